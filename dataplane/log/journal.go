package log

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/dataplane/journal"
)

// With a journal (Config.Journal and a Syncer from NewJournalSyncer) a
// sync round does not fdatasync the active segment: it reads the bytes
// appended since the last round back from the page cache and hands them
// to the journal, which writes them with every other log's in one record
// stream and one fdatasync. The log's own files are synced when the
// journal asks (SyncForJournal, before it reuses a file), at roll, at
// Close, and before anything removes, truncates or replaces a segment
// (fence), so that no journal record is ever replayed over a file that
// changed under it.

// journalDir sets jpath from the journal's root. Called by Open.
func (l *Log) journalDir() error {
	j := l.cfg.Journal
	if j == nil {
		return nil
	}
	dir, err := filepath.Abs(l.cfg.Dir)
	if err == nil {
		var root string
		if root, err = filepath.Abs(j.Root()); err == nil {
			l.jpath, err = filepath.Rel(root, dir)
		}
	}
	if err != nil || l.jpath == "." || l.jpath == ".." || strings.HasPrefix(l.jpath, "../") {
		return fmt.Errorf("config: Dir %s must lie under the journal's root %s", l.cfg.Dir, j.Root())
	}
	return nil
}

// journalCapture is what one log hands the journal in a round.
type journalCapture struct {
	l     *Log
	gen   uint64
	next  int64
	segs  []*segment
	sizes []int64
	entry journal.Entry
}

// JournalMaxBytes is the most a log hands the journal in one round; a log
// that appended more since its last round syncs its own files instead.
// The journal saves a flush per file, which is most of a small write's
// cost; a large one is cheaper written once than read back and written
// again.
const JournalMaxBytes = 64 << 10

// errJournalDirect says a log appended more than JournalMaxBytes since
// its last round.
var errJournalDirect = errors.New("log: round too large for the journal")

// captureJournal reads every byte appended since the last round that is
// neither synced nor journaled, or returns errJournalDirect if that is
// more than JournalMaxBytes.
func (l *Log) captureJournal() (journalCapture, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return journalCapture{}, err
	}
	var pending int64
	for i := len(l.segs) - 1; i >= 0; i-- {
		s := l.segs[i]
		from := max(s.synced, s.journaled)
		if from >= s.size {
			break
		}
		pending += s.size - from
	}
	if pending > JournalMaxBytes {
		return journalCapture{}, errJournalDirect
	}
	jgen := l.jgen.Load()
	c := journalCapture{l: l, gen: l.gen, next: l.next}
	c.entry = journal.Entry{Owner: l, Valid: func() bool { return l.jgen.Load() == jgen }}
	for i := len(l.segs) - 1; i >= 0; i-- {
		s := l.segs[i]
		from := max(s.synced, s.journaled)
		if from >= s.size {
			break // segments before a covered one were synced when rolled
		}
		b := make([]byte, s.size-from)
		if _, err := s.f.ReadAt(b, from); err != nil {
			return journalCapture{}, fmt.Errorf("read segment %d for the journal: %w", s.base, err)
		}
		c.segs = append(c.segs, s)
		c.sizes = append(c.sizes, s.size)
		c.entry.Writes = append(c.entry.Writes, journal.Write{
			Path: filepath.Join(l.jpath, SegmentFileName(s.base)), Off: from, Data: b,
		})
	}
	return c, nil
}

// finish records that the journal holds what c read. A capture the
// journal dropped needs nothing: the fence that dropped it synced it.
func (c *journalCapture) finish() {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen != c.gen {
		return // truncated or replaced since; that path synced what stays
	}
	for i, s := range c.segs {
		s.journaled = max(s.journaled, c.sizes[i])
	}
	l.durable = max(l.durable, c.next)
}

// SyncForJournal makes everything the log handed the journal durable in
// its own files; a closed log has nothing left (Close synced it).
func (l *Log) SyncForJournal() error {
	if err := l.Sync(); err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return nil
}

// fence makes the log's journal records dead before a change that
// removes, truncates or replaces segment files: it syncs the log's own
// files, drops captures not yet written (jgen), and writes a fence record.
// Called with wmu held and mu not held; without a journal it does nothing.
func (l *Log) fence() error {
	j := l.cfg.Journal
	if j == nil {
		return nil
	}
	if err := l.Sync(); err != nil {
		return err
	}
	l.jgen.Add(1)
	if err := j.Fence(l.jpath); err != nil {
		return fmt.Errorf("fence the journal: %w", err)
	}
	return nil
}

// syncJournal is a Syncer round in journal mode: one journal append for
// the logs that appended little since their last round, and their own
// fdatasyncs for the others (and for all, if the round is too large for a
// journal file). The two mix safely: a segment's bytes, once published,
// change only through a fence, so a record replayed over bytes the file
// holds durably writes the same bytes again.
func (y *Syncer) syncJournal(logs []*Log) error {
	var firstErr error
	caps := make([]journalCapture, 0, len(logs))
	entries := make([]journal.Entry, 0, len(logs))
	var direct []*Log
	for _, l := range logs {
		if l.cfg.Journal != y.journal {
			direct = append(direct, l)
			continue
		}
		c, err := l.captureJournal()
		if errors.Is(err, errJournalDirect) {
			direct = append(direct, l)
			continue
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("sync log %s: %w", l.cfg.Dir, err)
			}
			continue
		}
		if len(c.entry.Writes) == 0 {
			c.finish() // nothing new since the last round
			continue
		}
		caps = append(caps, c)
		entries = append(entries, c.entry)
	}
	if len(entries) > 0 {
		wrote, err := y.journal.Append(entries)
		switch {
		case errors.Is(err, journal.ErrTooLarge):
			for _, c := range caps {
				direct = append(direct, c.l)
			}
		case err != nil:
			if firstErr == nil {
				firstErr = fmt.Errorf("sync logs through the journal: %w", err)
			}
		default:
			for i := range caps {
				if wrote[i] {
					caps[i].finish()
				}
			}
		}
	}
	if len(direct) > 0 {
		if err := y.syncFiles(direct); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// FileDurable reports, for each segment file, its path and the length
// that fdatasync has made durable in the file itself; with a journal the
// journal may hold more of it. A power cut may lose the rest, so crash
// tests cut the files there.
func (l *Log) FileDurable() map[string]int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[string]int64, len(l.segs))
	for _, s := range l.segs {
		out[segmentPath(s.dir, s.base, logSuffix)] = s.synced
	}
	return out
}
