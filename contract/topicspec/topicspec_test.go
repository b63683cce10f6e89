package topicspec_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/topicspec"
)

var free = api.Quotas{MaxPartitions: 30, MaxRetentionMs: 7 * 24 * 3600 * 1000, MaxStorageBytes: 5 << 30, MaxMessageBytes: 1 << 20}

// code is the catalogue code of err, or "" for nil.
func code(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var ce *catalog.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v is not a catalogued error", err)
	}
	return string(ce.Entry.Code)
}

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name, topic, code string
	}{
		{"kafka characters", "orders.v1_eu-west", ""},
		{"longest", strings.Repeat("a", 249), ""},
		{"empty", "", "invalid_name"},
		{"dot", ".", "invalid_name"},
		{"dot dot", "..", "invalid_name"},
		{"too long", strings.Repeat("a", 250), "invalid_name"},
		{"space", "my topic", "invalid_name"},
		{"reserved", "__consumer_offsets", "invalid_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := code(t, topicspec.ValidName(tc.topic)); got != tc.code {
				t.Errorf("ValidName(%q) = %q, want %q", tc.topic, got, tc.code)
			}
		})
	}
}

func TestValidPartitions(t *testing.T) {
	for _, tc := range []struct {
		name          string
		n             int
		code, noQuota string // with the free plan's quotas, and with none
	}{
		{"one", 1, "", ""},
		{"the quota", 30, "", ""},
		{"zero", 0, "invalid_partitions", "invalid_partitions"},
		{"negative", -1, "invalid_partitions", "invalid_partitions"},
		{"above the quota", 31, "invalid_partitions", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := free
			if got := code(t, topicspec.ValidPartitions(tc.n, &q)); got != tc.code {
				t.Errorf("ValidPartitions(%d) with quotas = %q, want %q", tc.n, got, tc.code)
			}
			if got := code(t, topicspec.ValidPartitions(tc.n, nil)); got != tc.noQuota {
				t.Errorf("ValidPartitions(%d) without quotas = %q, want %q", tc.n, got, tc.noQuota)
			}
		})
	}
}

