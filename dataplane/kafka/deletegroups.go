package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
)

// deleteGroups answers DeleteGroups (key 42): empty groups the caller may
// delete lose their offsets and record.
func (c *conn) deleteGroups(r *kmsg.DeleteGroupsRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	var allowed []string
	for _, name := range r.Groups {
		if c.groupAllowed(v, name, authz.OpDelete) {
			allowed = append(allowed, name)
		}
	}
	outcome := c.coordinator().DeleteGroups(c.s.ctx, c.tenant(), allowed)
	for _, name := range r.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = name
		if err, ok := outcome[name]; ok {
			dg.ErrorCode = groupCode(err)
		} else {
			dg.ErrorCode = catalog.GroupAccessDenied.KafkaCode
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}
