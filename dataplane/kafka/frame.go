package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Framing errors. Each of them closes the connection: the protocol has no
// way to answer a request whose header cannot be read.
var (
	errFrameTooLarge  = errors.New("request frame too large")
	errFrameTooSmall  = errors.New("request frame too small for a header")
	errMalformed      = errors.New("malformed request")
	errUnknownAPI     = errors.New("unknown api key")
	errUnsupportedVer = errors.New("unsupported api version")
)

// apiRange is a version range this broker serves.
type apiRange struct{ min, max int16 }

// apis are the requests served, by key, with their versions. ApiVersions
// advertises exactly this table.
var apis = map[int16]apiRange{
	0:  {3, 10}, // Produce
	1:  {4, 12}, // Fetch
	2:  {1, 7},  // ListOffsets
	3:  {0, 12}, // Metadata
	17: {0, 1},  // SaslHandshake
	18: {0, 3},  // ApiVersions
	19: {0, 7},  // CreateTopics (with Config.ControlPlane)
	20: {0, 6},  // DeleteTopics (with Config.ControlPlane)
	21: {0, 2},  // DeleteRecords (see deleterecords.go)
	22: {0, 4},  // InitProducerId (with Config.ProducerIDs)
	23: {0, 4},  // OffsetForLeaderEpoch
	32: {0, 4},  // DescribeConfigs
	33: {0, 2},  // AlterConfigs (with Config.ControlPlane; see alterconfigs.go)
	44: {0, 1},  // IncrementalAlterConfigs (with Config.ControlPlane)
	36: {0, 2},  // SaslAuthenticate
	37: {0, 3},  // CreatePartitions (with Config.ControlPlane)
	29: {0, 3},  // DescribeAcls (with Config.ControlPlane; see acls.go)
	30: {0, 3},  // CreateAcls (with Config.ControlPlane)
	31: {0, 3},  // DeleteAcls (with Config.ControlPlane)
	50: {0, 0},  // DescribeUserScramCredentials (see scramcredentials.go)
	51: {0, 0},  // AlterUserScramCredentials (refused: credentials are derived)
	// Consumer groups (with Config.Groups; see groups.go).
	8:  {0, 8}, // OffsetCommit
	9:  {0, 8}, // OffsetFetch (v8: many groups)
	10: {0, 4}, // FindCoordinator (v4: batched keys)
	11: {0, 9}, // JoinGroup
	12: {0, 4}, // Heartbeat
	13: {0, 5}, // LeaveGroup (v3: batched members)
	14: {0, 5}, // SyncGroup
	15: {0, 5}, // DescribeGroups
	16: {0, 4}, // ListGroups
	42: {0, 2}, // DeleteGroups
	47: {0, 0}, // OffsetDelete
}

// request is one decoded request.
type request struct {
	key      int16
	version  int16
	corr     int32
	clientID *string
	flexible bool // the request header carried tagged fields
	body     kmsg.Request
}

// readFrame reads one size-prefixed frame into buf (grown as needed) and
// returns it. A size above limit, negative, or too small for a request header
// is an error; the frame's bytes are then not read.
func readFrame(r io.Reader, limit int32, buf []byte) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 0 || n > limit {
		return nil, fmt.Errorf("%w: %d bytes, at most %d allowed", errFrameTooLarge, uint32(n), limit)
	}
	// Allocate up to 8 MiB at once (a typical request in one allocation);
	// beyond that, grow with the data that actually arrives, so a peer
	// that announces a large frame and sends little cannot make the broker
	// allocate it all.
	buf = slices.Grow(buf[:0], int(min(n, 8<<20)))
	for int32(len(buf)) < n {
		start := len(buf)
		want := int(min(n-int32(start), max(int32(cap(buf)-start), 1<<20)))
		buf = slices.Grow(buf, want)[:start+want]
		if _, err := io.ReadFull(r, buf[start:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// parseRequest decodes a frame (without its size prefix): the request
// header, then the body with kmsg. For an ApiVersions request of an
// unsupported version it returns the header and errUnsupportedVer, so that
// the caller can answer with a v0 UNSUPPORTED_VERSION response.
func parseRequest(frame []byte) (*request, error) {
	if len(frame) < 10 {
		return nil, errFrameTooSmall
	}
	r := &request{
		key:     int16(binary.BigEndian.Uint16(frame[0:])),
		version: int16(binary.BigEndian.Uint16(frame[2:])),
		corr:    int32(binary.BigEndian.Uint32(frame[4:])),
	}
	rng, ok := apis[r.key]
	if !ok {
		return r, fmt.Errorf("%w %d", errUnknownAPI, r.key)
	}
	if r.version < rng.min || r.version > rng.max {
		return r, fmt.Errorf("%w: %s v%d (serving v%d–v%d)", errUnsupportedVer, kmsg.NameForKey(r.key), r.version, rng.min, rng.max)
	}
	body := kmsg.RequestForKey(r.key)
	body.SetVersion(r.version)
	r.body = body
	rd := &byteReader{b: frame[8:]}
	if l := rd.int16(); l >= 0 {
		s := string(rd.span(int(l)))
		r.clientID = &s
	} else if l < -1 {
		rd.failed = true
	}
	if body.IsFlexible() {
		r.flexible = true
		kmsg.SkipTags(rd)
	}
	if rd.failed {
		return r, fmt.Errorf("%w: truncated %s header", errMalformed, kmsg.NameForKey(r.key))
	}
	if err := body.ReadFrom(rd.b); err != nil {
		return r, fmt.Errorf("%w: %s v%d body: %w", errMalformed, kmsg.NameForKey(r.key), r.version, err)
	}
	return r, nil
}

// byteReader reads the request header; it implements kmsg.TagReader.
type byteReader struct {
	b      []byte
	failed bool
}

func (r *byteReader) Ok() bool { return !r.failed }

func (r *byteReader) span(n int) []byte {
	if r.failed || n < 0 || n > len(r.b) {
		r.failed = true
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *byteReader) int16() int16 {
	s := r.span(2)
	if s == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(s))
}

func (r *byteReader) Span(n int) []byte { return r.span(n) }

func (r *byteReader) Uvarint() uint32 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > 1<<31 {
		r.failed = true
		return 0
	}
	r.b = r.b[n:]
	return uint32(v)
}
