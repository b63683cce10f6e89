package raftlog

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/dataplane/journal"
	"github.com/sluicehq/sluice/dataplane/log"
)

// ErrCommitterClosed is returned to a StoreLogs waiting on a Committer that
// was closed.
var ErrCommitterClosed = errors.New("raftlog: committer closed")

// Committer makes the appends of every partition on one broker durable in
// shared rounds (group commit). A StoreLogs that has written its bytes asks
// the committer to cover its store, saying which of its two files must be
// durable; the committer's goroutine takes every store that asked since the
// last round, syncs the partition logs asked for through one log.Syncer
// call and the entries files asked for in parallel with it, then wakes all
// of them. One Committer per broker; it owns one goroutine, which Close
// stops.
type Committer struct {
	syncer  *log.Syncer
	journal *journal.Journal // nil unless NewJournalCommitter
	reqs    chan commitReq
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	rounds  atomic.Int64
	stores  atomic.Int64
	entries atomic.Int64
	// observe, when set, gets each round's sync time (SetRoundObserver).
	observe atomic.Pointer[func(time.Duration)]
}

type commitReq struct {
	s    *Store
	what syncWhat
	done chan error
}

// syncWhat says which files of a store a commit request needs durable.
type syncWhat uint8

const (
	syncLog     syncWhat = 1 << iota // the partition log's segments
	syncEntries                      // the entries file
)

// NewCommitter starts a committer that syncs logs in mode, which must not
// be log.SyncJournal.
func NewCommitter(mode log.SyncMode) *Committer {
	return startCommitter(log.NewSyncer(mode), nil)
}

// NewJournalCommitter starts a committer that makes partition logs
// durable through the broker's journal j: every store opened with it
// writes its log under j (Config.Log.Journal), and a round writes the
// appends of all of them to j with one fdatasync (dataplane/journal). The
// entries files are still synced in their own right. The caller closes j
// after the committer and every store.
func NewJournalCommitter(j *journal.Journal) *Committer {
	return startCommitter(log.NewJournalSyncer(j), j)
}

func startCommitter(y *log.Syncer, j *journal.Journal) *Committer {
	c := &Committer{
		syncer:  y,
		journal: j,
		reqs:    make(chan commitReq, 256),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go c.run()
	return c
}

// CommitStats counts durability rounds and the store syncs they covered.
type CommitStats struct {
	Rounds         int64 // durability rounds run
	Stores         int64 // store syncs covered, summed over rounds
	EntriesFlushes int64 // entries-file fdatasyncs, summed over rounds
}

// Stats reports how many rounds ran and how many stores they covered; Stores
// divided by Rounds is the mean number of partitions per fsync round.
func (c *Committer) Stats() CommitStats {
	return CommitStats{Rounds: c.rounds.Load(), Stores: c.stores.Load(), EntriesFlushes: c.entries.Load()}
}

// SetRoundObserver makes f receive, after each round, how long that
// round's syncs took (the partition logs' and the entries files', which
// run in parallel): the broker's fsync latency. f runs on the committer's
// goroutine, so it must be quick. nil removes it; safe at any time.
func (c *Committer) SetRoundObserver(f func(time.Duration)) {
	if f == nil {
		c.observe.Store(nil)
		return
	}
	c.observe.Store(&f)
}

// Close stops the committer's goroutine and waits for it. Waiters not yet
// served get ErrCommitterClosed. Close is idempotent.
func (c *Committer) Close() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

// wait returns once everything s wrote before the call to the files named
// by what is durable.
func (c *Committer) wait(s *Store, what syncWhat) error {
	r := commitReq{s: s, what: what, done: make(chan error, 1)}
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

// gatherYields bounds how many times a round's goroutine yields the
// processor before it starts, to let stores that are about to ask (the
// other partitions of one produce request, whose Raft loops are runnable)
// join the round: it yields again only while the last yield brought one.
// On an idle machine a yield returns at once and brings nothing, so a lone
// store waits for no one; on a busy one the round serves more partitions
// and the broker pays fewer journal writes and fdatasyncs per record.
const gatherYields = 8

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
		batch = c.gather(batch)
		c.round(batch)
	}
}

// gather adds to batch every request already waiting, then yields up to
// gatherYields times while each yield brought more.
func (c *Committer) gather(batch []commitReq) []commitReq {
	for y := 0; ; y++ {
		n := len(batch)
	more:
		for {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		if y == gatherYields || (y > 0 && len(batch) == n) {
			return batch
		}
		runtime.Gosched()
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

// round syncs the files asked for of every distinct store in batch once
// and answers each request.
func (c *Committer) round(batch []commitReq) {
	seen := make(map[*Store]int, len(batch))
	var stores []*Store
	var what []syncWhat
	for _, r := range batch {
		i, ok := seen[r.s]
		if !ok {
			i = len(stores)
			seen[r.s] = i
			stores = append(stores, r.s)
			what = append(what, 0)
		}
		what[i] |= r.what
	}
	var logs []*log.Log
	start := time.Now()
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		if what[i]&syncLog != 0 {
			logs = append(logs, s.log)
		}
		if what[i]&syncEntries != 0 {
			c.entries.Add(1)
			wg.Go(func() { errs[i] = fdatasync(s.idx) })
		}
	}
	var logErr error
	if len(logs) > 0 {
		logErr = c.syncer.Sync(logs...)
	}
	wg.Wait()
	if f := c.observe.Load(); f != nil {
		(*f)(time.Since(start))
	}
	c.rounds.Add(1)
	c.stores.Add(int64(len(stores)))
	for _, r := range batch {
		i := seen[r.s]
		err := errs[i]
		if err == nil && logErr != nil && r.what&syncLog != 0 {
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
