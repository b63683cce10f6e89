package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/topicspec"
)

// alterConfigs (key 33) replaces the dynamic configuration of the caller's
// topics, as Kafka does: the keys given are set, every other key set on
// the topic returns to its default. incrementalAlterConfigs (key 44)
// changes only the keys given. Both go through PATCH /v1/topics/{name} as
// the caller, so its validation, quotas and ACLs (alter_configs) decide,
// validate_only included; each resource gets its own error code and
// message. Broker configs are the service's and are refused.
func (c *conn) alterConfigs(r *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	// AlterConfigs is a SET of each key given, with every other key reset.
	rs := make([]kmsg.IncrementalAlterConfigsRequestResource, len(r.Resources))
	for i, rr := range r.Resources {
		rs[i].ResourceType, rs[i].ResourceName = rr.ResourceType, rr.ResourceName
		for _, kv := range rr.Configs {
			rs[i].Configs = append(rs[i].Configs, kmsg.IncrementalAlterConfigsRequestResourceConfig{
				Name: kv.Name, Op: kmsg.IncrementalAlterConfigOpSet, Value: kv.Value,
			})
		}
	}
	for _, or := range c.alterResources(rs, true, r.ValidateOnly) {
		// The two keys' resource answers carry the same fields.
		resp.Resources = append(resp.Resources, kmsg.AlterConfigsResponseResource(or))
	}
	return resp
}

func (c *conn) incrementalAlterConfigs(r *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resp.Resources = c.alterResources(r.Resources, false, r.ValidateOnly)
	return resp
}

// alterResources applies each resource in request order as the caller and
// answers each, then waits until the cell state shows the changed topics.
// Both alter keys go through it, so they check the caller, refuse a topic
// named twice and wait for their changes the same way; replace is
// AlterConfigs' reset of every key not given.
func (c *conn) alterResources(rs []kmsg.IncrementalAlterConfigsRequestResource,
	replace, validateOnly bool) []kmsg.IncrementalAlterConfigsResponseResource {
	ctx, cancel := adminContext(c.s.ctx, 0)
	defer cancel()
	cpc, apiErr := c.callerAPI()
	changed := map[string]map[string]string{}
	var out []kmsg.IncrementalAlterConfigsResponseResource
	for _, rr := range rs {
		or := kmsg.NewIncrementalAlterConfigsResponseResource()
		or.ResourceType, or.ResourceName = rr.ResourceType, rr.ResourceName
		ops := make([]configOp, 0, len(rr.Configs))
		for _, kv := range rr.Configs {
			ops = append(ops, configOp{name: kv.Name, op: kv.Op, value: kv.Value})
		}
		or.ErrorCode, or.ErrorMessage = c.alterTopicConfig(ctx, cpc, apiErr, rr.ResourceType, rr.ResourceName, ops, replace,
			validateOnly, changed)
		out = append(out, or)
	}
	c.waitForConfigs(ctx, changed)
	return out
}

