package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// owner counts the journal's requests to sync its files.
type owner struct{ syncs atomic.Int64 }

func (o *owner) SyncForJournal() error { o.syncs.Add(1); return nil }

func open(t *testing.T, root string, size int64) (*Journal, Report) {
	t.Helper()
	j, rep, err := Open(root, Options{FileBytes: size})
	if err != nil {
		t.Fatal(err)
	}
	return j, rep
}

func mkdir(t *testing.T, root, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
		t.Fatal(err)
	}
}

func appendOne(t *testing.T, j *Journal, o Owner, path string, off int64, data string) {
	t.Helper()
	if _, err := j.Append([]Entry{{Owner: o, Writes: []Write{{Path: path, Off: off, Data: []byte(data)}}}}); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReplayWritesBack: records written and never synced in their own
// files come back at the next Open, in order, in files it creates where
// their directory exists; a directory that is gone is passed over.
func TestReplayWritesBack(t *testing.T) {
	root := t.TempDir()
	mkdir(t, root, "p/log")
	mkdir(t, root, "gone")
	j, _ := open(t, root, 1<<20)
	o := &owner{}
	appendOne(t, j, o, "p/log/a", 0, "hello ")
	appendOne(t, j, o, "p/log/a", 6, "world")
	appendOne(t, j, o, "p/log/a", 0, "H")
	appendOne(t, j, o, "gone/b", 0, "lost")
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "gone")); err != nil {
		t.Fatal(err)
	}
	j, rep := open(t, root, 1<<20)
	defer j.Close()
	if got := readFile(t, filepath.Join(root, "p/log/a")); got != "Hello world" {
		t.Fatalf("replayed file holds %q", got)
	}
	if rep.Records != 4 || rep.Replayed != 3 || rep.Gone != 1 || rep.Bytes != 12 {
		t.Fatalf("report %+v", rep)
	}
	// The new generation starts empty: a second Open replays nothing.
	j.Close()
	j, rep = open(t, root, 1<<20)
	defer j.Close()
	if rep.Records != 0 {
		t.Fatalf("second open replayed %+v", rep)
	}
}

