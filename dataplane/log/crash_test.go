package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

const crashChildEnv = "SLUICE_LOG_CRASH_CHILD"

// crashConfig is shared by parent and child.
func crashConfig(dir string) Config {
	return Config{Dir: dir, SegmentBytes: 64 << 10, IndexIntervalBytes: 1024}
}

// TestCrashRecovery re-executes the test binary as a child that appends and
// syncs in a loop, reporting each durable offset over a pipe. The parent
// kills it with SIGKILL at random points, sometimes tears the tail of the
// last segment the way an interrupted write would, then reopens the log and
// checks that every batch below the last reported durable offset is present
// and intact, and that every batch served is one the child wrote at that
// offset (each batch carries its own base offset as a tag), so nothing past
// a corrupt point is served.
func TestCrashRecovery(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	dir := t.TempDir()
	const kills = 60
	var durable int64
	cuts := 0
	for i := range kills {
		got := runAndKill(t, dir, rng.IntN(25))
		if got > durable {
			durable = got
		}
		if tear := rng.IntN(4); tear > 0 {
			tearTail(t, dir, tear, rng)
		}
		l, err := Open(context.Background(), Config{Dir: dir, SegmentBytes: 64 << 10, IndexIntervalBytes: 1024, Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", i, err)
		}
		if l.Recovery().Cut() {
			cuts++
		}
		if l.NextOffset() < durable {
			t.Fatalf("kill %d: log ends at %d, but %d was reported durable (%+v)", i, l.NextOffset(), durable, l.Recovery())
		}
		var off int64
		for _, b := range splitBatches(t, readAll(t, l, 0)) {
			h, _ := ParseHeader(b)
			if h.BaseOffset != off || batchTag(t, b) != uint64(off) {
				t.Fatalf("kill %d: batch at %d has base %d, tag %d", i, off, h.BaseOffset, batchTag(t, b))
			}
			off = h.NextOffset()
		}
		if off != l.NextOffset() {
			t.Fatalf("kill %d: read up to %d, log ends at %d", i, off, l.NextOffset())
		}
		l.Close()
	}
	t.Logf("%d kills, %d recoveries cut a tail, %d offsets durable", kills, cuts, durable)
}

// runAndKill starts a child on dir, reads reports until it has seen n of
// them, kills it, and returns the last durable offset it reported.
func runAndKill(t *testing.T, dir string, n int) int64 {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashRecovery$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the child
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var last int64
	var buf [8]byte
	for range n {
		r.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("read child report: %v; child stderr:\n%s", err, stderr.String())
		}
		last = int64(binary.BigEndian.Uint64(buf[:]))
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait() // a killed process is reaped at once
	return last
}

// crashChild appends batches tagged with their base offsets and syncs,
// writing each durable offset to fd 3, until it is killed.
func crashChild(dir string) {
	report := os.NewFile(3, "report")
	l, err := Open(context.Background(), crashConfig(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	for {
		var in []Batch
		next := l.NextOffset()
		for range 1 + rng.IntN(3) {
			recs := 1 + rng.IntN(8)
			in = append(in, Batch{Data: makeBatch(recs, 50+rng.IntN(3000), time.Now().UnixMilli(), uint64(next)), LeaderEpoch: 1})
			next += int64(recs)
		}
		if _, _, err := l.AppendBatches(in); err != nil {
			fmt.Fprintln(os.Stderr, "child append:", err)
			os.Exit(2)
		}
		if rng.IntN(3) == 0 {
			continue // leave some appends unsynced
		}
		if err := l.Sync(); err != nil {
			fmt.Fprintln(os.Stderr, "child sync:", err)
			os.Exit(2)
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(l.DurableOffset()))
		if _, err := report.Write(b[:]); err != nil {
			os.Exit(0) // parent gone
		}
	}
}

// tearTail damages the end of the last segment past everything the child
// wrote: 1 appends garbage, 2 appends part of a valid next batch, 3 appends
// a whole next batch with one byte flipped.
func tearTail(t *testing.T, dir string, mode int, rng *rand.Rand) {
	t.Helper()
	names, _ := os.ReadDir(dir)
	var last int64 = -1
	for _, e := range names {
		if b, ok := parseBase(e.Name(), logSuffix); ok && b > last {
			last = b
		}
	}
	if last < 0 {
		return // killed before it made its first segment: nothing to tear
	}
	path := segmentPath(dir, last, logSuffix)
	var tail []byte
	switch mode {
	case 1:
		tail = make([]byte, 1+rng.IntN(5000))
		for i := range tail {
			tail[i] = byte(rng.Uint32())
		}
	case 2, 3:
		// The base offset is wrong unless we know the end; find it.
		l, err := Open(context.Background(), crashConfig(dir))
		if err != nil {
			t.Fatalf("tear: open: %v", err)
		}
		next := l.NextOffset()
		l.Close()
		b := makeBatch(3, 500, 0, uint64(next))
		stamp(b, next, 1)
		if mode == 2 {
			tail = b[:1+rng.IntN(len(b)-1)]
		} else {
			b[HeaderSize+rng.IntN(len(b)-HeaderSize)] ^= 0x40
			tail = b
		}
	}
	appendFile(t, path, tail)
}
