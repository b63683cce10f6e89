package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// The GC percent and memory limit parse as GOGC and GOMEMLIMIT write
// them, and anything else is refused with an error naming the setting.
func TestParseGCSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		percent string
		limit   string
		want    gcSettings
		err     string // substring of the error; "" for none
	}{
		{"nothing set", "", "", gcSettings{}, ""},
		{"percent", "400", "", gcSettings{percent: 400, percentSet: true}, ""},
		{"percent lowest", "10", "", gcSettings{percent: 10, percentSet: true}, ""},
		{"off with a limit", "off", "2GiB", gcSettings{percent: -1, percentSet: true, limit: 2 << 30}, ""},
		{"OFF", "OFF", "1GiB", gcSettings{percent: -1, percentSet: true, limit: 1 << 30}, ""},
		{"limit in bytes", "", "134217728", gcSettings{limit: 128 << 20}, ""},
		{"limit with B", "", "67108864B", gcSettings{limit: 64 << 20}, ""},
		{"limit in KiB", "", "65536KiB", gcSettings{limit: 64 << 20}, ""},
		{"limit in MiB", "", "512MiB", gcSettings{limit: 512 << 20}, ""},
		{"limit in TiB", "", "1TiB", gcSettings{limit: 1 << 40}, ""},
		{"percent too low", "5", "", gcSettings{}, `gc percent "5": want off or a whole number from 10 to 10000`},
		{"percent too high", "20000", "", gcSettings{}, `gc percent "20000"`},
		{"percent negative", "-1", "", gcSettings{}, `gc percent "-1"`},
		{"percent not a number", "lots", "", gcSettings{}, `gc percent "lots"`},
		{"off without a limit", "off", "", gcSettings{}, "gc percent off needs a memory limit"},
		{"limit too small", "", "32MiB", gcSettings{}, `memory limit "32MiB": want a whole number of bytes`},
		{"limit zero", "", "0", gcSettings{}, `memory limit "0"`},
		{"limit negative", "", "-1GiB", gcSettings{}, `memory limit "-1GiB"`},
		{"limit decimal unit", "", "4GB", gcSettings{}, `memory limit "4GB"`},
		{"limit fraction", "", "1.5GiB", gcSettings{}, `memory limit "1.5GiB"`},
		{"limit overflows", "", "9999999999TiB", gcSettings{}, `memory limit "9999999999TiB"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Config{GCPercent: tc.percent, MemoryLimit: tc.limit}.gcSettings()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// The settings layer like every other (file, environment, flags) and a
// bad value stops the broker's config from loading.
func TestBrokerGCConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(file, []byte(`{"gc_percent":"300","memory_limit":"1GiB"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		args           []string
		env            map[string]string
		percent, limit string
	}{
		{"unset", nil, nil, "", ""},
		{"file", []string{"-config", file}, nil, "300", "1GiB"},
		{"environment over file", []string{"-config", file}, map[string]string{"SLUICE_GC_PERCENT": "150", "SLUICE_MEMORY_LIMIT": "2GiB"}, "150", "2GiB"},
		{"flags over environment", []string{"-config", file, "-gc-percent", "off", "-memory-limit", "3GiB"}, map[string]string{"SLUICE_GC_PERCENT": "150"}, "off", "3GiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig("broker", brokerArgs(tc.args...), func(k string) string { return tc.env[k] })
			if err != nil || cfg.GCPercent != tc.percent || cfg.MemoryLimit != tc.limit {
				t.Fatalf("got gc percent %q, memory limit %q, %v", cfg.GCPercent, cfg.MemoryLimit, err)
			}
		})
	}
	for _, args := range [][]string{{"-gc-percent", "1"}, {"-memory-limit", "lots"}, {"-gc-percent", "off"}} {
		if _, err := loadBrokerConfig(args...); err == nil {
			t.Errorf("accepted %v", args)
		}
	}
	// Other roles do not apply them, so they refuse them.
	_, err := loadConfig("controlplane", []string{"-database-url", "x", "-gc-percent", "300"}, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "broker settings") {
		t.Fatalf("controlplane with a gc percent: %v", err)
	}
	_, err = loadConfig("dev", nil, func(k string) string { return map[string]string{"SLUICE_MEMORY_LIMIT": "1GiB"}[k] })
	if err == nil || !strings.Contains(err.Error(), "broker settings") {
		t.Fatalf("dev with a memory limit: %v", err)
	}
}

// applyGC changes the running process's collector: the configured
// percent, else the default unless GOGC is set, and the memory limit.
func TestApplyGC(t *testing.T) {
	oldPercent := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	})
	for _, tc := range []struct {
		name        string
		s           gcSettings
		gogc        string
		wantPercent int
		wantLimit   int64
		wantFrom    string
	}{
		{"default", gcSettings{}, "", defaultGCPercent, oldLimit, "gc_percent_from=default"},
		{"GOGC stands", gcSettings{}, "100", 100, oldLimit, "gc_percent_from=GOGC"},
		{"config over GOGC", gcSettings{percent: 350, percentSet: true}, "100", 350, oldLimit, "gc_percent_from=config"},
		{"off with a limit", gcSettings{percent: -1, percentSet: true, limit: 3 << 30}, "", -1, 3 << 30, "memory_limit_bytes=3221225472"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(oldLimit)
			var logs bytes.Buffer
			applyGC(tc.s, func(k string) string {
				if k == "GOGC" {
					return tc.gogc
				}
				return ""
			}, slog.New(slog.NewTextHandler(&logs, nil)))
			gotPercent := debug.SetGCPercent(100)
			gotLimit := debug.SetMemoryLimit(oldLimit)
			if gotPercent != tc.wantPercent || gotLimit != tc.wantLimit {
				t.Fatalf("runtime has gc percent %d, memory limit %d; want %d, %d", gotPercent, gotLimit, tc.wantPercent, tc.wantLimit)
			}
			if !strings.Contains(logs.String(), tc.wantFrom) {
				t.Fatalf("log %q does not say %q", logs.String(), tc.wantFrom)
			}
		})
	}
}
