package kafka

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
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
func (c *conn) groupAllowed(v *cellview.View, group, op string) bool {
	if c.dev {
		return true
	}
	return v.Allowed(c.principal.Load(), authz.ResourceGroup, group, op)
}

// groupVisible reports whether the caller may see group: describe or read
// on it, since a member that may read a group may also find and describe
// it.
func (c *conn) groupVisible(v *cellview.View, group string) bool {
	return c.groupAllowed(v, group, authz.OpDescribe) || c.groupAllowed(v, group, authz.OpRead)
}

// groupRefused is GROUP_AUTHORIZATION_FAILED when the caller's ACLs do not
// allow op on group, and 0 when they do.
func (c *conn) groupRefused(group, op string) int16 {
	if c.groupAllowed(c.s.cfg.State.View(), group, op) {
		return 0
	}
	return catalog.GroupAccessDenied.KafkaCode
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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
