package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
)

// cli runs the real Terraform CLI on the real plugin binary, set up as
// terraform/README.md's "Build and try it locally" says: the README's own
// dev_overrides block, no terraform init, the provider's environment
// variables.
type cli struct {
	t   *testing.T
	e   *env
	ctx context.Context
	rc  string // CLI configuration file
	dir string // working directory, with main.tf and the state
}

func newCLI(t *testing.T, e *env) *cli {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	binDir := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(binDir, "terraform-provider-sluice"), "../cmd/terraform-provider-sluice")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the provider: %v\n%s", err, out)
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```hcl\n(.*?)```").FindSubmatch(readme)
	if m == nil || !strings.Contains(string(m[1]), "dev_overrides") {
		t.Fatal("terraform/README.md has no hcl block with dev_overrides")
	}
	rc := filepath.Join(t.TempDir(), "terraformrc")
	if err := os.WriteFile(rc, []byte(strings.Replace(string(m[1]), "/path/to/sluice/bin", binDir, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return &cli{t: t, e: e, ctx: ctx, rc: rc, dir: t.TempDir()}
}

// appliedCLI is a CLI whose configuration holds the topic "orders" of n
// partitions, applied without init, as the README says.
func appliedCLI(t *testing.T, e *env, n int) *cli {
	t.Helper()
	c := newCLI(t, e)
	c.topic(n)
	if out, code := c.run("apply", "-auto-approve"); code != 0 {
		t.Fatalf("terraform apply (no init, as the README says) exited %d:\n%s", code, out)
	}
	return c
}

// topic writes a main.tf with one topic "orders" of n partitions.
func (c *cli) topic(n int) {
	c.t.Helper()
	hcl := fmt.Sprintf(`terraform {
  required_providers {
    sluice = { source = "sluicehq/sluice" }
  }
}

provider "sluice" {}

resource "sluice_topic" "orders" {
  name       = "orders"
  partitions = %d
}
`, n)
	if err := os.WriteFile(filepath.Join(c.dir, "main.tf"), []byte(hcl), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// run runs terraform in the working directory and returns its output and
// exit code.
func (c *cli) run(args ...string) (string, int) {
	c.t.Helper()
	cmd := exec.CommandContext(c.ctx, os.Getenv("TF_ACC_TERRAFORM_PATH"), append(args, "-no-color", "-input=false")...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+c.rc, "CHECKPOINT_DISABLE=1",
		"SLUICE_ENDPOINT="+c.e.url, "SLUICE_API_KEY_ID="+c.e.keyID, "SLUICE_API_KEY_SECRET="+c.e.secret)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	c.t.Fatalf("terraform %s: %v\n%s", args[0], err, out)
	return "", 0
}

// has reports whether Terraform's output holds text, which it may have
// wrapped over lines.
func has(out, text string) bool {
	return regexp.MustCompile(strings.Join(strings.Fields(regexp.QuoteMeta(text)), `\s+`)).MatchString(out)
}

// raise sets the topic's partitions through the /v1 API, as the console
// and kafka-topics --alter do.
func (c *cli) raise(name string, n int) {
	c.t.Helper()
	if _, err := c.e.tenant.UpdateTopic(c.ctx, name, api.UpdateTopicRequest{Partitions: &n}); err != nil {
		c.t.Fatal(err)
	}
}

// TestReadmeFlow follows the README's local flow and then does what the
// partitions rules promise, reading Terraform's own output: a count raised
// through the /v1 API plans no change and warns, and a lower configuration
// fails the plan (and the apply) with the reason, leaving the topic as it
// was.
func TestReadmeFlow(t *testing.T) {
	e := newEnv(t)
	c := appliedCLI(t, e, 4)
	first, err := e.tenant.Topic(c.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}

	c.raise("orders", 8)
	out, code := c.run("plan", "-detailed-exitcode")
	if code != 0 || !has(out, "No changes.") ||
		!has(out, "partitions were raised outside Terraform to 8; keeping 8 — set partitions = 8 to silence this") {
		t.Fatalf("plan after the API raised partitions to 8 exited %d (want 0, no changes, and the warning):\n%s", code, out)
	}
	if out, code := c.run("apply", "-auto-approve"); code != 0 || !has(out, "0 added, 0 changed, 0 destroyed") {
		t.Fatalf("apply after the API raised partitions exited %d:\n%s", code, out)
	}

	c.topic(2)
	out, code = c.run("plan", "-detailed-exitcode")
	if code != 1 || !has(out, "partitions cannot be lowered from 8 to 2: Kafka partitions only grow") || has(out, "to destroy") {
		t.Fatalf("plan with fewer partitions exited %d (want 1 and the reason):\n%s", code, out)
	}
	if out, code := c.run("apply", "-auto-approve"); code != 1 {
		t.Fatalf("apply with fewer partitions exited %d, want 1:\n%s", code, out)
	}
	now, err := e.tenant.Topic(c.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if now.Partitions != 8 || !now.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("topic has %d partitions, created %s; want the same topic (created %s) with 8", now.Partitions, now.CreatedAt, first.CreatedAt)
	}

	// terraform destroy plans with the configuration first, so the lower
	// count stops it too; -refresh=false skips that plan, as the docs say.
	if out, code := c.run("destroy", "-auto-approve"); code != 1 || !has(out, "partitions cannot be lowered from 8 to 2") {
		t.Fatalf("terraform destroy with fewer partitions exited %d, want 1 and the reason:\n%s", code, out)
	}
	if out, code := c.run("destroy", "-auto-approve", "-refresh=false"); code != 0 {
		t.Fatalf("terraform destroy -refresh=false exited %d:\n%s", code, out)
	}
	if _, err := e.tenant.Topic(c.ctx, "orders"); err == nil {
		t.Error("the topic is still there after terraform destroy")
	}
}

// TestTopicStateFromOlderProvider: a state written before the provider
// kept the count it applied (no private data, as older releases wrote it)
// takes that count from the state on refresh, so partitions raised outside
// Terraform since are kept with a warning, not taken for a lowered
// configuration, and a lowered configuration is still refused.
func TestTopicStateFromOlderProvider(t *testing.T) {
	e := newEnv(t)
	c := appliedCLI(t, e, 4)
	// Drop the private data, as an older provider's state has none.
	statePath := filepath.Join(c.dir, "terraform.tfstate")
	b, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	inst := st["resources"].([]any)[0].(map[string]any)["instances"].([]any)[0].(map[string]any)
	if inst["private"] == nil {
		t.Fatal("the provider wrote no private data; the test would prove nothing")
	}
	delete(inst, "private")
	if b, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statePath, b, 0o600); err != nil {
		t.Fatal(err)
	}

	c.raise("orders", 8)
	out, code := c.run("plan", "-detailed-exitcode")
	if code != 0 || !has(out, "partitions were raised outside Terraform to 8") {
		t.Fatalf("plan exited %d (want 0, no changes, and the warning):\n%s", code, out)
	}
	c.topic(3)
	if out, code := c.run("plan", "-detailed-exitcode"); code != 1 || !has(out, "partitions cannot be lowered from 8 to 3") {
		t.Fatalf("plan with fewer partitions exited %d (want 1 and the reason):\n%s", code, out)
	}
}
