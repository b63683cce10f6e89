package log

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"
)

// The log cleaner: compaction of closed segments (see DESIGN.md, "Log
// compaction"). Clean keeps the newest record of every key below a
// compaction point and removes expired tombstones, preserving offsets and
// timestamps. Its output depends only on the input batches and on
// CleanParams.UpTo, Now, DeleteRetention and MinCompactionLag, so replicas
// that apply the same decision to the same batches write the same bytes.

// ErrCleanConflict says a write to the log (truncation, retention, a
// replace) changed the segments a cleaning read; nothing was swapped.
var ErrCleanConflict = errors.New("log changed while it was cleaned")

// DefaultCleanMapBytes is the key map budget when CleanParams.MaxMapBytes is 0.
const DefaultCleanMapBytes = 64 << 20

// mapEntryOverhead is what one key map entry costs beyond its key bytes:
// the string header, the offset and the map's own share, roughly.
const mapEntryOverhead = 48

// CleanParams says what to compact. UpTo, Now, DeleteRetention and
// MinCompactionLag decide the output and must be the same on every replica;
// MaxMapBytes and BytesPerSecond only bound the work and may differ.
type CleanParams struct {
	// UpTo is the compaction point: only closed segments lying wholly below
	// it are rewritten. Pass at most the high watermark.
	UpTo int64
	// Now is the time, in milliseconds since the epoch, that tombstone
	// expiry and the compaction lag are measured from. It is never read
	// from a clock, so that every replica uses the same value.
	Now int64
	// DeleteRetention is delete.retention.ms: a tombstone (a record with a
	// null value) is removed once its batch's max timestamp is older than
	// Now minus this, and kept until then.
	DeleteRetention time.Duration
	// MinCompactionLag is min.compaction.lag.ms: a segment whose newest
	// batch is younger than Now minus this is not compacted, nor is any
	// segment after it.
	MinCompactionLag time.Duration
	// BoundTombstones keeps every tombstone at or above offset
	// TombstonesBelow, whatever its age. The replication layer passes the
	// compaction point of a decision made delete.retention.ms or more
	// before this one: the older records a tombstone hides went at that
	// decision's cleaning or earlier, so the tombstone outlives them by
	// delete.retention.ms, and a reader from the start that read one of
	// them and reaches the head within delete.retention.ms sees the
	// tombstone, as Kafka promises.
	BoundTombstones bool
	TombstonesBelow int64
	// MaxMapBytes bounds the key map. When the keys below UpTo do not fit,
	// the cleaner works in passes, each mapping the keys of the next range
	// of batches that fit; the output is the same. 0 means
	// DefaultCleanMapBytes. One batch's keys are always admitted.
	MaxMapBytes int64
	// BytesPerSecond limits the cleaner's reads plus writes. 0: no limit.
	BytesPerSecond int64
}

// CleanResult says what a cleaning did.
type CleanResult struct {
	// End is the offset below which the log is now compacted: UpTo lowered
	// to the base of the first segment that the active segment or the
	// compaction lag kept out. End == the first segment's base means
	// nothing was cleanable.
	End             int64
	Passes          int
	Segments        int   // segments rewritten
	SegmentsRemoved int   // segments left empty and removed
	BytesRead       int64 // segment bytes read, over all passes
	BytesWritten    int64 // segment bytes written, over all passes
	BytesBefore     int64 // size of the cleaned segments before
	BytesAfter      int64 // and after
	RecordsRemoved  int64
	// MappedFrom is where the key map started: the end of the log's last
	// cleaning, or the first segment's base.
	MappedFrom int64
	// Skipped says the log's last cleaning had the same deciding
	// parameters and left these very segments, so nothing was read or
	// written (its checkpoint, also across a restart).
	Skipped bool
}

// cleanSeg is one segment being cleaned: the live segment it came from and
// the file holding its current content (the segment itself until a pass
// rewrites it).
type cleanSeg struct {
	seg  *segment
	file *os.File // nil: read seg.f
	name string   // file's name in the log directory
	size int64
}

func (c *cleanSeg) reader() io.ReaderAt {
	if c.file != nil {
		return c.file
	}
	return c.seg.f
}

