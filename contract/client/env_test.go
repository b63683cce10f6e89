package client_test

import (
	"testing"

	"github.com/sluicehq/sluice/contract/client"
)

// TestReadEnv: the current names win, the older ones still work, and the
// key's id and secret never mix the two spellings.
func TestReadEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    client.Env
		wantErr bool
	}{
		{"nothing", nil, client.Env{}, false},
		{"current names", map[string]string{"SLUICE_ENDPOINT": "http://a", "SLUICE_API_KEY_ID": "ak_1", "SLUICE_API_KEY_SECRET": "s1"},
			client.Env{Endpoint: "http://a", APIKeyID: "ak_1", APIKeySecret: "s1"}, false},
		{"older names", map[string]string{"SLUICE_API_URL": "http://b", "SLUICE_API_KEY": "ak_2:s2"},
			client.Env{Endpoint: "http://b", APIKeyID: "ak_2", APIKeySecret: "s2"}, false},
		{"a secret may hold colons", map[string]string{"SLUICE_API_KEY": "ak_2:s:2"},
			client.Env{APIKeyID: "ak_2", APIKeySecret: "s:2"}, false},
		{"current names win", map[string]string{"SLUICE_ENDPOINT": "http://a", "SLUICE_API_URL": "http://b",
			"SLUICE_API_KEY_ID": "ak_1", "SLUICE_API_KEY_SECRET": "s1", "SLUICE_API_KEY": "ak_2:s2"},
			client.Env{Endpoint: "http://a", APIKeyID: "ak_1", APIKeySecret: "s1"}, false},
		{"half a current key does not borrow the older one", map[string]string{"SLUICE_API_KEY_ID": "ak_1", "SLUICE_API_KEY": "ak_2:s2"},
			client.Env{APIKeyID: "ak_1"}, false},
		{"older key without a colon", map[string]string{"SLUICE_API_KEY": "ak_2"}, client.Env{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := client.ReadEnv(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ReadEnv = %+v, %v; want %+v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
