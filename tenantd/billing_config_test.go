package main

import (
	"testing"
	"time"
)

// TestBillingConfig: the billing worker's settings layer like every
// setting (file, environment, flags); the embedded worker is on unless
// turned off; the Stripe key comes from the environment only; the
// billing role needs a database and nothing else.
func TestBillingConfig(t *testing.T) {
	file := configFile(t, `{"database_url":"postgres://file","billing_worker":false,"billing_interval":"5s"}`)
	for _, tc := range []struct {
		name     string
		cmd      string
		args     []string
		env      map[string]string
		worker   bool
		interval time.Duration
		key, url string
	}{
		{"controlplane defaults", "controlplane", []string{"-database-url", "x"}, nil, true, defaultBillingInterval, "", ""},
		{"dev defaults", "dev", nil, nil, true, defaultBillingInterval, "", ""},
		{"file", "controlplane", []string{"-config", file}, nil, false, 5 * time.Second, "", ""},
		{"environment over file", "controlplane", []string{"-config", file},
			map[string]string{"SLUICE_BILLING_WORKER": "true", "SLUICE_BILLING_INTERVAL": "2s", "SLUICE_STRIPE_KEY": "sk_test", "SLUICE_STRIPE_URL": "http://127.0.0.1:1"},
			true, 2 * time.Second, "sk_test", "http://127.0.0.1:1"},
		{"flags over environment", "controlplane", []string{"-config", file, "-billing-worker=false", "-billing-interval", "1s", "-stripe-url", "http://127.0.0.1:2"},
			map[string]string{"SLUICE_BILLING_WORKER": "true", "SLUICE_STRIPE_URL": "http://127.0.0.1:1"},
			false, time.Second, "", "http://127.0.0.1:2"},
		{"billing role", "billing", []string{"-database-url", "x", "-health-listen", "127.0.0.1:0"}, map[string]string{"SLUICE_STRIPE_KEY": "sk_test"},
			true, defaultBillingInterval, "sk_test", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(tc.cmd, tc.args, func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BillingWorker != tc.worker || cfg.billingInterval() != tc.interval || cfg.StripeKey != tc.key || cfg.StripeURL != tc.url {
				t.Fatalf("worker %v interval %v key %q url %q, want %v %v %q %q", cfg.BillingWorker, cfg.billingInterval(), cfg.StripeKey, cfg.StripeURL,
					tc.worker, tc.interval, tc.key, tc.url)
			}
		})
	}
	keyFile := configFile(t, `{"database_url":"x","stripe_key":"sk_live"}`)
	for _, tc := range []struct {
		name string
		cmd  string
		args []string
		env  map[string]string
	}{
		{"billing without a database", "billing", nil, nil},
		{"interval too short", "billing", []string{"-database-url", "x", "-billing-interval", "1ms"}, nil},
		{"interval not a duration", "controlplane", []string{"-database-url", "x", "-billing-interval", "often"}, nil},
		{"worker not a boolean", "controlplane", []string{"-database-url", "x"}, map[string]string{"SLUICE_BILLING_WORKER": "maybe"}},
		{"bad health address", "billing", []string{"-database-url", "x", "-health-listen", "nope"}, nil},
		{"the key in a file", "billing", []string{"-config", keyFile}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := loadConfig(tc.cmd, tc.args, func(k string) string { return tc.env[k] }); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
