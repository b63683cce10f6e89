package replicated

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// TestKcatBalancedConsumer: kcat's balanced consumer (librdkafka's group
// protocol, -G) reads every record of a topic that franz-go produced, in
// order per partition, and its final commits reach the end of every
// partition.
func TestKcatBalancedConsumer(t *testing.T) {
	kcat := testkit.Kcat(t)
	const (
		n     = 2000
		parts = 4
		topic = "clicks"
		group = "kcat-readers"
	)
	c, tn := startReadyGroupCell(t, parts, topic, 3)
	counts := produceN(t, c, tn, topic, parts, n)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, append(kcatSASL(c, tn),
		"-X", "auto.offset.reset=earliest", "-e", "-f", "%p %o %s\n", "-G", group, topic)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat -G: %v\nstderr:\n%s", err, errb.String())
	}
	next := make([]int64, parts)
	seen := make([]bool, n)
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var p, off, v int64
		if _, err := fmt.Sscanf(l, "%d %d %d", &p, &off, &v); err != nil || p < 0 || p >= parts || v < 0 || v >= n {
			t.Fatalf("unexpected kcat line %q: %v", l, err)
		}
		if off != next[p] {
			t.Fatalf("partition %d: offset %d, want %d", p, off, next[p])
		}
		next[p]++
		seen[v] = true
	}
	for p := range parts {
		if next[p] != counts[p] {
			t.Fatalf("partition %d: kcat read %d records of %d\nstderr:\n%s", p, next[p], counts[p], errb.String())
		}
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("record %d never read", i)
		}
	}
	cl := c.client(t, tn)
	got, err := committed(ctx, t, cl, group, topic, parts)
	if err != nil {
		t.Fatalf("fetch kcat's commits: %v", err)
	}
	for p := range parts {
		if got[p] != counts[p] {
			t.Fatalf("kcat committed %v, want the partition ends %v", got, counts)
		}
	}
}

// kcatSASL are kcat's arguments to reach the cell as the tenant's key.
func kcatSASL(c *cell, tn *cptest.Tenant) []string {
	return []string{"-b", strings.Join(c.addrs, ","),
		"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username=" + tn.KeyID, "-X", "sasl.password=" + tn.Secret}
}
