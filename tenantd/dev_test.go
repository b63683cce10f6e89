package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/testkit"
)

// buildTenantd compiles the real binary once per test.
func buildTenantd(t *testing.T) string { return testkit.BuildTenantd(t, t.TempDir()) }

// TestDevReadmeFlow runs `tenantd dev` as `make run` does and walks the
// README's tour over HTTP: signup, create a key, create a topic with it,
// list topics, revoke the key, and the revoked key gets 401. Then the
// operator CLI lists the tenant.
func TestDevReadmeFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tenantd")
	}
	d := startDev(t)
	bin, cmd, exited, stderr, dbURL := d.Bin, d.Cmd, d.Exited, d.Stderr, d.DBURL
	apiURL, opKey, opEnv, bootstrap, httpData := d.APIURL, d.OpKey, d.OpEnv, d.Bootstrap, d.HTTPData
	var deadline <-chan time.Time

	call := apiCaller(t, apiURL)
	if s := call("POST", "/v1/signup", "", `{"tenant_name":"acme","email":"dev@acme.test","password":"correct horse 1"}`, 202); s["status"] != "pending" {
		t.Fatalf("signup: %v", s)
	}
	signup := call("POST", "/v1/signup/confirm", "", `{"token":"`+d.MailToken(t, "dev@acme.test")+`"}`, 201)
	token := signup["session"].(map[string]any)["token"].(string)
	key := call("POST", "/v1/api-keys", "Bearer "+token, `{"description":"laptop"}`, 201)
	id, secret := key["id"].(string), key["secret"].(string)
	basic := "Basic " + b64(id+":"+secret)
	call("POST", "/v1/topics", basic, `{"name":"orders","partitions":3}`, 201)
	list := call("GET", "/v1/topics", basic, "", 200)
	if items := list["items"].([]any); len(items) != 1 || items[0].(map[string]any)["name"] != "orders" {
		t.Fatalf("topics: %v", list)
	}
	call("DELETE", "/v1/api-keys/"+id, "Bearer "+token, "", 200)
	if e := call("GET", "/v1/topics", basic, "", 401); e["code"] != "key_revoked" {
		t.Fatalf("revoked key: %v", e)
	}

	// As the README says: paste the export line, then run tenantd admin.
	adminCmd := exec.Command(bin, "admin", "tenants", "list", "-sort", "load")
	adminCmd.Env = append(os.Environ(), opEnv...)
	out, err := adminCmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "acme") || !strings.Contains(string(out), "PARTITIONS") {
		t.Fatalf("tenantd admin tenants list: %v\n%s", err, out)
	}
	consoleOperatorSignIn(t, apiURL, opKey, "acme")

	// Both dev cells' brokers (three each) sync their state and report
	// their disks.
	fleet := devFleetBrokers(devCellsOf(defaultConfig()))
	deadline = time.After(20 * time.Second)
	for {
		out, err := exec.Command(bin, "admin", "-api", apiURL, "-key", opKey, "-o", "json", "brokers", "list").Output()
		if err != nil {
			t.Fatalf("tenantd admin brokers list: %v", err)
		}
		var bs []struct {
			LastSeenAt     *time.Time `json:"last_seen_at"`
			DiskTotalBytes int64      `json:"disk_total_bytes"`
		}
		if err := json.Unmarshal(out, &bs); err != nil {
			t.Fatal(err)
		}
		reported := 0
		for _, b := range bs {
			if b.LastSeenAt != nil && b.DiskTotalBytes > 0 {
				reported++
			}
		}
		if len(bs) == fleet && reported == fleet {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("brokers did not report within 20 s: %s", out)
		case <-time.After(100 * time.Millisecond):
		}
	}

	// The topic's three partitions replicate across the dev brokers: each
	// elects a leader, which all three replicas report to the control
	// plane (partition_status).
	db, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	deadline = time.After(30 * time.Second)
	for {
		var led int
		err := db.QueryRow(context.Background(), `SELECT count(*) FROM (
			SELECT ps.partition FROM partition_status ps JOIN topics t ON t.id = ps.topic_id
			WHERE t.name = 'orders' GROUP BY ps.partition
			HAVING count(*) = 3 AND min(ps.leader_node) > 0 AND min(ps.leader_node) = max(ps.leader_node)) led`).Scan(&led)
		if err != nil {
			t.Fatal(err)
		}
		if led == 3 {
			break
		}
		select {
		case <-deadline:
			rows, _ := db.Query(context.Background(), `SELECT partition, broker_id, leader_node, leader_epoch FROM partition_status`)
			got, _ := pgx.CollectRows(rows, pgx.RowToMap)
			t.Fatalf("partitions without an agreed leader after 30 s (%d of 3 led): %v\n%s", led, got, stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
	}

	// The README's Kafka tour: kcat (librdkafka) produces keyed records with
	// a fresh key over SASL/PLAIN and reads every one back, through the
	// replicated partitions.
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: run `make tools` (it installs Debian's kcat)")
	}
	key2 := call("POST", "/v1/api-keys", "Bearer "+token, `{"description":"kcat"}`, 201)
	sasl := []string{"-b", bootstrap, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username=" + key2["id"].(string), "-X", "sasl.password=" + key2["secret"].(string)}
	// A new key reaches the brokers with the next cell state, within a second
	// or so: wait until the key lists the topic.
	deadline = time.After(20 * time.Second)
	for {
		out, err := runBounded(exec.Command(kcat, append(sasl, "-L", "-t", "orders")...), 20*time.Second)
		if err == nil && strings.Contains(string(out), `topic "orders" with 3 partitions`) {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("kcat -L with a new key did not list the topic within 20 s: %v\n%s", err, out)
		case <-time.After(200 * time.Millisecond):
		}
	}
	var in strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&in, "user-%d:event-%d\n", i%7, i)
	}
	prod := exec.Command(kcat, append(sasl, "-t", "orders", "-P", "-K:", "-X", "acks=all")...)
	prod.Stdin = strings.NewReader(in.String())
	if out, err := runBounded(prod, 60*time.Second); err != nil {
		t.Fatalf("kcat produce: %v\n%s\n%s", err, out, stderr.String())
	}
	cons := exec.Command(kcat, append(sasl, "-t", "orders", "-C", "-o", "beginning", "-e", "-f", "%k:%s\n")...)
	out, err = runBounded(cons, 60*time.Second)
	if err != nil {
		t.Fatalf("kcat consume: %v\n%s", err, out)
	}
	got := regexp.MustCompile(`(?m)^user-\d+:event-\d+$`).FindAllString(string(out), -1)
	if len(got) != 30 {
		t.Fatalf("kcat read %d records, want 30:\n%s", len(got), out)
	}
	for i := 0; i < 30; i++ {
		if !strings.Contains(string(out), fmt.Sprintf("user-%d:event-%d\n", i%7, i)) {
			t.Fatalf("record %d missing from kcat's read:\n%s", i, out)
		}
	}

	// The same records through a consumer group (kcat's balanced
	// consumer): the brokers coordinate groups over their Raft offsets
	// partitions.
	grp := exec.Command(kcat, append(sasl, "-G", "readme-tour", "-X", "auto.offset.reset=earliest", "-e", "-f", "%k:%s\n", "orders")...)
	out, err = runBounded(grp, 90*time.Second)
	if err != nil {
		t.Fatalf("kcat -G: %v\n%s\n%s", err, out, stderr.String())
	}
	if got := regexp.MustCompile(`(?m)^user-\d+:event-\d+$`).FindAllString(string(out), -1); len(got) != 30 {
		t.Fatalf("kcat -G read %d records, want 30:\n%s", len(got), out)
	}
	// kcat committed as it read: the group's coordinator broker reports its
	// lag (none left) and the tenant reads it from /v1/groups within a few
	// reports, every partition of orders listed (one kcat read nothing
	// from would have no committed offset and nothing to read).
	deadline = time.After(30 * time.Second)
	for {
		g := call("GET", "/v1/groups/readme-tour", "Bearer "+token, "", 0)
		var committed, lag float64
		parts, _ := g["partitions"].([]any)
		caughtUp := len(parts) == 3 && g["partition_count"] == float64(3)
		for _, p := range parts {
			p := p.(map[string]any)
			c, isCommitted := p["committed_offset"].(float64)
			committed += c
			lag += p["lag_records"].(float64)
			caughtUp = caughtUp && p["measured"] == true &&
				(isCommitted && c == p["high_watermark"] || p["committed_offset"] == nil && p["lag_records"] == float64(0))
		}
		if caughtUp && committed == 30 && lag == 0 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the group's lag was not reported within 30 s: %v\n%s", g, stderr.String())
		case <-time.After(500 * time.Millisecond):
		}
	}

	// The README's HTTP tour: publish with the kcat key over HTTP to the
	// first broker (forwarded to the partition's leader as needed) and read
	// the message back by partition and offset.
	dataCall := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		status, b := sendKey(t, method, "http://"+httpData+path, key2["id"].(string), key2["secret"].(string), body)
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return status, out
	}
	status, pub := dataCall("POST", "/v1/topics/orders/messages:publish", `{"messages":[{"key":"`+b64("user-1")+`","value":"`+b64("paid over http")+`"}]}`)
	if status != 200 {
		t.Fatalf("http publish: %d %v", status, pub)
	}
	res := pub["messages"].([]any)[0].(map[string]any)
	status, read := dataCall("GET", fmt.Sprintf("/v1/topics/orders/partitions/%v/messages?offset=%v", res["partition"], res["offset"]), "")
	if msgs, _ := read["messages"].([]any); status != 200 || len(msgs) == 0 || msgs[0].(map[string]any)["value"] != b64("paid over http") ||
		msgs[0].(map[string]any)["message_id"] != res["message_id"] {
		t.Fatalf("http read: %d %v (published %v)", status, read, res)
	}

	// The tour's consumer group: join, fetch the message, commit past it.
	// dev's banner waits for every offsets partition to be served
	// (TestDevReadyServesGroups); a retriable answer (a coordinator that
	// moved since, on a busy machine) is retried, as clients do.
	status, joined := dataCall("POST", "/v1/groups/billing/members", `{"topics":["orders"]}`)
	for deadline := time.Now().Add(30 * time.Second); status != 200 && joined["retriable"] == true && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond) // a client's backoff, not a wait for state
		status, joined = dataCall("POST", "/v1/groups/billing/members", `{"topics":["orders"]}`)
	}
	if parts, _ := joined["partitions"].([]any); status != 200 || len(parts) != 3 {
		t.Fatalf("http join: %d %v", status, joined)
	}
	member := fmt.Sprintf(`"member_id":%q,"generation":%v`, joined["member_id"], joined["generation"])
	found := false
	for deadline := time.Now().Add(30 * time.Second); !found && time.Now().Before(deadline); {
		status, fetched := dataCall("POST", "/v1/groups/billing/messages:fetch", `{`+member+`,"max_wait_ms":1000}`)
		if status != 200 {
			t.Fatalf("http fetch: %d %v", status, fetched)
		}
		for _, m := range fetched["messages"].([]any) {
			found = found || m.(map[string]any)["message_id"] == res["message_id"]
		}
	}
	if !found {
		t.Fatal("the group fetch did not return the message published over HTTP")
	}
	status, committed := dataCall("POST", "/v1/groups/billing/offsets:commit",
		fmt.Sprintf(`{%s,"offsets":[{"topic":"orders","partition":%v,"offset":%v}]}`, member, res["partition"], res["offset"].(float64)+1))
	if status != 200 {
		t.Fatalf("http commit: %d %v", status, committed)
	}
	// The group lists every partition of orders, its member's subscription:
	// the committed one, and the two without a commit, which lag by their
	// whole retained log.
	deadline = time.After(30 * time.Second)
	for {
		g := call("GET", "/v1/groups/billing", "Bearer "+token, "", 0)
		parts, _ := g["partitions"].([]any)
		ok := len(parts) == 3
		for _, p := range parts {
			p := p.(map[string]any)
			if p["partition"] == res["partition"] {
				ok = ok && p["committed_offset"] == res["offset"].(float64)+1
			} else {
				ok = ok && p["committed_offset"] == nil && p["measured"] == true &&
					p["lag_records"] == p["high_watermark"].(float64)-p["log_start_offset"].(float64)
			}
		}
		if ok {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the HTTP group's partitions were not all reported within 30 s: %v", g)
		case <-time.After(500 * time.Millisecond):
		}
	}

	// The console reads a topic's messages from the brokers with a key the
	// user types in: the message published over HTTP shows on its page.
	consoleBrowse(t, apiURL, "dev@acme.test", "correct horse 1", "orders", int(res["partition"].(float64)),
		key2["id"].(string), key2["secret"].(string), "paid over http")

	// The console is served at / by the same process.
	resp, err := http.Get(apiURL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "<form") {
		t.Fatalf("console login page: %d %.200s", resp.StatusCode, page)
	}

	// Metrics count the tour's requests by route and status. They name
	// tenants (the brokers' series carry tenant ids), so the public port
	// serves them to operators only.
	tenantID := signup["tenant"].(map[string]any)["id"].(string)
	getMetrics := func(auth string) (int, string) {
		t.Helper()
		status, body := send(t, "GET", apiURL+"/metrics", auth, "")
		return status, string(body)
	}
	for name, auth := range map[string]string{"anonymous": "", "tenant session": "Bearer " + token} {
		status, body := getMetrics(auth)
		if status == 200 || strings.Contains(body, tenantID) || strings.Contains(body, "sluice_api_requests_total") {
			t.Fatalf("%s /metrics on the public port: %d %.300s", name, status, body)
		}
	}
	status, metrics := getMetrics("Basic " + b64(opKey))
	if status != 200 ||
		!strings.Contains(metrics, `sluice_api_requests_total{method="POST",route="/v1/topics",status="201"} 1`) ||
		!strings.Contains(metrics, `sluice_api_errors_total{code="key_revoked"} 1`) {
		t.Fatalf("operator /metrics: %d, lacks the tour's requests:\n%s", status, metrics)
	}

	// SIGTERM shuts down cleanly.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("tenantd dev exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("tenantd dev did not stop within 20 s of SIGTERM")
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// runBounded runs cmd and kills it if it outlives limit.
func runBounded(cmd *exec.Cmd, limit time.Duration) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		return out.Bytes(), fmt.Errorf("%s did not finish within %v", cmd.Path, limit)
	}
}

