package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDiskSampler(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	write := func(path string, n int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dirs[0], "replicas", "tp", "0", "raft.entries"), 1<<20)
	write(filepath.Join(dirs[0], "replicas", "tp", "0", "log", "00000000000000000000.log"), 2<<20)
	write(filepath.Join(dirs[1], "x"), 512<<10)
	d := StartDiskSampler(dirs, time.Hour)
	d.Stop()
	if got := d.Max(); got != 3<<20 {
		t.Fatalf("max %d, want %d", got, 3<<20)
	}
	var b strings.Builder
	d.Write(&b)
	if !strings.Contains(b.String(), "| 3.0 | 1.0 | 0.5 | 0.0 |") {
		t.Fatalf("table:\n%s", b.String())
	}
}

func TestParseNemesesNone(t *testing.T) {
	got, err := ParseNemeses("none")
	if err != nil || len(got) != 0 {
		t.Fatalf("ParseNemeses(none) = %v, %v; want no nemeses", got, err)
	}
	n := NewNemesis(nil, 1, got, nil)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); n.Run(stop, time.Millisecond) }()
	close(stop)
	<-done
	if total, _ := n.Counts(); total != 0 {
		t.Fatalf("%d faults injected without nemeses", total)
	}
}
