package raftlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
)

// File names inside a store's directory.
const (
	logDirName   = "log"          // the partition's dataplane/log
	entriesName  = "raft.entries" // one record per Raft entry
	stableName   = "raft.stable"  // term and vote
	maxEpochTerm = math.MaxInt32  // leader epochs are int32 on the wire
)

// Errors returned by the store. Callers match them with errors.Is.
var (
	// ErrGap means StoreLogs was given an entry that does not follow the
	// last stored one. The store never leaves a hole in the Kafka offset
	// space, so it refuses; see DESIGN.md (catch-up) for when this can
	// happen.
	ErrGap = errors.New("raftlog: entries do not follow the stored log")
	// ErrNotBatch means a LogCommand entry was not one valid Kafka record
	// batch.
	ErrNotBatch = errors.New("raftlog: command entry is not a record batch")
	// ErrTermTooLarge means the Raft term no longer fits a Kafka leader epoch.
	ErrTermTooLarge = errors.New("raftlog: raft term exceeds the int32 leader epoch")
	// ErrInconsistent means the entries file and the partition log disagree
	// in a way recovery cannot repair, or a read found a batch other than
	// the one the entry names.
	ErrInconsistent = errors.New("raftlog: entries file and partition log disagree")
	// ErrStoreClosed is returned by every call after Close.
	ErrStoreClosed = errors.New("raftlog: store closed")
)

// Config configures one partition's store.
type Config struct {
	// Dir is the replica directory. The partition log lives in Dir/log,
	// the entries file and the stable store beside it. Required.
	Dir string
	// Log configures the partition log; its Dir is set from Dir.
	Log log.Config
	// Committer makes appends durable; share one per broker. Required.
	Committer *Committer
	// Logger receives recovery lines. Nil discards them.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Dir == "" {
		return errors.New("config: Dir is required: the replica directory")
	}
	if c.Committer == nil {
		return errors.New("config: Committer is required: one per broker, shared by its partitions")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c.Log.Dir = filepath.Join(c.Dir, logDirName)
	if c.Log.Journal == nil {
		c.Log.Journal = c.Committer.journal
	}
	if c.Log.Logger == nil {
		c.Log.Logger = c.Logger
	}
	return nil
}

// entry is what the store keeps in memory for one Raft entry.
type entry struct {
	term  uint64
	typ   raft.LogType
	at    int64  // Kafka log end offset before this entry
	count int64  // Kafka offsets the entry takes: records in its batch, 0 for non-data
	pos   int64  // position of its record in the entries file
	data  []byte // non-data entries only
	ext   []byte
}

// Store is a raft.LogStore over one partition log plus its entries file.
// Raft calls StoreLogs and DeleteRange from its main goroutine and GetLog
// from several; all methods are safe for concurrent use.
type Store struct {
	cfg       Config
	log       *log.Log
	idx       *os.File
	committer *Committer

	// checked holds the first byte's address of each batch this process
	// validated whole before handing it to Raft (MarkChecked), so that
	// storing it does not hash it again. A follower's batches arrive from
	// the network and are never in it: it validates them in full.
	checked sync.Map // *byte → struct{}

	// wmu serializes StoreLogs, DeleteRange and Close. Lock order: wmu,
	// then mu, then the partition log's own locks.
	wmu sync.Mutex

	// mu guards the fields below.
	mu        sync.RWMutex
	first     uint64  // Raft index of ents[0], or of the next entry if empty
	ents      []entry // contiguous Raft indexes from first
	kafkaNext int64   // Kafka log end offset implied by ents
	size      int64   // bytes of valid records in the entries file
	synced    int64   // bytes of the entries file known to be on stable storage
	failed    error
	closed    bool
	seeded    uint64 // the Raft index a seed started the store after (seed.go); 0 if none known
	seedConf  bool   // a configuration entry was stored after the seed
}

var _ raft.LogStore = (*Store)(nil)

// Open opens or creates the store in cfg.Dir and reconciles the entries
// file with the partition log after a crash: records past the log's end
// (their batch never reached the disk) and batches past the last record
// (written, but the record was lost) are both cut. Neither was ever
// acknowledged, since an acknowledgement waits for both to be durable.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("open raft log store: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("open raft log store: %w", err)
	}
	if err := finishSeed(cfg); err != nil {
		return nil, fmt.Errorf("open raft log store: %w", err)
	}
	l, err := log.Open(ctx, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("open raft log store: %w", err)
	}
	s := &Store{cfg: cfg, log: l, committer: cfg.Committer, first: 1}
	if err := s.recover(); err != nil {
		l.Close()
		if s.idx != nil {
			s.idx.Close()
		}
		return nil, fmt.Errorf("open raft log store %s: %w", cfg.Dir, err)
	}
	if err := s.reconcileRoll(false); err != nil { // roll.go: a crash between a roll entry and its roll
		s.Close()
		return nil, fmt.Errorf("open raft log store %s: %w", cfg.Dir, err)
	}
	return s, nil
}

