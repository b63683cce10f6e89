package kafka

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// findCoordinator answers for group keys only: transaction coordinators
// are not served (transactional producers are refused).
func (c *conn) findCoordinator(r *kmsg.FindCoordinatorRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	for _, key := range coordinatorKeys(r) {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.NodeID, co.Port = key, -1, -1
		fail := func(e *catalog.Entry, msg string) { co.ErrorCode, co.ErrorMessage = entryCode(e, msg) }
		switch {
		case r.CoordinatorType == 1:
			fail(catalog.InvalidRequest, "transaction coordinators are not served: transactional producers are not supported")
		case r.CoordinatorType != 0:
			fail(catalog.InvalidRequest, "unknown coordinator type")
		case !c.groupVisible(v, key):
			fail(catalog.GroupAccessDenied, "")
		default:
			node, _, err := c.coordinator().Locate(c.tenant(), key)
			if err != nil {
				co.ErrorCode, co.ErrorMessage = errCode(err)
				break
			}
			host, port, ok := kafkaEndpoint(v, node)
			if !ok {
				fail(catalog.CoordinatorNotReady, "the coordinator has no Kafka address yet")
				break
			}
			co.NodeID, co.Host, co.Port = int32(node), host, port
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	foldCoordinator(resp, r.Version)
	return resp
}

// coordinatorKeys are the keys a FindCoordinator request asks about: the
// batch of v4 and later, or the one key of earlier versions, so the cell's
// answer and a redirect session's build one coordinator per key alike.
func coordinatorKeys(r *kmsg.FindCoordinatorRequest) []string {
	if r.Version < 4 {
		return []string{r.CoordinatorKey}
	}
	return r.CoordinatorKeys
}

// foldCoordinator moves the one coordinator of a pre-v4 answer to the
// response's top level, where those versions carry it.
func foldCoordinator(resp *kmsg.FindCoordinatorResponse, version int16) {
	if version >= 4 || len(resp.Coordinators) != 1 {
		return
	}
	co := resp.Coordinators[0]
	resp.Coordinators = nil
	resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = co.ErrorCode, co.ErrorMessage, co.NodeID, co.Host, co.Port
}

// kafkaEndpoint is a broker's advertised Kafka host and port.
func kafkaEndpoint(v *cellview.View, node int) (string, int32, bool) {
	b, ok := v.Broker(node)
	if !ok {
		return "", 0, false
	}
	host, port, err := net.SplitHostPort(b.KafkaAddr)
	if err != nil {
		return "", 0, false
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return "", 0, false
	}
	return host, int32(p), true
}
