package provider

import (
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sluicehq/sluice/contract/api"
)

// TestAPIKeyFillExpiresAt: expires_at keeps the user's spelling of the same
// instant, and follows the API otherwise.
func TestAPIKeyFillExpiresAt(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		prior types.String
		api   *time.Time
		want  types.String
	}{
		{"never expires", types.StringNull(), nil, types.StringNull()},
		{"same instant, other zone", types.StringValue("2030-01-02T04:04:05+01:00"), &at, types.StringValue("2030-01-02T04:04:05+01:00")},
		{"imported", types.StringNull(), &at, types.StringValue("2030-01-02T03:04:05Z")},
		{"changed out of band", types.StringValue("2031-01-01T00:00:00Z"), &at, types.StringValue("2030-01-02T03:04:05Z")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := apiKeyModel{ExpiresAt: tc.prior}
			m.fill(api.APIKey{ID: "k", Role: "client", Status: "active", ExpiresAt: tc.api})
			if !m.ExpiresAt.Equal(tc.want) {
				t.Errorf("expires_at = %v, want %v", m.ExpiresAt, tc.want)
			}
		})
	}
}
