package provider_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/controlplane/api"
)

// TestReadmeFlow follows terraform/README.md's "Build and try it locally"
// with the real CLI and the real plugin binary: build the provider, use the
// README's dev_overrides block, skip terraform init, apply. Then it does
// what the partitions rules promise, reading Terraform's own output: a
// count raised through the /v1 API plans no change and warns, and a lower
// configuration fails the plan (and the apply) with the reason, leaving the
// topic as it was.
func TestReadmeFlow(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

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

	dir := t.TempDir()
	writeMain := func(partitions int) {
		t.Helper()
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
`, partitions)
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(hcl), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// terraform runs the CLI in dir and returns its output and exit code.
	terraform := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, os.Getenv("TF_ACC_TERRAFORM_PATH"), append(args, "-no-color", "-input=false")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1",
			"SLUICE_ENDPOINT="+e.url, "SLUICE_API_KEY_ID="+e.keyID, "SLUICE_API_KEY_SECRET="+e.secret)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &ee):
			return string(out), ee.ExitCode()
		}
		t.Fatalf("terraform %s: %v\n%s", args[0], err, out)
		return "", 0
	}
	// Terraform wraps long messages; match them with any run of spaces.
	has := func(out, text string) bool {
		return regexp.MustCompile(strings.Join(strings.Fields(regexp.QuoteMeta(text)), `\s+`)).MatchString(out)
	}

	writeMain(4)
	if out, code := terraform("apply", "-auto-approve"); code != 0 {
		t.Fatalf("terraform apply (no init, as the README says) exited %d:\n%s", code, out)
	}
	first, err := e.tenant.Topic(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}

	n := 8
	if _, err := e.tenant.UpdateTopic(ctx, "orders", api.UpdateTopicRequest{Partitions: &n}); err != nil {
		t.Fatal(err)
	}
	out, code := terraform("plan", "-detailed-exitcode")
	if code != 0 || !has(out, "No changes.") ||
		!has(out, "partitions were raised outside Terraform to 8; keeping 8 — set partitions = 8 to silence this") {
		t.Fatalf("plan after the API raised partitions to 8 exited %d (want 0, no changes, and the warning):\n%s", code, out)
	}
	if out, code := terraform("apply", "-auto-approve"); code != 0 || !has(out, "0 added, 0 changed, 0 destroyed") {
		t.Fatalf("apply after the API raised partitions exited %d:\n%s", code, out)
	}

	writeMain(2)
	out, code = terraform("plan", "-detailed-exitcode")
	if code != 1 || !has(out, "partitions cannot be lowered from 8 to 2: Kafka partitions only grow") || has(out, "to destroy") {
		t.Fatalf("plan with fewer partitions exited %d (want 1 and the reason):\n%s", code, out)
	}
	if out, code := terraform("apply", "-auto-approve"); code != 1 {
		t.Fatalf("apply with fewer partitions exited %d, want 1:\n%s", code, out)
	}
	now, err := e.tenant.Topic(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if now.Partitions != 8 || !now.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("topic has %d partitions, created %s; want the same topic (created %s) with 8", now.Partitions, now.CreatedAt, first.CreatedAt)
	}
	// terraform destroy plans with the configuration first, so the lower
	// count stops it too; -refresh=false skips that plan, as the docs say.
	if out, code := terraform("destroy", "-auto-approve"); code != 1 || !has(out, "partitions cannot be lowered from 8 to 2") {
		t.Fatalf("terraform destroy with fewer partitions exited %d, want 1 and the reason:\n%s", code, out)
	}
	if out, code := terraform("destroy", "-auto-approve", "-refresh=false"); code != 0 {
		t.Fatalf("terraform destroy -refresh=false exited %d:\n%s", code, out)
	}
	if _, err := e.tenant.Topic(ctx, "orders"); err == nil {
		t.Error("the topic is still there after terraform destroy")
	}
}
