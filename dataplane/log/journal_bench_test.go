package log

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/dataplane/journal"
)

// BenchmarkSyncRound is one group-commit round of a broker: 120 KiB
// appended over 1, 12 or 100 logs and made durable, either by
// fdatasyncing each log's segment (SyncFiles) or through one journal
// (SyncJournal). The bytes per round are those of a cell whose producers
// keep a few thousand small records in flight, spread thinner the more
// partitions there are; MB/s is the round's appended bytes over its time.
func BenchmarkSyncRound(b *testing.B) {
	const total = 120 << 10
	for _, n := range []int{1, 12, 100} {
		for _, mode := range []SyncMode{SyncFiles, SyncJournal} {
			b.Run(fmt.Sprintf("%s/%d", mode, n), func(b *testing.B) {
				root := b.TempDir()
				var y *Syncer
				var j *journal.Journal
				if mode == SyncJournal {
					var err error
					if j, _, err = journal.Open(root, journal.Options{}); err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { j.Close() })
					y = NewJournalSyncer(j)
				} else {
					y = NewSyncer(mode)
				}
				logs := make([]*Log, n)
				for i := range logs {
					l, err := Open(context.Background(), Config{Dir: filepath.Join(root, fmt.Sprint(i)), Journal: j})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { l.Close() })
					logs[i] = l
				}
				per := total / n
				records := max(1, per/1250)
				batch := makeBatch(records, per/records-30, 0, 1)
				b.SetBytes(int64(len(batch) * n))
				for b.Loop() {
					for _, l := range logs {
						if _, _, err := l.Append(append([]byte(nil), batch...), 1); err != nil {
							b.Fatal(err)
						}
					}
					if err := y.Sync(logs...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
