package runbooks

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/testkit"
)

// kcatProducer is kcat -P for a tenant, fed a numbered line every 20 ms
// until stopped: it must exit 0 (every record delivered) and every line
// must be read back.
type kcatProducer struct {
	cmd    *exec.Cmd
	out    *testkit.LogBuffer
	stdin  io.WriteCloser
	done   chan struct{}
	exited chan error
	mu     sync.Mutex
	sent   int
	got    map[string]bool
}

// startKcat starts one against s's bootstrap address; nil (and every
// method a no-op) without kcat outside CI.
func startKcat(t *testing.T, s *stack, tn tenant, topic string) *kcatProducer {
	t.Helper()
	bin := toolBin(t, "kcat")
	if bin == "" {
		return nil
	}
	k := &kcatProducer{out: &testkit.LogBuffer{}, done: make(chan struct{}), exited: make(chan error, 1), got: map[string]bool{}}
	k.cmd = exec.Command(bin, "-b", s.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username="+tn.keyID, "-X", "sasl.password="+tn.secret, "-X", "acks=all", "-X", "linger.ms=5", "-t", topic, "-P")
	k.cmd.Stdout, k.cmd.Stderr = k.out, k.out
	var err error
	if k.stdin, err = k.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { k.exited <- k.cmd.Wait() }()
	t.Cleanup(func() {
		_ = k.cmd.Process.Kill()
		<-k.exited
	})
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-k.done:
				return
			case <-tick.C:
			}
			k.mu.Lock()
			line := fmt.Sprintf("kcat-%06d", k.sent)
			k.sent++
			k.mu.Unlock()
			if _, err := io.WriteString(k.stdin, line+"\n"); err != nil {
				return // kcat exited: stop says so
			}
		}
	}()
	return k
}

// stop ends kcat's input and waits for it to deliver what it has and exit
// 0; a kcat that exited before (it gave up) fails the test.
func (k *kcatProducer) stop(t *testing.T) {
	t.Helper()
	if k == nil {
		return
	}
	select {
	case err := <-k.exited:
		t.Fatalf("kcat exited before its input ended: %v\n%s", err, k.output())
	default:
	}
	close(k.done)
	_ = k.stdin.Close()
	select {
	case err := <-k.exited:
		k.exited <- err
		if err != nil {
			t.Fatalf("kcat: %v (a record not delivered)\n%s", err, k.output())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("kcat still delivering 2 minutes after its input ended\n%s", k.output())
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	t.Logf("kcat delivered its %d records through the throttle and the move; it printed:\n%s", k.sent, k.output())
}

// seen notes a record read back.
func (k *kcatProducer) seen(v []byte) {
	if k != nil && bytes.HasPrefix(v, []byte("kcat-")) {
		k.mu.Lock()
		k.got[string(v)] = true
		k.mu.Unlock()
	}
}

// missing answers the lines kcat was given and not read back yet.
func (k *kcatProducer) missing() []string {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for i := 0; i < k.sent; i++ {
		if l := fmt.Sprintf("kcat-%06d", i); !k.got[l] {
			out = append(out, l)
		}
	}
	return out
}

// pending counts them.
func (k *kcatProducer) pending() int { return len(k.missing()) }

// check: every line kcat was given was read back.
func (k *kcatProducer) check(t *testing.T) {
	t.Helper()
	if k == nil {
		return
	}
	if missing := k.missing(); len(missing) > 0 {
		t.Fatalf("%d of kcat's %d records not read back (first %s)\n%s", len(missing), k.sent, missing[0], k.output())
	}
	t.Logf("kcat's records all read back")
}

// output is what kcat printed, each run of identical lines as one line
// and its count: a failed delivery prints a line per record, which would
// bury the line that says why.
func (k *kcatProducer) output() string {
	var b strings.Builder
	lines := strings.Split(strings.TrimSpace(k.out.String()), "\n")
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && lines[j] == lines[i] {
			j++
		}
		b.WriteString(lines[i])
		if j-i > 1 {
			fmt.Fprintf(&b, " (%d times)", j-i)
		}
		b.WriteString("\n")
		i = j
	}
	return b.String()
}
