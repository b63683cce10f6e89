package testkit

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// CrashImage copies the tree under root into a new temporary directory as
// a power cut would leave it: a file named in durable keeps only that many
// bytes (what fdatasync made durable in the file itself), and one whose
// durable length is 0 is left out, as a file created since its directory
// was last synced may be; every other file is copied whole. Crash tests
// reopen the copy while the original stays open.
func CrashImage(t testing.TB, root string, durable map[string]int64) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		n, cut := durable[path]
		if !cut {
			n = fi.Size()
		} else if n == 0 {
			return nil
		}
		return copyPrefix(path, to, n)
	})
	if err != nil {
		t.Fatalf("crash image of %s: %v", root, err)
	}
	return dst
}

func copyPrefix(from, to string, n int64) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	_, err = io.CopyN(out, src, n)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