// Log is the partition log the store writes into. Readers may Read from it;
// only the store writes to it.
func (s *Store) Log() *log.Log { return s.log }

// FirstIndex returns the first Raft index stored, or 0 if none.
func (s *Store) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usable(); err != nil {
		return 0, err
	}
	if len(s.ents) == 0 {
		return 0, nil
	}
	return s.first, nil
}

// LastIndex returns the last Raft index stored, or 0 if none.
func (s *Store) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usable(); err != nil {
		return 0, err
	}
	if len(s.ents) == 0 {
		return 0, nil
	}
	return s.first + uint64(len(s.ents)) - 1, nil
}

// NextIndex returns the Raft index the store takes next: one past its
// last entry, or past the base a seed started it after (LastIndex says 0
// for both an empty store and a seeded one that holds no entry yet).
func (s *Store) NextIndex() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.first + uint64(len(s.ents))
}

// TermAt returns the term of the stored entry index, without reading its
// batch; ok is false if the store does not hold it.
func (s *Store) TermAt(index uint64) (term uint64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if index < s.first || index >= s.first+uint64(len(s.ents)) {
		return 0, false
	}
	return s.ents[index-s.first].term, true
}

// KafkaOffsetAt returns the Kafka log end offset right after Raft entry
// index, for translating a Raft position into the Kafka offset space.
func (s *Store) KafkaOffsetAt(index uint64) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if index < s.first || index >= s.first+uint64(len(s.ents)) {
		return 0, false
	}
	e := s.ents[index-s.first]
	return e.at + e.count, true
}

func (s *Store) usable() error {
	if s.closed {
		return ErrStoreClosed
	}
	return s.failed
}

// MarkChecked notes that batch was validated whole (log.ValidateBatch or
// ValidateClientBatch) and will reach StoreLogs as this same slice, so
// that storing it checks only its framing. The caller calls forget once
// the batch is stored or will not be (its Apply returned): a batch stored
// after that is hashed in full, which is merely slower.
func (s *Store) MarkChecked(batch []byte) (forget func()) {
	if len(batch) == 0 {
		return func() {}
	}
	key := &batch[0]
	s.checked.Store(key, struct{}{})
	return func() { s.checked.Delete(key) }
}

// GetLog reconstructs entry index: a LogCommand's Data is its batch as
// stored, with the base offset and leader epoch stamped.
func (s *Store) GetLog(index uint64, out *raft.Log) error {
	s.mu.RLock()
	if err := s.usable(); err != nil {
		s.mu.RUnlock()
		return err
	}
	if index < s.first || index >= s.first+uint64(len(s.ents)) {
		s.mu.RUnlock()
		return raft.ErrLogNotFound
	}
	e := s.ents[index-s.first]
	s.mu.RUnlock()
	*out = raft.Log{Index: index, Term: e.term, Type: e.typ, Extensions: e.ext}
	if !e.inLog() {
		out.Data = e.data
		return nil
	}
	h, b, err := s.log.ReadBatch(e.at, nil)
	if err != nil {
		if errors.Is(err, log.ErrOffsetOutOfRange) {
			return raft.ErrLogNotFound // retention removed it
		}
		return fmt.Errorf("get raft entry %d: %w", index, err)
	}
	if s.log.HasGaps() && !e.isMirror() && (h.BaseOffset != e.at || h.NumRecords != h.LastOffsetDelta+1) {
		return raft.ErrLogNotFound // compacted: its batch is gone or rewritten (roll.go)
	}
	if e.isMirror() {
		return mirrorData(index, e, h, b, out) // mirror.go
	}
	if h.BaseOffset != e.at || int64(h.LastOffsetDelta)+1 != e.count {
		return fmt.Errorf("get raft entry %d: %w: batch at %d has offsets %d–%d, want %d records",
			index, ErrInconsistent, e.at, h.BaseOffset, h.LastOffset(), e.count)
	}
	out.Data = b
	return nil
}

