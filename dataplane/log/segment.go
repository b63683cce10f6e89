package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// File name suffixes of a segment; the stem is the base offset, 20 digits.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"

	offsetEntrySize = 8  // relative offset uint32, position uint32
	timeEntrySize   = 12 // timestamp int64, relative offset uint32
)

func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// offsetEntry maps the base offset of a batch (relative to the segment base)
// to its byte position.
type offsetEntry struct{ rel, pos uint32 }

// timeEntry records that every batch up to and including the one at rel has
// a max timestamp ≤ ts, and the batch at rel has exactly ts.
type timeEntry struct {
	ts  int64
	rel uint32
}

// segment is one .log file with its in-memory indexes. The file stays open
// while refs > 0: the Log holds one reference until the segment is deleted or
// the log closed, and every outstanding Slice holds one.
type segment struct {
	base int64
	dir  string
	f    *os.File
	fd   int
	refs atomic.Int32

	// The fields below are guarded by Log.mu; only the goroutine holding
	// Log.wmu changes them.
	size            int64 // bytes published to readers
	next            int64 // offset after the last batch
	synced          int64 // bytes known to be on stable storage in this file
	journaled       int64 // bytes the broker's journal holds durably (journal.go)
	maxTS           int64 // newest batch max timestamp, -1 if empty
	maxTSRel        uint32
	bytesSinceIndex int64
	offs            []offsetEntry
	times           []timeEntry
	created         time.Time
}

func (s *segment) ref() { s.refs.Add(1) }
func (s *segment) unref() {
	if s.refs.Add(-1) == 0 {
		s.f.Close()
	}
}

func openSegment(dir string, base int64, create bool, now time.Time) (*segment, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(segmentPath(dir, base, logSuffix), flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open segment %d: %w", base, err)
	}
	s := &segment{base: base, dir: dir, f: f, fd: int(f.Fd()), next: base, maxTS: -1, created: now}
	s.refs.Store(1)
	return s, nil
}

// indexBatch records a batch appended at pos in the in-memory indexes.
func (s *segment) indexBatch(h Header, pos int64, interval int) {
	rel := uint32(h.BaseOffset - s.base)
	if h.MaxTimestamp > s.maxTS {
		s.maxTS, s.maxTSRel = h.MaxTimestamp, rel
	}
	if pos > 0 && s.bytesSinceIndex >= int64(interval) {
		s.offs = append(s.offs, offsetEntry{rel: rel, pos: uint32(pos)})
		s.bytesSinceIndex = 0
		s.maybeTimeEntry()
	}
	s.bytesSinceIndex += h.Size()
	s.next = h.NextOffset()
}

func (s *segment) maybeTimeEntry() {
	if s.maxTS >= 0 && (len(s.times) == 0 || s.maxTS > s.times[len(s.times)-1].ts) {
		s.times = append(s.times, timeEntry{ts: s.maxTS, rel: s.maxTSRel})
	}
}

// lookup returns the index entry at or before offset: a position where the
// scan for offset may start, and the base offset of the batch there.
func (s *segment) lookup(offset int64) (pos, base int64) {
	rel := offset - s.base
	i := sort.Search(len(s.offs), func(i int) bool { return int64(s.offs[i].rel) > rel })
	if i == 0 {
		return 0, s.base
	}
	e := s.offs[i-1]
	return int64(e.pos), s.base + int64(e.rel)
}

// readHeader reads the batch header at pos.
func (s *segment) readHeader(pos int64, buf *[HeaderSize]byte) (Header, error) {
	if _, err := unix.Pread(s.fd, buf[:], pos); err != nil {
		return Header{}, fmt.Errorf("read batch header at %d of segment %d: %w", pos, s.base, err)
	}
	return ParseHeader(buf[:])
}

