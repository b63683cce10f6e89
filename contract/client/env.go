package client

import (
	"fmt"
	"strings"
)

// The environment variables that point a client of the /v1 API at a
// control plane: the Terraform provider and tenantd admin read them, and
// tenantd dev prints them for its operator key.
const (
	EnvEndpoint     = "SLUICE_ENDPOINT"       // base URL, e.g. http://127.0.0.1:8080
	EnvAPIKeyID     = "SLUICE_API_KEY_ID"     // the API key's id
	EnvAPIKeySecret = "SLUICE_API_KEY_SECRET" // the API key's secret
)

// Older names, still read when the names above are unset: tenantd dev used
// to print them and tenantd admin to read only them.
const (
	EnvEndpointOld = "SLUICE_API_URL"
	EnvAPIKeyOld   = "SLUICE_API_KEY" // id:secret
)

// Env is what the environment says about where and as whom to call.
// Empty fields were not set.
type Env struct {
	Endpoint     string
	APIKeyID     string
	APIKeySecret string
}

// ReadEnv reads the environment through getenv (os.Getenv in programs).
// Each setting takes its current name first and its older one otherwise;
// the key's id and secret come together, from SLUICE_API_KEY_ID and
// SLUICE_API_KEY_SECRET if either is set, else from SLUICE_API_KEY.
func ReadEnv(getenv func(string) string) (Env, error) {
	e := Env{Endpoint: getenv(EnvEndpoint), APIKeyID: getenv(EnvAPIKeyID), APIKeySecret: getenv(EnvAPIKeySecret)}
	if e.Endpoint == "" {
		e.Endpoint = getenv(EnvEndpointOld)
	}
	if e.APIKeyID == "" && e.APIKeySecret == "" {
		if pair := getenv(EnvAPIKeyOld); pair != "" {
			id, secret, ok := strings.Cut(pair, ":")
			if !ok || id == "" || secret == "" {
				return Env{}, fmt.Errorf("read %s: want id:secret", EnvAPIKeyOld)
			}
			e.APIKeyID, e.APIKeySecret = id, secret
		}
	}
	return e, nil
}
