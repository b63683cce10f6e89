package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux architecture Go supports (the kernel exports a
// fixed USER_HZ to user space whatever its internal HZ), and reading it
// with sysconf(_SC_CLK_TCK) would need cgo.
const clockTicks = 100

// parseStatCPU returns utime+stime, in clock ticks, from the contents of a
// /proc/<pid>/stat file. The command name (field 2) is in parentheses and
// may itself hold spaces and parentheses, so fields are counted from the
// last ')': utime and stime are fields 14 and 15 of the whole line.
func parseStatCPU(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("parse /proc stat: no ')' after the command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc stat: %d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc stat utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc stat stime: %w", err)
	}
	return utime + stime, nil
}

// cpuSeconds returns the user+system CPU time, in seconds, that the
// processes pids have used so far (all their threads; not their children).
func cpuSeconds(pids []int) (float64, error) {
	var ticks uint64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("read cpu time of pid %d: %w", pid, err)
		}
		t, err := parseStatCPU(string(b))
		if err != nil {
			return 0, fmt.Errorf("pid %d: %w", pid, err)
		}
		ticks += t
	}
	return float64(ticks) / clockTicks, nil
}

// perGB is seconds of CPU per 10^9 bytes moved, or 0 if nothing moved.
func perGB(cpuSec float64, bytes int64) float64 {
	if bytes <= 0 {
		return 0
	}
	return cpuSec / (float64(bytes) / 1e9)
}

// parseSchedstat returns the run-queue wait, in nanoseconds, from the
// contents of a /proc/<pid>/task/<tid>/schedstat file: "on-CPU ns,
// waiting-to-run ns, timeslices".
func parseSchedstat(s string) (uint64, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0, fmt.Errorf("parse schedstat %q: want 3 fields", s)
	}
	w, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse schedstat wait: %w", err)
	}
	return w, nil
}

// runQueueWait returns how long, in seconds, the threads of pids have so
// far been runnable but waiting for a CPU: what other load on the machine
// (or the servers' own threads) cost them. Threads that have exited are
// not counted, so compare values over an interval, as for cpuSeconds.
func runQueueWait(pids []int) (float64, error) {
	var ns uint64
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return 0, fmt.Errorf("list threads of pid %d: %w", pid, err)
		}
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
			if err != nil {
				continue // the thread exited meanwhile
			}
			w, err := parseSchedstat(string(b))
			if err != nil {
				return 0, fmt.Errorf("pid %d thread %s: %w", pid, t.Name(), err)
			}
			ns += w
		}
	}
	return float64(ns) / 1e9, nil
}

// cpuAndWait returns cpuSeconds and runQueueWait of pids, read together.
func cpuAndWait(pids []int) (cpuSec, waitSec float64, err error) {
	if cpuSec, err = cpuSeconds(pids); err != nil {
		return 0, 0, err
	}
	if waitSec, err = runQueueWait(pids); err != nil {
		return 0, 0, err
	}
	return cpuSec, waitSec, nil
}