// scanResult says where a scan of a segment stopped and why.
type scanResult struct {
	end    int64  // position after the last good batch
	reason string // empty if the scan reached the limit cleanly
}

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// scan walks the batches from pos (where a batch with base offset want must
// start) to limit, checking each header, the offset sequence and, if verify,
// the CRC, and indexes every batch it accepts. With gaps, the segment may
// have been compacted: a batch may start above want (whole batches were
// removed) and hold fewer records than its offset range (records were
// removed from it); offsets must still only grow.
func (s *segment) scan(pos, limit, want int64, verify, gaps bool, interval int) (scanResult, error) {
	var hb [HeaderSize]byte
	for pos < limit {
		if limit-pos < HeaderSize {
			return scanResult{end: pos, reason: fmt.Sprintf("%d trailing bytes, shorter than a batch header", limit-pos)}, nil
		}
		n, err := unix.Pread(s.fd, hb[:], pos)
		if err != nil {
			return scanResult{end: pos}, fmt.Errorf("scan segment %d at %d: %w", s.base, pos, err)
		}
		if n < HeaderSize {
			return scanResult{end: pos, reason: "file shorter than its size"}, nil
		}
		h, err := ParseHeader(hb[:])
		if err == nil {
			if gaps {
				err = checkCompactedFields(h)
			} else {
				err = checkFields(h)
			}
		}
		if err != nil {
			return scanResult{end: pos, reason: fmt.Sprintf("bad batch header at position %d: %s", pos, err.Error())}, nil
		}
		if h.BaseOffset != want && (!gaps || h.BaseOffset < want) {
			return scanResult{end: pos, reason: fmt.Sprintf("batch at position %d has base offset %d, want %d", pos, h.BaseOffset, want)}, nil
		}
		if h.Size() > limit-pos {
			return scanResult{end: pos, reason: fmt.Sprintf("torn batch at position %d: %d bytes, %d left in file", pos, h.Size(), limit-pos)}, nil
		}
		if h.LastOffset()-s.base > maxRelOffset {
			return scanResult{end: pos, reason: fmt.Sprintf("batch at position %d overflows the segment's offset range", pos)}, nil
		}
		if verify {
			ok, err := s.checkCRC(h, pos)
			if err != nil {
				return scanResult{end: pos}, err
			}
			if !ok {
				return scanResult{end: pos, reason: fmt.Sprintf("crc mismatch in batch at position %d", pos)}, nil
			}
		}
		s.indexBatch(h, pos, interval)
		pos += h.Size()
		want = h.NextOffset()
	}
	return scanResult{end: pos}, nil
}

// checkCRC computes the CRC32C of the batch at pos from the file.
func (s *segment) checkCRC(h Header, pos int64) (bool, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	var crc uint32
	off, end := pos+offAttributes, pos+h.Size()
	for off < end {
		n := min(int64(len(buf)), end-off)
		m, err := unix.Pread(s.fd, buf[:n], off)
		if err != nil {
			return false, fmt.Errorf("read batch at %d of segment %d: %w", pos, s.base, err)
		}
		if m == 0 {
			return false, nil
		}
		crc = crc32.Update(crc, castagnoli, buf[:m])
		off += int64(m)
	}
	return crc == h.CRC, nil
}

// maxRelOffset bounds offsets within a segment so they fit the index.
const maxRelOffset = 1<<31 - 1

// resetIndex clears the in-memory indexes before a full rebuild.
func (s *segment) resetIndex() {
	s.offs, s.times = s.offs[:0], s.times[:0]
	s.maxTS, s.maxTSRel, s.bytesSinceIndex, s.next = -1, 0, 0, s.base
}

// trimIndex drops index state at and after position cut and returns the
// position and base offset to rescan from so the state is exact again.
func (s *segment) trimIndex(cut int64) (pos, base int64) {
	i := sort.Search(len(s.offs), func(i int) bool { return int64(s.offs[i].pos) >= cut })
	s.offs = s.offs[:i]
	pos, base = 0, s.base
	if i > 0 {
		e := s.offs[i-1]
		pos, base = int64(e.pos), s.base+int64(e.rel)
		// Rescan the batch at the last entry too; drop that entry and let
		// the scan add it back.
		s.offs = s.offs[:i-1]
	}
	rel := uint32(base - s.base)
	j := sort.Search(len(s.times), func(j int) bool { return s.times[j].rel >= rel })
	s.times = s.times[:j]
	s.maxTS, s.maxTSRel = -1, 0
	if j > 0 {
		s.maxTS, s.maxTSRel = s.times[j-1].ts, s.times[j-1].rel
	}
	s.next = base
	s.bytesSinceIndex = 0
	if pos > 0 {
		s.bytesSinceIndex = 1 << 62 // force the entry at pos to come back
	}
	return pos, base
}

// finishTimeIndex makes the last time entry carry the segment's max
// timestamp, so a closed segment's max timestamp is its last entry.
func (s *segment) finishTimeIndex() { s.maybeTimeEntry() }