// Clean compacts the closed segments below p.UpTo: it keeps the newest
// record of every key, every record without a key, and tombstones younger
// than p.DeleteRetention, and swaps the rewritten segments in at once,
// crash-safely. Reads and appends go on meanwhile; only the swap takes the
// writer lock. It never touches the active segment.
func (l *Log) Clean(ctx context.Context, p CleanParams) (CleanResult, error) {
	if p.MaxMapBytes == 0 {
		p.MaxMapBytes = DefaultCleanMapBytes
	}
	if p.MaxMapBytes < 0 || p.BytesPerSecond < 0 || p.DeleteRetention < 0 || p.MinCompactionLag < 0 {
		return CleanResult{}, fmt.Errorf("clean: negative parameter in %+v", p)
	}
	if !l.Compacted() {
		return CleanResult{}, errors.New("clean: the log is not opened as compacted (Config.Compacted): its recovery would cut at the gaps cleaning leaves")
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	segs, gen, mapFrom, done, err := l.cleanable(p)
	if err != nil {
		return CleanResult{}, fmt.Errorf("clean: %w", err)
	}
	if done {
		// This very cleaning already ran on these segments: doing it again
		// would write the same bytes (clean_checkpoint.go).
		end := segsEnd(l, segs)
		for _, c := range segs {
			c.seg.unref()
		}
		return CleanResult{End: end, MappedFrom: mapFrom, Skipped: true}, nil
	}
	defer func() {
		for _, c := range segs {
			c.seg.unref()
			if c.file != nil {
				c.file.Close()
			}
		}
	}()
	res := CleanResult{End: segsEnd(l, segs)}
	if len(segs) == 0 {
		return res, nil
	}
	for _, c := range segs {
		res.BytesBefore += c.size
	}
	cl := &cleaner{l: l, p: p, segs: segs, dec: kgo.DefaultDecompressor(), res: &res, mapFrom: mapFrom}
	if p.BytesPerSecond > 0 {
		burst := int(min(p.BytesPerSecond, 1<<30))
		cl.lim = rate.NewLimiter(rate.Limit(p.BytesPerSecond), burst)
	}
	// The active segment may have been created after the last directory
	// fsync; make it durable before any segment file is swapped, so that
	// recovery never finds a compacted segment last by accident.
	if err := l.dir.Sync(); err != nil {
		return res, fmt.Errorf("clean: sync directory: %w", err)
	}
	if err := cl.run(ctx); err != nil {
		cl.removeOutputs()
		return res, fmt.Errorf("clean: %w", err)
	}
	hook("passes done")
	if err := l.swapCleaned(segs, gen, p, &res); err != nil {
		cl.removeOutputs()
		return res, fmt.Errorf("clean: %w", err)
	}
	return res, nil
}

func segsEnd(l *Log, segs []*cleanSeg) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return 0
	}
	if len(segs) == 0 {
		return l.segs[0].base
	}
	for i, s := range l.segs {
		if s == segs[len(segs)-1].seg && i+1 < len(l.segs) {
			return l.segs[i+1].base
		}
	}
	return segs[len(segs)-1].seg.next
}

// cleanable picks the segments to clean and takes a reference on each,
// and says where the key map starts: the end of the last cleaning, if the
// log was not truncated or replaced since, else the start. done says that
// the last cleaning had the same deciding parameters and the picked
// segments are exactly the ones it left (its checkpoint), so cleaning them
// again would change nothing.
func (l *Log) cleanable(p CleanParams) (segs []*cleanSeg, gen uint64, mapFrom int64, done bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return nil, 0, 0, false, err
	}
	mapFrom = -1
	if l.cleanedGen == l.gen {
		mapFrom = l.cleanedTo
	}
	lagEdge := p.Now - p.MinCompactionLag.Milliseconds()
	var out []*cleanSeg
	for k := 0; k < len(l.segs)-1; k++ {
		s := l.segs[k]
		if l.segs[k+1].base > p.UpTo || s.maxTS > lagEdge {
			break
		}
		s.ref()
		out = append(out, &cleanSeg{seg: s, size: s.size})
	}
	if ck := l.lastClean; ck != nil && mapFrom == ck.End && ck.Params == paramsOf(p) && len(out) > 0 {
		picked := make([]checkpointSeg, len(out))
		for i, c := range out {
			picked[i] = checkpointSeg{Base: c.seg.base, Size: c.size}
		}
		done = slices.Equal(picked, l.closedBelow(ck.End)) && ck.matches(picked)
	}
	return out, l.gen, mapFrom, done, nil
}

// cleaner runs the passes of one Clean.
type cleaner struct {
	l       *Log
	p       CleanParams
	mapFrom int64 // where the key map starts (-1: the first segment)
	segs    []*cleanSeg
	dec     kgo.Decompressor
	lim     *rate.Limiter
	res     *CleanResult
	buf     []byte
	out     []byte
}

