package raftlog

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/dataplane/log"
)

// ErrCommitterClosed is returned to a StoreLogs waiting on a Committer that
// was closed.
var ErrCommitterClosed = errors.New("raftlog: committer closed")

// Committer makes the appends of every partition on one broker durable in
// shared rounds (group commit). A StoreLogs that has written its bytes asks
// the committer to cover its store; the committer's goroutine takes every
// store that asked since the last round, syncs all their partition logs
// through one log.Syncer call and their index files in parallel, then wakes
// all of them. One Committer per broker; it owns one goroutine, which Close
// stops.
type Committer struct {
	syncer *log.Syncer
	reqs   chan commitReq
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	rounds atomic.Int64
	stores atomic.Int64
}

type commitReq struct {
	s    *Store
	done chan error
}

// NewCommitter starts a committer that syncs logs in mode.
func NewCommitter(mode log.SyncMode) *Committer {
	c := &Committer{
		syncer: log.NewSyncer(mode),
		reqs:   make(chan commitReq, 256),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go c.run()
	return c
}

// CommitStats counts durability rounds and the store syncs they covered.
type CommitStats struct {
	Rounds int64 // durability rounds run
	Stores int64 // store syncs covered, summed over rounds
}

// Stats reports how many rounds ran and how many stores they covered; Stores
// divided by Rounds is the mean number of partitions per fsync round.
func (c *Committer) Stats() CommitStats {
	return CommitStats{Rounds: c.rounds.Load(), Stores: c.stores.Load()}
}

// Close stops the committer's goroutine and waits for it. Waiters not yet
// served get ErrCommitterClosed. Close is idempotent.
func (c *Committer) Close() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

// wait returns once everything s wrote before the call is durable.
func (c *Committer) wait(s *Store) error {
	r := commitReq{s: s, done: make(chan error, 1)}
	select {
	case c.reqs <- r:
	case <-c.stop:
		return ErrCommitterClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-c.done:
		// The loop may have answered just before it exited.
		select {
		case err := <-r.done:
			return err
		default:
			return ErrCommitterClosed
		}
	}
}

func (c *Committer) run() {
	defer close(c.done)
	var batch []commitReq
	for {
		batch = batch[:0]
		select {
		case r := <-c.reqs:
			batch = append(batch, r)
		case <-c.stop:
			c.drain()
			return
		}
	more:
		for {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		c.round(batch)
	}
}

func (c *Committer) drain() {
	for {
		select {
		case r := <-c.reqs:
			r.done <- ErrCommitterClosed
		default:
			return
		}
	}
}

// round syncs every distinct store in batch once and answers each request.
func (c *Committer) round(batch []commitReq) {
	seen := make(map[*Store]int, len(batch))
	var logs []*log.Log
	var files []*os.File
	var stores []*Store
	for _, r := range batch {
		if _, ok := seen[r.s]; ok {
			continue
		}
		seen[r.s] = len(stores)
		stores = append(stores, r.s)
		logs = append(logs, r.s.log)
		files = append(files, r.s.idx)
	}
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fdatasync(f)
		}()
	}
	logErr := c.syncer.Sync(logs...)
	wg.Wait()
	c.rounds.Add(1)
	c.stores.Add(int64(len(stores)))
	for _, r := range batch {
		i := seen[r.s]
		err := errs[i]
		if err == nil && logErr != nil {
			// Syncer reports the first failure only; ask the log whether
			// this one is durable.
			err = r.s.checkDurable()
		}
		r.done <- err
	}
}

func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
