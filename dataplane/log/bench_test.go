package log

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

var benchSizes = []int{16 << 10, 64 << 10, 1 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// benchBatch is a batch of 1 KiB records (1000-byte values plus record
// overhead) of about size bytes.
func benchBatch(size int) []byte { return makeBatch(size/1024, 1000, 1, 1) }

func benchLog(b *testing.B) *Log {
	b.Helper()
	l, err := Open(context.Background(), Config{Dir: b.TempDir(), MaxBatchBytes: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkAppendSync appends one batch and fsyncs it, per op.
func BenchmarkAppendSync(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			l := benchLog(b)
			batch := benchBatch(size)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := l.Append(batch, 1); err != nil {
					b.Fatal(err)
				}
				if err := l.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGroupCommit appends one batch to each of 8 partition logs and
// makes all of them durable in one round, per op, with each Syncer mode.
func BenchmarkGroupCommit(b *testing.B) {
	for _, mode := range []SyncMode{SyncFiles, SyncFilesystem} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/8x%s", mode, sizeName(size)), func(b *testing.B) {
				benchGroupCommit(b, mode, size)
			})
		}
	}
}

// BenchmarkGroupCommitNoisy is BenchmarkGroupCommit at 64 KiB while another
// writer on the same filesystem dirties 256 KiB at a time without syncing,
// the way another tenant's partitions, a log shipper or a compaction would.
// syncfs(2) has to flush that writer's pages too; fdatasync does not.
func BenchmarkGroupCommitNoisy(b *testing.B) {
	for _, mode := range []SyncMode{SyncFiles, SyncFilesystem} {
		b.Run(fmt.Sprintf("%s/8x64KiB", mode), func(b *testing.B) {
			noise, err := os.Create(b.TempDir() + "/noise")
			if err != nil {
				b.Fatal(err)
			}
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				buf := make([]byte, 256<<10)
				var off int64
				for {
					select {
					case <-stop:
						return
					default:
					}
					noise.WriteAt(buf, off)
					off = (off + int64(len(buf))) % (256 << 20)
				}
			}()
			b.Cleanup(func() { close(stop); <-done; noise.Close() })
			benchGroupCommit(b, mode, 64<<10)
		})
	}
}

func benchGroupCommit(b *testing.B, mode SyncMode, size int) {
	const parts = 8
	logs := make([]*Log, parts)
	for i := range logs {
		logs[i] = benchLog(b)
	}
	batch := benchBatch(size)
	y := NewSyncer(mode)
	b.SetBytes(int64(parts * len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range logs {
			if _, _, err := l.Append(batch, 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := y.Sync(logs...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawWriteFdatasync is the baseline: pwrite of the same bytes at
// the end of a plain file, then fdatasync, per op; and the same over 8 files
// with their fdatasyncs in parallel.
func BenchmarkRawWriteFdatasync(b *testing.B) {
	for _, files := range []int{1, 8} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%dx%s", files, sizeName(size)), func(b *testing.B) {
				dir := b.TempDir()
				fds := make([]int, files)
				for i := range fds {
					f, err := os.Create(fmt.Sprintf("%s/raw%d", dir, i))
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { f.Close() })
					fds[i] = int(f.Fd())
				}
				buf := benchBatch(size)
				var off int64
				b.SetBytes(int64(files * len(buf)))
				b.ReportAllocs()
				for b.Loop() {
					for _, fd := range fds {
						if _, err := unix.Pwrite(fd, buf, off); err != nil {
							b.Fatal(err)
						}
					}
					off += int64(len(buf))
					if files == 1 {
						if err := unix.Fdatasync(fds[0]); err != nil {
							b.Fatal(err)
						}
						continue
					}
					var wg sync.WaitGroup
					for _, fd := range fds {
						wg.Go(func() {
							if err := unix.Fdatasync(fd); err != nil {
								b.Error(err)
							}
						})
					}
					wg.Wait()
				}
			})
		}
	}
}

// filledLog returns a log holding about 64 MiB of 16 KiB batches, in the
// page cache.
func filledLog(b *testing.B) *Log {
	b.Helper()
	l := benchLog(b)
	batch := benchBatch(16 << 10)
	for l.Size() < 64<<20 {
		if _, _, err := l.Append(batch, 1); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

var readSizes = []int{16 << 10, 64 << 10, 1 << 20}

// readLoop reads l sequentially, size bytes per op, wrapping to offset 0
// at the end, hands each Slice to use and reports the MiB/s read.
func readLoop(b *testing.B, l *Log, size int, use func(Slice) error) {
	b.Helper()
	var off, total int64
	b.ReportAllocs()
	for b.Loop() {
		sl, err := l.Read(off, size, math.MaxInt64)
		if err != nil {
			b.Fatal(err)
		}
		if sl.Size == 0 {
			off = 0
			continue
		}
		if err := use(sl); err != nil {
			b.Fatal(err)
		}
		total += sl.Size
		off = sl.NextOffset
		sl.Release()
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds()/(1<<20), "MiB/s")
}

// BenchmarkReadCopy reads sequentially from the page cache with Read and
// Slice.ReadAt into a reused buffer (the TLS path), maxBytes per op.
func BenchmarkReadCopy(b *testing.B) {
	for _, size := range readSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			l := filledLog(b)
			buf := make([]byte, 2*size)
			readLoop(b, l, size, func(sl Slice) error {
				_, err := sl.ReadAt(buf[:sl.Size], 0)
				return err
			})
		})
	}
}

// BenchmarkReadSendfile reads sequentially and sends each Slice to a
// loopback TCP connection with Slice.WriteTo (sendfile), maxBytes per op.
func BenchmarkReadSendfile(b *testing.B) {
	for _, size := range readSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			l := filledLog(b)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				io.Copy(io.Discard, c)
				c.Close()
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			readLoop(b, l, size, func(sl Slice) error {
				_, err := sl.WriteTo(c)
				return err
			})
			c.Close()
			<-done
		})
	}
}

// BenchmarkBatchChecks: what one whole validation of a produced 64 KiB
// batch costs (the CRC32C pass over its records) against a framing check
// alone; the leader's path does one of the first and two of the second.
func BenchmarkBatchChecks(b *testing.B) {
	batch := makeBatch(64, 1000, 1, 1)
	b.Run("validate", func(b *testing.B) {
		b.SetBytes(int64(len(batch)))
		for b.Loop() {
			if _, err := ValidateClientBatch(batch); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("framing", func(b *testing.B) {
		b.SetBytes(int64(len(batch)))
		for b.Loop() {
			if _, err := CheckClientBatchFraming(batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}
