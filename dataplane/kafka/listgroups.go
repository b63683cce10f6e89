package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
)

// listGroups lists the caller's groups that this broker coordinates
// (clients ask every broker) and that the caller may describe.
func (c *conn) listGroups(r *kmsg.ListGroupsRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	states := map[string]bool{}
	for _, s := range r.StatesFilter {
		states[s] = true
	}
	list, err := c.coordinator().ListGroups(c.tenant())
	if err != nil {
		resp.ErrorCode, _ = errCode(err) // ListGroups has no error message
		return resp
	}
	for _, g := range list {
		if len(states) > 0 && !states[g.State] {
			continue
		}
		if !c.groupAllowed(v, g.Group, authz.OpDescribe) && !c.groupAllowed(v, g.Group, authz.OpRead) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState = g.Group, g.ProtocolType, g.State
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}
