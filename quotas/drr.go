package quotas

// DRR schedules fetch responses across tenants by deficit round robin
// (Shreedhar and Varghese): tenants with pending responses take turns; on
// its turn a tenant's deficit grows by quantum × weight bytes and it sends
// pending responses, in order, while the next one fits in its deficit. Under
// contention every active tenant therefore gets bytes in proportion to its
// weight, whatever its response sizes. A tenant whose queue empties leaves
// the round with its deficit reset to zero, so idling never earns credit.
//
// DRR only orders costs; the caller keeps each tenant's pending responses
// in a FIFO and sends the one Next names. It is not safe for concurrent use:
// one fetch scheduler owns it.
type DRR struct {
	quantum int64
	tenants map[string]*drrTenant
	ring    []*drrTenant // active tenants in turn order, ring[head] first
	head    int
	active  int
	stalled int // turns ended without sending since the last send
}

type drrTenant struct {
	id      string
	weight  int64
	deficit int64
	inTurn  bool
	queue   []int64 // pending costs, queue[next] first
	next    int
	active  bool
}

// NewDRR returns a scheduler granting quantum bytes per turn to a tenant of
// weight 1. A quantum below 1 is taken as 1. Pick it around the typical
// response size: a smaller one only adds idle turns.
func NewDRR(quantum int64) *DRR {
	return &DRR{quantum: max(quantum, 1), tenants: make(map[string]*drrTenant)}
}

func (d *DRR) tenant(id string) *drrTenant {
	t := d.tenants[id]
	if t == nil {
		t = &drrTenant{id: id, weight: 1}
		d.tenants[id] = t
	}
	return t
}

// SetWeight sets a tenant's share of fetch bytes under contention relative
// to the others (its plan's weight). A weight below 1 is taken as 1; unknown
// tenants weigh 1. It applies from the tenant's next turn.
func (d *DRR) SetWeight(id string, weight int) {
	d.tenant(id).weight = int64(max(weight, 1))
}

// Remove forgets a tenant and drops its pending costs.
func (d *DRR) Remove(id string) {
	t := d.tenants[id]
	if t == nil {
		return
	}
	delete(d.tenants, id)
	if !t.active {
		return
	}
	// Rebuild the ring without t, keeping the turn order.
	ring := make([]*drrTenant, 0, max(len(d.ring), 1))
	for i := range d.active {
		if u := d.ring[(d.head+i)%len(d.ring)]; u != t {
			ring = append(ring, u)
		}
	}
	d.ring, d.head, d.active, d.stalled = ring[:cap(ring)], 0, len(ring), 0
}

// Enqueue adds a pending response of cost bytes for a tenant. A cost below
// zero is taken as zero.
func (d *DRR) Enqueue(id string, cost int64) {
	t := d.tenant(id)
	if t.next > 0 && t.next == len(t.queue) {
		t.queue, t.next = t.queue[:0], 0
	}
	t.queue = append(t.queue, max(cost, 0))
	if !t.active {
		t.active = true
		d.push(t)
	}
}

// push appends t at the tail of the ring.
func (d *DRR) push(t *drrTenant) {
	if d.active == len(d.ring) {
		ring := make([]*drrTenant, max(2*len(d.ring), 8))
		for i := range d.active {
			ring[i] = d.ring[(d.head+i)%len(d.ring)]
		}
		d.ring, d.head = ring, 0
	}
	d.ring[(d.head+d.active)%len(d.ring)] = t
	d.active++
}

// Len is the number of pending responses across tenants.
func (d *DRR) Len() int {
	n := 0
	for i := range d.active {
		t := d.ring[(d.head+i)%len(d.ring)]
		n += len(t.queue) - t.next
	}
	return n
}

// Pending is the number of a tenant's pending responses.
func (d *DRR) Pending(id string) int {
	if t := d.tenants[id]; t != nil {
		return len(t.queue) - t.next
	}
	return 0
}

// Next removes and returns the pending response that goes next: its tenant
// and cost. ok is false when nothing is pending.
func (d *DRR) Next() (id string, cost int64, ok bool) {
	for d.active > 0 {
		t := d.ring[d.head]
		if !t.inTurn {
			t.inTurn = true
			t.deficit += d.quantum * t.weight
		}
		if c := t.queue[t.next]; c <= t.deficit {
			t.deficit -= c
			t.next++
			d.stalled = 0
			if t.next >= 64 && 2*t.next >= len(t.queue) {
				n := copy(t.queue, t.queue[t.next:])
				t.queue, t.next = t.queue[:n], 0
			}
			if t.next == len(t.queue) {
				// Idle: leave the round without credit.
				t.queue, t.next = t.queue[:0], 0
				t.deficit, t.inTurn, t.active = 0, false, false
				d.ring[d.head] = nil
				d.head = (d.head + 1) % len(d.ring)
				d.active--
			}
			return t.id, c, true
		}
		// Turn over: rotate to the tail, keeping the deficit.
		t.inTurn = false
		d.ring[d.head] = nil
		d.head = (d.head + 1) % len(d.ring)
		d.active--
		d.push(t)
		d.stalled++
		if d.stalled >= d.active {
			d.skipIdleRounds()
		}
	}
	return "", 0, false
}

// skipIdleRounds runs, in one step, the full rounds in which no tenant could
// send anything (responses much larger than quantum × weight), so that Next
// costs the same whatever the ratio of response size to quantum. It is
// called at a round boundary, with every active tenant between turns; it
// grants each the quanta of the rounds that would have passed before the
// first tenant's head response fits, leaving that last round to Next.
func (d *DRR) skipIdleRounds() {
	rounds := int64(-1)
	for i := range d.active {
		t := d.ring[(d.head+i)%len(d.ring)]
		grant := d.quantum * t.weight
		need := (t.queue[t.next] - t.deficit + grant - 1) / grant // rounds until it fits
		if rounds < 0 || need < rounds {
			rounds = need
		}
	}
	if rounds > 1 {
		for i := range d.active {
			t := d.ring[(d.head+i)%len(d.ring)]
			t.deficit += (rounds - 1) * d.quantum * t.weight
		}
	}
	d.stalled = 0
}