// StoreLog stores one entry.
func (s *Store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs appends entries that must follow the last stored one. Each
// LogCommand's batch is stamped in place with its Kafka base offset and the
// entry's term as leader epoch (plus the epoch base a promoted mirror's
// entries carry, mirror_epoch.go), and written to the partition log; every
// entry gets a record in the entries file. StoreLogs returns once the
// entries are durable, through a round of the shared Committer.
//
// Durable means recoverable, not both files flushed. A call of plain
// command entries (the steady state of a partition: batches only) flushes
// the partition log alone, one fdatasync per round instead of two: the
// batches carry their base offset and their term as leader epoch, so
// recovery rebuilds the records of batches whose records a crash lost,
// with the Raft indexes that follow the last record. That is exact only if
// every entry after the last durable record is a plain command entry, so a
// call holding any other entry (no-op, barrier, configuration, or a
// command with extensions), or the first entry of an empty store, first
// makes its records, and every record before them, durable, and only then
// writes its batches.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	return s.storeRolling(logs) // roll.go: ControlRoll entries roll the log where they lie
}

func (s *Store) storeLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	err := s.usable()
	first := s.first
	next := first + uint64(len(s.ents))
	kafka := s.kafkaNext
	pos := s.size
	synced := s.synced
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("store raft entries: %w", err)
	}
	if logs[0].Index != next {
		return fmt.Errorf("store raft entries %d–%d: %w: next index is %d",
			logs[0].Index, logs[len(logs)-1].Index, ErrGap, next)
	}
	if got := s.log.NextOffset(); got != kafka {
		return s.fail(fmt.Errorf("store raft entries: %w: log ends at %d, entries at %d", ErrInconsistent, got, kafka))
	}
	ents := make([]entry, 0, len(logs))
	var batches []log.Batch
	batchAt := int64(-1) // the first batch's base offset
	var rec []byte
	// Recovery rebuilds lost records after the last durable one, so the
	// first entry of an empty store is never plain.
	plain := next > first
	for i, l := range logs {
		if l.Index != next+uint64(i) {
			return fmt.Errorf("store raft entry %d: %w: expected %d", l.Index, ErrGap, next+uint64(i))
		}
		epoch, ok := EntryEpoch(l.Term, l.Extensions) // mirror_epoch.go: the term, plus a promoted mirror's base
		if !ok {
			return fmt.Errorf("store raft entry %d: %w: term %d, extensions %q", l.Index, ErrTermTooLarge, l.Term, l.Extensions)
		}
		e := entry{term: l.Term, typ: l.Type, at: kafka, ext: l.Extensions}
		if e.isMirror() {
			// mirror.go: at its own offset, or a no-op record.
			b, err := s.mirrorEntry(&e, l, kafka)
			if err != nil {
				return err
			}
			if b.Data != nil {
				batches = append(batches, b)
			}
			plain = false
		} else if e.isData() {
			// Only the header here: AppendBatches validates every batch
			// (lengths, fields, CRC) before it writes any, so checking the
			// CRC here too would hash each batch twice on the write path.
			// A batch this process validated before Raft took it (the
			// leader's own) is not hashed again at all.
			h, err := log.ParseHeader(l.Data)
			if err != nil {
				return fmt.Errorf("store raft entry %d: %w: %w", l.Index, ErrNotBatch, err)
			}
			e.count = int64(h.LastOffsetDelta) + 1
			_, checked := s.checked.Load(&l.Data[0])
			batches = append(batches, log.Batch{Data: l.Data, LeaderEpoch: epoch, Checked: checked})
			plain = plain && len(l.Extensions) == 0
		} else {
			e.data = l.Data
			plain = false
		}
		e.pos = pos + int64(len(rec))
		rec = appendRecord(rec, l.Index, e)
		if e.inLog() && len(batches) == 1 && batchAt < 0 {
			batchAt = e.at
		}
		kafka = e.at + e.count
		ents = append(ents, e)
	}
	if !plain {
		// Records first, durable before any of these batches can be.
		if err := pwriteAll(s.idx, rec, pos); err != nil {
			return s.fail(fmt.Errorf("store raft entries: write %s: %w", entriesName, err))
		}
		if err := s.committer.wait(s, syncEntries); err != nil {
			return s.fail(fmt.Errorf("store raft entries %d–%d: sync %s: %w", logs[0].Index, logs[len(logs)-1].Index, entriesName, err))
		}
		synced = pos + int64(len(rec))
	}
	if len(batches) > 0 {
		first, last, err := s.log.AppendBatches(batches)
		if err != nil {
			s.rewindLog()
			if !plain {
				// The records are on disk without their batches. Cut them,
				// durably: other entries may take these indexes later, and
				// a crash must not bring these records back to name them.
				if terr := s.idx.Truncate(pos); terr != nil {
					return s.fail(fmt.Errorf("store raft entries: cut %s: %w", entriesName, terr))
				}
				if terr := fdatasync(s.idx); terr != nil {
					return s.fail(fmt.Errorf("store raft entries: sync %s: %w", entriesName, terr))
				}
				s.mu.Lock()
				s.synced = min(s.synced, pos)
				s.mu.Unlock()
			}
			if errors.Is(err, log.ErrCorruptBatch) || errors.Is(err, log.ErrInvalidMagic) {
				err = fmt.Errorf("%w: %w", ErrNotBatch, err)
			}
			return fmt.Errorf("store raft entries %d–%d: %w", logs[0].Index, logs[len(logs)-1].Index, err)
		}
		if first != batchAt || last+1 != kafka {
			return s.fail(fmt.Errorf("store raft entries: %w: log assigned %d–%d, expected %d–%d",
				ErrInconsistent, first, last, batchAt, kafka-1))
		}
	}
	if plain {
		if err := pwriteAll(s.idx, rec, pos); err != nil {
			return s.fail(fmt.Errorf("store raft entries: write %s: %w", entriesName, err))
		}
	}
	if len(batches) > 0 {
		if err := s.committer.wait(s, syncLog); err != nil {
			return s.fail(fmt.Errorf("store raft entries %d–%d: sync: %w", logs[0].Index, logs[len(logs)-1].Index, err))
		}
	}
	s.mu.Lock()
	for _, e := range ents {
		s.seedConf = s.seedConf || e.typ == raft.LogConfiguration
	}
	s.ents = append(s.ents, ents...)
	s.kafkaNext = kafka
	s.size = pos + int64(len(rec))
	s.synced = synced
	s.mu.Unlock()
	return nil
}

