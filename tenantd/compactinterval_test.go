package main

import (
	"testing"
	"time"
)

// A broker's cleaner interval is unset by default (replicas takes its
// DefaultCompactInterval), -compact-interval reaches the broker's config,
// and a negative one is refused.
func TestBrokerCompactIntervalConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want time.Duration
	}{
		{"default", nil, 0},
		{"set", []string{"-compact-interval", "3s"}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadBrokerConfig(tc.args...)
			if err != nil || cfg.CompactInterval != tc.want || brokerConfigOf(cfg).CompactInterval != tc.want {
				t.Fatalf("compact interval %v (broker %v), want %v: %v", cfg.CompactInterval, brokerConfigOf(cfg).CompactInterval, tc.want, err)
			}
		})
	}
	if _, err := loadBrokerConfig("-compact-interval", "-1s"); err == nil {
		t.Fatal("accepted a negative compact interval")
	}
}
