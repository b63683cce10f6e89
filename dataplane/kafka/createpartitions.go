package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
)

// createPartitions grows topics through the control plane's API as the
// caller (PATCH /v1/topics/{name}), so quotas, validation and placement are
// the API's. Partitions only grow; Sluice places them itself.
func (c *conn) createPartitions(r *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	ctx, cancel := adminContext(c.s.ctx, r.TimeoutMillis)
	defer cancel()
	cpc, apiErr := c.callerAPI()
	grown := map[string]int{}
	for _, rt := range r.Topics {
		ot := kmsg.NewCreatePartitionsResponseTopic()
		ot.Topic = rt.Topic
		switch {
		case apiErr != nil:
			ot.ErrorCode, ot.ErrorMessage = errCode(apiErr)
		case len(rt.Assignment) > 0:
			ot.ErrorCode, ot.ErrorMessage = entryCode(catalog.InvalidRequest, "manual replica assignment is not supported; Sluice places partitions")
		default:
			n := int(rt.Count)
			t, err := cpc.UpdateTopic(ctx, rt.Topic, api.UpdateTopicRequest{Partitions: &n, ValidateOnly: r.ValidateOnly})
			switch {
			case err != nil:
				ot.ErrorCode, ot.ErrorMessage = apiError(err)
			case !r.ValidateOnly && t.Partitions != n:
				// The count did not change: Kafka calls asking for the
				// current count an error, so clients can tell.
				ot.ErrorCode, ot.ErrorMessage = entryCode(catalog.InvalidPartitions, "the topic already has that many partitions")
			case !r.ValidateOnly:
				grown[rt.Topic] = n
			}
		}
		resp.Topics = append(resp.Topics, ot)
	}
	c.waitForState(ctx, func() bool {
		v := c.s.cfg.State.View()
		for name, n := range grown {
			if t, ok := v.Topic(c.tenant(), name); !ok || len(t.Partitions) < n {
				return false
			}
		}
		return true
	})
	return resp
}
