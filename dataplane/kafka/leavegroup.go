package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// leaveGroup answers LeaveGroup (key 13): the members leave at once
// instead of at their session timeout.
func (c *conn) leaveGroup(r *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode = c.groupRefused(r.Group, authz.OpRead); resp.ErrorCode != 0 {
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
