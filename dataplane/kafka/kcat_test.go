package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// TestKcatProduceConsume produces and consumes with kcat (librdkafka) over
// SASL_PLAINTEXT with a tenant's key. kcat is a test dependency installed by
// `make tools`; without it the test fails, except under -short.
func TestKcatProduceConsume(t *testing.T) {
	kcat := testkit.Kcat(t)
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("kcatco", "developer")
	b.createTopic(t, a, "events", 2, nil)
	b.waitForKey(t, a)
	run := kcatRunner(t, kcat, b.addr, "PLAIN", a, "events")
	var in strings.Builder
	var want []string
	for i := range 50 {
		fmt.Fprintf(&in, "k%d:value-%d\n", i%5, i)
		want = append(want, fmt.Sprintf("k%d=value-%d", i%5, i))
	}
	run(in.String(), "-P", "-K:", "-X", "acks=all")

	out := run("", "-C", "-o", "beginning", "-e", "-f", "%k=%s %p %o\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Fatalf("consumed %d records, want %d:\n%s", len(lines), len(want), out)
	}
	var got []string
	next := map[string]int{}
	for _, l := range lines {
		var rec, part string
		var off int
		if _, err := fmt.Sscanf(l, "%s %s %d", &rec, &part, &off); err != nil {
			t.Fatalf("unexpected kcat line %q: %v", l, err)
		}
		if off != next[part] {
			t.Fatalf("partition %s: offset %d, want %d (dense from 0, in order)", part, off, next[part])
		}
		next[part]++
		got = append(got, rec)
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("consumed %v\nwant %v", got, want)
	}
}

// kcatRunner returns a function that runs kcat against addr on topic,
// signed in as tn's key with SASL mechanism mech: stdin is kcat's input,
// args follow the connection flags, and what kcat printed is returned. A
// kcat failure fails the test with kcat's stderr.
func kcatRunner(t *testing.T, kcat, addr, mech string, tn *cptest.Tenant, topic string) func(stdin string, args ...string) string {
	common := []string{"-b", addr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
		"-X", "sasl.username=" + tn.KeyID, "-X", "sasl.password=" + tn.Secret, "-t", topic}
	return func(stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append(append([]string{}, common...), args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat %v: %v\nstderr:\n%s", args, err, errb.String())
		}
		return out.String()
	}
}
