package cellview_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/dataplane/cellview"
)

// TestKeysUsed: uses noted from many goroutines come back once each,
// sorted, and a second take starts afresh.
func TestKeysUsed(t *testing.T) {
	s, err := cellview.New(cellview.Config{Cell: "c", CacheFile: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				s.NoteKeyUse(fmt.Sprintf("K%02d", (g+i)%10))
			}
		}()
	}
	wg.Wait()
	s.NoteKeyUse("")
	got := s.TakeKeysUsed()
	want := []string{"K00", "K01", "K02", "K03", "K04", "K05", "K06", "K07", "K08", "K09"}
	if !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v", got, want)
	}
	if got := s.TakeKeysUsed(); len(got) != 0 {
		t.Fatalf("second take %v, want none", got)
	}
}