// consoleOperatorSignIn signs in to the console with the operator key the
// banner prints, as the banner says to, and finds tenant on the operator's
// tenants page.
// rt, when set, carries the requests (one trusting the console's CA).
func consoleOperatorSignIn(t *testing.T, consoleURL, opKey, tenant string, rt ...http.RoundTripper) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	if len(rt) > 0 {
		hc.Transport = rt[0]
	}
	get := func(resp *http.Response, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", resp.Request.URL, resp.StatusCode, b)
		}
		return string(b)
	}
	page := get(hc.Get(consoleURL + "/login?as=operator"))
	m := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the console's login page has no form:\n%s", page)
	}
	page = get(hc.PostForm(consoleURL+"/login/operator", url.Values{"csrf_token": {m[1]}, "api_key": {opKey}}))
	if !strings.Contains(page, `id="admin-tenants"`) || !strings.Contains(page, tenant) {
		t.Fatalf("the operator key does not open the console's tenants page:\n%s", page)
	}
}

// apiCaller returns call for the API at apiURL: call sends a request with
// send, fails t unless the status is want (0 accepts any) and decodes the
// JSON answer, the step every walk through the API repeats.
func apiCaller(t *testing.T, apiURL string) func(method, path, auth, body string, want int) map[string]any {
	return func(method, path, auth, body string, want int) map[string]any {
		t.Helper()
		status, b := send(t, method, apiURL+path, auth, body)
		if want != 0 && status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, status, b, want)
		}
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return out
	}
}

