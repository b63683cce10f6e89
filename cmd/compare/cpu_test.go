package main

import (
	"os"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stat    string
		want    uint64
		wantErr bool
	}{
		{"plain", "1234 (tenantd) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 12 0 100 0 0", 325, false},
		{"name with spaces and parens", "99 (a (b) c) R 1 99 99 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 0 0", 10, false},
		{"truncated", "99 (x) R 1 2 3", 0, true},
		{"no name", "99 x R 1 2 3 4 5 6 7 8 9 10 11 12 13", 0, true},
		{"not a number", "9 (x) R 1 9 9 0 -1 0 0 0 0 0 u 3 0 0 20 0 1 0 1 0 0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU(tc.stat)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("got %d ticks, want %d", got, tc.want)
			}
		})
	}
}

// The reader works on a real process: this one, which has used some CPU
// by now, and whose count never goes backwards.
func TestCPUSecondsOfSelf(t *testing.T) {
	a, err := cpuSeconds([]int{os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 20_000_000 {
		x += i
	}
	_ = x
	b, err := cpuSeconds([]int{os.Getpid(), os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	if b < 2*a {
		t.Fatalf("cpu seconds went backwards: %v then %v (twice counted)", a, b)
	}
	if _, err := cpuSeconds([]int{1 << 30}); err == nil {
		t.Fatal("no error for a pid that does not exist")
	}
}

func TestPerGB(t *testing.T) {
	if got := perGB(3, 2_000_000_000); got != 1.5 {
		t.Fatalf("perGB = %v", got)
	}
	if got := perGB(3, 0); got != 0 {
		t.Fatalf("perGB of nothing = %v", got)
	}
}

func TestParseSchedstat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    uint64
		wantErr bool
	}{
		{"three fields", "123456 7890 12\n", 7890, false},
		{"too short", "123456\n", 0, true},
		{"not a number", "1 x 2\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSchedstat(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("parseSchedstat(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := runQueueWait([]int{os.Getpid()}); err != nil {
		t.Fatal(err)
	}
}