func (c *cleaner) throttle(ctx context.Context, n int) error {
	if c.lim == nil {
		return nil
	}
	for n > 0 {
		k := min(n, c.lim.Burst())
		if err := c.lim.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// eachBatch reads the batches of segment c from the start and calls fn
// with each; fn returning false stops the walk.
func (c *cleaner) eachBatch(ctx context.Context, cs *cleanSeg, fn func(b []byte, h Header) (bool, error)) error {
	r := bufio.NewReaderSize(io.NewSectionReader(cs.reader(), 0, cs.size), 256<<10)
	var pos int64
	for pos < cs.size {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.buf = c.buf[:0]
		c.buf = append(c.buf, make([]byte, HeaderSize)...)
		if _, err := io.ReadFull(r, c.buf); err != nil {
			return fmt.Errorf("read segment %d at %d: %w", cs.seg.base, pos, err)
		}
		h, err := ParseHeader(c.buf)
		if err != nil {
			return fmt.Errorf("read segment %d at %d: %w", cs.seg.base, pos, err)
		}
		if h.Size() > cs.size-pos {
			return fmt.Errorf("read segment %d at %d: %w: torn batch", cs.seg.base, pos, ErrCorruptBatch)
		}
		c.buf = append(c.buf, make([]byte, h.Size()-HeaderSize)...)
		if _, err := io.ReadFull(r, c.buf[HeaderSize:]); err != nil {
			return fmt.Errorf("read segment %d at %d: %w", cs.seg.base, pos, err)
		}
		if err := checkCRC(c.buf, h); err != nil {
			return fmt.Errorf("read segment %d at %d: %w", cs.seg.base, pos, err)
		}
		if err := c.throttle(ctx, len(c.buf)); err != nil {
			return err
		}
		c.res.BytesRead += h.Size()
		pos += h.Size()
		more, err := fn(c.buf, h)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// run makes passes until every batch of the segments has been mapped.
//
// Below the end of the log's last cleaning (mapFrom) every key has one
// record: that cleaning mapped every key below it. A newer record of such
// a key can only lie above, so the map starts there and the output is the
// same as mapping from the first segment (TestCleanDirtyMapSameBytes);
// what lies below is still rewritten, its superseded records and expired
// tombstones removed. With nothing new to map (a cleaning only time calls
// for), one pass rewrites with an empty map.
func (c *cleaner) run(ctx context.Context) error {
	from := max(c.segs[0].seg.base, min(c.mapFrom, c.res.End)) // first batch offset not yet mapped
	end := c.res.End
	c.res.MappedFrom = from
	if from >= end {
		c.res.Passes++
		return c.rewrite(ctx, map[string]int64{}, end)
	}
	for from < end {
		keys, mapEnd, err := c.buildMap(ctx, from, end)
		if err != nil {
			return err
		}
		c.res.Passes++
		if err := c.rewrite(ctx, keys, mapEnd); err != nil {
			return err
		}
		from = mapEnd
	}
	return nil
}

// buildMap maps each key of the batches from offset from to its newest
// offset, stopping before the batch whose keys would overflow the budget.
// It returns the map and the offset it covers up to (exclusive).
func (c *cleaner) buildMap(ctx context.Context, from, end int64) (map[string]int64, int64, error) {
	keys := make(map[string]int64)
	var used int64
	mapEnd := end
	full := false
	for _, cs := range c.segs {
		if full {
			break
		}
		if cs.seg.base < from && segmentEnd(c.segs, cs, end) <= from {
			continue
		}
		err := c.eachBatch(ctx, cs, func(b []byte, h Header) (bool, error) {
			if h.NextOffset() <= from || h.IsControl() {
				return true, nil
			}
			var add int64
			fresh := map[string]bool{}
			err := batchRecords(b, h, c.dec, func(r record) error {
				if r.keyed {
					if _, ok := keys[string(r.key)]; !ok && !fresh[string(r.key)] {
						fresh[string(r.key)] = true
						add += int64(len(r.key)) + mapEntryOverhead
					}
				}
				return nil
			})
			if err != nil {
				return false, err
			}
			if used > 0 && used+add > c.p.MaxMapBytes {
				mapEnd, full = h.BaseOffset, true
				return false, nil
			}
			used += add
			return true, batchRecords(b, h, c.dec, func(r record) error {
				if r.keyed {
					keys[string(r.key)] = h.BaseOffset + int64(r.offsetDelta)
				}
				return nil
			})
		})
		if err != nil {
			return nil, 0, err
		}
	}
	return keys, mapEnd, nil
}

// segmentEnd is the offset the next segment starts at (or end).
func segmentEnd(segs []*cleanSeg, cs *cleanSeg, end int64) int64 {
	for i, s := range segs {
		if s == cs && i+1 < len(segs) {
			return segs[i+1].seg.base
		}
	}
	return end
}

// rewrite writes a new file for each segment that starts below mapEnd,
// keeping a record unless the map holds a newer offset for its key, or it
// is a tombstone below mapEnd older than the delete retention. A segment
// whose every batch would be copied as it is gets no new file: it is left
// as it is (its bytes are what a rewrite would write). The new file of a
// segment that changes is created at its first changed batch, with the
// unchanged batches before it copied across.
func (c *cleaner) rewrite(ctx context.Context, keys map[string]int64, mapEnd int64) error {
	expired := c.p.Now - c.p.DeleteRetention.Milliseconds()
	for _, cs := range c.segs {
		if cs.seg.base >= mapEnd {
			break
		}
		hook("rewrite")
		name := fmt.Sprintf("%020d%s.%d%s", cs.seg.base, logSuffix, c.res.Passes, cleanedSuffix)
		path := filepath.Join(c.l.cfg.Dir, name)
		var f *os.File
		var w *bufio.Writer
		var size, same int64 // bytes written; bytes of the unchanged batches before the first change
		write := func(b []byte) error {
			if err := c.throttle(ctx, len(b)); err != nil {
				return err
			}
			if _, err := w.Write(b); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
			size += int64(len(b))
			return nil
		}
		start := func() error {
			var err error
			if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
				f = nil
				return fmt.Errorf("create %s: %w", name, err)
			}
			w = bufio.NewWriterSize(f, 256<<10)
			// The unchanged batches before the first change, as they are.
			r := io.NewSectionReader(cs.reader(), 0, same)
			for done := int64(0); done < same; {
				n := min(same-done, 256<<10)
				c.buf = append(c.buf[:0], make([]byte, n)...)
				if _, err := io.ReadFull(r, c.buf); err != nil {
					return fmt.Errorf("read segment %d at %d: %w", cs.seg.base, done, err)
				}
				c.res.BytesRead += n
				if err := c.throttle(ctx, int(n)); err != nil {
					return err
				}
				if err := write(c.buf); err != nil {
					return err
				}
				done += n
			}
			return nil
		}
		err := c.eachBatch(ctx, cs, func(b []byte, h Header) (bool, error) {
			var out []byte
			var removed int
			var err error
			if h.IsControl() {
				out = append(c.out[:0], b...)
			} else {
				tomb := h.MaxTimestamp < expired
				out, removed, err = filterBatch(b, h, c.dec, func(r record) bool {
					if !r.keyed {
						return true
					}
					off := h.BaseOffset + int64(r.offsetDelta)
					if newest, ok := keys[string(r.key)]; ok && off < newest {
						return false
					}
					return !(r.tombstone && tomb && off < mapEnd && (!c.p.BoundTombstones || off < c.p.TombstonesBelow))
				}, c.out[:0])
				if err != nil {
					return false, err
				}
			}
			c.out = out[:0]
			c.res.RecordsRemoved += int64(removed)
			if f == nil {
				if removed == 0 && len(out) == len(b) {
					same += int64(len(b)) // copied as it is (filterBatch)
					return true, nil
				}
				// c.buf holds b, which start reuses: keep out, which is c.out.
				if err := start(); err != nil {
					return false, err
				}
			}
			if len(out) == 0 {
				return true, nil
			}
			return true, write(out)
		})
		if f == nil && err == nil {
			continue // unchanged: the segment stays as it is
		}
		if err == nil {
			err = w.Flush()
		}
		if err == nil {
			err = unix.Fdatasync(int(f.Fd()))
		}
		if err != nil {
			if f != nil {
				f.Close()
				os.Remove(path)
			}
			return fmt.Errorf("rewrite segment %d: %w", cs.seg.base, err)
		}
		c.res.BytesWritten += size
		if cs.file != nil {
			cs.file.Close()
			os.Remove(filepath.Join(c.l.cfg.Dir, cs.name))
		}
		cs.file, cs.name, cs.size = f, name, size
	}
	return nil
}

// removeOutputs deletes the files of a cleaning that will not be swapped in.
func (c *cleaner) removeOutputs() {
	for _, cs := range c.segs {
		if cs.file != nil {
			cs.file.Close()
			os.Remove(filepath.Join(c.l.cfg.Dir, cs.name))
			cs.file = nil
		}
	}
}