// TestValidateConfig: each key's bounds, with and without the tenant's
// quotas; without them only the quota checks are skipped.
func TestValidateConfig(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cfg           map[string]string
		code, noQuota string // with the free plan's quotas, and with none
	}{
		{"none", nil, "", ""},
		{"every key", map[string]string{"cleanup.policy": "delete", "retention.ms": "3600000", "retention.bytes": "-1",
			"max.message.bytes": "524288", "segment.bytes": "1048576", "segment.ms": "60000"}, "", ""},
		{"unknown key", map[string]string{"retention.hours": "1"}, "invalid_config", "invalid_config"},
		{"compaction", map[string]string{"cleanup.policy": "compact"}, "", ""},
		{"compaction and deletion", map[string]string{"cleanup.policy": "compact,delete"}, "", ""},
		{"deletion and compaction", map[string]string{"cleanup.policy": "delete, compact"}, "", ""},
		{"policy twice", map[string]string{"cleanup.policy": "compact,compact"}, "invalid_config", "invalid_config"},
		{"policy unknown", map[string]string{"cleanup.policy": "shred"}, "invalid_config", "invalid_config"},
		{"policy empty", map[string]string{"cleanup.policy": ""}, "invalid_config", "invalid_config"},
		{"every compaction key", map[string]string{"cleanup.policy": "compact", "min.compaction.lag.ms": "0",
			"max.compaction.lag.ms": "1", "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01"}, "", ""},
		{"min lag negative", map[string]string{"min.compaction.lag.ms": "-1"}, "invalid_config", "invalid_config"},
		{"max lag zero", map[string]string{"max.compaction.lag.ms": "0"}, "invalid_config", "invalid_config"},
		{"delete retention negative", map[string]string{"delete.retention.ms": "-1"}, "invalid_config", "invalid_config"},
		{"dirty ratio above 1", map[string]string{"min.cleanable.dirty.ratio": "1.5"}, "invalid_config", "invalid_config"},
		{"dirty ratio not a number", map[string]string{"min.cleanable.dirty.ratio": "NaN"}, "invalid_config", "invalid_config"},
		{"min lag above max lag", map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "9"}, "invalid_config", "invalid_config"},
		{"retention too short", map[string]string{"retention.ms": "999"}, "invalid_config", "invalid_config"},
		{"retention not a number", map[string]string{"retention.ms": "1h"}, "invalid_config", "invalid_config"},
		{"retention forever", map[string]string{"retention.ms": "-1"}, "invalid_config", "invalid_config"},
		{"retention negative", map[string]string{"retention.ms": "-5000"}, "invalid_config", "invalid_config"},
		{"retention bytes negative", map[string]string{"retention.bytes": "-2"}, "invalid_config", "invalid_config"},
		{"retention bytes not a number", map[string]string{"retention.bytes": "1GB"}, "invalid_config", "invalid_config"},
		{"segment not a number", map[string]string{"segment.bytes": "1MiB"}, "invalid_config", "invalid_config"},
		{"retention above the quota", map[string]string{"retention.ms": "604800001"}, "quota_exceeded", ""},
		{"retention bytes zero", map[string]string{"retention.bytes": "0"}, "invalid_config", "invalid_config"},
		{"retention bytes above the quota", map[string]string{"retention.bytes": "5368709121"}, "quota_exceeded", ""},
		{"message size above the quota", map[string]string{"max.message.bytes": "1048577"}, "quota_exceeded", ""},
		{"segment too small", map[string]string{"segment.bytes": "1048575"}, "invalid_config", "invalid_config"},
		{"segment too large", map[string]string{"segment.bytes": "1073741825"}, "invalid_config", "invalid_config"},
		{"segment too young", map[string]string{"segment.ms": "59999"}, "invalid_config", "invalid_config"},
		{"keys in sorted order", map[string]string{"retention.ms": "604800001", "segment.ms": "1"}, "quota_exceeded", "invalid_config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := free
			if got := code(t, topicspec.ValidateConfig(tc.cfg, &q)); got != tc.code {
				t.Errorf("with quotas: %q, want %q", got, tc.code)
			}
			if got := code(t, topicspec.ValidateConfig(tc.cfg, nil)); got != tc.noQuota {
				t.Errorf("without quotas: %q, want %q", got, tc.noQuota)
			}
		})
	}
}

func TestEffective(t *testing.T) {
	got := topicspec.Effective(map[string]string{"retention.ms": "1000"}, free)
	if len(got) != len(topicspec.Keys) || got["retention.ms"] != "1000" || got["cleanup.policy"] != "delete" || got["max.message.bytes"] != "1048576" {
		t.Errorf("Effective = %v", got)
	}
}

// TestConfigAccessors: the typed readers accept exactly what ValidateConfig
// accepts, and say false for a missing or broken value.
func TestConfigAccessors(t *testing.T) {
	c := topicspec.Config{
		topicspec.MaxMessageBytes: "2048", topicspec.RetentionMs: "3600000", topicspec.RetentionBytes: "-1",
		topicspec.SegmentBytes: "1048576", topicspec.SegmentMs: "60000",
	}
	if err := topicspec.ValidateConfig(c, nil); err != nil {
		t.Fatal(err)
	}
	if n, ok := c.MaxMessageBytes(); !ok || n != 2048 {
		t.Errorf("max.message.bytes: %d %v", n, ok)
	}
	if n, ok := c.RetentionMs(); !ok || n != 3600000 {
		t.Errorf("retention.ms: %d %v", n, ok)
	}
	if n, ok := c.RetentionBytes(); !ok || n != -1 {
		t.Errorf("retention.bytes: %d %v", n, ok)
	}
	if n, ok := c.SegmentBytes(); !ok || n != 1<<20 {
		t.Errorf("segment.bytes: %d %v", n, ok)
	}
	if n, ok := c.SegmentMs(); !ok || n != 60000 {
		t.Errorf("segment.ms: %d %v", n, ok)
	}
	bad := topicspec.Config{topicspec.MaxMessageBytes: "0", topicspec.RetentionMs: "soon", topicspec.SegmentBytes: "1024"}
	if topicspec.ValidateConfig(bad, nil) == nil {
		t.Fatal("ValidateConfig accepted broken values")
	}
	if _, ok := bad.MaxMessageBytes(); ok {
		t.Error("max.message.bytes 0 read as valid")
	}
	if _, ok := bad.RetentionMs(); ok {
		t.Error("retention.ms soon read as valid")
	}
	if _, ok := bad.SegmentBytes(); ok {
		t.Error("segment.bytes 1024 read as valid")
	}
	if _, ok := (topicspec.Config{}).RetentionBytes(); ok {
		t.Error("a missing retention.bytes read as valid")
	}
}

