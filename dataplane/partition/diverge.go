package partition

import (
	"fmt"
	"log/slog"

	"github.com/hashicorp/raft"
)

// A replica's store can end in entries its group never committed: those
// a deposed leader appended, or a follower took from it, before it
// stopped. Raft overwrites such a tail when the replica returns, walking
// back from the leader's log to where the two agree. It cannot when the
// leader no longer holds those indexes (DeleteRecords or retention moved
// its log start past them, as the usage topic's shipper does every few
// seconds): it sends InstallSnapshot instead, and the snapshot does not
// touch the store (data stays where retention left it, DESIGN.md,
// "Catch-up, snapshots, and seeding"). Then either
//
//   - the store holds the snapshot's index with another term: every
//     append after it fails Raft's previous-entry check, and the leader,
//     which cannot send anything older, installs the same snapshot again,
//     hundreds of times a second, for ever; or
//   - the store ends before the snapshot's index (its tail was shorter,
//     or the leader's entries there held no data) while holding the
//     snapshot's high watermark: the store refuses the next entry (it
//     does not follow its last), and the loop is the same.
//
// Both are a replica that must be seeded. The second needs only that:
// Raft's last entry is below the snapshot's, so once the seed is in, the
// leader's next append matches the snapshot and is stored. In the first,
// the store's tail from the snapshot's index on is cut (it is not the
// group's: the committed entry there has the snapshot's term), but
// hashicorp/raft keeps the last index it read at start, above the
// snapshot's, and would still look the cut entries up; so the replica
// asks to be reopened (Config.Reopen), and start cuts the same tail
// before Raft reads the store if a crash came first. Seeding replaces the
// whole log, so whatever else of the tail is below the snapshot's index
// goes too. While it waits, the replica is behind: the transport refuses
// entries and votes (SetSeeding), so the leader backs off instead of
// looping, and nothing is served from the tail.

// latestSnapshot is the index and term of the newest Raft snapshot.
func latestSnapshot(snaps raft.SnapshotStore) (index, term uint64, ok bool) {
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return 0, 0, false
	}
	return metas[0].Index, metas[0].Term, true
}

// tailStore is what cutting a divergent tail needs of the entries store.
type tailStore interface {
	TermAt(index uint64) (uint64, bool)
	NextIndex() uint64
}

// cutOverruled cuts st's entries from index on, through del, if st holds
// index with a term other than term (the snapshot's): from there on its
// entries are not the group's. It reports whether there was such a tail.
func cutOverruled(st tailStore, del func(min, max uint64) error, index, term uint64, logger *slog.Logger) (bool, error) {
	if t, ok := st.TermAt(index); !ok || t == term {
		return false, nil
	}
	last := st.NextIndex() - 1
	logger.Warn("cutting an uncommitted tail that the latest snapshot overrules; the replica will be seeded",
		"snapshot_index", index, "snapshot_term", term, "last_index", last)
	if err := del(index, last); err != nil {
		return true, fmt.Errorf("cut the entries the snapshot at %d overrules: %w", index, err)
	}
	return true, nil
}

// cutDivergent runs at start, before Raft reads the store: a tail the
// latest snapshot overrules (left by a crash before the reopen) is cut.
func cutDivergent(st interface {
	tailStore
	DeleteRange(min, max uint64) error
}, snaps raft.SnapshotStore, logger *slog.Logger) error {
	index, term, ok := latestSnapshot(snaps)
	if !ok {
		return nil
	}
	_, err := cutOverruled(st, st.DeleteRange, index, term, logger)
	return err
}

// restored is the FSM's hook at the start of Restore (Raft's FSM
// goroutine, at start and on InstallSnapshot): it cuts a tail the
// snapshot overrules and asks to be reopened, and reports whether the
// store cannot take the entries after the snapshot.
func (r *Replica) restored() (stale bool) {
	index, term, ok := latestSnapshot(r.snaps)
	if !ok {
		return false
	}
	// Through the cache, which may hold the cut entries.
	cut, err := cutOverruled(r.store, r.logs.DeleteRange, index, term, r.cfg.Logger.With("replica", r.cfg.ID))
	if err != nil {
		r.cfg.Logger.Error("cut an uncommitted tail; start cuts it again after the reopen", "replica", r.cfg.ID, "err", err)
	}
	if cut {
		r.askReopen()
		return true
	}
	return r.store.NextIndex() <= index
}

// followsSnapshot reports whether the store takes the entry after the
// latest snapshot (its entries reach the snapshot's index, or a seed
// started it there), and the replica needs no reopen first.
func (r *Replica) followsSnapshot() bool {
	if r.reopen.Load() {
		return false
	}
	index, _, ok := latestSnapshot(r.snaps)
	return !ok || r.store.NextIndex() > index
}

// askReopen calls Config.Reopen once.
func (r *Replica) askReopen() {
	if !r.reopen.CompareAndSwap(false, true) {
		return
	}
	if r.cfg.Reopen == nil {
		r.cfg.Logger.Error("replica must be reopened to take entries again, and nothing reopens it", "replica", r.cfg.ID)
		return
	}
	r.cfg.Reopen()
}

// NeedsReopen reports whether the replica asked to be closed and opened
// again (Config.Reopen).
func (r *Replica) NeedsReopen() bool { return r.reopen.Load() }
