package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	cleanCrashDirEnv  = "SLUICE_CLEAN_CRASH_DIR"
	cleanCrashAtEnv   = "SLUICE_CLEAN_CRASH_AT"
	cleanCrashModeEnv = "SLUICE_CLEAN_CRASH_MODE"

	exitCrashed  = 7 // the child stopped itself at the step it was told
	exitFinished = 3 // the child ran past every step
)

// cleanCrashParams cleans in several passes, so intermediate files exist.
func cleanCrashParams(h history, upTo int64) CleanParams {
	return CleanParams{UpTo: upTo, Now: h.endTS() + 1, DeleteRetention: time.Duration(h.endTS()-h.ts0) * time.Millisecond / 2, MaxMapBytes: 2 << 10}
}

func cleanCrashHistory() history { return randomHistory(9, 250, 80, true) }

// TestCleanCrash runs a cleaning in a child process that exits (like a
// kill: no deferred cleanup) at its n-th step, for every n: each segment
// rewrite of each pass, before and after the swap list is committed, after
// each swapped segment, after the swap. When the list was committed, a
// second child reopens the log and exits in the middle of finishing the
// swap. The parent then reopens the log and checks that it holds either
// exactly the old segment files or exactly those a clean run produces
// (SHA-256 compared), that it serves the records the model says, that
// no file of the cleaning is left, and that cleaning again (with whatever
// the crash left of the cleaner's checkpoint) gives the clean run's files.
func TestCleanCrash(t *testing.T) {
	if dir := os.Getenv(cleanCrashDirEnv); dir != "" {
		cleanCrashChild(dir)
		return
	}
	h := cleanCrashHistory()
	tmpl := filepath.Join(t.TempDir(), "template")
	l := openLog(t, cleanConfig(t, tmpl))
	h.write(t, l)
	upTo := l.NextOffset()
	l.Close()
	oldSums := dirSums(t, tmpl)
	ref := filepath.Join(t.TempDir(), "ref")
	copyDir(t, tmpl, ref)
	lr := openLog(t, cleanConfig(t, ref))
	res, err := lr.Clean(context.Background(), cleanCrashParams(h, upTo))
	if err != nil {
		t.Fatal(err)
	}
	lr.Close()
	if res.Passes < 2 {
		t.Fatalf("reference cleaning took %d passes, want several", res.Passes)
	}
	newSums := dirSums(t, ref)
	p := cleanCrashParams(h, upTo)
	wantNew := h.model(p.Now - p.DeleteRetention.Milliseconds())
	crashAtEveryStep(t, "TestCleanCrash", "clean", tmpl, func(at int, dir string, l *Log) bool {
		// Whatever the crash left of the checkpoint, cleaning again ends
		// with the reference files.
		defer func() {
			if _, err := l.Clean(context.Background(), p); err != nil {
				t.Fatalf("crash at step %d: clean again: %v", at, err)
			}
			if !reflect.DeepEqual(dirSums(t, dir), newSums) {
				t.Fatalf("crash at step %d: cleaning again did not give the reference files", at)
			}
		}()
		switch got := dirSums(t, dir); {
		case reflect.DeepEqual(got, oldSums):
			if n := len(logRecords(t, l)); n != h.recordCount() {
				t.Fatalf("crash at step %d: old segments serve %d records, want %d", at, n, h.recordCount())
			}
			return true
		case reflect.DeepEqual(got, newSums):
			checkRecords(t, logRecords(t, l), wantNew)
			return false
		default:
			t.Fatalf("crash at step %d: segment files are neither the old nor the cleaned ones", at)
			return false
		}
	})
}

// crashAtEveryStep runs test's child in mode on a fresh copy of tmpl,
// exiting at its first step, then its second, and so on until a child
// finishes. After each crash it finishes a swap left in the directory in
// a child that itself crashes at its first step (a crashed recovery),
// reopens the log, asks check whether the files are the old ones (true)
// or the rewritten ones, and fails t if a rewritten segment or swap file
// is left. The crash points must cover both outcomes and a crashed
// recovery.
func crashAtEveryStep(t *testing.T, test, mode, tmpl string, check func(at int, dir string, l *Log) (old bool)) {
	t.Helper()
	var olds, news, resumed int
	for at := 1; ; at++ {
		dir := filepath.Join(t.TempDir(), "run")
		copyDir(t, tmpl, dir)
		code := runCrashChild(t, test, dir, mode, at)
		if code == exitFinished {
			t.Logf("%d crash points: %d left the old segments, %d the new, %d crashed again while finishing the swap", at-1, olds, news, resumed)
			if olds == 0 || news == 0 || resumed == 0 {
				t.Fatal("the crash points did not cover both outcomes and a crashed recovery")
			}
			return
		}
		if _, err := os.Stat(filepath.Join(dir, cleanSwapName)); err == nil {
			if code := runCrashChild(t, test, dir, "reopen", 1); code == exitCrashed {
				resumed++
			}
		}
		l := openLog(t, cleanConfig(t, dir))
		if check(at, dir, l) {
			olds++
		} else {
			news++
		}
		l.Close()
		checkNoRewriteLeft(t, dir, at)
	}
}

// runCrashChild runs the test binary as a child that runs only test, in
// mode on dir, exiting at its at-th step, and returns its exit code.
func runCrashChild(t *testing.T, test, dir, mode string, at int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), cleanCrashDirEnv+"="+dir, cleanCrashAtEnv+"="+strconv.Itoa(at), cleanCrashModeEnv+"="+mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && (ee.ExitCode() == exitCrashed || ee.ExitCode() == exitFinished) {
		return ee.ExitCode()
	}
	t.Fatalf("%s child at step %d: %v; stderr:\n%s", mode, at, err, stderr.String())
	return 0
}

// checkNoRewriteLeft fails t if dir, reopened after a crash at step at,
// still holds a rewritten segment or a swap file.
func checkNoRewriteLeft(t *testing.T, dir string, at int) {
	t.Helper()
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if strings.HasSuffix(n.Name(), cleanedSuffix) || strings.HasPrefix(n.Name(), cleanSwapName) {
			t.Fatalf("crash at step %d: %s left after reopening", at, n.Name())
		}
	}
}

// cleanCrashChild cleans (or, in mode reopen, opens) the log in dir and
// exits at the step its environment names.
func cleanCrashChild(dir string) {
	swapCrashChild(dir, "clean", func(l *Log) error {
		_, err := l.Clean(context.Background(), cleanCrashParams(cleanCrashHistory(), l.NextOffset()))
		return err
	})
}

// swapCrashChild is the child of a cleaning or re-cut crash test: it
// opens the log in dir and, when its environment names mode, runs op on
// it; it exits at the step of the open or of op its environment names, or
// when it is done.
func swapCrashChild(dir, mode string, op func(*Log) error) {
	at, _ := strconv.Atoi(os.Getenv(cleanCrashAtEnv))
	n := 0
	cleanHook = func(string) {
		if n++; n == at {
			os.Exit(exitCrashed)
		}
	}
	l, err := Open(context.Background(), Config{Dir: dir, SegmentBytes: 16 << 10, IndexIntervalBytes: 512, Compacted: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	if os.Getenv(cleanCrashModeEnv) == mode {
		if err := op(l); err != nil {
			fmt.Fprintf(os.Stderr, "child %s: %v\n", mode, err)
			os.Exit(2)
		}
	}
	os.Exit(exitFinished)
}