// configOp is one key's change: SET, DELETE, APPEND or SUBTRACT.
type configOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// alterTopicConfig applies ops to one resource; replace resets every
// other key (AlterConfigs). It records the effective config of a changed
// topic in changed, for waitForConfigs.
func (c *conn) alterTopicConfig(ctx context.Context, cpc *client.Client, apiErr error, typ kmsg.ConfigResourceType, name string,
	ops []configOp, replace, validateOnly bool, changed map[string]map[string]string) (int16, *string) {
	switch {
	case apiErr != nil:
		return errCode(apiErr)
	case typ == kmsg.ConfigResourceTypeBroker || typ == kmsg.ConfigResourceTypeBrokerLogger:
		return entryCode(catalog.InvalidRequest, "broker configs are the service's; only topic configs can be altered")
	case typ != kmsg.ConfigResourceTypeTopic:
		return entryCode(catalog.InvalidRequest, "only topic configs can be altered")
	}
	if _, dup := changed[name]; dup {
		return entryCode(catalog.InvalidRequest, fmt.Sprintf("topic %q is named twice in one request", name))
	}
	// The topic as it is: its set keys (for replace) and effective values
	// (for APPEND and SUBTRACT); a topic the caller may not see answers
	// as unknown, as /v1 does.
	cur, err := cpc.Topic(ctx, name)
	if err != nil {
		return apiError(err)
	}
	req := api.UpdateTopicRequest{Config: map[string]*string{}, ValidateOnly: validateOnly}
	if replace {
		for k := range cur.Config {
			req.Config[k] = nil
		}
	}
	seen := map[string]bool{}
	for _, o := range ops {
		if seen[o.name] {
			return entryCode(catalog.InvalidConfig, fmt.Sprintf("config %q is given twice", o.name))
		}
		seen[o.name] = true
		switch o.op {
		case kmsg.IncrementalAlterConfigOpSet:
			if o.value == nil {
				return entryCode(catalog.InvalidConfig, fmt.Sprintf("config %q: SET needs a value (DELETE returns a key to its default)", o.name))
			}
			req.Config[o.name] = o.value
		case kmsg.IncrementalAlterConfigOpDelete:
			// /v1 takes a null for a key it does not know as a no-op; Kafka
			// calls it an unknown config.
			if _, known := configTypes[o.name]; !known {
				return entryCode(catalog.InvalidConfig, fmt.Sprintf("unknown topic config %q; supported: %s", o.name, strings.Join(topicspec.Keys, ", ")))
			}
			req.Config[o.name] = nil
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if typ, ok := configTypes[o.name]; ok && typ != kmsg.ConfigTypeList {
				return entryCode(catalog.InvalidConfig, fmt.Sprintf("config %q is a %s, not a list: APPEND and SUBTRACT apply to list configs only; use SET",
					o.name, strings.ToLower(typ.String())))
			}
			if o.value == nil {
				return entryCode(catalog.InvalidConfig, fmt.Sprintf("config %q: %s needs a value", o.name, o.op))
			}
			v, ok := cur.EffectiveConfig[o.name]
			if !ok {
				return entryCode(catalog.InvalidConfig, fmt.Sprintf("unknown config %q", o.name))
			}
			items := listItems(v)
			for _, x := range listItems(*o.value) {
				has := slices.Contains(items, x)
				switch {
				case o.op == kmsg.IncrementalAlterConfigOpAppend && !has:
					items = append(items, x)
				case o.op == kmsg.IncrementalAlterConfigOpSubtract && has:
					items = slices.DeleteFunc(items, func(y string) bool { return y == x })
				}
			}
			joined := strings.Join(items, ",")
			req.Config[o.name] = &joined
		default:
			return entryCode(catalog.InvalidConfig, fmt.Sprintf("config %q: unknown operation %d", o.name, o.op))
		}
	}
	if len(req.Config) == 0 {
		return 0, nil // nothing to change (AlterConfigs of a topic with no keys set, to none)
	}
	t, err := cpc.UpdateTopic(ctx, name, req)
	if err != nil {
		return apiError(err)
	}
	if !validateOnly {
		changed[name] = t.EffectiveConfig
	}
	return 0, nil
}

// listItems splits a list config's value ("delete,compact").
func listItems(v string) []string {
	var out []string
	for x := range strings.SplitSeq(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// waitForConfigs waits (bounded by ctx) until the cell state carries the
// changed topics' new configuration, so a DescribeConfigs right after
// shows it.
func (c *conn) waitForConfigs(ctx context.Context, changed map[string]map[string]string) {
	c.waitForState(ctx, func() bool {
		v := c.s.cfg.State.View()
		for name, cfg := range changed {
			if t, ok := v.Topic(c.tenant(), name); !ok || !maps.Equal(t.Config, cfg) {
				return false
			}
		}
		return true
	})
}
