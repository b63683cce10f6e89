package kafka

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/topicspec"
)

// configTypes are the Kafka types of the topic configs Sluice knows.
var configTypes = map[string]kmsg.ConfigType{
	topicspec.CleanupPolicy:   kmsg.ConfigTypeList,
	topicspec.MaxMessageBytes: kmsg.ConfigTypeInt,
	topicspec.RetentionBytes:  kmsg.ConfigTypeLong,
	topicspec.RetentionMs:     kmsg.ConfigTypeLong,
	topicspec.SegmentBytes:    kmsg.ConfigTypeInt,
	topicspec.SegmentMs:       kmsg.ConfigTypeLong,

	topicspec.MinCompactionLagMs:     kmsg.ConfigTypeLong,
	topicspec.MaxCompactionLagMs:     kmsg.ConfigTypeLong,
	topicspec.DeleteRetentionMs:      kmsg.ConfigTypeLong,
	topicspec.MinCleanableDirtyRatio: kmsg.ConfigTypeDouble,
}

// describeConfigs answers for the caller's topics with their effective
// configuration from the cell state; it needs describe_configs on the topic.
// Broker resources get an empty list (brokers are the service's, not the
// tenant's) for a caller with describe_configs on the cluster, and
// CLUSTER_AUTHORIZATION_FAILED for the others.
func (c *conn) describeConfigs(r *kmsg.DescribeConfigsRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		or := kmsg.NewDescribeConfigsResponseResource()
		or.ResourceType, or.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t, ok := v.Topic(c.tenant(), rr.ResourceName)
			switch {
			case !ok:
				or.ErrorCode, or.ErrorMessage = entryCode(catalog.TopicNotFound, "")
			case !c.allowed(v, rr.ResourceName, authz.OpDescribeConfigs):
				or.ErrorCode, or.ErrorMessage = entryCode(catalog.TopicAccessDenied, "")
			default:
				names := make([]string, 0, len(t.Config))
				for k := range t.Config {
					if rr.ConfigNames == nil || slices.Contains(rr.ConfigNames, k) {
						names = append(names, k)
					}
				}
				sort.Strings(names)
				for _, k := range names {
					or.Configs = append(or.Configs, topicConfig(k, t.Config[k], slices.Contains(t.Explicit, k), r.IncludeSynonyms))
				}
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			if !c.clusterAllowed(v, authz.OpDescribeConfigs) {
				or.ErrorCode, or.ErrorMessage = entryCode(catalog.PermissionDenied, "")
			}
		default:
			or.ErrorCode, or.ErrorMessage = entryCode(catalog.InvalidRequest, "only topic and broker resources can be described")
		}
		resp.Resources = append(resp.Resources, or)
	}
	return resp
}

// topicConfig is one key of a topic's effective configuration as
// DescribeConfigs describes it: a key the tenant set is a dynamic topic
// config, any other is a default (the service's, or the tenant's plan's),
// as Kafka tells a topic override from a broker default. With synonyms
// asked for, the key itself is its one synonym, with the same source.
func topicConfig(key, value string, explicit, synonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	cfg := kmsg.NewDescribeConfigsResponseResourceConfig()
	cfg.Name, cfg.Value = key, &value
	cfg.Source, cfg.IsDefault = kmsg.ConfigSourceDefaultConfig, true
	if explicit {
		cfg.Source, cfg.IsDefault = kmsg.ConfigSourceDynamicTopicConfig, false
	}
	cfg.ConfigType = configTypes[key]
	if cfg.ConfigType == 0 {
		cfg.ConfigType = kmsg.ConfigTypeString
	}
	if synonyms {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		syn.Name, syn.Value, syn.Source = key, &value, cfg.Source
		cfg.ConfigSynonyms = append(cfg.ConfigSynonyms, syn)
	}
	return cfg
}
