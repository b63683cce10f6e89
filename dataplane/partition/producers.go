package partition

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/log"
)

// Idempotent-producer errors. Produce returns them wrapped in the
// catalogue's OutOfOrderSequence and InvalidProducerEpoch; errors.Is sees
// them through that.
var (
	// ErrOutOfOrderSequence: the batch's first sequence does not follow the
	// producer's last batch (a gap, or an old batch no longer in the
	// window), or a new epoch does not start at sequence 0.
	ErrOutOfOrderSequence = errors.New("partition: out-of-order producer sequence")
	// ErrInvalidProducerEpoch: the batch's producer epoch is older than the
	// newest seen for its producer id; that producer instance is fenced.
	ErrInvalidProducerEpoch = errors.New("partition: producer epoch is fenced")
)

// ProducerWindow is how many recent batches per producer id a partition
// remembers for deduplication: Kafka clients keep at most five requests in
// flight per partition with idempotence on.
const ProducerWindow = 5

// maxProducers bounds the producer ids a partition remembers, so that
// clients that keep taking new ids (every InitProducerId is one) cannot
// grow its state and snapshot without bound. A variable for tests.
var maxProducers = 10_000

// evictIdlest forgets the producer id whose newest batch is the oldest in
// the log. Base offsets are unique, so the choice is the same on every
// replica whatever the map order. A forgotten producer's next batch is
// treated as an unknown producer's: accepted at any sequence.
func evictIdlest(ps map[int64]*ProducerState) {
	victim, oldest := int64(0), int64(math.MaxInt64)
	for pid, st := range ps {
		if n := len(st.Batches); n > 0 && st.Batches[n-1].BaseOffset < oldest {
			victim, oldest = pid, st.Batches[n-1].BaseOffset
		}
	}
	delete(ps, victim)
}

// ProducerBatch is one remembered batch of a producer.
type ProducerBatch struct {
	FirstSeq   int32 `json:"first_seq"`
	LastSeq    int32 `json:"last_seq"`
	BaseOffset int64 `json:"base_offset"`
}

// ProducerState is what a partition knows of one producer id: its newest
// epoch and its last ProducerWindow batches in that epoch, oldest first.
type ProducerState struct {
	Epoch   int16           `json:"epoch"`
	Batches []ProducerBatch `json:"batches"`
}

func (s *ProducerState) clone() *ProducerState {
	if s == nil {
		return nil
	}
	return &ProducerState{Epoch: s.Epoch, Batches: append([]ProducerBatch(nil), s.Batches...)}
}

// lastSeq is the sequence of a batch's last record. Sequences wrap from
// MaxInt32 to 0, as Kafka's do.
func lastSeq(h log.Header) int32 {
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

// record adds a batch that entered the log to the producer's state. It is
// what every replica's FSM does for every idempotent data entry, so it
// must depend on nothing but the state and the entry. The leader lets no
// duplicate into the log; recording one anyway changes nothing.
func (s *ProducerState) record(epoch int16, first, last int32, base int64) {
	if epoch != s.Epoch {
		s.Epoch = epoch
		s.Batches = s.Batches[:0]
	}
	if _, dup := s.find(first, last); dup {
		return
	}
	s.Batches = append(s.Batches, ProducerBatch{FirstSeq: first, LastSeq: last, BaseOffset: base})
	if n := len(s.Batches); n > ProducerWindow {
		s.Batches = append(s.Batches[:0], s.Batches[n-ProducerWindow:]...)
	}
}

func (s *ProducerState) find(first, last int32) (int64, bool) {
	for _, b := range s.Batches {
		if b.FirstSeq == first && b.LastSeq == last {
			return b.BaseOffset, true
		}
	}
	return 0, false
}

// check decides a new batch of a producer against its state (nil: the
// producer id is unknown here). dup reports a batch already in the window,
// whose base offset is returned.
func (s *ProducerState) check(pid int64, epoch int16, first, last int32) (base int64, dup bool, err error) {
	if s == nil || len(s.Batches) == 0 {
		// An unknown producer may start at any sequence: its earlier
		// batches may have gone to a partition state this one never saw
		// (Kafka and Redpanda accept it too). A new epoch starts at 0.
		if s != nil && epoch < s.Epoch {
			return 0, false, fenced(pid, epoch, s.Epoch)
		}
		if s != nil && epoch > s.Epoch && first != 0 {
			return 0, false, outOfOrder(pid, epoch, first, "a new epoch must start at sequence 0")
		}
		return 0, false, nil
	}
	switch {
	case epoch < s.Epoch:
		return 0, false, fenced(pid, epoch, s.Epoch)
	case epoch > s.Epoch:
		if first != 0 {
			return 0, false, outOfOrder(pid, epoch, first, "a new epoch must start at sequence 0")
		}
		return 0, false, nil
	}
	if base, ok := s.find(first, last); ok {
		return base, true, nil
	}
	want := nextSeq(s.Batches[len(s.Batches)-1].LastSeq)
	if first != want {
		return 0, false, outOfOrder(pid, epoch, first, fmt.Sprintf("expected sequence %d", want))
	}
	return 0, false, nil
}

func fenced(pid int64, epoch, current int16) error {
	return catalog.InvalidProducerEpoch.Wrap(
		fmt.Errorf("producer %d epoch %d, current epoch %d: %w", pid, epoch, current, ErrInvalidProducerEpoch),
		fmt.Sprintf("producer epoch %d is older than the current epoch %d of this producer id", epoch, current))
}

func outOfOrder(pid int64, epoch int16, first int32, why string) error {
	return catalog.OutOfOrderSequence.Wrap(
		fmt.Errorf("producer %d epoch %d sequence %d: %s: %w", pid, epoch, first, why, ErrOutOfOrderSequence),
		fmt.Sprintf("sequence %d out of order: %s", first, why))
}
