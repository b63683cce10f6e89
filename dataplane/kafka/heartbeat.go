package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
)

// heartbeat answers Heartbeat (key 12): it renews the member's session
// and says when the group is rebalancing.
func (c *conn) heartbeat(r *kmsg.HeartbeatRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	if resp.ErrorCode = c.groupRefused(r.Group, authz.OpRead); resp.ErrorCode != 0 {
		return resp
	}
	resp.ErrorCode = groupCode(c.coordinator().Heartbeat(c.s.ctx, c.tenant(), r.Group, r.MemberID, deref(r.InstanceID), r.Generation))
	return resp
}
