package main

import (
	"testing"

	"github.com/sluicehq/sluice/dataplane/replicas"
)

// A broker's seed rate defaults to replicas.DefaultSeedRate, 0 means
// unlimited and reaches the broker's config, and a negative one is refused.
func TestBrokerSeedRateConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int64
	}{
		{"default", nil, replicas.DefaultSeedRate},
		{"unlimited", []string{"-seed-rate", "0"}, 0},
		{"set", []string{"-seed-rate", "1048576"}, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadBrokerConfig(tc.args...)
			if err != nil || cfg.SeedRate != tc.want || brokerConfigOf(cfg).SeedRate != tc.want {
				t.Fatalf("seed rate %d (broker %d), want %d: %v", cfg.SeedRate, brokerConfigOf(cfg).SeedRate, tc.want, err)
			}
		})
	}
	if _, err := loadBrokerConfig("-seed-rate", "-5"); err == nil {
		t.Fatal("accepted a negative seed rate")
	}
}
