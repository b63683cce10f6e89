package partition

import (
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// downPeers is a peerWatcher whose down brokers are fixed.
type downPeers map[raft.ServerID]bool

func (downPeers) WatchPeers([]raft.Server)                     {}
func (downPeers) OnPeerDown(func(id raft.ServerID, down bool)) {}
func (d downPeers) PeerDown(id raft.ServerID) bool             { return d[id] }

// campaignRank is the rank onPeerDown gives replica self when the broker
// of its leader dead is found down: the live members of peers before it.
func campaignRank(peers []raft.Server, self, dead raft.ServerID, down downPeers) int {
	rank := 0
	for _, p := range peers {
		if p.ID == self {
			break
		}
		if p.ID != dead && !down[p.ID] {
			rank++
		}
	}
	return rank
}

func servers(ss ...raft.Server) []raft.Server { return ss }

// TestPeersNowDuringMove: the voters a dead leader's followers rank
// themselves among are the latest configuration's voters in the target's
// preference order, not the target: during a move 1,2,3 → 4,5,6 the
// target names none of the old voters, so each got the same rank (the
// three live target brokers), they campaigned at the same moment and
// split the vote, and the partition waited out Raft's election timeout
// (10–20 s in tenantd) in TestMoveSurvivesLeaderAndControlPlaneKill.
// Outside a move the order is the placement's, its first the preferred
// leader.
func TestPeersNowDuringMove(t *testing.T) {
	target := servers(voter("4"), voter("5"), voter("6"))
	for _, tc := range []struct {
		name   string
		peers  []raft.Server // Config.Peers
		target []raft.Server // nil: none set
		conf   []raft.Server // nil: not read yet
		dead   raft.ServerID
		want   []raft.ServerID
		ranks  map[raft.ServerID]int // of the live voters that campaign
	}{
		{
			name:  "first joiner a non-voter",
			peers: servers(voter("1"), voter("2"), voter("3")), target: target,
			conf: servers(voter("1"), voter("2"), voter("3"), nonvoter("4")), dead: "1",
			want: []raft.ServerID{"1", "2", "3"}, ranks: map[raft.ServerID]int{"2": 0, "3": 1},
		},
		{
			name:  "first joiner promoted",
			peers: servers(voter("1"), voter("2"), voter("3")), target: target,
			conf: servers(voter("1"), voter("2"), voter("3"), voter("4"), nonvoter("5")), dead: "2",
			want: []raft.ServerID{"4", "1", "2", "3"}, ranks: map[raft.ServerID]int{"4": 0, "1": 1, "3": 2},
		},
		{
			name:  "opened mid-move, no target yet",
			peers: servers(voter("4"), voter("5"), voter("6"), voter("1"), voter("2"), voter("3")),
			conf:  servers(voter("1"), voter("2"), voter("3"), nonvoter("4")), dead: "3",
			want: []raft.ServerID{"1", "2", "3"}, ranks: map[raft.ServerID]int{"1": 0, "2": 1},
		},
		{
			name:  "no move",
			peers: servers(voter("2"), voter("3"), voter("1")),
			conf:  servers(voter("2"), voter("3"), voter("1")), dead: "2",
			want: []raft.ServerID{"2", "3", "1"}, ranks: map[raft.ServerID]int{"3": 0, "1": 1},
		},
		{
			name:  "move done",
			peers: servers(voter("1"), voter("2"), voter("3")), target: target,
			conf: servers(voter("5"), voter("6"), voter("4")), dead: "5",
			want: []raft.ServerID{"4", "5", "6"}, ranks: map[raft.ServerID]int{"4": 0, "6": 1},
		},
		{
			name:  "configuration not read yet",
			peers: servers(voter("1"), voter("2"), voter("3")), target: target,
			want: []raft.ServerID{"4", "5", "6"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []raft.ServerID
			for self := range tc.ranks {
				r := &Replica{cfg: Config{ID: self, Peers: tc.peers}}
				r.member.target = tc.target
				r.member.conf.Store(&confView{servers: tc.conf})
				if rank := campaignRank(r.peersNow(), self, tc.dead, downPeers{tc.dead: true}); rank != tc.ranks[self] {
					t.Errorf("replica %s ranks %d among %v after %s's broker went down, want %d", self, rank, r.peersNow(), tc.dead, tc.ranks[self])
				}
			}
			r := &Replica{cfg: Config{ID: "x", Peers: tc.peers}}
			r.member.target = tc.target
			if tc.conf != nil {
				r.member.conf.Store(&confView{servers: tc.conf})
			}
			for _, s := range r.peersNow() {
				got = append(got, s.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("peersNow = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNoQuorumDuringMove: a replica whose group lost two of its three
// voters mid-move says so, though the target's brokers are all up (they
// are not voters yet).
func TestNoQuorumDuringMove(t *testing.T) {
	r := &Replica{cfg: Config{ID: "2", Peers: servers(voter("1"), voter("2"), voter("3"))}}
	r.member.target = servers(voter("4"), voter("5"), voter("6"))
	r.member.conf.Store(&confView{servers: servers(voter("1"), voter("2"), voter("3"), nonvoter("4"))})
	r.peers = downPeers{"1": true, "3": true}
	if !r.NoQuorum() {
		t.Error("NoQuorum is false with voters 1 and 3 of 1, 2, 3 down")
	}
	r.peers = downPeers{"1": true}
	if r.NoQuorum() {
		t.Error("NoQuorum is true with only voter 1 of 1, 2, 3 down")
	}
}
