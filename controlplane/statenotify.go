package controlplane

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// stateChannel is the Postgres notification channel every transaction that
// changes a cell's desired state notifies (audit.go, tenantmove_report.go),
// with the cell's id as the payload.
const stateChannel = "sluice_cell_state"

// stateNotifier wakes the brokers' long-polls of their cell state
// (cellState) when a change is committed, instead of at their next
// CellStatePoll: a topic created through the API reached the brokers up
// to 250 ms later, and a client that asked a broker for it at once heard
// UNKNOWN_TOPIC_OR_PARTITION and waited before asking again.
//
// While any long-poll waits, one goroutine holds a connection of its own
// (outside the pool, so that closing the pool never waits for it) that
// LISTENs on stateChannel; it closes the current changed channel at each
// notification, and at each (re)start, since a notification may have been
// missed meanwhile. It stops when the last waiter leaves. Every waiter
// is woken by every cell's change and reads its own cell's version again:
// one query per broker per change.
type stateNotifier struct {
	cfg *pgx.ConnConfig
	log *slog.Logger

	mu      sync.Mutex
	waiters int
	changed chan struct{}      // closed at the next notification
	stop    context.CancelFunc // the listener's, while waiters > 0
}

func newStateNotifier(db *pgxpool.Pool, log *slog.Logger) *stateNotifier {
	return &stateNotifier{cfg: db.Config().ConnConfig, log: log, changed: make(chan struct{})}
}

// join counts a waiter in, starting the listener for the first, and
// returns the func that counts it out.
func (n *stateNotifier) join() (leave func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.waiters++
	if n.waiters == 1 {
		ctx, cancel := context.WithCancel(context.Background())
		n.stop = cancel
		go n.listen(ctx)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.waiters--
			if n.waiters == 0 {
				n.stop()
				n.stop = nil
			}
		})
	}
}

// next returns a channel closed at the next notification (or restart of
// the listener).
func (n *stateNotifier) next() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

// wake closes the current changed channel and starts a new one.
func (n *stateNotifier) wake() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.changed)
	n.changed = make(chan struct{})
}

// listen keeps a LISTEN connection until ctx ends, reconnecting after a
// failure (100 ms, doubling to 5 s); the waiters' CellStatePoll covers
// the gaps.
func (n *stateNotifier) listen(ctx context.Context) {
	pause := 100 * time.Millisecond
	for {
		err := n.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("cell state notifications: listening failed; long-polls fall back to polling meanwhile", "err", err, "retry_in", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Second)
	}
}

func (n *stateNotifier) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, n.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+stateChannel); err != nil {
		return err
	}
	n.wake() // a change committed before the LISTEN took effect
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		n.wake()
	}
}
