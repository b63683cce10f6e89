package mirror_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestMirrorCatchesUpWithLongCommitTimeout copies a partition that four
// writers fill while the mirror runs, on Raft settings like a broker's
// (transport.RaftConfig: CommitTimeout 5 s; a few entries per append, as
// replicas set for 8 MiB batches; the apply channel buffered), and checks
// that the mirror reaches the source's end. hashicorp/raft's pipeline
// sends one append per trigger; entries stored while it sent shared one
// trigger and waited for CommitTimeout, so a puller waiting on them
// copied one append's entries every 5–10 s (251 of 112,285 batches in
// 40 s) until the transport's appends carried what the log held after
// them (transport.GroupTransport.SetLocalLog).
func TestMirrorCatchesUpWithLongCommitTimeout(t *testing.T) {
	rc := func() *raft.Config {
		c := celltest.TestRaftConfig()
		c.CommitTimeout = 5 * time.Second
		c.MaxAppendEntries = 8
		c.BatchApplyCh = true
		return c
	}
	m := newMove(t, celltest.Options{Raft: rc}, celltest.Options{Raft: rc}, 0)
	m.maxBytes = 1 << 20
	m.startPullers()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 500 {
				if _, err := sendRetrying(ctx, m.src, celltest.Batch(bytes.Repeat([]byte{byte(w), byte(j)}, 2<<10))); err != nil {
					t.Errorf("writer %d, batch %d: %v", w, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	hw := leaderOf(m.src).HighWatermark()
	m.waitMirrored(hw)
	m.sameLog()
}
