package log

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/dataplane/journal"
)

// SyncMode chooses how a Syncer makes many logs durable in one round.
type SyncMode int

const (
	// SyncFiles calls fdatasync(2) on every dirty segment file, all in
	// parallel, plus fsync(2) on a directory that gained a segment. It
	// touches only the files it must. The default; see docs/benchmarks.md.
	SyncFiles SyncMode = iota
	// SyncFilesystem calls syncfs(2) once per filesystem. It flushes every
	// dirty page on that filesystem, including other tenants' and other
	// programs' writes, so its cost is not bounded by what these logs wrote.
	SyncFilesystem
	// SyncJournal writes what each log appended since its last round to the
	// broker's journal, one fdatasync for all of them (journal.go). Logs
	// opened without that journal, and rounds too large for a journal
	// file, are synced as SyncFiles does.
	SyncJournal
)

func (m SyncMode) String() string {
	switch m {
	case SyncFiles:
		return "fdatasync"
	case SyncFilesystem:
		return "syncfs"
	case SyncJournal:
		return "journal"
	}
	return fmt.Sprintf("SyncMode(%d)", int(m))
}

// syncTarget is what one log must flush to make everything it had written
// at the time of prepareSync durable.
type syncTarget struct {
	l     *Log
	gen   uint64
	next  int64
	dir   uint64     // dirGen to make durable; 0 if the directory is clean
	segs  []*segment // referenced until finishSync
	sizes []int64
}

// prepareSync snapshots the dirty state of l. The files stay referenced.
func (l *Log) prepareSync() (syncTarget, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return syncTarget{}, err
	}
	t := syncTarget{l: l, gen: l.gen, next: l.next}
	if l.dirGen > l.dirSync {
		t.dir = l.dirGen
	}
	for i := len(l.segs) - 1; i >= 0; i-- {
		s := l.segs[i]
		if s.synced >= s.size {
			break // segments before an in-sync one were synced when rolled
		}
		s.ref()
		t.segs = append(t.segs, s)
		t.sizes = append(t.sizes, s.size)
	}
	return t, nil
}

// finishSync records the outcome of a sync round and drops the references.
func (t *syncTarget) finish(err error) error {
	l := t.l
	if err != nil {
		l.fail(err) // after a failed fsync the page cache can no longer be trusted
	} else {
		l.mu.Lock()
		if l.gen == t.gen {
			for i, s := range t.segs {
				s.synced = max(s.synced, t.sizes[i])
			}
			l.durable = max(l.durable, t.next)
			l.dirSync = max(l.dirSync, t.dir)
		}
		l.mu.Unlock()
	}
	for _, s := range t.segs {
		s.unref()
	}
	if err != nil {
		return fmt.Errorf("sync log %s: %w", l.cfg.Dir, err)
	}
	return nil
}

// Sync makes every batch appended before the call durable, and advances
// DurableOffset. Nothing is reported durable before its fsync returns.
// fsync cannot be cancelled, so Sync takes no context.
func (l *Log) Sync() error {
	t, err := l.prepareSync()
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	for _, s := range t.segs {
		if err == nil {
			err = unix.Fdatasync(s.fd)
		}
	}
	if err == nil && t.dir > 0 {
		err = l.dir.Sync()
	}
	return t.finish(err)
}

// Syncer makes the appends of many logs durable together in one round
// (group commit), without writing any byte a second time. It is safe for
// concurrent use; callers that want fewer, larger rounds batch their logs
// before calling Sync.
type Syncer struct {
	mode    SyncMode
	journal *journal.Journal // SyncJournal only
}

// NewSyncer returns a Syncer using mode, which must not be SyncJournal.
func NewSyncer(mode SyncMode) *Syncer {
	if mode == SyncJournal {
		panic("log: NewSyncer(SyncJournal): use NewJournalSyncer")
	}
	return &Syncer{mode: mode}
}

// NewJournalSyncer returns a Syncer in SyncJournal mode writing to j.
func NewJournalSyncer(j *journal.Journal) *Syncer {
	return &Syncer{mode: SyncJournal, journal: j}
}

// Mode is the Syncer's mode.
func (y *Syncer) Mode() SyncMode { return y.mode }

// Sync makes everything appended to logs before the call durable, and
// returns when all of it is. A log that fails is marked failed; the first
// error is returned.
func (y *Syncer) Sync(logs ...*Log) error {
	if y.mode == SyncJournal {
		return y.syncJournal(logs)
	}
	return y.syncFiles(logs)
}

// syncFiles is a round that syncs the logs' own files.
func (y *Syncer) syncFiles(logs []*Log) error {
	targets := make([]syncTarget, 0, len(logs))
	var firstErr error
	for _, l := range logs {
		t, err := l.prepareSync()
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("sync log %s: %w", l.cfg.Dir, err)
			}
			continue
		}
		targets = append(targets, t)
	}
	errs := make([]error, len(targets))
	switch y.mode {
	case SyncFilesystem:
		y.syncfs(targets, errs)
	default:
		y.fdatasync(targets, errs)
	}
	for i := range targets {
		if err := targets[i].finish(errs[i]); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// fdatasync flushes every dirty file of every target, one goroutine per
// file, and every directory that gained a file.
func (y *Syncer) fdatasync(targets []syncTarget, errs []error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	setErr := func(i int, err error) {
		mu.Lock()
		if errs[i] == nil {
			errs[i] = err
		}
		mu.Unlock()
	}
	for i := range targets {
		t := &targets[i]
		for _, s := range t.segs {
			wg.Go(func() {
				if err := unix.Fdatasync(s.fd); err != nil {
					setErr(i, err)
				}
			})
		}
		if t.dir > 0 {
			wg.Go(func() {
				if err := t.l.dir.Sync(); err != nil {
					setErr(i, err)
				}
			})
		}
	}
	wg.Wait()
}

// syncfs calls syncfs(2) once per filesystem that holds a dirty target.
func (y *Syncer) syncfs(targets []syncTarget, errs []error) {
	done := map[uint64]error{}
	for i := range targets {
		t := &targets[i]
		if len(t.segs) == 0 && t.dir == 0 {
			continue
		}
		var st unix.Stat_t
		fd := int(t.l.dir.Fd())
		if err := unix.Fstat(fd, &st); err != nil {
			errs[i] = err
			continue
		}
		err, ok := done[st.Dev]
		if !ok {
			err = unix.Syncfs(fd)
			done[st.Dev] = err
		}
		errs[i] = err
	}
}
