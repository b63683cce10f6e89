package main

import (
	"testing"
	"time"
)

// A broker's cleaner interval is unset by default (replicas takes its
// DefaultCompactInterval), -compact-interval reaches the broker's config,
// and a negative one is refused.
func TestBrokerCompactIntervalConfig(t *testing.T) {
	interval := func(c Config) (time.Duration, time.Duration) {
		return c.CompactInterval, brokerConfigOf(c).CompactInterval
	}
	testBrokerSettings(t, "compact interval", interval, []brokerSettingCase[time.Duration]{
		{"default", nil, 0},
		{"set", []string{"-compact-interval", "3s"}, 3 * time.Second},
	})
	if _, err := loadBrokerConfig("-compact-interval", "-1s"); err == nil {
		t.Fatal("accepted a negative compact interval")
	}
}
