package kafka

import (
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// redirectFindCoordinator answers a redirect session's FindCoordinator for
// group keys with a broker of the tenant's home cell: the preferred
// replica of the group's offsets partition under the brokers' own
// placement (wire.OffsetsPlacement: the offsets replicas'
// lowest node ids, rotated by partition), which leads it unless a leader
// change or a drain moved it. A client that finds it is not the
// coordinator there (NOT_COORDINATOR) asks again, now of a home broker,
// which knows. Without an answer here a client that looks for its
// coordinator only through its bootstrap brokers (librdkafka) would never
// join after its tenant moved away. partitions is the offsets partition
// count, which every broker of every cell shares. Transaction
// coordinators keep the retriable refusal.
func redirectFindCoordinator(r *kmsg.FindCoordinatorRequest, home wire.KeyHome, partitions int) kmsg.Response {
	if r.CoordinatorType != 0 {
		return redirectAnswer(r)
	}
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	for _, key := range coordinatorKeys(r) {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.NodeID, co.Port, co.ErrorCode = key, -1, -1, redirectFind
		if b, ok := homeCoordinator(home, key, partitions); ok {
			if host, port, ok := splitKafkaAddr(b.KafkaAddr); ok {
				co.ErrorCode, co.NodeID, co.Host, co.Port = 0, RedirectNodeID(b.NodeID), host, port
			}
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	foldCoordinator(resp, r.Version)
	return resp
}

// homeCoordinator is the home broker expected to coordinate group: the
// preferred replica of its offsets partition under the brokers' own
// placement (wire.OffsetsPlacement); none while the home lists too few
// brokers to hold offsets partitions.
func homeCoordinator(home wire.KeyHome, group string, partitions int) (wire.HomeNode, bool) {
	ids := make([]int, len(home.Brokers))
	for i, b := range home.Brokers {
		ids[i] = b.NodeID
	}
	placed := wire.OffsetsPlacement(ids, partitions, wire.DefaultOffsetsReplicas)
	if placed == nil {
		return wire.HomeNode{}, false
	}
	leader := placed[groups.Partition(home.TenantID, group, partitions)][0]
	i := slices.IndexFunc(home.Brokers, func(b wire.HomeNode) bool { return b.NodeID == leader })
	return home.Brokers[i], true
}

// splitKafkaAddr is a host:port Kafka address's host and port; ok is false
// for an empty or malformed address (a broker without one yet).
func splitKafkaAddr(addr string) (string, int32, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil || n <= 0 {
		return "", 0, false
	}
	return host, int32(n), true
}
