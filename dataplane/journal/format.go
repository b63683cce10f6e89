package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strings"
)

// A journal file starts with a header; records follow it back to back:
//
//	header: magic[8] gen u64 crc32c(magic, gen) u32, padded to headerSize
//	record: length u32, crc32c(payload) u32, payload[length]
//	payload: gen u64, kind u8, path length u16, path, then for a write
//	         offset i64 and the bytes
//
// A file whose header generation is 0 or does not check holds nothing. A
// record counts only while its generation is the header's and its CRC
// checks: the first that does not ends the file (a torn tail, or a
// record of the file's previous use).
const (
	headerSize  = 64
	recordFixed = 8 // length and CRC
	payloadMin  = 8 + 1 + 2
	maxPath     = 4096
)

var magic = [8]byte{'s', 'l', 'u', 'i', 'c', 'e', 'j', '1'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type kind uint8

const (
	kindWrite kind = 1 // bytes at an offset of a file
	kindFence kind = 2 // earlier records of a directory are not replayed
)

// record is one decoded record.
type record struct {
	kind kind
	path string // a file for a write, a directory for a fence
	off  int64
	data []byte
}

var errBadPath = errors.New("journal: path must be relative, clean and inside the data directory")

// checkPath refuses paths that could leave the data directory.
func checkPath(p string) error {
	if p == "" || p == "." || len(p) > maxPath || filepath.IsAbs(p) || filepath.Clean(p) != p ||
		p == ".." || strings.HasPrefix(p, "../") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("%w: %q", errBadPath, p)
	}
	return nil
}

func encodeHeader(gen uint64) []byte {
	b := make([]byte, headerSize)
	copy(b, magic[:])
	binary.BigEndian.PutUint64(b[8:], gen)
	binary.BigEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	return b
}

// decodeHeader returns the file's generation, 0 if it holds nothing.
func decodeHeader(b []byte) uint64 {
	if len(b) < headerSize || [8]byte(b[:8]) != magic ||
		binary.BigEndian.Uint32(b[16:]) != crc32.Checksum(b[:16], castagnoli) {
		return 0
	}
	return binary.BigEndian.Uint64(b[8:])
}

// recordSize is the encoded size of a record.
func recordSize(r record) int {
	n := recordFixed + payloadMin + len(r.path)
	if r.kind == kindWrite {
		n += 8 + len(r.data)
	}
	return n
}

// appendRecord encodes r in generation gen onto b.
func appendRecord(b []byte, gen uint64, r record) []byte {
	return append(appendHead(b, gen, r), r.data...)
}

// appendHead encodes everything of r but its data onto b: the record is
// the head followed by r.data (a write's bytes), so a round can write
// the bytes from where they are without copying them into the record.
func appendHead(b []byte, gen uint64, r record) []byte {
	start := len(b)
	b = append(b, make([]byte, recordFixed)...)
	b = binary.BigEndian.AppendUint64(b, gen)
	b = append(b, byte(r.kind))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.path)))
	b = append(b, r.path...)
	if r.kind == kindWrite {
		b = binary.BigEndian.AppendUint64(b, uint64(r.off))
	} else {
		r.data = nil
	}
	head := b[start+recordFixed:]
	binary.BigEndian.PutUint32(b[start:], uint32(len(head)+len(r.data)))
	crc := crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, r.data)
	binary.BigEndian.PutUint32(b[start+4:], crc)
	return b
}

// decodeFile returns the generation of a whole journal file and its
// records, in order, up to the first that does not count. The records'
// data alias b.
func decodeFile(b []byte) (uint64, []record) {
	gen := decodeHeader(b)
	if gen == 0 {
		return 0, nil
	}
	var recs []record
	for p := headerSize; ; {
		r, n, ok := decodeRecord(b[p:], gen)
		if !ok {
			return gen, recs
		}
		recs = append(recs, r)
		p += n
	}
}

// decodeRecord decodes one record of generation gen at the start of b and
// its encoded length; ok is false if there is none that counts.
func decodeRecord(b []byte, gen uint64) (record, int, bool) {
	if len(b) < recordFixed+payloadMin {
		return record{}, 0, false
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < payloadMin || n > len(b)-recordFixed {
		return record{}, 0, false
	}
	p := b[recordFixed : recordFixed+n]
	if binary.BigEndian.Uint32(b[4:]) != crc32.Checksum(p, castagnoli) ||
		binary.BigEndian.Uint64(p) != gen {
		return record{}, 0, false
	}
	r := record{kind: kind(p[8])}
	plen := int(binary.BigEndian.Uint16(p[9:]))
	p = p[payloadMin:]
	if plen > len(p) {
		return record{}, 0, false
	}
	r.path, p = string(p[:plen]), p[plen:]
	if checkPath(r.path) != nil {
		return record{}, 0, false
	}
	switch r.kind {
	case kindFence:
		if len(p) != 0 {
			return record{}, 0, false
		}
	case kindWrite:
		if len(p) < 8 {
			return record{}, 0, false
		}
		r.off = int64(binary.BigEndian.Uint64(p))
		r.data = p[8:]
		if r.off < 0 || r.off > 1<<50 {
			return record{}, 0, false
		}
	default:
		return record{}, 0, false
	}
	return r, recordFixed + n, true
}
