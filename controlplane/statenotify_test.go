package controlplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane"
)

// TestCellStateLongPollWokenByChange: a broker's long-poll of its cell
// state answers a change when it is committed, not at its next poll: with
// the fallback poll an hour apart, a topic created while the long-poll
// waits still reaches it within its wait.
func TestCellStateLongPollWokenByChange(t *testing.T) {
	e := newEnv(t, func(c *controlplane.Config) { c.CellStatePoll = time.Hour })
	tn := e.signup("alpha")
	cell := e.cellClient()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, _, err := cell.CellState(ctx, "cell-1", -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		version int64
		changed bool
		err     error
	}
	got := make(chan answer, 1)
	go func() {
		next, changed, err := cell.CellState(ctx, "cell-1", st.StateVersion, 30*time.Second)
		got <- answer{next.StateVersion, changed, err}
	}()
	testkit.WaitFor(t, 30*time.Second, "the long-poll to wait", func() bool { return e.srv.CellStateWaiters() > 0 })
	if _, err := tn.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "fresh", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || !a.changed || a.version <= st.StateVersion {
		t.Fatalf("long-poll after version %d: version %d, changed %v, err %v; want the topic's new version", st.StateVersion, a.version, a.changed, a.err)
	}
	testkit.WaitFor(t, 30*time.Second, "the long-poll to leave", func() bool { return e.srv.CellStateWaiters() == 0 })
}
