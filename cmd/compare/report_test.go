package main

import (
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"odd", []float64{3, 1, 2}, 2},
		{"even", []float64{4, 1, 3, 2}, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := median(tc.in); got != tc.want {
				t.Fatalf("median(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestRenderTable(t *testing.T) {
	got := renderTable([]row{
		{metric: "msgs/s", sluice: []float64{90_000, 120_000, 100_000}, nats: []float64{50_000, 40_000, 45_000}, format: fmtCount},
		{metric: "p99 ms", sluice: []float64{2}, nats: []float64{0}, format: fmtMs},
	})
	for _, want := range []string{
		"| msgs/s | **100,000** (90,000 / 120,000 / 100,000) | **45,000** (50,000 / 40,000 / 45,000) | 2.22× |",
		"| p99 ms | 2.00 | 0.00 | n/a |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

func TestGroupThousands(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -45000: "-45,000"} {
		if got := groupThousands(in); got != want {
			t.Errorf("groupThousands(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestReplaceSection(t *testing.T) {
	first, err := replaceSection("# Benchmarks\n\nold text", "table 1\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first, "# Benchmarks\n\nold text\n\n"+sectionHeading+"\n\n"+markBegin+"\ntable 1\n"+markEnd) {
		t.Fatalf("appended section:\n%s", first)
	}
	// Hand-written notes after the markers survive a rerun.
	withNotes := first + "\nnotes by hand\n"
	second, err := replaceSection(withNotes, "table 2")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(second, "table 1") || !strings.Contains(second, markBegin+"\ntable 2\n"+markEnd) ||
		!strings.HasSuffix(second, "\nnotes by hand\n") || !strings.HasPrefix(second, "# Benchmarks\n\nold text") {
		t.Fatalf("rerun:\n%s", second)
	}
	for _, bad := range []string{"x " + markBegin, markEnd + " " + markBegin, markEnd} {
		if _, err := replaceSection(bad, "t"); err == nil {
			t.Errorf("no error for markers in %q", bad)
		}
	}
}

func TestRowOf(t *testing.T) {
	r := rowOf("produced", []throughputResult{{Produced: 1}, {Produced: 2}}, []throughputResult{{Produced: 3}},
		func(x throughputResult) float64 { return float64(x.Produced) }, fmtCount)
	if r.metric != "produced" || len(r.sluice) != 2 || r.sluice[0] != 1 || r.sluice[1] != 2 || len(r.nats) != 1 || r.nats[0] != 3 {
		t.Fatalf("rowOf: %+v", r)
	}
}

// The partitions rows: each run's scaled throughput over the 1-partition
// throughput of the same run and system, the median of those in bold.
func TestRenderSectionScaledRows(t *testing.T) {
	o := options{runs: 2, scaleParts: 12, tp: throughputConfig{Messages: 1000, Producers: 4, Window: 10, Parts: 1}}
	tp := func(msgs int, secs float64) throughputResult {
		return throughputResult{Produced: msgs, Elapsed: time.Duration(secs * float64(time.Second))}
	}
	res := map[string]*runResults{
		"Sluice":         {tp: []throughputResult{tp(1000, 1), tp(1000, 2)}, tpScale: []throughputResult{tp(1000, 0.5), tp(1000, 1)}},
		"NATS JetStream": {tp: []throughputResult{tp(1000, 1), tp(1000, 1)}, tpScale: []throughputResult{tp(1000, 4), tp(1000, 2)}},
	}
	got := renderSection(o, res, time.Unix(0, 0), "0 0 0", "0 0 0")
	for _, want := range []string{
		"| 12 partitions / 12 streams: produce msgs/s (12 producers) | **1,500** (2,000 / 1,000) | **375** (250 / 500) | 4.00× |",
		"| 12 partitions / 12 streams: produce msgs/s over the 1-partition run's, same run | **2.00×** (2.00× / 2.00×) | **0.38×** (0.25× / 0.50×) |",
		"-scale-partitions 12",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
}
