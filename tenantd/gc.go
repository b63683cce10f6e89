package main

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
)

// The broker's garbage collector settings (Config.GCPercent and
// Config.MemoryLimit). An idle broker's CPU is mostly its Raft groups'
// goroutines waking for heartbeats, and a fair part of the rest is the
// garbage collector scanning their stacks (about 20 goroutines per
// partition across a 3-broker cell) on every cycle, however small the
// heap: Go's default GOGC of 100 starts a cycle each time the heap has
// grown by its live size (and its stacks') again. defaultGCPercent lets
// it grow by twice that, halving the cycles for a peak heap of about 3×
// the live one instead of 2×. See docs/benchmarks.md, "GC percent 200 and
// no per-peer Raft telemetry", for what it saves. Only the broker role
// applies these settings, and only it accepts them.
const defaultGCPercent = 200

// gcSettings is what a broker applies to the Go runtime at start.
type gcSettings struct {
	// percent is debug.SetGCPercent's argument (-1: off); set reports
	// whether the config gave it, else the default applies unless the
	// environment's GOGC does.
	percent    int
	percentSet bool
	// limit is debug.SetMemoryLimit's argument in bytes; 0 leaves the
	// runtime's (GOMEMLIMIT, or none).
	limit int64
}

// parseGCPercent reads a GC percent: "off" or a whole number from 10 to
// 10000, as GOGC takes it.
func parseGCPercent(s string) (int, error) {
	if strings.EqualFold(s, "off") {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 10 || n > 10000 {
		return 0, fmt.Errorf("gc percent %q: want off or a whole number from 10 to 10000, like %d", s, defaultGCPercent)
	}
	return n, nil
}

// memorySuffixes are the units parseMemoryLimit takes, longest first.
var memorySuffixes = []struct {
	name  string
	scale int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// minMemoryLimit is the lowest memory limit parseMemoryLimit accepts: a
// broker's heap is above it before it serves one partition, so a lower
// limit would only make the collector run without pause.
const minMemoryLimit = 64 << 20

// parseMemoryLimit reads a soft memory limit: a whole number of bytes
// with an optional B, KiB, MiB, GiB or TiB suffix (as GOMEMLIMIT takes
// it), at least 64MiB.
func parseMemoryLimit(s string) (int64, error) {
	bad := fmt.Errorf("memory limit %q: want a whole number of bytes with an optional KiB, MiB, GiB or TiB suffix, at least 64MiB, like 4GiB", s)
	num, scale := s, int64(1)
	for _, u := range memorySuffixes {
		if strings.HasSuffix(s, u.name) {
			num, scale = strings.TrimSuffix(s, u.name), u.scale
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/scale || n*scale < minMemoryLimit {
		return 0, bad
	}
	return n * scale, nil
}

// gcSettings parses the config's GC settings.
func (c Config) gcSettings() (gcSettings, error) {
	var s gcSettings
	if c.GCPercent != "" {
		p, err := parseGCPercent(c.GCPercent)
		if err != nil {
			return s, err
		}
		s.percent, s.percentSet = p, true
	}
	if c.MemoryLimit != "" {
		l, err := parseMemoryLimit(c.MemoryLimit)
		if err != nil {
			return s, err
		}
		s.limit = l
	}
	if s.percentSet && s.percent < 0 && s.limit == 0 {
		return s, errors.New("gc percent off needs a memory limit (-memory-limit), or the heap grows without bound")
	}
	return s, nil
}

// applyGC sets the runtime's GC percent and memory limit from s: the GC
// percent given, else defaultGCPercent unless the environment sets GOGC
// (the runtime read it already); the memory limit when given. It logs
// what the process runs with.
func applyGC(s gcSettings, getenv func(string) string, log *slog.Logger) {
	percent, from := s.percent, "config"
	switch {
	case s.percentSet:
		debug.SetGCPercent(percent)
	case getenv("GOGC") != "":
		percent, from = debug.SetGCPercent(-1), "GOGC"
		debug.SetGCPercent(percent) // read back, unchanged
	default:
		percent, from = defaultGCPercent, "default"
		debug.SetGCPercent(percent)
	}
	if s.limit > 0 {
		debug.SetMemoryLimit(s.limit)
	}
	log.Info("garbage collector", "gc_percent", percent, "gc_percent_from", from, "memory_limit_bytes", debug.SetMemoryLimit(-1))
}
