package frontdoor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/records"
)

// otherNotLeader is a replication layer's own not-leader error.
type otherNotLeader struct{}

func (otherNotLeader) Error() string           { return "not leader" }
func (otherNotLeader) LeaderNode() (int, bool) { return 2, true }

// TestCatalogued: both front doors map each partition-layer failure to one
// catalogue code, wrapped or not (the HTTP API alone used to map a
// malformed record, the Kafka listener alone its own not-leader error).
func TestCatalogued(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want catalog.Code
	}{
		{"catalogue error", catalog.TopicNotFound.New(""), catalog.TopicNotFound.Code},
		{"not leader", &frontdoor.NotLeaderError{Leader: -1}, catalog.NotLeader.Code},
		{"another layer's not leader", fmt.Errorf("produce: %w", otherNotLeader{}), catalog.NotLeader.Code},
		{"offset out of range", log.ErrOffsetOutOfRange, catalog.OffsetOutOfRange.Code},
		{"batch too large", log.ErrBatchTooLarge, catalog.MessageTooLarge.Code},
		{"keyless record in a compacted topic", log.ErrKeylessRecord, catalog.InvalidRecord.Code},
		{"corrupt batch", log.ErrCorruptBatch, catalog.CorruptMessage.Code},
		{"not magic v2", log.ErrInvalidMagic, catalog.CorruptMessage.Code},
		{"control batch", log.ErrControlBatch, catalog.CorruptMessage.Code},
		{"malformed record", fmt.Errorf("decode: %w", records.ErrCorrupt), catalog.CorruptMessage.Code},
		{"deadline", context.DeadlineExceeded, catalog.RequestTimedOut.Code},
		{"canceled", context.Canceled, catalog.Unavailable.Code},
		{"unknown", errors.New("disk on fire"), catalog.Internal.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := frontdoor.Catalogued(tc.err)
			if ce.Entry.Code != tc.want {
				t.Fatalf("%v → %s, want %s", tc.err, ce.Entry.Code, tc.want)
			}
			if tc.want == catalog.Internal.Code && ce.Message != catalog.Internal.New("").Message {
				t.Fatalf("an unknown error's cause reached the caller: %q", ce.Message)
			}
		})
	}
	var ln frontdoor.LeaderNoder
	if !errors.As(error(&frontdoor.NotLeaderError{Leader: 3}), &ln) {
		t.Fatal("NotLeaderError is not a LeaderNoder")
	}
	if n, ok := ln.LeaderNode(); !ok || n != 3 {
		t.Fatalf("LeaderNode = %d, %v", n, ok)
	}
}
