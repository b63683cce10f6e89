package main

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DiskSampler records, every interval, what each broker stores on disk:
// all of its data directory, and the part of it in Raft side files
// (raft.entries), for the soak's bounded-disk table.
type DiskSampler struct {
	dirs  []string // each broker's data directory
	start time.Time
	stop  chan struct{}
	done  chan struct{}
	// mu guards rows.
	mu   sync.Mutex
	rows []diskRow
}

type diskRow struct {
	at      time.Duration
	total   []int64 // per broker, bytes under its data directory
	entries []int64 // per broker, bytes of its raft.entries files
}

// StartDiskSampler samples dirs now and every interval until Stop.
func StartDiskSampler(dirs []string, interval time.Duration) *DiskSampler {
	d := &DiskSampler{dirs: dirs, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			d.sample()
			select {
			case <-d.stop:
				return
			case <-t.C:
			}
		}
	}()
	return d
}

// Stop takes a last sample and stops the sampler; it waits for it.
func (d *DiskSampler) Stop() {
	close(d.stop)
	<-d.done
	d.sample()
}

func (d *DiskSampler) sample() {
	r := diskRow{at: time.Since(d.start), total: make([]int64, len(d.dirs)), entries: make([]int64, len(d.dirs))}
	for i, dir := range d.dirs {
		// Files come and go while the broker runs (segments deleted,
		// the entries file rewritten): a file gone between listing and
		// stat is skipped, not an error.
		_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			info, err := e.Info()
			if err != nil {
				return nil
			}
			r.total[i] += info.Size()
			if e.Name() == "raft.entries" {
				r.entries[i] += info.Size()
			}
			return nil
		})
	}
	d.mu.Lock()
	d.rows = append(d.rows, r)
	d.mu.Unlock()
}

// Max answers the largest total any broker had in any sample.
func (d *DiskSampler) Max() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var m int64
	for _, r := range d.rows {
		for _, v := range r.total {
			m = max(m, v)
		}
	}
	return m
}

// Write writes the samples as a Markdown table: per broker, MiB on disk
// and MiB of it in raft.entries.
func (d *DiskSampler) Write(out io.Writer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	head := []string{"elapsed"}
	for i := range d.dirs {
		head = append(head, fmt.Sprintf("b%d disk MiB", i+1), fmt.Sprintf("b%d raft.entries MiB", i+1))
	}
	fmt.Fprintf(out, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	mib := func(v int64) string { return fmt.Sprintf("%.1f", float64(v)/(1<<20)) }
	for _, r := range d.rows {
		cells := []string{r.at.Round(time.Second).String()}
		for i := range d.dirs {
			cells = append(cells, mib(r.total[i]), mib(r.entries[i]))
		}
		fmt.Fprintf(out, "| %s |\n", strings.Join(cells, " | "))
	}
}
