package raftlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
)

// StableStore is Raft's stable store (current term, last vote) as one small
// file in the replica directory. The file holds two fixed slots of
// stableSlot bytes, and each Set overwrites the older one in place with
// the whole store and a sequence number, then fdatasyncs the file: the
// file's size and blocks never change, so that is one device flush with
// no journal commit. Raft stores its term and then its vote, each
// durably, on every election it takes part in, so a failover waits for
// these writes (the previous layout, a new file renamed over the old and
// the directory fsynced, cost three to four flushes per Set). A torn slot
// fails its CRC and Open takes the other one, which holds the store as
// it was before the Set that tore it.
type StableStore struct {
	dir string

	// mu guards the fields below and serializes writes.
	mu  sync.Mutex
	kv  map[string][]byte
	seq uint64 // of the slot written last; the next Set writes slot (seq+1)%2
}

var _ raft.StableStore = (*StableStore)(nil)

const (
	stableSlot   = 4096 // bytes per slot; the file is two slots
	stableHeader = 16   // crc32c of the rest, sequence uint64, body length uint32
)

// OpenStable opens or creates the stable store in dir. A store in the
// earlier one-record layout is read and rewritten in slots.
func OpenStable(dir string) (*StableStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open stable store: %w", err)
	}
	s := &StableStore{dir: dir, kv: map[string][]byte{}}
	_ = os.Remove(filepath.Join(dir, stableName+".tmp"))
	b, err := os.ReadFile(filepath.Join(dir, stableName))
	switch {
	case os.IsNotExist(err):
		// a new store: created below
	case err != nil:
		return nil, fmt.Errorf("open stable store: %w", err)
	case len(b) == 2*stableSlot:
		if err := s.decodeSlots(b); err != nil {
			return nil, fmt.Errorf("open stable store %s: %w", dir, err)
		}
		return s, nil
	default:
		if err := s.decode(b); err != nil {
			return nil, fmt.Errorf("open stable store %s: %w", dir, err)
		}
	}
	if err := s.create(); err != nil { // new, or the earlier layout
		return nil, fmt.Errorf("open stable store %s: %w", dir, err)
	}
	return s, nil
}

// File layout of the earlier store, and of a slot's body without its
// first four bytes: crc32c of the rest uint32, then per key: keyLen
// uint32, key, valLen uint32, val.
func (s *StableStore) encode() []byte {
	keys := make([]string, 0, len(s.kv))
	for k := range s.kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b := make([]byte, 4)
	for _, k := range keys {
		b = binary.BigEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s.kv[k])))
		b = append(b, s.kv[k]...)
	}
	binary.BigEndian.PutUint32(b, crc32.Checksum(b[4:], castagnoli))
	return b
}

func (s *StableStore) decode(b []byte) error {
	if len(b) < 4 || crc32.Checksum(b[4:], castagnoli) != binary.BigEndian.Uint32(b) {
		return fmt.Errorf("%s is corrupt", stableName)
	}
	b = b[4:]
	field := func() ([]byte, bool) {
		if len(b) < 4 {
			return nil, false
		}
		n := int(binary.BigEndian.Uint32(b))
		if n > len(b)-4 {
			return nil, false
		}
		v := append([]byte(nil), b[4:4+n]...)
		b = b[4+n:]
		return v, true
	}
	kv := map[string][]byte{}
	for len(b) > 0 {
		k, ok1 := field()
		v, ok2 := field()
		if !ok1 || !ok2 {
			return fmt.Errorf("%s is corrupt", stableName)
		}
		kv[string(k)] = v
	}
	s.kv = kv
	return nil
}

// slot encodes the store as the slot of sequence seq: stableSlot bytes,
// or an error if the store has outgrown a slot.
func (s *StableStore) slot(seq uint64) ([]byte, error) {
	body := s.encode()
	if stableHeader+len(body) > stableSlot {
		return nil, fmt.Errorf("stable store of %d bytes exceeds its %d-byte slot", len(body), stableSlot-stableHeader)
	}
	b := make([]byte, stableSlot)
	binary.BigEndian.PutUint64(b[4:], seq)
	binary.BigEndian.PutUint32(b[12:], uint32(len(body)))
	copy(b[stableHeader:], body)
	binary.BigEndian.PutUint32(b, crc32.Checksum(b[4:stableHeader+len(body)], castagnoli))
	return b, nil
}

// decodeSlots reads the file's two slots and keeps the valid one of the
// higher sequence.
func (s *StableStore) decodeSlots(b []byte) error {
	found := false
	for i := range 2 {
		sl := b[i*stableSlot : (i+1)*stableSlot]
		n := int(binary.BigEndian.Uint32(sl[12:]))
		if n > stableSlot-stableHeader || crc32.Checksum(sl[4:stableHeader+n], castagnoli) != binary.BigEndian.Uint32(sl) {
			continue // torn or never written
		}
		seq := binary.BigEndian.Uint64(sl[4:])
		if found && seq <= s.seq {
			continue
		}
		o := &StableStore{kv: map[string][]byte{}}
		if err := o.decode(sl[stableHeader : stableHeader+n]); err != nil {
			continue
		}
		s.kv, s.seq, found = o.kv, seq, true
	}
	if !found {
		return fmt.Errorf("%s is corrupt: neither slot is valid", stableName)
	}
	return nil
}

// create writes the whole two-slot file anew (both slots the current
// store) through a temporary file renamed into place.
func (s *StableStore) create() error {
	s.seq = 1
	a, err := s.slot(0)
	if err != nil {
		return err
	}
	b, err := s.slot(1)
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, stableName+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write stable store: %w", err)
	}
	_, err = f.Write(append(a, b...))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, stableName))
	}
	if err != nil {
		return fmt.Errorf("write stable store: %w", err)
	}
	return log.SyncDir(s.dir)
}

// Set stores val under key durably.
func (s *StableStore) Set(key, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.kv[string(key)]
	s.kv[string(key)] = append([]byte(nil), val...)
	if err := s.write(); err != nil {
		if had {
			s.kv[string(key)] = old
		} else {
			delete(s.kv, string(key))
		}
		return err
	}
	return nil
}

// Get returns the value of key, or nil if it was never set.
func (s *StableStore) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.kv[string(key)]...), nil
}

// SetUint64 stores val under key durably.
func (s *StableStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value of key, or 0 if it was never set.
func (s *StableStore) GetUint64(key []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kv[string(key)]
	if !ok {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("stable store key %q holds %d bytes, not a uint64", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// write overwrites the older slot with the store and makes it durable.
func (s *StableStore) write() error {
	seq := s.seq + 1
	b, err := s.slot(seq)
	if err != nil {
		return fmt.Errorf("write stable store: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, stableName), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("write stable store: %w", err)
	}
	_, err = f.WriteAt(b, int64(seq%2)*stableSlot)
	if err == nil {
		err = fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write stable store: %w", err)
	}
	s.seq = seq
	return nil
}