// TestFenceDropsEarlierRecords: after a fence of a directory, its earlier
// records are not replayed (the files may have been truncated or replaced
// since), later ones are, and other directories are untouched.
func TestFenceDropsEarlierRecords(t *testing.T) {
	root := t.TempDir()
	mkdir(t, root, "a")
	mkdir(t, root, "b")
	j, _ := open(t, root, 1<<20)
	o := &owner{}
	appendOne(t, j, o, "a/seg", 0, "stale-stale")
	appendOne(t, j, o, "b/seg", 0, "kept")
	if err := j.Fence("a"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a/seg"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	appendOne(t, j, o, "a/seg", 3, "er")
	j.Close()
	j, rep := open(t, root, 1<<20)
	defer j.Close()
	if got := readFile(t, filepath.Join(root, "a/seg")); got != "newer" {
		t.Fatalf("fenced file holds %q", got)
	}
	if got := readFile(t, filepath.Join(root, "b/seg")); got != "kept" {
		t.Fatalf("other directory holds %q", got)
	}
	if rep.Fenced != 1 || rep.Replayed != 2 {
		t.Fatalf("report %+v", rep)
	}
}

// TestValidDropsEntry: an entry whose Valid says no is not written and is
// reported so; the others in the same call are.
func TestValidDropsEntry(t *testing.T) {
	root := t.TempDir()
	mkdir(t, root, "d")
	j, _ := open(t, root, 1<<20)
	o := &owner{}
	wrote, err := j.Append([]Entry{
		{Owner: o, Valid: func() bool { return false }, Writes: []Write{{Path: "d/x", Data: []byte("no")}}},
		{Owner: o, Valid: func() bool { return true }, Writes: []Write{{Path: "d/y", Data: []byte("yes")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if wrote[0] || !wrote[1] {
		t.Fatalf("wrote %v", wrote)
	}
	j.Close()
	j, rep := open(t, root, 1<<20)
	defer j.Close()
	if _, err := os.Stat(filepath.Join(root, "d/x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dropped entry was replayed: %v", err)
	}
	if rep.Replayed != 1 {
		t.Fatalf("report %+v", rep)
	}
}

// TestSwitchSyncsOwners: when a file fills, the journal continues in the
// other under a new generation and has the owners of the full one sync
// their files before it is used again; records of a file's earlier use
// are never replayed, its current ones are.
func TestSwitchSyncsOwners(t *testing.T) {
	root := t.TempDir()
	mkdir(t, root, "d")
	const size = 64 << 10
	j, _ := open(t, root, size)
	o := &owner{}
	chunk := bytes.Repeat([]byte{'x'}, 1000)
	var off int64
	for range 200 { // about three files' worth
		if _, err := j.Append([]Entry{{Owner: o, Writes: []Write{{Path: "d/f", Off: off, Data: chunk}}}}); err != nil {
			t.Fatal(err)
		}
		off += int64(len(chunk))
	}
	appendOne(t, j, o, "d/g", 0, "last")
	st := j.Stats()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Checkpoints < 3 || o.syncs.Load() != st.Checkpoints {
		t.Fatalf("stats %+v, owner synced %d times", st, o.syncs.Load())
	}
	// Only what the current and the previous file hold comes back.
	j, rep := open(t, root, size)
	defer j.Close()
	if rep.Replayed == 0 || rep.Replayed >= 200 {
		t.Fatalf("replayed %d writes of 201; the files hold less than two files' worth", rep.Replayed)
	}
	if got := readFile(t, filepath.Join(root, "d/g")); got != "last" {
		t.Fatalf("last record replayed as %q", got)
	}
}

// TestTooLarge: a round larger than a file is refused whole.
func TestTooLarge(t *testing.T) {
	root := t.TempDir()
	j, _ := open(t, root, 64<<10)
	defer j.Close()
	_, err := j.Append([]Entry{{Owner: &owner{}, Writes: []Write{{Path: "d/f", Data: make([]byte, 64<<10)}}}})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

// TestBadPathsRefused: a path that could leave the data directory is
// refused before anything is written.
func TestBadPathsRefused(t *testing.T) {
	root := t.TempDir()
	j, _ := open(t, root, 64<<10)
	defer j.Close()
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../../x", "a//b", "."} {
		if _, err := j.Append([]Entry{{Owner: &owner{}, Writes: []Write{{Path: p, Data: []byte("x")}}}}); !errors.Is(err, errBadPath) {
			t.Errorf("append to %q: %v", p, err)
		}
		if err := j.Fence(p); !errors.Is(err, errBadPath) {
			t.Errorf("fence %q: %v", p, err)
		}
	}
}

// TestTornTailEndsReplay: a record cut short by a crash, and everything
// after it, is not replayed; what came before is.
func TestTornTailEndsReplay(t *testing.T) {
	root := t.TempDir()
	mkdir(t, root, "d")
	j, _ := open(t, root, 1<<20)
	o := &owner{}
	appendOne(t, j, o, "d/f", 0, "first")
	pos := j.pos
	appendOne(t, j, o, "d/f", 5, "-second")
	j.Close()
	f, err := os.OpenFile(filepath.Join(root, "journal", "0"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, pos+20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	j, rep := open(t, root, 1<<20)
	defer j.Close()
	if got := readFile(t, filepath.Join(root, "d/f")); got != "first" {
		t.Fatalf("replayed %q", got)
	}
	if rep.Records != 1 {
		t.Fatalf("report %+v", rep)
	}
}

// TestFencesAloneSwitchFiles: a journal that takes only fences moves to
// its other file when one fills, as data rounds do, instead of running
// out of room.
func TestFencesAloneSwitchFiles(t *testing.T) {
	root := t.TempDir()
	j, _ := open(t, root, 64<<10)
	defer j.Close()
	for i := range 2000 { // 220 bytes each: several files
		if err := j.Fence(fmt.Sprintf("d/%0200d", i)); err != nil {
			t.Fatalf("fence %d: %v", i, err)
		}
	}
	if st := j.Stats(); st.Checkpoints == 0 || st.Fences != 2000 {
		t.Fatalf("stats %+v", st)
	}
}

// TestManyWritesOneRound: a round of more writes than one pwritev takes
// (two buffers a write, IOV_MAX 1024) is written whole and replays whole.
func TestManyWritesOneRound(t *testing.T) {
	root := t.TempDir()
	mkdir(t, root, "d")
	j, _ := open(t, root, 1<<20)
	var ws []Write
	for i := range 700 {
		ws = append(ws, Write{Path: "d/f", Off: int64(i) * 4, Data: fmt.Appendf(nil, "%04d", i)})
	}
	if _, err := j.Append([]Entry{{Owner: &owner{}, Writes: ws}}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j, rep := open(t, root, 1<<20)
	defer j.Close()
	got := readFile(t, filepath.Join(root, "d/f"))
	if rep.Replayed != 700 || len(got) != 2800 || got[:8] != "00000001" || got[2796:] != "0699" {
		t.Fatalf("replayed %+v, file of %d bytes: %.12q…%q", rep, len(got), got, got[max(0, len(got)-4):])
	}
}