// send makes one request, with a JSON body when body is set and an
// Authorization header when auth is, and returns the status and body.
func send(t *testing.T, method, url, auth, body string) (int, []byte) {
	t.Helper()
	return sendWith(t, http.DefaultClient, method, url, auth, body)
}

// sendKey makes one request to the HTTP data API as a client does: a
// JSON content type whatever the method, and an API key as basic auth.
func sendKey(t *testing.T, method, url, keyID, secret, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(keyID, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// sendWith is send through hc.
func sendWith(t *testing.T, hc *http.Client, method, url, auth, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// consoleBrowse signs in to the console as a tenant's user and reads a
// partition of topic on its messages page with the API key id:secret,
// expecting a message whose value is want; a wrong secret is refused there.
func consoleBrowse(t *testing.T, consoleURL, email, password, topic string, partition int, keyID, secret, want string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	page := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	csrf := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	_, login := page(hc.Get(consoleURL + "/login"))
	m := csrf.FindStringSubmatch(login)
	if m == nil {
		t.Fatalf("the console's login page has no form:\n%s", login)
	}
	if status, body := page(hc.PostForm(consoleURL+"/login", url.Values{"csrf_token": {m[1]}, "email": {email}, "password": {password}})); status != http.StatusOK {
		t.Fatalf("console sign-in: %d\n%.500s", status, body)
	}
	status, form := page(hc.Get(consoleURL + "/topics/" + topic + "/messages"))
	if m = csrf.FindStringSubmatch(form); status != http.StatusOK || m == nil {
		t.Fatalf("messages page: %d\n%.500s", status, form)
	}
	read := func(secret string) (int, string) {
		return page(hc.PostForm(consoleURL+"/topics/"+topic+"/messages", url.Values{"csrf_token": {m[1]},
			"partition": {strconv.Itoa(partition)}, "offset": {"0"}, "key_id": {keyID}, "key_secret": {secret}}))
	}
	if status, body := read(secret); status != http.StatusOK || !strings.Contains(body, `id="browse-messages"`) || !strings.Contains(body, want) {
		t.Fatalf("reading partition %d in the console: %d, want a table with %q\n%s", partition, status, want, body)
	}
	if status, body := read(secret + "x"); status == http.StatusOK || strings.Contains(body, want) || !strings.Contains(body, "unauthenticated") && !strings.Contains(body, "wrong") {
		t.Fatalf("a wrong secret read messages in the console: %d\n%.800s", status, body)
	}
}

// TestDevReadyServesGroups: `tenantd dev` prints its banner only once
// every offsets partition of its cell has a leader serving consumer
// groups, so a README user's first group join is answered, not met with a
// retriable 503 while a partition still elects or loads. The only retry
// here is for the new key and topic to reach the brokers with the next
// cell state (401 or 404); any 503 fails the test.
func TestDevReadyServesGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tenantd")
	}
	d := startDev(t)
	call := apiCaller(t, d.APIURL)
	call("POST", "/v1/signup", "", `{"tenant_name":"first","email":"dev@first.test","password":"correct horse 1"}`, 202)
	signup := call("POST", "/v1/signup/confirm", "", `{"token":"`+d.MailToken(t, "dev@first.test")+`"}`, 201)
	token := signup["session"].(map[string]any)["token"].(string)
	key := call("POST", "/v1/api-keys", "Bearer "+token, `{"description":"first"}`, 201)
	call("POST", "/v1/topics", "Bearer "+token, `{"name":"orders","partitions":1}`, 201)
	join := func() (int, []byte) {
		return sendKey(t, "POST", "http://"+d.HTTPData+"/v1/groups/first-group/members", key["id"].(string), key["secret"].(string), `{"topics":["orders"]}`)
	}
	status, body := join()
	for deadline := time.Now().Add(20 * time.Second); (status == 401 || status == 404) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond) // the next cell state's poll, not a wait for a leader
		status, body = join()
	}
	if status != 200 {
		t.Fatalf("first group join after the banner: %d %s, want 200 (a 503 means dev reported ready before its offsets partitions served groups)\n%s", status, body, d.Stderr.String())
	}
}

