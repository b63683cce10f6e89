package controlplane_test

import (
	"context"
	"sort"
	"sync"
	"testing"
)

// Concurrent allocations by several brokers never overlap.
func TestProducerIDBlocksAreDisjoint(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cell := e.cellClient()
	type block struct{ first, n int64 }
	var mu sync.Mutex
	var blocks []block
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				first, err := cell.AllocateProducerIDs(ctx, "cell-1", n)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				blocks = append(blocks, block{first, int64(n)})
				mu.Unlock()
			}
		}(10 + i*7)
	}
	wg.Wait()
	sort.Slice(blocks, func(i, j int) bool { return blocks[i].first < blocks[j].first })
	for i := 1; i < len(blocks); i++ {
		if prev := blocks[i-1]; prev.first+prev.n > blocks[i].first {
			t.Fatalf("blocks overlap: %+v and %+v", prev, blocks[i])
		}
	}
	if len(blocks) != 40 || blocks[0].first < 1000 {
		t.Fatalf("got %d blocks starting at %d", len(blocks), blocks[0].first)
	}
	_, err := cell.AllocateProducerIDs(ctx, "cell-1", 0)
	wantCode(t, err, "invalid_request")
	_, err = e.op.AllocateProducerIDs(ctx, "cell-1", 1)
	wantCode(t, err, "unauthenticated")
}
