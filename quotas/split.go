package quotas

import "math"

// DefaultFloor is the fraction of an even share that Split guarantees every
// broker, so that a broker that saw no traffic for a tenant lately can still
// admit a burst when a client connects to it. The floors of idle brokers are
// not available to busy ones: with all of a tenant's traffic on one broker
// of three, the cell admits 1 − 0.1 × 2/3 ≈ 93% of the quota.
const DefaultFloor = 0.1

// Split divides a tenant's cell-wide quota (units per second) among the
// brokers of a cell, given each broker's demand for that tenant over the last
// window (what it recorded, in units per second). It writes one share per
// broker into out (reallocated if too short) and returns it.
//
// Every broker gets a floor of floor × quota / n. When the brokers'
// demands (each at least the floor) add up to no more than the quota, every
// broker gets its demand and an equal part of what is left: a tenant within
// its quota is then throttled nowhere, even when the demand is a poor
// estimate of what its clients are about to send (just after they start,
// the last window saw little of it). Otherwise the quota is filled to one
// level (max-min fairness): a broker whose demand is below the level gets
// its demand, and every other broker gets the level. The shares always sum
// to quota. When no broker has demand above the floor the split is even.
//
// Demand is what brokers admitted, and a throttled broker admits about its
// share; its share still grows each window (by a part of the spare below
// the quota) until the brokers with little traffic hold only what they use,
// so the cell as a whole reaches its quota. Above the quota, a throttled
// broker's demand says only that it wants more than its share (the sharer
// publishes a multiple of it), not how much more; filling to a level gives
// the brokers that all want more the same share, where splitting in
// proportion to those demands would keep whatever uneven split the last
// window left, and let it drift.
//
// A quota of zero or less means no limit and is copied to every share.
// floor is clamped to [0, 1]; negative or NaN demand counts as none.
func Split(quota float64, demand []float64, floor float64, out []float64) []float64 {
	n := len(demand)
	out = resize(out, n)
	if n == 0 {
		return out
	}
	if quota <= 0 || math.IsNaN(quota) {
		for i := range out {
			out[i] = quota
		}
		return out
	}
	if !(floor >= 0) { // also catches NaN
		floor = 0
	}
	floor = min(floor, 1)
	each := floor * quota / float64(n)
	var excess float64
	for _, d := range demand {
		excess += wanted(d, each) - each
	}
	if excess == 0 {
		return EvenSplit(quota, n, out)
	}
	if spare := quota - each*float64(n) - excess; spare >= 0 {
		// Within the quota each broker's demand above its floor is its
		// own and the spare is split evenly.
		for i, d := range demand {
			out[i] = wanted(d, each) + spare/float64(n)
		}
	} else {
		fillToLevel(quota, demand, each, out)
	}
	var sum float64
	largest := 0
	for i := range out {
		sum += out[i]
		if out[i] > out[largest] {
			largest = i
		}
	}
	// Rounding may leave the sum an ulp or two off; the largest share
	// absorbs it so the cell never admits more than its quota.
	out[largest] += quota - sum
	return out
}

// wanted is a broker's demand as Split counts it: at least the floor, and
// the floor alone for a demand that is NaN, negative or infinite.
func wanted(d, each float64) float64 {
	if d > each && !math.IsInf(d, 1) {
		return d
	}
	return each
}

// fillToLevel writes into out the max-min fair split of quota: the level L
// for which the wanted demands, each capped at L, add up to quota; a broker
// wanting less than L gets what it wants, the others get L. The caller has
// checked that the wanted demands add up to more than quota, so L exists
// and is at least quota / n ≥ each. Brokers are few (a cell's), so each
// pass fixes the brokers below the current level and raises it, with no
// sorting and no allocation.
func fillToLevel(quota float64, demand []float64, each float64, out []float64) {
	const open = -1
	for i := range out {
		out[i] = open
	}
	left, n := quota, len(demand)
	for fixed := true; fixed && n > 0; {
		fixed = false
		level := left / float64(n)
		for i, d := range demand {
			if w := wanted(d, each); out[i] == open && w <= level {
				out[i], left, n, fixed = w, left-w, n-1, true
			}
		}
	}
	for i := range out {
		if out[i] == open {
			out[i] = left / float64(n)
		}
	}
}

// EvenSplit gives each of n brokers quota / n: the split a broker falls back
// to when it cannot learn the others' demand. It writes into out
// (reallocated if too short) and returns it. A quota of zero or less means
// no limit and is copied to every share.
func EvenSplit(quota float64, n int, out []float64) []float64 {
	out = resize(out, n)
	for i := range out {
		if quota <= 0 {
			out[i] = quota
		} else {
			out[i] = quota / float64(n)
		}
	}
	return out
}

func resize(s []float64, n int) []float64 {
	if n < 0 {
		n = 0
	}
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}