// rewindLog cuts batches a failed append left past the stored entries.
func (s *Store) rewindLog() {
	s.mu.RLock()
	kafka := s.kafkaNext
	s.mu.RUnlock()
	if s.log.NextOffset() > kafka {
		if err := s.log.TruncateTo(kafka); err != nil {
			s.fail(err)
		}
	}
}

func (s *Store) fail(err error) error {
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	s.mu.Unlock()
	return err
}

// checkDurable reports whether everything the store wrote to its partition
// log is on stable storage; the Committer asks after a round that failed
// for some log.
func (s *Store) checkDurable() error {
	if d, n := s.log.DurableOffset(), s.log.NextOffset(); d < n {
		return fmt.Errorf("%w: durable offset %d below log end %d", log.ErrLogFailed, d, n)
	}
	return nil
}

// DeleteRange removes entries min through max. Removing a suffix is a Raft
// log conflict: the partition log is truncated at the first removed
// entry's Kafka offset, and the cut is durable on return. Removing a
// prefix is Raft log compaction; the store keeps those entries, because
// their batches are the partition's data and only retention may delete
// them, so a prefix delete changes nothing.
func (s *Store) DeleteRange(min, max uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	err := s.usable()
	first, n := s.first, uint64(len(s.ents))
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("delete raft entries %d–%d: %w", min, max, err)
	}
	last := first + n - 1
	if n == 0 || min > max || max < first || min > last {
		return nil
	}
	if max < last {
		s.cfg.Logger.Debug("raft log compaction kept the partition data", "from", min, "to", max)
		return nil
	}
	if min < first {
		min = first
	}
	s.mu.RLock()
	e := s.ents[min-first]
	s.mu.RUnlock()
	if err := s.log.TruncateTo(e.at); err != nil {
		return s.fail(fmt.Errorf("delete raft entries %d–%d: %w", min, max, err))
	}
	if err := s.idx.Truncate(e.pos); err != nil {
		return s.fail(fmt.Errorf("delete raft entries %d–%d: truncate %s: %w", min, max, entriesName, err))
	}
	if err := fdatasync(s.idx); err != nil {
		return s.fail(fmt.Errorf("delete raft entries %d–%d: sync %s: %w", min, max, entriesName, err))
	}
	s.mu.Lock()
	s.ents = s.ents[:min-first]
	s.kafkaNext = s.log.NextOffset() // below e.at if a mirror entry's gap preceded it
	s.size = e.pos
	s.synced = e.pos
	s.mu.Unlock()
	return s.unrollRemoved() // roll.go
}

// Durable reports how much of the store is on stable storage: the Kafka
// offset below which the partition log is, and the byte length of the
// entries file prefix that is. A crash may lose anything beyond; crash
// tests cut the files there. It waits for a StoreLogs in progress, whose
// sync round may have finished without its bookkeeping being done yet.
func (s *Store) Durable() (kafkaOffset, entriesBytes int64) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log.DurableOffset(), s.synced
}

// Close closes the entries file and the partition log. It does not sync:
// everything StoreLogs acknowledged already is. Close is idempotent.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.idx.Close()
	if lerr := s.log.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("close raft log store: %w", err)
	}
	return nil
}

func pwriteAll(f *os.File, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := f.WriteAt(b, off)
		if err != nil {
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}
