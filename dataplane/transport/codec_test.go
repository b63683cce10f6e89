package transport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func testHeader() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("b1"), Addr: []byte("127.0.0.1:9093")}
}

// codecCases are the messages every codec test round-trips; the fuzz target
// uses their encodings as its seed corpus.
func codecCases() []struct {
	name string
	kind uint8
	msg  any
} {
	at := time.Unix(1764400000, 123456789)
	big := bytes.Repeat([]byte{0xab}, 4*inlineDataMax)
	return []struct {
		name string
		kind uint8
		msg  any
	}{
		{"heartbeat", kindAppendEntries, &raft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 7, Leader: []byte("127.0.0.1:9093")}},
		{"ping", kindPing, nil},
		{"pong", kindPing | kindResponse, nil},
		{"append one small entry", kindAppendEntries, &raft.AppendEntriesRequest{
			RPCHeader: testHeader(), Term: 7, PrevLogEntry: 10, PrevLogTerm: 6, LeaderCommitIndex: 9,
			Entries: []*raft.Log{{Index: 11, Term: 7, Type: raft.LogCommand, Data: []byte("hello"), AppendedAt: at}},
		}},
		{"append mixed entries", kindAppendEntries, &raft.AppendEntriesRequest{
			RPCHeader: testHeader(), Term: 8, PrevLogEntry: 1 << 40, PrevLogTerm: 7, LeaderCommitIndex: 1 << 40,
			Entries: []*raft.Log{
				{Index: 1<<40 + 1, Term: 8, Type: raft.LogNoop},
				{Index: 1<<40 + 2, Term: 8, Type: raft.LogCommand, Data: big, Extensions: []byte{1, 2, 3}, AppendedAt: at},
				{Index: 1<<40 + 3, Term: 8, Type: raft.LogConfiguration, Data: []byte("cfg")},
				{Index: 1<<40 + 4, Term: 8, Type: raft.LogCommand, Data: big[:inlineDataMax+1]},
			},
		}},
		{"append response", kindAppendEntries | kindResponse, &raft.AppendEntriesResponse{RPCHeader: testHeader(), Term: 8, LastLog: 99, Success: true, NoRetryBackoff: true}},
		{"request vote", kindRequestVote, &raft.RequestVoteRequest{RPCHeader: testHeader(), Term: 3, Candidate: []byte("c"), LastLogIndex: 5, LastLogTerm: 2, LeadershipTransfer: true}},
		{"request vote response", kindRequestVote | kindResponse, &raft.RequestVoteResponse{RPCHeader: testHeader(), Term: 3, Peers: []byte("p"), Granted: true}},
		{"pre-vote", kindRequestPreVote, &raft.RequestPreVoteRequest{RPCHeader: testHeader(), Term: 4, LastLogIndex: 5, LastLogTerm: 3}},
		{"pre-vote response", kindRequestPreVote | kindResponse, &raft.RequestPreVoteResponse{RPCHeader: testHeader(), Term: 4, Granted: true}},
		{"timeout now", kindTimeoutNow, &raft.TimeoutNowRequest{RPCHeader: testHeader()}},
		{"timeout now response", kindTimeoutNow | kindResponse, &raft.TimeoutNowResponse{RPCHeader: raft.RPCHeader{}}},
		{"install snapshot", kindInstallSnapshot, &raft.InstallSnapshotRequest{
			RPCHeader: testHeader(), SnapshotVersion: raft.SnapshotVersionMax, Term: 9, Leader: []byte("l"),
			LastLogIndex: 100, LastLogTerm: 9, Configuration: []byte("conf"), ConfigurationIndex: 50, Size: 1 << 33,
		}},
		{"install snapshot response", kindInstallSnapshot | kindResponse, &raft.InstallSnapshotResponse{RPCHeader: testHeader(), Term: 9, Success: true}},
		{"snapshot accept", kindSnapshotAccept, nil},
		{"error", kindError, &wireError{code: codeUnknownGroup, msg: "unknown group"}},
		{"segment list", kindSegmentList, &SegmentListRequest{RPCHeader: testHeader(), From: 1200, To: 1 << 40}},
		{"segment list response", kindSegmentList | kindResponse, &SegmentListResponse{RPCHeader: testHeader(), Start: 1200,
			Segments: []SegmentInfo{{Base: 1100, Size: 8192}, {Base: 1190, Size: 17}}}},
		{"empty segment list response", kindSegmentList | kindResponse, &SegmentListResponse{RPCHeader: testHeader(), Start: 5}},
		{"segment read", kindSegmentRead, &SegmentReadRequest{RPCHeader: testHeader(), Base: 1100, Pos: 4096, Limit: 8192, Max: 1 << 20}},
		{"segment read response", kindSegmentRead | kindResponse, &SegmentReadResponse{RPCHeader: testHeader(), Data: big}},
		{"seeding error", kindError, &wireError{code: codeSeeding, msg: "replica is being seeded"}},
	}
}

