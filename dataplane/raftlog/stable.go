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
)

// StableStore is Raft's stable store (current term, last vote) as one small
// file in the replica directory. Every Set replaces the file atomically:
// write a temporary file, fsync it, rename it over the old one, fsync the
// directory. Raft writes it only on term changes and votes.
type StableStore struct {
	dir string

	// mu guards the field below and serializes writes.
	mu sync.Mutex
	kv map[string][]byte
}

var _ raft.StableStore = (*StableStore)(nil)

// OpenStable opens or creates the stable store in dir.
func OpenStable(dir string) (*StableStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open stable store: %w", err)
	}
	s := &StableStore{dir: dir, kv: map[string][]byte{}}
	_ = os.Remove(filepath.Join(dir, stableName+".tmp"))
	b, err := os.ReadFile(filepath.Join(dir, stableName))
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open stable store: %w", err)
	}
	if err := s.decode(b); err != nil {
		return nil, fmt.Errorf("open stable store %s: %w", dir, err)
	}
	return s, nil
}

// File layout: crc32c of the rest uint32, then per key: keyLen uint32, key,
// valLen uint32, val.
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
	for len(b) > 0 {
		k, ok1 := field()
		v, ok2 := field()
		if !ok1 || !ok2 {
			return fmt.Errorf("%s is corrupt", stableName)
		}
		s.kv[string(k)] = v
	}
	return nil
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

func (s *StableStore) write() error {
	tmp := filepath.Join(s.dir, stableName+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write stable store: %w", err)
	}
	_, err = f.Write(s.encode())
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
	return syncDir(s.dir)
}
