package wire

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/contract/testkit"
)

func TestTenantMoveValidate(t *testing.T) {
	for _, tc := range []struct {
		m    TenantMove
		want error
	}{
		{TenantMove{Role: MoveSource, Peer: "c2"}, nil},
		{TenantMove{Role: MoveDestination, Peer: "c1", HoldGroups: true}, nil},
		{TenantMove{Role: "sideways", Peer: "c1"}, ErrMoveRole},
		{TenantMove{Role: MoveSource}, ErrMovePeer},
	} {
		if err := tc.m.Validate(); !errors.Is(err, tc.want) {
			t.Errorf("%+v: got %v, want %v", tc.m, err, tc.want)
		}
	}
}

func TestTopicMirrorValidate(t *testing.T) {
	ca := testkit.SelfSignedPEM(t, "grant test", true)
	ok := TopicMirror{SourceCell: "c1", SourceBrokers: []MirrorBroker{{NodeID: 1, RaftAddr: "127.0.0.1:1"}}, SourcePeerCA: ca}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid mirror refused: %v", err)
	}
	noCell := ok
	noCell.SourceCell = ""
	noBrokers := ok
	noBrokers.SourceBrokers = nil
	badBroker := ok
	badBroker.SourceBrokers = []MirrorBroker{{NodeID: 0, RaftAddr: "x"}}
	badCA := ok
	badCA.SourcePeerCA = "not pem"
	for name, tc := range map[string]struct {
		m    TopicMirror
		want error
	}{
		"no cell": {noCell, ErrMirrorCell}, "no brokers": {noBrokers, ErrMirrorNone},
		"bad CA": {badCA, ErrGrantBadCA},
	} {
		if err := tc.m.Validate(); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
	if err := badBroker.Validate(); err == nil {
		t.Error("a source broker without a node id was accepted")
	}
}
