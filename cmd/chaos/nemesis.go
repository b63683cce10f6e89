package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"
)

// The nemeses, one fault at a time, each healed before the next.
const (
	// Kill sends SIGKILL to a broker; heal starts it again from its data.
	Kill = "kill"
	// Pause sends SIGSTOP to a broker; heal sends SIGCONT.
	Pause = "pause"
	// Restart stops a broker with SIGTERM and starts it at once.
	Restart = "restart"
	// Isolate cuts one broker's Raft links to both others.
	Isolate = "isolate"
	// Bridge cuts the Raft link between two brokers only; the third still
	// reaches both.
	Bridge = "bridge"
	// KillMajority sends SIGKILL to two brokers at once: no partition can
	// commit until heal starts them again.
	KillMajority = "kill-majority"
	// KillAll sends SIGKILL to every broker at once and starts them all
	// again at heal: only what the brokers made durable may be served.
	KillAll = "kill-all"
	// Move moves one replica of a partition to the spare broker through the
	// control plane, cancelling it at heal half the time (move.go).
	Move = "move"
)

// Nemeses lists every nemesis.
var Nemeses = []string{Kill, Pause, Restart, Isolate, Bridge, KillMajority, KillAll, Move}

// Nemesis injects faults into a cluster on a schedule.
type Nemesis struct {
	c     *Cluster
	rng   *rand.Rand
	kinds []string
	log   *slog.Logger
	// mu guards counts.
	mu     sync.Mutex
	counts map[string]int
}

// NewNemesis returns a nemesis choosing among kinds with the seeded rng.
func NewNemesis(c *Cluster, seed int64, kinds []string, log *slog.Logger) *Nemesis {
	return &Nemesis{c: c, rng: rand.New(rand.NewSource(seed)), kinds: kinds, log: log, counts: map[string]int{}}
}

// Inject applies one random fault and returns its description and heal.
func (n *Nemesis) Inject() (string, func() error) {
	kind := n.kinds[n.rng.Intn(len(n.kinds))]
	b := n.rng.Intn(n.c.Brokers())
	n.mu.Lock()
	n.counts[kind]++
	n.mu.Unlock()
	id := n.c.brokers[b].ID
	switch kind {
	case Kill:
		n.c.KillBroker(b)
		return "SIGKILL " + id, func() error { return n.c.StartBroker(b) }
	case Pause:
		n.c.PauseBroker(b)
		return "SIGSTOP " + id, func() error { n.c.ResumeBroker(b); return nil }
	case Restart:
		n.c.TermBroker(b)
		err := n.c.StartBroker(b)
		return "restart " + id, func() error { return err }
	case KillMajority:
		o := (b + 1 + n.rng.Intn(n.c.Brokers()-1)) % n.c.Brokers()
		n.c.KillBroker(b)
		n.c.KillBroker(o)
		return fmt.Sprintf("SIGKILL %s and %s", id, n.c.brokers[o].ID), func() error {
			return errors.Join(n.c.StartBroker(b), n.c.StartBroker(o))
		}
	case KillAll:
		for i := range n.c.Brokers() {
			n.c.KillBroker(i)
		}
		return "SIGKILL every broker", func() error {
			var errs []error
			for i := range n.c.Brokers() {
				errs = append(errs, n.c.StartBroker(i))
			}
			return errors.Join(errs...)
		}
	case Isolate:
		n.c.net.Isolate(b, n.c.Brokers())
		return "isolate " + id, func() error { n.c.net.Heal(); return nil }
	case Move:
		return n.c.startMove(n.rng)
	case Bridge:
		o := (b + 1 + n.rng.Intn(n.c.Brokers()-1)) % n.c.Brokers()
		n.c.net.Cut(b, o)
		return fmt.Sprintf("cut %s-%s", id, n.c.brokers[o].ID), func() error { n.c.net.Heal(); return nil }
	}
	panic("unknown nemesis " + kind)
}

// Run injects a fault every interval (held for interval, then healed, then
// a quiet interval) until stop closes, healing the last one.
func (n *Nemesis) Run(stop <-chan struct{}, interval time.Duration) {
	wait := func(d time.Duration) bool {
		select {
		case <-stop:
			return false
		case <-time.After(d):
			return true
		}
	}
	if len(n.kinds) == 0 {
		<-stop
		return
	}
	for wait(interval) {
		desc, heal := n.Inject()
		n.log.Info("nemesis: inject", "fault", desc)
		wait(interval)
		if err := heal(); err != nil {
			n.log.Error("nemesis: heal", "fault", desc, "err", err)
		}
		n.log.Info("nemesis: heal", "fault", desc)
	}
}

// Counts returns how many faults of each kind were injected.
func (n *Nemesis) Counts() (total int, desc string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var parts []string
	for k, v := range n.counts {
		total += v
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return total, strings.Join(parts, " ")
}

// ParseNemeses parses a comma-separated list of nemeses ("all" for every
// one, "none" for a run without faults: a soak).
func ParseNemeses(s string) ([]string, error) {
	if s == "all" || s == "" {
		return Nemeses, nil
	}
	if s == "none" {
		return nil, nil
	}
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		found := false
		for _, n := range Nemeses {
			found = found || n == k
		}
		if !found {
			return nil, fmt.Errorf("unknown nemesis %q: want one of %s", k, strings.Join(Nemeses, ", "))
		}
		out = append(out, k)
	}
	return out, nil
}
