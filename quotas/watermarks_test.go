package quotas

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestWatermarkTransitions(t *testing.T) {
	type step struct {
		usedPct int64
		want    DiskState
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"fills up", []step{{50, DiskOK}, {79, DiskOK}, {80, DiskSoft}, {89, DiskSoft}, {90, DiskHard}, {99, DiskHard}}},
		{"jumps straight to hard", []step{{10, DiskOK}, {95, DiskHard}}},
		{"soft hysteresis", []step{{80, DiskSoft}, {79, DiskSoft}, {78, DiskSoft}, {80, DiskSoft}, {77, DiskOK}, {79, DiskOK}, {80, DiskSoft}}},
		{"hard hysteresis", []step{{90, DiskHard}, {89, DiskHard}, {88, DiskHard}, {87, DiskSoft}, {89, DiskSoft}, {90, DiskHard}}},
		{"hard recovers to ok only below soft", []step{{92, DiskHard}, {85, DiskSoft}, {79, DiskSoft}, {77, DiskOK}}},
		{"hard straight to ok", []step{{92, DiskHard}, {40, DiskOK}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWatermarks(WatermarkConfig{})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				if got := w.Update(s.usedPct*1_000, 100_000); got != s.want {
					t.Fatalf("step %d at %d%%: state %v, want %v", i, s.usedPct, got, s.want)
				}
				if got := w.PlacePartitions(); got != (s.want == DiskOK) {
					t.Errorf("step %d: PlacePartitions = %v in %v", i, got, s.want)
				}
				if got := w.ThrottleWriters(); got != (s.want != DiskOK) {
					t.Errorf("step %d: ThrottleWriters = %v in %v", i, got, s.want)
				}
				if err := w.AdmitProduce(); (err != nil) != (s.want == DiskHard) {
					t.Errorf("step %d: AdmitProduce = %v in %v", i, err, s.want)
				}
			}
		})
	}
}

func TestWatermarkRejection(t *testing.T) {
	w, err := NewWatermarks(WatermarkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w.Update(913, 1000)
	err = w.AdmitProduce()
	var full *DiskFullError
	if !errors.As(err, &full) || !full.Retriable() || !errors.Is(err, ErrDiskFull) {
		t.Fatalf("AdmitProduce = %#v, want a retriable *DiskFullError", err)
	}
	for _, part := range []string{"disk", "91.3% full", "90% hard watermark", "below 88%", "retry"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("reason %q does not say %q", err, part)
		}
	}
	if w.Update(0, 0) != DiskHard {
		t.Error("a zero total changed the state")
	}
}

func TestWatermarkConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  WatermarkConfig
		ok   bool
	}{
		{"defaults", WatermarkConfig{}, true},
		{"custom", WatermarkConfig{Soft: 0.7, Hard: 0.95, Margin: 0.05}, true},
		{"soft above hard", WatermarkConfig{Soft: 0.95, Hard: 0.9}, false},
		{"hard above 100%", WatermarkConfig{Hard: 1.2}, false},
		{"negative margin", WatermarkConfig{Margin: -0.1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewWatermarks(tc.cfg); (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestHeaviestWriters(t *testing.T) {
	rates := map[string]float64{"a": 50, "b": 30, "c": 10, "d": 10, "idle": 0}
	for _, tc := range []struct {
		name     string
		fraction float64
		want     []string
	}{
		{"none", 0, nil},
		{"heaviest alone covers half", 0.5, []string{"a"}},
		{"two for 60%", 0.6, []string{"a", "b"}},
		{"ties broken by id", 0.85, []string{"a", "b", "c"}},
		{"all writers, never the idle", 1, []string{"a", "b", "c", "d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HeaviestWriters(rates, tc.fraction); !slices.Equal(got, tc.want) {
				t.Fatalf("HeaviestWriters(%v) = %v, want %v", tc.fraction, got, tc.want)
			}
		})
	}
}
