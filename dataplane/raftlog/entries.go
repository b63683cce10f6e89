package raftlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
)

// The entries file is a sequence of records, one per Raft entry, in index
// order. Every field is big endian:
//
//	crc    uint32  CRC32C of the body
//	length uint32  body length
//	body:
//	  index  uint64  Raft index
//	  term   uint64  Raft term
//	  type   uint8   raft.LogType
//	  at     int64   Kafka log end offset before the entry
//	  count  int64   Kafka offsets the entry takes (0 unless a data entry:
//	                 a LogCommand that is not a control entry)
//	  extLen uint32, ext   the entry's Extensions
//	  dataLen uint32, data the entry's Data, non-data entries only
//	                 (Raft's own entries and control entries), and mirror
//	                 entries that were no-ops (mirror.go)
//
// A LogCommand's bytes live only in the partition log, at offset at.
const (
	recHeader  = 8
	bodyFixed  = 8 + 8 + 1 + 8 + 8 + 4 + 4
	maxRecBody = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendRecord(b []byte, index uint64, e entry) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, index)
	b = binary.BigEndian.AppendUint64(b, e.term)
	b = append(b, byte(e.typ))
	b = binary.BigEndian.AppendUint64(b, uint64(e.at))
	b = binary.BigEndian.AppendUint64(b, uint64(e.count))
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.ext)))
	b = append(b, e.ext...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.data)))
	b = append(b, e.data...)
	body := b[start+recHeader:]
	binary.BigEndian.PutUint32(b[start:], crc32.Checksum(body, castagnoli))
	binary.BigEndian.PutUint32(b[start+4:], uint32(len(body)))
	return b
}

// parseRecord decodes the record at the start of b. ok is false if b holds
// no complete, intact record (a torn or corrupt tail).
func parseRecord(b []byte) (index uint64, e entry, n int, ok bool) {
	if len(b) < recHeader {
		return 0, e, 0, false
	}
	size := int(binary.BigEndian.Uint32(b[4:]))
	if size < bodyFixed || size > maxRecBody || len(b) < recHeader+size {
		return 0, e, 0, false
	}
	body := b[recHeader : recHeader+size]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b) {
		return 0, e, 0, false
	}
	index = binary.BigEndian.Uint64(body)
	e.term = binary.BigEndian.Uint64(body[8:])
	e.typ = raft.LogType(body[16])
	e.at = int64(binary.BigEndian.Uint64(body[17:]))
	e.count = int64(binary.BigEndian.Uint64(body[25:]))
	rest := body[33:]
	extLen := int(binary.BigEndian.Uint32(rest))
	if extLen > len(rest)-8 {
		return 0, e, 0, false
	}
	if extLen > 0 {
		e.ext = append([]byte(nil), rest[4:4+extLen]...)
	}
	rest = rest[4+extLen:]
	dataLen := int(binary.BigEndian.Uint32(rest))
	if dataLen != len(rest)-4 {
		return 0, e, 0, false
	}
	if dataLen > 0 {
		e.data = append([]byte(nil), rest[4:]...)
	}
	if e.at < 0 || e.count < 0 || (!e.inLog() && e.count != 0) {
		return 0, e, 0, false
	}
	return index, e, recHeader + size, true
}

