package runbooks

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/controlplane/mail"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// stack is a running `tenantd dev` (the control plane and a 3-broker
// cell in one process, as `make run` starts it) on free ports and its own
// database, and the binary, whose directory the runbooks' commands find
// tenantd in.
type stack struct {
	bin, dataDir    string
	apiURL, opKey   string // opKey: id:secret
	bootstrap, http string // the first broker's Kafka and HTTP data addresses
}

func startStack(t *testing.T) *stack {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "tenantd")
	if out, err := exec.Command("go", "build", "-o", bin, "../tenantd").CombinedOutput(); err != nil {
		t.Fatalf("build tenantd: %v\n%s", err, out)
	}
	dataDir := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "dev", "-listen", "127.0.0.1:0", "-raft-listen", "127.0.0.1:0", "-kafka-listen", "127.0.0.1:0",
		"-http-listen", "127.0.0.1:0", "-data-dir", dataDir)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+pgtest.New(t), "SLUICE_LOG_LEVEL=warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	s := &stack{bin: bin, dataDir: dataDir}
	urlRE := regexp.MustCompile(`API:\s+(https?://\S+)/v1`)
	keyRE := regexp.MustCompile(`export SLUICE_ENDPOINT=\S+ SLUICE_API_KEY_ID=(\S+) SLUICE_API_KEY_SECRET=(\S+)`)
	kafkaRE := regexp.MustCompile(`Kafka on ([^,\s]+)`)
	httpRE := regexp.MustCompile(`HTTP data: ([^,\s]+)`)
	deadline := time.After(60 * time.Second)
	for banner := false; !banner; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("tenantd dev exited before it was ready: %s", stderr.String())
			}
			if m := urlRE.FindStringSubmatch(l); m != nil {
				s.apiURL = m[1]
			}
			if m := keyRE.FindStringSubmatch(l); m != nil {
				s.opKey = m[1] + ":" + m[2]
			}
			if m := kafkaRE.FindStringSubmatch(l); m != nil {
				s.bootstrap = m[1]
			}
			if m := httpRE.FindStringSubmatch(l); m != nil {
				s.http = m[1]
			}
			banner = strings.Contains(l, "Press Ctrl-C to stop.")
		case <-deadline:
			t.Fatalf("tenantd dev not ready within 60 s: %s", stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	if s.apiURL == "" || s.opKey == "" || s.bootstrap == "" || s.http == "" {
		t.Fatalf("banner incomplete: %+v", s)
	}
	return s
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
	text, err := mail.Last(filepath.Join(s.dataDir, "mail"), email)
	if err != nil {
		t.Fatal(err)
	}
	res := s.call(t, "POST", "/v1/signup/confirm", "", `{"token":"`+mail.Token(text)+`"}`, 201)
	tn := tenant{id: res["tenant"].(map[string]any)["id"].(string), session: res["session"].(map[string]any)["token"].(string)}
	key := s.call(t, "POST", "/v1/api-keys", "Bearer "+tn.session, `{"description":"app","role":"admin"}`, 201)
	tn.keyID, tn.secret = key["id"].(string), key["secret"].(string)
	s.call(t, "POST", "/v1/topics", basic(tn.keyID, tn.secret), fmt.Sprintf(`{"name":%q,"partitions":%d}`, topic, partitions), 201)
	return tn
}
