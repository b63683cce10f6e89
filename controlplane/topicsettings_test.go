package controlplane_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
)

// TestTopicSettingsRefused: a retention above the plan's maximum (the free
// plan keeps 7 days), Kafka's -1 "keep forever" (no plan offers it),
// negative and non-numeric values, and a segment.bytes below the 1 MiB
// floor are each refused through /v1 with a specific code and message, on
// create and on change, and nothing changes.
func TestTopicSettingsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("settings")
	if _, err := a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "kept", Config: map[string]string{"retention.ms": "3600000"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, value, code, message string
	}{
		{"retention above the plan", "retention.ms", "604800001", "quota_exceeded", "above the tenant's limit of 604800000 ms"},
		{"retention forever", "retention.ms", "-1", "invalid_config", "-1 (keep forever) is not offered"},
		{"retention negative", "retention.ms", "-60000", "invalid_config", "at least 1000 milliseconds"},
		{"retention not a number", "retention.ms", "7d", "invalid_config", "must be a whole number"},
		{"retention bytes negative", "retention.bytes", "-100", "invalid_config", "must be -1 (no limit"},
		{"retention bytes not a number", "retention.bytes", "10GB", "invalid_config", "must be a whole number"},
		{"segment below the floor", "segment.bytes", "1048575", "invalid_config", "from 1 MiB (1048576)"},
		{"segment not a number", "segment.bytes", "1MiB", "invalid_config", "must be a whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "fresh", Config: map[string]string{tc.key: tc.value}})
			wantCode(t, err, tc.code)
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("create: %v, want %q", err, tc.message)
			}
			v := tc.value
			_, err = a.key.UpdateTopic(ctx, "kept", api.UpdateTopicRequest{Config: map[string]*string{tc.key: &v}})
			wantCode(t, err, tc.code)
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("change: %v, want %q", err, tc.message)
			}
			ts, err := a.key.Topics(ctx)
			if err != nil || len(ts) != 1 || !maps.Equal(ts[0].Config, map[string]string{"retention.ms": "3600000"}) {
				t.Fatalf("topics after the refusals: %+v %v", ts, err)
			}
		})
	}
}