// writeIndexes writes both index files from memory and fsyncs them.
func (s *segment) writeIndexes() error {
	b := make([]byte, 0, len(s.offs)*offsetEntrySize)
	for _, e := range s.offs {
		b = binary.BigEndian.AppendUint32(b, e.rel)
		b = binary.BigEndian.AppendUint32(b, e.pos)
	}
	if err := writeFileSync(segmentPath(s.dir, s.base, indexSuffix), appendTrailer(b, len(s.offs))); err != nil {
		return err
	}
	b = make([]byte, 0, len(s.times)*timeEntrySize)
	for _, e := range s.times {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, e.rel)
	}
	return writeFileSync(segmentPath(s.dir, s.base, timeIndexSuffix), appendTrailer(b, len(s.times)))
}

// An index file is its entries followed by an 8-byte trailer: the CRC32C of
// the entries and their count. Index files are written whole, when a segment
// is rolled, so a file that fails the check is rebuilt from the log.
const trailerSize = 8

func appendTrailer(b []byte, n int) []byte {
	crc := crc32.Checksum(b, castagnoli)
	b = binary.BigEndian.AppendUint32(b, crc)
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// checkTrailer returns the entries of an index file if its trailer matches.
func checkTrailer(b []byte, entrySize int) ([]byte, bool) {
	if len(b) < trailerSize || (len(b)-trailerSize)%entrySize != 0 {
		return nil, false
	}
	body, tr := b[:len(b)-trailerSize], b[len(b)-trailerSize:]
	return body, binary.BigEndian.Uint32(tr) == crc32.Checksum(body, castagnoli) &&
		int(binary.BigEndian.Uint32(tr[4:])) == len(body)/entrySize
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// loadIndexes reads both index files and checks that they are plausible for
// a log file of size bytes. It reports false if they are missing or damaged.
func (s *segment) loadIndexes(size int64) bool {
	ob, err := os.ReadFile(segmentPath(s.dir, s.base, indexSuffix))
	if err != nil {
		return false
	}
	ob, ok := checkTrailer(ob, offsetEntrySize)
	if !ok {
		return false
	}
	tb, err := os.ReadFile(segmentPath(s.dir, s.base, timeIndexSuffix))
	if err != nil {
		return false
	}
	if tb, ok = checkTrailer(tb, timeEntrySize); !ok {
		return false
	}
	s.resetIndex()
	var prev offsetEntry
	for i := 0; i < len(ob); i += offsetEntrySize {
		e := offsetEntry{rel: binary.BigEndian.Uint32(ob[i:]), pos: binary.BigEndian.Uint32(ob[i+4:])}
		if e.pos == 0 || int64(e.pos) >= size || e.rel > maxRelOffset || (i > 0 && (e.rel <= prev.rel || e.pos <= prev.pos)) {
			s.resetIndex()
			return false
		}
		s.offs = append(s.offs, e)
		prev = e
	}
	var prevT timeEntry
	for i := 0; i < len(tb); i += timeEntrySize {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(tb[i:])), rel: binary.BigEndian.Uint32(tb[i+8:])}
		if e.ts < 0 || e.rel > maxRelOffset || (i > 0 && (e.ts <= prevT.ts || e.rel < prevT.rel)) {
			s.resetIndex()
			return false
		}
		s.times = append(s.times, e)
		prevT = e
	}
	// The last offset entry must point at a batch with the base offset it
	// claims; the caller then rescans from it to the end of the file.
	if len(s.offs) > 0 {
		var hb [HeaderSize]byte
		last := s.offs[len(s.offs)-1]
		h, err := s.readHeader(int64(last.pos), &hb)
		if err != nil || h.BaseOffset != s.base+int64(last.rel) {
			s.resetIndex()
			return false
		}
	}
	return true
}

// copyRange writes length bytes of the segment from pos to w with pread and
// w.Write through a pooled buffer.
func (s *segment) copyRange(w io.Writer, pos, length int64) (int64, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	var done int64
	for done < length {
		n := min(int64(len(buf)), length-done)
		m, err := s.f.ReadAt(buf[:n], pos+done)
		if m > 0 {
			w, werr := w.Write(buf[:m])
			done += int64(w)
			if werr != nil {
				return done, werr
			}
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return done, err
		}
	}
	return done, nil
}
