package main

import (
	"strings"
	"testing"
)

func TestThroughputSplit(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  throughputConfig
		want []int // messages per part, warm-up included
	}{
		{"even", throughputConfig{Messages: 400, Producers: 4, Parts: 1, Warmup: 10}, []int{410}},
		{"remainder to the first producers", throughputConfig{Messages: 10, Producers: 4, Parts: 4}, []int{3, 3, 2, 2}},
		{"producers wrap over parts", throughputConfig{Messages: 600, Producers: 6, Parts: 4, Warmup: 1}, []int{201, 201, 101, 101}},
		{"producers spread over parts", throughputConfig{Messages: 10, Producers: 2, Parts: 5}, []int{2, 3, 2, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.cfg.perPart()
			total := 0
			for i := range tc.cfg.Producers {
				total += tc.cfg.split(i)
			}
			if total != tc.cfg.Messages {
				t.Fatalf("producers send %d messages, want %d", total, tc.cfg.Messages)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("perPart = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("perPart = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestPayloads(t *testing.T) {
	p := newPayloads()
	a, b := p.get(0), p.get(1)
	if len(a) != msgSize || len(b) != msgSize || string(a) == string(b) {
		t.Fatalf("payloads: %d and %d bytes, equal %v", len(a), len(b), string(a) == string(b))
	}
	for _, i := range []int{0, 1 << 20, 1<<31 - 1} {
		if len(p.get(i)) != msgSize {
			t.Fatalf("payload %d has %d bytes", i, len(p.get(i)))
		}
	}
}

// The NATS configuration is what the docs promise: file storage with an
// fsync before every acknowledgement, and routes to all three servers.
func TestNATSConfig(t *testing.T) {
	c := natsConfig("n2", "127.0.0.1:4301", "127.0.0.1:6301", []string{"127.0.0.1:6300", "127.0.0.1:6301", "127.0.0.1:6302"}, "/data/n2")
	for _, want := range []string{
		"server_name: n2", "host: 127.0.0.1\nport: 4301", "sync_interval: always", `store_dir: "/data/n2"`,
		"port: 6301", "nats-route://127.0.0.1:6300", "nats-route://127.0.0.1:6302",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("config lacks %q:\n%s", want, c)
		}
	}
}