func joinBufs(bufs [][]byte) []byte {
	var out []byte
	for _, b := range bufs {
		out = append(out, b...)
	}
	return out
}

func TestCodecRoundTrip(t *testing.T) {
	for _, tc := range codecCases() {
		t.Run(tc.name, func(t *testing.T) {
			bufs, total, err := encodeFrame(tc.kind, 42, "orders-3", tc.msg, DefaultMaxFrameSize)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			wire := joinBufs(bufs)
			if len(wire) != total {
				t.Fatalf("total %d, wrote %d", total, len(wire))
			}
			if n := binary.LittleEndian.Uint32(wire); int(n) != total-frameHeaderLen {
				t.Fatalf("length prefix %d, want %d", n, total-frameHeaderLen)
			}
			f, err := decodeFrame(wire[frameHeaderLen:])
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if f.kind != tc.kind || f.reqID != 42 || string(f.group) != "orders-3" {
				t.Fatalf("header = %#x %d %q", f.kind, f.reqID, f.group)
			}
			if !equalMsg(tc.msg, f.msg) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", f.msg, tc.msg)
			}
		})
	}
}

// TestCodecNoDataCopy checks that large entry data is written from the
// caller's slice, not copied into the frame.
func TestCodecNoDataCopy(t *testing.T) {
	data := make([]byte, 1<<20)
	req := &raft.AppendEntriesRequest{Term: 1, Entries: []*raft.Log{{Index: 1, Term: 1, Data: data}, {Index: 2, Term: 1, Data: data}}}
	bufs, _, err := encodeFrame(kindAppendEntries, 1, "g", req, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for _, b := range bufs {
		if len(b) == len(data) && &b[0] == &data[0] {
			shared++
		}
	}
	if shared != 2 {
		t.Fatalf("%d of 2 data slices referenced directly; buffers: %d", shared, len(bufs))
	}
}

// TestCodecDecodeAllocs checks the decoder's allocation budget: the message
// struct and two slices per AppendEntries frame, nothing per entry.
func TestCodecDecodeAllocs(t *testing.T) {
	entries := make([]*raft.Log, 64)
	for i := range entries {
		entries[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Data: make([]byte, 1000), AppendedAt: time.Now()}
	}
	bufs, _, err := encodeFrame(kindAppendEntries, 1, "g", &raft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1, Entries: entries}, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	wire := joinBufs(bufs)[frameHeaderLen:]
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := decodeFrame(wire); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 {
		t.Fatalf("decode of 64 entries: %v allocations, want ≤ 3", allocs)
	}
}

func TestCodecRejects(t *testing.T) {
	good, _, err := encodeFrame(kindRequestVote, 1, "g", &raft.RequestVoteRequest{Term: 1}, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	wire := joinBufs(good)[frameHeaderLen:]
	manyEntries := []byte{kindAppendEntries, 1, 0, 0, 0, 0, 0, 0, 0, 1, 'g', 0, 0, 0, 0, 1, 0, 0, 0}
	manyEntries = binary.AppendUvarint(manyEntries, 1<<30)
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"truncated", wire[:len(wire)-1]},
		{"trailing", append(append([]byte{}, wire...), 0)},
		{"unknown kind", append([]byte{0x33}, wire[1:]...)},
		{"entry count beyond frame", manyEntries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeFrame(tc.in); err == nil {
				t.Fatal("decoded without error")
			}
		})
	}
	t.Run("encode over limit", func(t *testing.T) {
		req := &raft.AppendEntriesRequest{Entries: []*raft.Log{{Data: make([]byte, 2048)}}}
		if _, _, err := encodeFrame(kindAppendEntries, 1, "g", req, 1024); !errors.Is(err, errFrameTooLarge) {
			t.Fatalf("err = %v, want errFrameTooLarge", err)
		}
	})
}

