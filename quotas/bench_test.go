package quotas

import (
	"strconv"
	"testing"
	"time"
)

// thousandTenants is the broker both Record benchmarks measure: 1,000
// tenants, each with a produce rate of 10 MiB/s.
func thousandTenants(b *testing.B) (*Buckets, []string) {
	bk := newBuckets(b, Config{})
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "tenant-" + strconv.Itoa(i)
		var l Limits
		l[ProduceBytes].Rate = 10 << 20
		bk.Set(ids[i], l, t0)
	}
	return bk, ids
}

// BenchmarkRecord is one produce request's quota check on a broker serving
// 1,000 tenants, cycling through them; the clock advances 10µs per call.
// "under" keeps every tenant within its burst; "debt" drives each bucket
// into debt (every call also widens the burst for an oversized batch).
func BenchmarkRecord(b *testing.B) {
	for _, tc := range []struct {
		name  string
		batch int64
	}{
		{"under", 1 << 10},
		{"debt", 4 << 20},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bk, ids := thousandTenants(b)
			now := t0
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now = now.Add(10 * time.Microsecond)
				bk.Record(ids[i], ProduceBytes, tc.batch, now)
				i++
				if i == len(ids) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkRecordParallel is BenchmarkRecord/under from all Ps at once.
func BenchmarkRecordParallel(b *testing.B) {
	bk, ids := thousandTenants(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now, i := t0, 0
		for pb.Next() {
			now = now.Add(10 * time.Microsecond)
			bk.Record(ids[i%len(ids)], ProduceBytes, 1<<10, now)
			i += 7
		}
	})
}

// BenchmarkDRRNext is one scheduling decision with N tenants always
// backlogged (each Next is followed by an Enqueue for the same tenant),
// weights 1 to 4, response sizes from 1 KiB to 1 MiB, quantum 64 KiB.
func BenchmarkDRRNext(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(strconv.Itoa(n)+"tenants", func(b *testing.B) {
			d := NewDRR(64 << 10)
			sizes := []int64{1 << 10, 16 << 10, 64 << 10, 1 << 20}
			for i := range n {
				id := "tenant-" + strconv.Itoa(i)
				d.SetWeight(id, 1+i%4)
				d.Enqueue(id, sizes[i%len(sizes)])
				d.Enqueue(id, sizes[(i+1)%len(sizes)])
			}
			k := 0
			b.ReportAllocs()
			for b.Loop() {
				id, _, _ := d.Next()
				d.Enqueue(id, sizes[k%len(sizes)])
				k++
			}
		})
	}
}
