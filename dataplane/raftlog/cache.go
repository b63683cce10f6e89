package raftlog

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// Cache keeps the entries a store stored last in memory, so that the
// leader's replication reads the entries it has just stored without a
// read of the partition log. hashicorp/raft's LogCache keeps a fixed
// number of entries whatever their size: 32 entries of 1 MiB batches are
// 32 MiB per busy partition, 384 MiB on a broker of twelve, which the
// garbage collector must then let the heap grow by. Cache bounds the
// bytes as well as the entries. Followers that are caught up only read
// what was stored in the last round or two; one that lags reads the rest
// from the store.
//
// A floor (SetFloor) drops what nobody will read from the cache again:
// entries this replica has applied and, on a leader, every follower holds. Without it every
// replica of every busy partition kept its full bound: 100 busy
// partitions held about 1.2 GB across a cell of three brokers, all of it
// memory the heap first had to grow by.
type Cache struct {
	store    raft.LogStore
	maxBytes int64
	floor    atomic.Pointer[func() uint64]
	mu       sync.RWMutex
	ring     []*raft.Log // ring[(head+i)%len(ring)] has index first+i
	head, n  int
	first    uint64
	bytes    int64
}

// NewCache wraps store with a cache of at most maxEntries entries and
// maxBytes bytes of entry data; the newest entry is kept even when it
// alone is larger.
func NewCache(store raft.LogStore, maxEntries int, maxBytes int64) (*Cache, error) {
	if maxEntries <= 0 || maxBytes <= 0 {
		return nil, errors.New("raft log cache: entries and bytes must be positive")
	}
	return &Cache{store: store, maxBytes: maxBytes, ring: make([]*raft.Log, maxEntries)}, nil
}

// SetFloor has the cache drop, each time it stores, the entries up to
// the index fn returns: entries the replica will not read from it again
// (applied, and on a leader held by every follower). They are still read
// from the store if asked for. Nil removes the floor.
func (c *Cache) SetFloor(fn func() uint64) {
	if fn == nil {
		c.floor.Store(nil)
		return
	}
	c.floor.Store(&fn)
}

// IsMonotonic reports whether the store refuses gaps between entries
// (raft.MonotonicLogStore), as the store does.
func (c *Cache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// GetLog returns entry index from the cache, or else from the store.
func (c *Cache) GetLog(index uint64, out *raft.Log) error {
	c.mu.RLock()
	if index >= c.first && index-c.first < uint64(c.n) {
		*out = *c.ring[(c.head+int(index-c.first))%len(c.ring)]
		c.mu.RUnlock()
		return nil
	}
	c.mu.RUnlock()
	return c.store.GetLog(index, out)
}

// StoreLog stores one entry.
func (c *Cache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries in the store and, once they are stored, keeps
// them. An entry that does not follow the cached ones (Raft stores after a
// truncation, or after a snapshot) starts the cache again.
func (c *Cache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return err
	}
	floor := uint64(0)
	if f := c.floor.Load(); f != nil {
		floor = (*f)()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if c.n > 0 && l.Index != c.first+uint64(c.n) {
			c.clear()
		}
		if c.n == len(c.ring) {
			c.dropOldest()
		}
		if c.n == 0 {
			c.first = l.Index
		}
		c.ring[(c.head+c.n)%len(c.ring)] = l
		c.n++
		c.bytes += entryBytes(l)
		for c.bytes > c.maxBytes && c.n > 1 {
			c.dropOldest()
		}
	}
	for c.n > 0 && c.first <= floor {
		c.dropOldest()
	}
	return nil
}

// FirstIndex is the store's.
func (c *Cache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

// LastIndex is the store's.
func (c *Cache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// DeleteRange empties the cache and deletes the range from the store. An
// empty range (min > max) only empties the cache: what a replica does when
// its store's contents were replaced underneath.
func (c *Cache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	c.clear()
	c.mu.Unlock()
	return c.store.DeleteRange(min, max)
}

// Cached reports how many entries and bytes the cache holds.
func (c *Cache) Cached() (entries int, bytes int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.n, c.bytes
}

func (c *Cache) dropOldest() {
	c.bytes -= entryBytes(c.ring[c.head])
	c.ring[c.head] = nil
	c.head = (c.head + 1) % len(c.ring)
	c.first++
	c.n--
}

func (c *Cache) clear() {
	clear(c.ring)
	c.head, c.n, c.first, c.bytes = 0, 0, 0, 0
}

func entryBytes(l *raft.Log) int64 { return int64(len(l.Data) + len(l.Extensions)) }
