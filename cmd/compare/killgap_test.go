package main

import (
	"testing"
	"time"
)

func TestLongestGap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		acks []time.Time
		want time.Duration
	}{
		{"none", nil, 0},
		{"one", at(5), 0},
		{"steady", at(0, 10, 20, 30), 10 * time.Millisecond},
		{"gap in the middle", at(0, 10, 1510, 1520), 1500 * time.Millisecond},
		{"longest of two", at(0, 300, 310, 2310), 2000 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := longestGap(tc.acks); got != tc.want {
				t.Fatalf("longestGap = %v, want %v", got, tc.want)
			}
		})
	}
}
