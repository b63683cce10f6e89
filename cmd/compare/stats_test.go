package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	// 1..1000 ms, shuffled: the p-th percentile is exactly p*10 ms.
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	rand.Shuffle(len(lat), func(i, j int) { lat[i], lat[j] = lat[j], lat[i] })
	s := summarize(lat)
	for _, tc := range []struct {
		name      string
		got, want time.Duration
	}{
		{"p50", s.P50, 500 * time.Millisecond},
		{"p99", s.P99, 990 * time.Millisecond},
		{"p99.9", s.P999, 999 * time.Millisecond},
		{"max", s.Max, 1000 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
	if s.Count != 1000 {
		t.Fatalf("count %d", s.Count)
	}
}

func TestPercentileSmallSamples(t *testing.T) {
	for _, tc := range []struct {
		name string
		lat  []time.Duration
		p    float64
		want time.Duration
	}{
		{"one sample", []time.Duration{7}, 99.9, 7},
		{"two samples p50 is the lower", []time.Duration{1, 2}, 50, 1},
		{"two samples p99 is the upper", []time.Duration{1, 2}, 99, 2},
		{"ten samples p99.9 is the max", []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99.9, 10},
		{"ten samples p10 is the min", []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.lat, tc.p); got != tc.want {
				t.Fatalf("percentile(%v, %v) = %v, want %v", tc.lat, tc.p, got, tc.want)
			}
		})
	}
	if s := summarize(nil); s != (latencySummary{}) {
		t.Fatalf("empty: %+v", s)
	}
}

func TestRate(t *testing.T) {
	if got := rate(1000, 2*time.Second); got != 500 {
		t.Fatalf("rate = %v", got)
	}
	if got := rate(1000, 0); got != 0 {
		t.Fatalf("rate over nothing = %v", got)
	}
}