// recover loads the entries file, keeps its longest valid prefix whose
// entries are contiguous and whose batches are all in the partition log,
// and cuts whatever lies beyond on either side.
func (s *Store) recover() error {
	path := filepath.Join(s.cfg.Dir, entriesName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", entriesName, err)
	}
	s.idx = f
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read %s: %w", entriesName, err)
	}
	logStart, logNext := s.log.LogStartOffset(), s.log.NextOffset()
	var ents []entry
	var first uint64 = 1
	var kafka int64
	pos := 0
	reason := ""
	// A seeded store's file starts with a base record (seed.go): the
	// entries start after its index, at its Kafka offset.
	hasBase, baseTerm := false, uint64(0)
	for pos < len(b) {
		index, e, n, ok := parseRecord(b[pos:])
		if !ok {
			reason = "torn or corrupt record"
			break
		}
		if e.typ == baseRecord {
			if pos != 0 || e.count != 0 {
				reason = fmt.Sprintf("base record for index %d is not the first", index)
				break
			}
			hasBase, baseTerm = true, e.term
			first, kafka = index+1, e.at
			pos += n
			continue
		}
		if len(ents) == 0 && !hasBase {
			first, kafka = index, e.at
		} else if index != first+uint64(len(ents)) || e.at != kafka && !(e.inLog() && e.isMirror() && e.at > kafka) {
			reason = fmt.Sprintf("record for index %d does not follow", index)
			break
		}
		if e.at+e.count > logNext {
			reason = fmt.Sprintf("batch of index %d is not in the log", index)
			break
		}
		e.pos = int64(pos)
		ents = append(ents, e)
		kafka = e.at + e.count
		pos += n
	}
	var rebuilt []entry
	if (len(ents) > 0 || hasBase) && logNext > kafka {
		// Batches past the last record: a crash lost the records of plain
		// command entries (see StoreLogs), which the batches describe.
		last := baseTerm
		if len(ents) > 0 {
			last = ents[len(ents)-1].term
		}
		rebuilt, kafka = s.rebuildTail(last, kafka, logNext)
	}
	if len(ents) == 0 && !hasBase {
		kafka = logNext // a fresh store, or one whose records were all lost
		if logNext > logStart {
			kafka = logStart
		}
	}
	if kafka < logStart {
		return fmt.Errorf("%w: entries end at Kafka offset %d, below the log start %d", ErrInconsistent, kafka, logStart)
	}
	if logNext > kafka {
		s.cfg.Logger.Warn("raft log store cut batches without an entry record", "from", kafka, "to", logNext)
		if err := s.log.TruncateTo(kafka); err != nil {
			return fmt.Errorf("cut unrecorded batches: %w", err)
		}
	}
	changed := pos < len(b) || len(rebuilt) > 0
	if pos < len(b) {
		s.cfg.Logger.Warn("raft log store cut entries file", "bytes", len(b)-pos, "reason", reason)
		if err := f.Truncate(int64(pos)); err != nil {
			return fmt.Errorf("cut %s: %w", entriesName, err)
		}
	}
	if len(rebuilt) > 0 {
		s.cfg.Logger.Info("raft log store rebuilt entry records from batches", "entries", len(rebuilt),
			"from_index", first+uint64(len(ents)), "from_offset", rebuilt[0].at)
		var rec []byte
		for i := range rebuilt {
			rebuilt[i].pos = int64(pos + len(rec))
			rec = appendRecord(rec, first+uint64(len(ents)+i), rebuilt[i])
		}
		if err := pwriteAll(f, rec, int64(pos)); err != nil {
			return fmt.Errorf("rebuild %s: %w", entriesName, err)
		}
		ents = append(ents, rebuilt...)
		pos += len(rec)
	}
	if changed {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", entriesName, err)
		}
	}
	if err := log.SyncDir(s.cfg.Dir); err != nil {
		return err
	}
	// Check the last batch: the record and the log must name the same one.
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		if !e.inLog() {
			continue
		}
		if e.at < logStart {
			break
		}
		h, _, err := s.log.ReadBatch(e.at, nil)
		if err != nil {
			return fmt.Errorf("check last batch: %w", err)
		}
		if h.BaseOffset != e.at || int64(h.LastOffsetDelta)+1 != e.count || !e.epochIs(h.LeaderEpoch) && !e.isMirror() {
			return fmt.Errorf("%w: last batch at %d has epoch %d and %d records; its entry says term %d, %d records",
				ErrInconsistent, e.at, h.LeaderEpoch, h.LastOffsetDelta+1, e.term, e.count)
		}
		break
	}
	s.first, s.ents, s.kafkaNext, s.size, s.synced = first, ents, kafka, int64(pos), int64(pos)
	if hasBase {
		s.seeded = first - 1
		for _, e := range ents {
			s.seedConf = s.seedConf || e.typ == raft.LogConfiguration
		}
	}
	return nil
}

// rebuildTail describes the batches from offset at to end as plain command
// entries following one of term last: each batch's leader epoch is its
// entry's term. It stops at a batch it cannot read or whose epoch would
// make terms go backwards; the caller cuts the log there.
func (s *Store) rebuildTail(last uint64, at, end int64) ([]entry, int64) {
	var ents []entry
	var buf []byte
	for at < end {
		h, b, err := s.log.ReadBatch(at, buf)
		if err != nil {
			s.cfg.Logger.Warn("raft log store cannot rebuild an entry", "offset", at, "err", err)
			break
		}
		buf = b[:0]
		term := uint64(max(h.LeaderEpoch, 0))
		if h.BaseOffset != at || term < max(last, 1) {
			s.cfg.Logger.Warn("raft log store cannot rebuild an entry", "offset", at,
				"base", h.BaseOffset, "epoch", h.LeaderEpoch, "previous_term", last)
			break
		}
		count := int64(h.LastOffsetDelta) + 1
		ents = append(ents, entry{term: term, typ: raft.LogCommand, at: at, count: count})
		at += count
		last = term
	}
	return ents, at
}