// equalMsg compares messages treating nil and empty byte slices alike and
// times by instant.
func equalMsg(want, got any) bool {
	if w, ok := want.(*raft.AppendEntriesRequest); ok {
		g, ok := got.(*raft.AppendEntriesRequest)
		if !ok || len(w.Entries) != len(g.Entries) {
			return false
		}
		for i := range w.Entries {
			a, b := w.Entries[i], g.Entries[i]
			if a.Index != b.Index || a.Term != b.Term || a.Type != b.Type || !a.AppendedAt.Equal(b.AppendedAt) ||
				!bytes.Equal(a.Data, b.Data) || !bytes.Equal(a.Extensions, b.Extensions) {
				return false
			}
		}
		wc, gc := *w, *g
		wc.Entries, gc.Entries = nil, nil
		return reflect.DeepEqual(normalize(&wc), normalize(&gc))
	}
	return reflect.DeepEqual(normalize(want), normalize(got))
}

// normalize turns empty byte slices into nil, recursively through structs.
func normalize(m any) any {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer {
		return m
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	normalizeValue(c.Elem())
	return c.Interface()
}

func normalizeValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				normalizeValue(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 && v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
		}
	}
}

// FuzzDecodeFrame feeds arbitrary bytes to the frame reader and decoder.
// Invariants:
//   - readFrame never allocates more than the configured MaxFrameSize for
//     a frame, whatever length prefix it reads, and decodeFrame allocates
//     at most a bounded entries slice (≤ maxEntriesPerFrame, and ≤ one per
//     minEntryLen bytes of input) plus the message struct;
//   - neither panics;
//   - a frame that decodes re-encodes to bytes that decode to an equal
//     message (the codec is a bijection on what it accepts, up to nil/empty
//     slices and time zones).
func FuzzDecodeFrame(f *testing.F) {
	for _, tc := range codecCases() {
		bufs, _, err := encodeFrame(tc.kind, 7, "g-1", tc.msg, DefaultMaxFrameSize)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(joinBufs(bufs))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	const maxFrame = 1 << 20
	f.Fuzz(func(t *testing.T, in []byte) {
		buf, err := readFrame(bufioReaderOf(in), maxFrame)
		if err != nil {
			return
		}
		if len(buf) > maxFrame {
			t.Fatalf("read %d bytes past the limit", len(buf))
		}
		fr, err := decodeFrame(buf)
		if err != nil {
			return
		}
		checkReencodes(t, fr)
	})
}

// checkReencodes fails t unless fr, a decoded frame, encodes to bytes that
// decode to the same frame: the round trip every frame fuzz target checks.
func checkReencodes(t *testing.T, fr frame) {
	t.Helper()
	bufs, _, err := encodeFrame(fr.kind, fr.reqID, string(fr.group), fr.msg, DefaultMaxFrameSize)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	again, err := decodeFrame(joinBufs(bufs)[frameHeaderLen:])
	if err != nil {
		t.Fatalf("decode re-encoded: %v", err)
	}
	if again.kind != fr.kind || again.reqID != fr.reqID || !bytes.Equal(again.group, fr.group) || !equalMsg(fr.msg, again.msg) {
		t.Fatalf("re-encode changed the frame:\n%#v\n%#v", fr.msg, again.msg)
	}
}

func bufioReaderOf(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
