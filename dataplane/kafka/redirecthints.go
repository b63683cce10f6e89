package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
)

// hintHomeLeaders names, in a redirect session's v10+ Produce answer, each
// partition's leader at the tenant's home and that leader's endpoint
// (KIP-951's CurrentLeader and NodeEndpoints), where the home knows the
// leader with its epoch. A client that takes the hint (franz-go does when
// the epoch is newer than the one it knows, which a moved partition's is)
// produces to the new home at once instead of waiting for its next
// metadata refresh, which franz-go spaces by its metadata age (5 s by
// default). A partition whose leader is not known, or that was not
// refused with NOT_LEADER_OR_FOLLOWER, gets no hint. Nodes are named by
// RedirectNodeID, as in the session's Metadata.
func hintHomeLeaders(resp *kmsg.ProduceResponse, home wire.KeyHome) {
	named := map[int]bool{}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		var ht *wire.HomeTopic
		for j := range home.Topics {
			if t.Topic == home.Topics[j].Name && home.Topics[j].Describable {
				ht = &home.Topics[j]
			}
		}
		if ht == nil {
			continue
		}
		for k := range t.Partitions {
			p := &t.Partitions[k]
			for _, hp := range ht.Partitions {
				if int32(hp.Partition) == p.Partition && hp.Leader > 0 && hp.LeaderEpoch >= 0 && p.ErrorCode == catalog.NotLeader.KafkaCode {
					p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = RedirectNodeID(hp.Leader), int32(hp.LeaderEpoch)
					named[hp.Leader] = true
				}
			}
		}
	}
	for _, b := range home.Brokers {
		if named[b.NodeID] {
			addEndpoint(resp, int(RedirectNodeID(b.NodeID)), b.KafkaAddr) // produce.go
		}
	}
}
