package controlplane

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/controlplane/api"
	"github.com/sluicehq/sluice/controlplane/catalog"
)

// Topic configuration keys Sluice honours, with Kafka's names so that
// clients' admin tools work unchanged.
const (
	cfgCleanupPolicy   = "cleanup.policy"
	cfgRetentionMs     = "retention.ms"
	cfgRetentionBytes  = "retention.bytes"
	cfgMaxMessageBytes = "max.message.bytes"
	cfgSegmentBytes    = "segment.bytes"
	cfgSegmentMs       = "segment.ms"
)

// TopicConfigKeys lists the supported keys, sorted.
var TopicConfigKeys = []string{cfgCleanupPolicy, cfgMaxMessageBytes, cfgRetentionBytes, cfgRetentionMs, cfgSegmentBytes, cfgSegmentMs}

// topicDefaults are the effective values of keys not set explicitly, given
// the tenant's quotas.
func topicDefaults(q api.Quotas) map[string]string {
	return map[string]string{
		cfgCleanupPolicy:   "delete",
		cfgRetentionMs:     strconv.FormatInt(min(7*24*3600*1000, q.MaxRetentionMs), 10),
		cfgRetentionBytes:  "-1",
		cfgMaxMessageBytes: strconv.Itoa(min(1<<20, q.MaxMessageBytes)),
		cfgSegmentBytes:    strconv.Itoa(128 << 20),
		cfgSegmentMs:       strconv.Itoa(7 * 24 * 3600 * 1000),
	}
}

// validateTopicConfig checks explicit settings against the rules and the
// tenant's quotas.
func validateTopicConfig(cfg map[string]string, q api.Quotas) error {
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		v := cfg[k]
		bad := func(rule string) error {
			return catalog.InvalidConfig.Newf("%s=%q: %s", k, v, rule)
		}
		switch k {
		case cfgCleanupPolicy:
			if v == "compact" || strings.Contains(v, "compact") {
				return bad(`compaction is not supported yet; use "delete"`)
			}
			if v != "delete" {
				return bad(`must be "delete"`)
			}
		case cfgRetentionMs:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1000 {
				return bad("must be a whole number of milliseconds, at least 1000")
			}
			if n > q.MaxRetentionMs {
				return catalog.QuotaExceeded.Newf("%s=%s is above the tenant's limit of %d ms", k, v, q.MaxRetentionMs)
			}
		case cfgRetentionBytes:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || (n != -1 && n < 1) {
				return bad("must be -1 (no limit) or a positive number of bytes")
			}
			if n > q.MaxStorageBytes {
				return catalog.QuotaExceeded.Newf("%s=%s is above the tenant's storage limit of %d bytes", k, v, q.MaxStorageBytes)
			}
		case cfgMaxMessageBytes:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return bad("must be a positive number of bytes")
			}
			if n > q.MaxMessageBytes {
				return catalog.QuotaExceeded.Newf("%s=%s is above the tenant's limit of %d bytes", k, v, q.MaxMessageBytes)
			}
		case cfgSegmentBytes:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1<<20 || n > 1<<30 {
				return bad("must be from 1 MiB (1048576) to 1 GiB (1073741824)")
			}
		case cfgSegmentMs:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 60_000 {
				return bad("must be a whole number of milliseconds, at least 60000")
			}
		default:
			return catalog.InvalidConfig.Newf("unknown topic config %q; supported: %s", k, strings.Join(TopicConfigKeys, ", "))
		}
	}
	return nil
}

func effectiveConfig(explicit map[string]string, q api.Quotas) map[string]string {
	out := topicDefaults(q)
	maps.Copy(out, explicit)
	return out
}
