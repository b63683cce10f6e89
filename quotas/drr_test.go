package quotas

import (
	"math/rand/v2"
	"testing"
)

func TestDRRFairnessUnderContention(t *testing.T) {
	for _, tc := range []struct {
		name    string
		quantum int64
		weights map[string]int
		costs   map[string][]int64 // each tenant cycles through its costs
	}{
		{"1:1 equal sizes", 64 << 10, map[string]int{"a": 1, "b": 1},
			map[string][]int64{"a": {32 << 10}, "b": {32 << 10}}},
		{"1:1 small against large responses", 64 << 10, map[string]int{"a": 1, "b": 1},
			map[string][]int64{"a": {1500}, "b": {1 << 20}}},
		{"2:1", 64 << 10, map[string]int{"gold": 2, "free": 1},
			map[string][]int64{"gold": {48 << 10, 8 << 10}, "free": {100 << 10}}},
		{"3:2:1 mixed sizes", 16 << 10, map[string]int{"a": 3, "b": 2, "c": 1},
			map[string][]int64{"a": {1 << 10, 300 << 10}, "b": {64 << 10}, "c": {5000, 70000, 12}}},
		{"2:1 responses far above the quantum", 1 << 10, map[string]int{"a": 2, "b": 1},
			map[string][]int64{"a": {4 << 20}, "b": {3 << 20, 1 << 20}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDRR(tc.quantum)
			var totalWeight float64
			for id, w := range tc.weights {
				d.SetWeight(id, w)
				totalWeight += float64(w)
			}
			idx := map[string]int{}
			enqueue := func(id string) {
				c := tc.costs[id]
				d.Enqueue(id, c[idx[id]%len(c)])
				idx[id]++
			}
			for id := range tc.weights { // keep two pending per tenant: always backlogged
				enqueue(id)
				enqueue(id)
			}
			got := map[string]float64{}
			var total float64
			var maxCost int64
			for _, cs := range tc.costs {
				for _, c := range cs {
					maxCost = max(maxCost, c)
				}
			}
			for total < 2000*float64(maxCost) {
				id, c, ok := d.Next()
				if !ok {
					t.Fatal("nothing pending under contention")
				}
				got[id] += float64(c)
				total += float64(c)
				enqueue(id)
			}
			for id, w := range tc.weights {
				want := total * float64(w) / totalWeight
				if !within(got[id], want, 0.01) {
					t.Errorf("%s got %.0f bytes, want %.0f ±1%% (weight %d of %.0f)", id, got[id], want, w, totalWeight)
				}
			}
		})
	}
}

func TestDRRIdleTenantEarnsNoCredit(t *testing.T) {
	const quantum = 10_000
	d := NewDRR(quantum)
	// b fetches alone for a long time; a has one small response early on.
	d.Enqueue("a", 100)
	for range 1000 {
		d.Enqueue("b", 5000)
	}
	for d.Pending("b") > 0 {
		d.Next()
	}
	// Now both are backlogged: a must not cash in the rounds it sat out.
	for range 100 {
		d.Enqueue("a", 1000)
		d.Enqueue("b", 1000)
	}
	got := map[string]int64{}
	for range 40 {
		id, c, _ := d.Next()
		got[id] += c
	}
	if diff := got["a"] - got["b"]; diff > quantum || diff < -quantum {
		t.Fatalf("first 40 responses after contention began: %v; a hoarded credit while idle", got)
	}
	if a := d.tenants["a"]; a.deficit > quantum {
		t.Fatalf("a's deficit %d exceeds one quantum", a.deficit)
	}
}

func TestDRRBasics(t *testing.T) {
	d := NewDRR(0) // taken as 1
	if _, _, ok := d.Next(); ok {
		t.Fatal("Next on empty returned ok")
	}
	d.Enqueue("a", 3)
	d.Enqueue("a", -1) // taken as 0
	d.Enqueue("b", 2)
	d.Enqueue("c", 1)
	if d.Len() != 4 || d.Pending("a") != 2 {
		t.Fatalf("Len %d, Pending(a) %d", d.Len(), d.Pending("a"))
	}
	d.Remove("b")
	d.Remove("nobody")
	var order []string
	for {
		id, _, ok := d.Next()
		if !ok {
			break
		}
		order = append(order, id)
	}
	// quantum 1: c (cost 1) fits on its first turn; a needs three turns.
	if want := []string{"c", "a", "a"}; len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Fatalf("order %v, want %v", order, want)
	}
	if d.Len() != 0 {
		t.Fatalf("Len %d after draining", d.Len())
	}
}

// naiveDRR is the textbook loop, one turn at a time, against which DRR's
// skipping of idle rounds is checked.
type naiveDRR struct {
	quantum int64
	weight  map[string]int64
	order   []string
	queue   map[string][]int64
	deficit map[string]int64
	inTurn  map[string]bool
}

func (n *naiveDRR) enqueue(id string, c int64) {
	if len(n.queue[id]) == 0 {
		n.order = append(n.order, id)
	}
	n.queue[id] = append(n.queue[id], c)
}

func (n *naiveDRR) next() (string, int64, bool) {
	for len(n.order) > 0 {
		id := n.order[0]
		if !n.inTurn[id] {
			n.inTurn[id] = true
			n.deficit[id] += n.quantum * max(n.weight[id], 1)
		}
		if c := n.queue[id][0]; c <= n.deficit[id] {
			n.deficit[id] -= c
			n.queue[id] = n.queue[id][1:]
			if len(n.queue[id]) == 0 {
				n.deficit[id], n.inTurn[id] = 0, false
				n.order = n.order[1:]
			}
			return id, c, true
		}
		n.inTurn[id] = false
		n.order = append(n.order[1:], id)
	}
	return "", 0, false
}

func TestDRRMatchesTextbook(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		quantum := int64(100 + r.IntN(3000))
		d := NewDRR(quantum)
		n := &naiveDRR{quantum: quantum, weight: map[string]int64{}, queue: map[string][]int64{}, deficit: map[string]int64{}, inTurn: map[string]bool{}}
		ids := []string{"a", "b", "c", "d", "e"}
		for _, id := range ids {
			w := 1 + r.IntN(4)
			d.SetWeight(id, w)
			n.weight[id] = int64(w)
		}
		for step := range 3000 {
			if r.IntN(3) > 0 {
				id, c := ids[r.IntN(len(ids))], int64(r.IntN(100_000))
				if r.IntN(10) == 0 {
					c = int64(r.IntN(1_000_000))
				}
				d.Enqueue(id, c)
				n.enqueue(id, c)
				continue
			}
			gi, gc, gok := d.Next()
			wi, wc, wok := n.next()
			if gi != wi || gc != wc || gok != wok {
				t.Fatalf("seed %d step %d: Next = %s %d %v, textbook %s %d %v", seed, step, gi, gc, gok, wi, wc, wok)
			}
		}
	}
}
