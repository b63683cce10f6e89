package runbooks

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/tenantd/devtest"
)

// stack is a running `tenantd dev` (the control plane, the shared cell
// and the dedicated pool's cell in one process, as `make run` starts it) on free ports and its own
// database, and the binary, whose directory the runbooks' commands find
// tenantd in.
type stack struct {
	dev             *devtest.Dev
	bin             string
	apiURL, opKey   string // opKey: id:secret
	bootstrap, http string // the first broker's Kafka and HTTP data addresses
}

func startStack(t *testing.T) *stack {
	t.Helper()
	d := devtest.Start(t, testkit.BuildTenantd(t, t.TempDir()), 60*time.Second)
	return &stack{dev: d, bin: d.Bin, apiURL: d.APIURL, opKey: d.OpKey, bootstrap: d.Bootstrap, http: d.HTTPData}
}

// env is the environment the runbooks' commands run in: tenantd on PATH
// and the operator's credentials as tenantd dev prints them, plus vars.
func (s *stack) env(vars map[string]string) []string {
	id, secret, _ := strings.Cut(s.opKey, ":")
	env := append(os.Environ(), "PATH="+filepath.Dir(s.bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SLUICE_ENDPOINT="+s.apiURL, "SLUICE_API_KEY_ID="+id, "SLUICE_API_KEY_SECRET="+secret)
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// call sends a control-plane request and decodes the answer.
func (s *stack) call(t *testing.T, method, path, auth, body string, want int) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, s.apiURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func basic(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))
}

// tenant is a signed-up tenant with an admin key, its owner's session
// and a topic.
type tenant struct {
	id, keyID, secret, session string
}

// signUp signs a tenant up, confirms it by the mailed token, creates an
// admin key and a topic of partitions partitions.
func (s *stack) signUp(t *testing.T, name, topic string, partitions int) tenant {
	t.Helper()
	email := "ops@" + name + ".test"
	s.call(t, "POST", "/v1/signup", "", fmt.Sprintf(`{"tenant_name":%q,"email":%q,"password":"correct horse 1"}`, name, email), 202)
	res := s.call(t, "POST", "/v1/signup/confirm", "", `{"token":"`+s.dev.MailToken(t, email)+`"}`, 201)
	tn := tenant{id: res["tenant"].(map[string]any)["id"].(string), session: res["session"].(map[string]any)["token"].(string)}
	key := s.call(t, "POST", "/v1/api-keys", "Bearer "+tn.session, `{"description":"app","role":"admin"}`, 201)
	tn.keyID, tn.secret = key["id"].(string), key["secret"].(string)
	s.call(t, "POST", "/v1/topics", basic(tn.keyID, tn.secret), fmt.Sprintf(`{"name":%q,"partitions":%d}`, topic, partitions), 201)
	return tn
}