// TestCompactionAccessors: the policy and the compaction settings read
// back as set, with Kafka's defaults when absent.
func TestCompactionAccessors(t *testing.T) {
	for _, tc := range []struct {
		policy           string
		compact, deletes bool
	}{
		{"", false, true}, {"delete", false, true}, {"compact", true, false},
		{"compact,delete", true, true}, {"delete,compact", true, true}, {"bogus", false, true},
	} {
		c := topicspec.Config{topicspec.CleanupPolicy: tc.policy}
		if tc.policy == "" {
			c = topicspec.Config{}
		}
		if c.Compacted() != tc.compact || c.Deletes() != tc.deletes {
			t.Errorf("%q: compacted %v deletes %v, want %v %v", tc.policy, c.Compacted(), c.Deletes(), tc.compact, tc.deletes)
		}
	}
	d := topicspec.Config{}
	if d.MinCompactionLagMs() != 0 || d.MaxCompactionLagMs() != math.MaxInt64 || d.DeleteRetentionMs() != 86400000 || d.MinCleanableDirtyRatio() != 0.5 {
		t.Errorf("defaults: %d %d %d %v", d.MinCompactionLagMs(), d.MaxCompactionLagMs(), d.DeleteRetentionMs(), d.MinCleanableDirtyRatio())
	}
	c := topicspec.Config{topicspec.MinCompactionLagMs: "5", topicspec.MaxCompactionLagMs: "6", topicspec.DeleteRetentionMs: "7", topicspec.MinCleanableDirtyRatio: "0.25"}
	if c.MinCompactionLagMs() != 5 || c.MaxCompactionLagMs() != 6 || c.DeleteRetentionMs() != 7 || c.MinCleanableDirtyRatio() != 0.25 {
		t.Errorf("set: %d %d %d %v", c.MinCompactionLagMs(), c.MaxCompactionLagMs(), c.DeleteRetentionMs(), c.MinCleanableDirtyRatio())
	}
	if err := topicspec.ValidateConfig(topicspec.Defaults(free), &free); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

// TestValidateConfigMessages: each bad value is told what is wrong with it.
func TestValidateConfigMessages(t *testing.T) {
	q := free
	for _, tc := range []struct {
		cfg  map[string]string
		want string
	}{
		{map[string]string{"retention.ms": "1h"}, `retention.ms="1h": must be a whole number`},
		{map[string]string{"retention.ms": "-1"}, `retention.ms="-1": -1 (keep forever) is not offered`},
		{map[string]string{"retention.ms": "-5000"}, `retention.ms="-5000": must be at least 1000 milliseconds`},
		{map[string]string{"retention.ms": "604800001"}, `retention.ms=604800001 is above the tenant's limit of 604800000 ms`},
		{map[string]string{"retention.bytes": "-2"}, `retention.bytes="-2": must be -1 (no limit`},
		{map[string]string{"max.message.bytes": "big"}, `max.message.bytes="big": must be a whole number`},
		{map[string]string{"segment.bytes": "1024"}, `segment.bytes="1024": must be from 1 MiB (1048576)`},
		{map[string]string{"segment.ms": "-1"}, `segment.ms="-1": must be at least 60000 milliseconds`},
	} {
		err := topicspec.ValidateConfig(tc.cfg, &q)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
