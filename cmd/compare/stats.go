package main

import (
	"math"
	"slices"
	"time"
)

// latencySummary is the distribution of one run's publish latencies.
type latencySummary struct {
	Count          int
	P50, P99, P999 time.Duration
	Max            time.Duration
}

// summarize sorts lat in place and returns its percentiles by the
// nearest-rank method: the p-th percentile is the smallest sample with at
// least p% of all samples at or below it, so every figure is a latency some
// publish really had.
func summarize(lat []time.Duration) latencySummary {
	if len(lat) == 0 {
		return latencySummary{}
	}
	slices.Sort(lat)
	return latencySummary{
		Count: len(lat),
		P50:   percentile(lat, 50),
		P99:   percentile(lat, 99),
		P999:  percentile(lat, 99.9),
		Max:   lat[len(lat)-1],
	}
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, which must not be empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	// The small epsilon absorbs float error: 99.9% of 1000 is rank 999,
	// not 1000 because 0.999*1000 came out as 999.0000000000001.
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// rate is count per second of d, or 0 for an empty interval.
func rate(count float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return count / d.Seconds()
}
