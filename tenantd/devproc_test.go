package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/tenantd/devtest"
)

// startDev builds tenantd and runs `tenantd dev` with extra flags until
// the test ends (devtest.Start, 30 s for its banner).
func startDev(t *testing.T, extra ...string) *devtest.Dev {
	t.Helper()
	return devtest.Start(t, buildTenantd(t), 30*time.Second, extra...)
}

// devCall sends a request through hc and decodes its JSON answer, failing
// the test unless the status is want (any status when want is 0).
func devCall(t *testing.T, hc *http.Client, method, url, auth, body string, want int) map[string]any {
	t.Helper()
	status, b := sendWith(t, hc, method, url, auth, body)
	if want != 0 && status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, status, b, want)
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// devKey signs up tenant name on d (owner dev@<name>.test, confirmed
// through the mail d keeps) and makes it an API key of the default role,
// described as description: its id and secret.
func devKey(t *testing.T, d *devtest.Dev, hc *http.Client, name, description string) (id, secret string) {
	t.Helper()
	email := "dev@" + name + ".test"
	devCall(t, hc, "POST", d.APIURL+"/v1/signup", "", `{"tenant_name":"`+name+`","email":"`+email+`","password":"correct horse 1"}`, 202)
	signup := devCall(t, hc, "POST", d.APIURL+"/v1/signup/confirm", "", `{"token":"`+d.MailToken(t, email)+`"}`, 201)
	token := signup["session"].(map[string]any)["token"].(string)
	key := devCall(t, hc, "POST", d.APIURL+"/v1/api-keys", "Bearer "+token, `{"description":"`+description+`"}`, 201)
	return key["id"].(string), key["secret"].(string)
}
