package main

import (
	"testing"

	"github.com/sluicehq/sluice/dataplane/replicas"
)

// A broker's seed rate defaults to replicas.DefaultSeedRate, 0 means
// unlimited and reaches the broker's config, and a negative one is refused.
func TestBrokerSeedRateConfig(t *testing.T) {
	seedRate := func(c Config) (int64, int64) { return c.SeedRate, brokerConfigOf(c).SeedRate }
	testBrokerSettings(t, "seed rate", seedRate, []brokerSettingCase[int64]{
		{"default", nil, replicas.DefaultSeedRate},
		{"unlimited", []string{"-seed-rate", "0"}, 0},
		{"set", []string{"-seed-rate", "1048576"}, 1 << 20},
	})
	if _, err := loadBrokerConfig("-seed-rate", "-5"); err == nil {
		t.Fatal("accepted a negative seed rate")
	}
}
