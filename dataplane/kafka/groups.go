package kafka

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/state"
)

// groupAPIs are served only with Config.Groups: OffsetCommit,
// OffsetFetch, FindCoordinator, JoinGroup, Heartbeat, LeaveGroup,
// SyncGroup, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete.
var groupAPIs = map[int16]bool{8: true, 9: true, 10: true, 11: true, 12: true, 13: true, 14: true, 15: true, 16: true, 42: true, 47: true}

// handleGroup serves the consumer-group requests; nil for any other.
func (c *conn) handleGroup(req *request) kmsg.Response {
	switch r := req.body.(type) {
	case *kmsg.FindCoordinatorRequest:
		return c.findCoordinator(r)
	case *kmsg.JoinGroupRequest:
		return c.joinGroup(r, deref(req.clientID))
	case *kmsg.SyncGroupRequest:
		return c.syncGroup(r)
	case *kmsg.HeartbeatRequest:
		return c.heartbeat(r)
	case *kmsg.LeaveGroupRequest:
		return c.leaveGroup(r)
	case *kmsg.OffsetCommitRequest:
		return c.offsetCommit(r)
	case *kmsg.OffsetFetchRequest:
		return c.offsetFetch(r)
	case *kmsg.OffsetDeleteRequest:
		return c.offsetDelete(r)
	case *kmsg.ListGroupsRequest:
		return c.listGroups(r)
	case *kmsg.DescribeGroupsRequest:
		return c.describeGroups(r)
	case *kmsg.DeleteGroupsRequest:
		return c.deleteGroups(r)
	}
	return nil
}

// groupAllowed checks the caller's ACLs on one of its groups.
func (c *conn) groupAllowed(v *state.View, group, op string) bool {
	if c.dev {
		return true
	}
	return v.Allowed(c.principal.Load(), authz.ResourceGroup, group, op)
}

// groupCode is the Kafka code of a coordinator error; a context that
// ended (the listener closing) is NOT_COORDINATOR, so clients look again.
func groupCode(err error) int16 {
	if err == context.Canceled || err == context.DeadlineExceeded {
		return catalog.NotCoordinator.KafkaCode
	}
	code, _ := errCode(err)
	return code
}

func (c *conn) coordinator() *groups.Coordinator { return c.s.cfg.Groups }

// findCoordinator answers for group keys only: transaction coordinators
// are not served (transactional producers are refused).
func (c *conn) findCoordinator(r *kmsg.FindCoordinatorRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, key := range keys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.NodeID, co.Port = key, -1, -1
		fail := func(e *catalog.Entry, msg string) { co.ErrorCode, co.ErrorMessage = entryCode(e, msg) }
		switch {
		case r.CoordinatorType == 1:
			fail(catalog.InvalidRequest, "transaction coordinators are not served: transactional producers are not supported")
		case r.CoordinatorType != 0:
			fail(catalog.InvalidRequest, "unknown coordinator type")
		case !c.groupAllowed(v, key, authz.OpDescribe) && !c.groupAllowed(v, key, authz.OpRead):
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
	if r.Version < 4 && len(resp.Coordinators) == 1 {
		co := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = co.ErrorCode, co.ErrorMessage, co.NodeID, co.Host, co.Port
	}
	return resp
}

// kafkaEndpoint is a broker's advertised Kafka host and port.
func kafkaEndpoint(v *state.View, node int) (string, int32, bool) {
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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// maxJoinWait bounds a JoinGroup's wait beyond its rebalance timeout (the
// coordinator completes every rebalance by then).
const maxJoinWait = 30 * time.Second

func (c *conn) joinGroup(r *kmsg.JoinGroupRequest, clientID string) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.MemberID = -1, r.MemberID
	empty := ""
	resp.Protocol = &empty
	if !c.groupAllowed(v, r.Group, authz.OpRead) {
		resp.ErrorCode, _ = entryCode(catalog.GroupAccessDenied, "")
		return resp
	}
	jr := groups.JoinRequest{TenantID: c.tenant(), Group: r.Group, MemberID: r.MemberID, InstanceID: deref(r.InstanceID),
		ClientID: clientID, ClientHost: "/" + hostOf(c.remote), ProtocolType: r.ProtocolType,
		SessionTimeout:       time.Duration(r.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond,
		RequireKnownMemberID: r.Version >= 4}
	if r.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	for _, p := range r.Protocols {
		jr.Protocols = append(jr.Protocols, groups.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, max(jr.RebalanceTimeout, jr.SessionTimeout)+maxJoinWait)
	defer cancel()
	res, err := c.coordinator().Join(ctx, jr)
	if err != nil {
		resp.ErrorCode = groupCode(err)
		if res.MemberID != "" {
			resp.MemberID = res.MemberID
		}
		return resp
	}
	resp.Generation, resp.MemberID, resp.LeaderID = res.Generation, res.MemberID, res.LeaderID
	pt, proto := res.ProtocolType, res.Protocol
	resp.ProtocolType, resp.Protocol = &pt, &proto
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.ProtocolMetadata = m.MemberID, m.Metadata
		if m.InstanceID != "" {
			id := m.InstanceID
			rm.InstanceID = &id
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

func (c *conn) syncGroup(r *kmsg.SyncGroupRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ProtocolType, resp.Protocol = r.ProtocolType, r.Protocol
	if !c.groupAllowed(v, r.Group, authz.OpRead) {
		resp.ErrorCode, _ = entryCode(catalog.GroupAccessDenied, "")
		return resp
	}
	assignments := map[string][]byte{}
	for _, a := range r.GroupAssignment {
		assignments[a.MemberID] = a.MemberAssignment
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, maxJoinWait+5*time.Minute)
	defer cancel()
	a, err := c.coordinator().Sync(ctx, c.tenant(), r.Group, r.MemberID, deref(r.InstanceID), r.Generation, assignments)
	if err != nil {
		resp.ErrorCode = groupCode(err)
		return resp
	}
	resp.MemberAssignment = a
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp
}

func (c *conn) heartbeat(r *kmsg.HeartbeatRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	if !c.groupAllowed(v, r.Group, authz.OpRead) {
		resp.ErrorCode, _ = entryCode(catalog.GroupAccessDenied, "")
		return resp
	}
	resp.ErrorCode = groupCode(c.coordinator().Heartbeat(c.s.ctx, c.tenant(), r.Group, r.MemberID, deref(r.InstanceID), r.Generation))
	return resp
}

func (c *conn) leaveGroup(r *kmsg.LeaveGroupRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !c.groupAllowed(v, r.Group, authz.OpRead) {
		resp.ErrorCode, _ = entryCode(catalog.GroupAccessDenied, "")
		return resp
	}
	if r.Version < 3 {
		resp.ErrorCode = groupCode(c.coordinator().Leave(c.s.ctx, c.tenant(), r.Group, []groups.MemberIdentity{{MemberID: r.MemberID}}))
		return resp
	}
	ids := make([]groups.MemberIdentity, len(r.Members))
	for i, m := range r.Members {
		ids[i] = groups.MemberIdentity{MemberID: m.MemberID, InstanceID: deref(m.InstanceID)}
	}
	errs, err := c.coordinator().LeaveMembers(c.s.ctx, c.tenant(), r.Group, ids)
	if err != nil {
		resp.ErrorCode = groupCode(err)
		return resp
	}
	for i, m := range r.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, groupCode(errs[i])
		resp.Members = append(resp.Members, rm)
	}
	return resp
}
