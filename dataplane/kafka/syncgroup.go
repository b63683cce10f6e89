package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
)

// syncGroup answers SyncGroup (key 14): the leader hands in the
// assignment, every member gets its own part of it.
func (c *conn) syncGroup(r *kmsg.SyncGroupRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ProtocolType, resp.Protocol = r.ProtocolType, r.Protocol
	if resp.ErrorCode = c.groupRefused(r.Group, authz.OpRead); resp.ErrorCode != 0 {
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
