package testkit

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestClockAdvances(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	c := NewClock(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	if got := c.Advance(3 * time.Second); !got.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("Advance returned %v, want %v", got, t0.Add(3*time.Second))
	}
	if got := c.Now(); !got.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("Now after Advance = %v", got)
	}
}

func TestLogBufferKeepsEveryConcurrentWrite(t *testing.T) {
	var b LogBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines written, want 800", n)
	}
}
