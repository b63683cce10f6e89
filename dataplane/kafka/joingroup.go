package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// maxJoinWait bounds a JoinGroup's wait beyond its rebalance timeout (the
// coordinator completes every rebalance by then).
const maxJoinWait = 30 * time.Second

func (c *conn) joinGroup(r *kmsg.JoinGroupRequest, clientID string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.MemberID = -1, r.MemberID
	empty := ""
	resp.Protocol = &empty
	if resp.ErrorCode = c.groupRefused(r.Group, authz.OpRead); resp.ErrorCode != 0 {
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