// TestDevGroupsServedBounded: the wait for the dev cell's offsets
// partitions gives up after its bound with a message naming the
// partitions without a serving leader, and stops when dev is stopped.
func TestDevGroupsServedBounded(t *testing.T) {
	parts := []*brokerParts{newBrokerParts(), newBrokerParts()} // no coordinator runs: nothing is served
	err := devGroupsServed(context.Background(), "dev-cell-1", parts, 3, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "dev cell dev-cell-1 not ready") || !strings.Contains(err.Error(), "offsets partitions 0, 1, 2 (of 3) have no leader serving consumer groups") ||
		!strings.Contains(err.Error(), "not ready after 50ms") {
		t.Fatalf("bounded wait: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := devGroupsServed(ctx, "dev-cell-1", parts, 3, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait after dev stopped: %v, want context.Canceled", err)
	}
}

// TestDevDedicatedCellFlag: dev runs the dedicated pool's cell unless
// -dedicated-cell=false, and the flag is refused where it would do
// nothing (any other role).
func TestDevDedicatedCellFlag(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		name     string
		cmd      string
		args     []string
		wantErr  string
		wantCell bool
	}{
		{name: "dev default", cmd: "dev", wantCell: true},
		{name: "dev without", cmd: "dev", args: []string{"-dedicated-cell=false"}},
		{name: "dev explicit", cmd: "dev", args: []string{"-dedicated-cell=true"}, wantCell: true},
		{name: "broker refuses", cmd: "broker", args: []string{"-dedicated-cell=false"}, wantErr: "-dedicated-cell is for tenantd dev only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(tc.cmd, tc.args, env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cells := devCellsOf(cfg)
			if got := len(cells) == 2; got != tc.wantCell {
				t.Fatalf("cells %v, want the dedicated one: %v", cells, tc.wantCell)
			}
			if tc.wantCell && (cells[1].ID != "dev-cell-2" || cells[1].Pool != "dev-dedicated" || cells[1].Kind != "dedicated" || devFleetBrokers(cells) != 6) {
				t.Fatalf("dedicated cell %+v", cells[1])
			}
		})
	}
}
