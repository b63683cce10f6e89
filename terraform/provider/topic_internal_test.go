package provider

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sluicehq/sluice/contract/api"
)

func TestConfigChanges(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name      string
		had, want map[string]string
		out       map[string]*string
	}{
		{"nothing", map[string]string{}, map[string]string{}, map[string]*string{}},
		{"unchanged keys are left out", map[string]string{"retention.ms": "1000"}, map[string]string{"retention.ms": "1000"}, map[string]*string{}},
		{"added", map[string]string{}, map[string]string{"retention.ms": "1000"}, map[string]*string{"retention.ms": str("1000")}},
		{"changed", map[string]string{"retention.ms": "1000"}, map[string]string{"retention.ms": "2000"}, map[string]*string{"retention.ms": str("2000")}},
		{"dropped keys go back to the default", map[string]string{"retention.ms": "1000", "segment.ms": "60000"},
			map[string]string{"segment.ms": "60000"}, map[string]*string{"retention.ms": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := configChanges(tc.had, tc.want)
			eq := maps.EqualFunc(got, tc.out, func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) })
			if !eq {
				t.Errorf("configChanges(%v, %v) = %v, want %v", tc.had, tc.want, got, tc.out)
			}
		})
	}
}

// TestTopicFillConfig: the config attribute mirrors the API's explicit
// keys, and an empty one keeps the user's spelling (null or {}) so that
// neither diffs.
func TestTopicFillConfig(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		prior    types.Map
		api      map[string]string
		wantNull bool
		wantLen  int
	}{
		{"unset stays null", types.MapNull(types.StringType), map[string]string{}, true, 0},
		{"empty stays empty", emptyMap(), map[string]string{}, false, 0},
		{"keys set out of band show up", types.MapNull(types.StringType), map[string]string{"retention.ms": "1000"}, false, 1},
		{"keys removed out of band go", types.MapValueMust(types.StringType, map[string]attr.Value{"retention.ms": types.StringValue("1000")}), map[string]string{}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var diags diag.Diagnostics
			m := topicModel{Config: tc.prior}
			m.fill(ctx, api.Topic{Name: "t", Partitions: 1, Config: tc.api, EffectiveConfig: map[string]string{"retention.ms": "1"}}, &diags)
			if diags.HasError() {
				t.Fatal(diags)
			}
			if m.Config.IsNull() != tc.wantNull || len(m.Config.Elements()) != tc.wantLen {
				t.Errorf("config = %v, want null=%v with %d keys", m.Config, tc.wantNull, tc.wantLen)
			}
		})
	}
}

// TestPlanPartitions: a topic is never planned with fewer partitions than
// it has; a count raised outside Terraform is kept with a warning, and one
// lowered in the configuration is an error.
func TestPlanPartitions(t *testing.T) {
	for _, tc := range []struct {
		name                string
		live, want, applied int64
		plan                int64
		severity            diag.Severity // 0: no diagnostic
		detail              string
	}{
		{"unchanged", 4, 4, 4, 4, 0, ""},
		{"grown", 4, 6, 4, 6, 0, ""},
		{"grown past a count raised outside", 8, 10, 4, 10, 0, ""},
		{"raised outside", 8, 4, 4, 8, diag.SeverityWarning,
			"partitions were raised outside Terraform to 8; keeping 8 — set partitions = 8 to silence this"},
		{"raised outside past a grown configuration", 8, 6, 4, 8, diag.SeverityWarning, "raised outside Terraform to 8"},
		{"lowered", 6, 4, 6, 6, diag.SeverityError, "partitions cannot be lowered from 6 to 4: Kafka partitions only grow"},
		{"lowered after being raised outside", 8, 2, 4, 8, diag.SeverityError, "partitions cannot be lowered from 8 to 2"},
		{"lowered with no record of the last apply", 8, 4, 0, 8, diag.SeverityError, "partitions cannot be lowered from 8 to 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, d := planPartitions(tc.live, tc.want, tc.applied)
			if plan != tc.plan {
				t.Errorf("planned %d partitions, want %d", plan, tc.plan)
			}
			switch {
			case tc.severity == 0 && d != nil:
				t.Errorf("unexpected diagnostic %s: %s", d.Summary(), d.Detail())
			case tc.severity != 0 && (d == nil || d.Severity() != tc.severity || !strings.Contains(d.Detail(), tc.detail)):
				t.Errorf("diagnostic %v, want severity %v containing %q", d, tc.severity, tc.detail)
			}
		})
	}
}
