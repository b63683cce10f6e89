package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// Report says what Open found in the journal and wrote back.
type Report struct {
	Records  int   // records that counted, in both files
	Replayed int   // writes applied to their files
	Fenced   int   // writes passed over: a later fence names their directory
	Gone     int   // writes passed over: their directory no longer exists
	Bytes    int64 // bytes written back
}

// replay writes the records of the journal files (their whole contents)
// back into the files under root, in generation order, and makes them
// durable. A write is passed over when a later fence names its directory
// (its bytes were synced in their own file before the fence) or when its
// directory is gone (the log was closed, fenced and removed); a file that
// is missing in a directory that exists is created, since a segment
// created after the last directory sync may not have survived.
func replay(root string, contents [][]byte) (Report, error) {
	type file struct {
		gen  uint64
		recs []record
	}
	var fs []file
	for _, b := range contents {
		if gen, recs := decodeFile(b); gen != 0 {
			fs = append(fs, file{gen, recs})
		}
	}
	slices.SortFunc(fs, func(a, b file) int { return compareGen(a.gen, b.gen) })
	var recs []record
	for _, f := range fs {
		recs = append(recs, f.recs...)
	}
	var rep Report
	rep.Records = len(recs)
	lastFence := map[string]int{}
	for i, r := range recs {
		if r.kind == kindFence {
			lastFence[r.path] = i
		}
	}
	w := newWriteBack(root)
	defer w.close()
	for i, r := range recs {
		if r.kind != kindWrite {
			continue
		}
		if f, ok := lastFence[filepath.Dir(r.path)]; ok && f > i {
			rep.Fenced++
			continue
		}
		written, err := w.write(r)
		if err != nil {
			return rep, err
		}
		if !written {
			rep.Gone++
			continue
		}
		rep.Replayed++
		rep.Bytes += int64(len(r.data))
	}
	return rep, w.sync()
}

func compareGen(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeBack holds the files a replay writes to until it syncs them.
type writeBack struct {
	root  string
	files map[string]*os.File
	dirs  map[string]bool
}

func newWriteBack(root string) *writeBack {
	return &writeBack{root: root, files: map[string]*os.File{}, dirs: map[string]bool{}}
}

// write applies one write record; false if its directory is gone.
func (w *writeBack) write(r record) (bool, error) {
	f, ok := w.files[r.path]
	if !ok {
		dir := filepath.Join(w.root, filepath.Dir(r.path))
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("journal replay: %w", err)
		}
		var err error
		f, err = os.OpenFile(filepath.Join(w.root, r.path), os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return false, fmt.Errorf("journal replay: %w", err)
		}
		w.files[r.path] = f
		w.dirs[dir] = true
	}
	if _, err := f.WriteAt(r.data, r.off); err != nil {
		return false, fmt.Errorf("journal replay: write %s at %d: %w", r.path, r.off, err)
	}
	return true, nil
}

// sync makes every file written and every directory that holds one durable.
func (w *writeBack) sync() error {
	for p, f := range w.files {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("journal replay: sync %s: %w", p, err)
		}
	}
	for d := range w.dirs {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("journal replay: %w", err)
		}
	}
	return nil
}

func (w *writeBack) close() {
	for _, f := range w.files {
		f.Close()
	}
}

func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Fsync(fd)
		unix.Close(fd)
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
