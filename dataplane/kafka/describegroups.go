package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// describeGroups answers DescribeGroups (key 15) for the caller's groups
// it may describe; another tenant's group is a missing one.
func (c *conn) describeGroups(r *kmsg.DescribeGroupsRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range r.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = name
		if !c.groupVisible(v, name) {
			dg.ErrorCode, dg.ErrorMessage = entryCode(catalog.GroupAccessDenied, "")
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		d, err := c.coordinator().DescribeGroup(c.tenant(), name)
		switch {
		case catalog.Has(err, catalog.GroupNotFound):
			dg.State = groups.StateDead
		case err != nil:
			dg.ErrorCode, dg.ErrorMessage = errCode(err)
		default:
			dg.State, dg.ProtocolType, dg.Protocol = d.State, d.ProtocolType, d.Protocol
			for _, m := range d.Members {
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.ClientID, dm.ClientHost, dm.ProtocolMetadata, dm.MemberAssignment = m.MemberID, m.ClientID, m.ClientHost, m.Metadata, m.Assignment
				if m.InstanceID != "" {
					id := m.InstanceID
					dm.InstanceID = &id
				}
				if dm.MemberAssignment == nil {
					dm.MemberAssignment = []byte{}
				}
				dg.Members = append(dg.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}
