package transport

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// FuzzDecodeMirrorFrame feeds arbitrary bytes to the decoder of mirror
// connections. Invariants: it never panics; a frame of another request
// kind comes back undecoded (msg nil, errNotMirrorKind) and nothing else
// without a message; offsets decode as non-negative and no byte slice is
// longer than the input; whatever decodes re-encodes to a frame that
// decodes to the same message.
func FuzzDecodeMirrorFrame(f *testing.F) {
	for _, msg := range []struct {
		kind uint8
		msg  any
	}{
		{kindMirrorRead, &MirrorReadRequest{Offset: 40, Max: 1 << 20}},
		{kindMirrorRead | kindResponse, &MirrorReadResponse{Data: []byte("batches")}},
		{kindMirrorState, &MirrorStateRequest{}},
		{kindMirrorState | kindResponse, &MirrorStateResponse{MirrorState{LogStart: 1, HighWatermark: 90, Fenced: true, FencedEnd: 90}}},
		{kindMirrorSnapshot, &MirrorSnapshotRequest{}},
		{kindMirrorSnapshot | kindResponse, &MirrorSnapshotResponse{Data: []byte{18, 0, 1}}},
		{kindError, &wireError{code: codeNotLeader, msg: "a2"}},
		{kindRequestVote, &raft.RequestVoteRequest{Term: 3}},
	} {
		bufs, err := encodeAny(msg.kind, 7, "t1/0", msg.msg, DefaultMaxFrameSize)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(joinBufs(bufs)[frameHeaderLen:])
	}
	f.Add([]byte{kindMirrorRead, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, err := decodeMirrorFrame(in)
		if err == errNotMirrorKind {
			if fr.msg != nil || fr.kind&kindResponse != 0 {
				t.Fatalf("undecoded frame kind %#x with message %T", fr.kind, fr.msg)
			}
			return
		}
		if err != nil {
			return
		}
		if fr.msg == nil {
			t.Fatalf("frame kind %#x decoded without a message", fr.kind)
		}
		switch m := fr.msg.(type) {
		case *MirrorReadRequest:
			if m.Offset < 0 {
				t.Fatalf("offset %d", m.Offset)
			}
		case *MirrorStateResponse:
			if m.LogStart < 0 || m.HighWatermark < 0 || m.FencedEnd < 0 {
				t.Fatalf("state %+v", m.MirrorState)
			}
		case *MirrorReadResponse:
			if len(m.Data) > len(in) {
				t.Fatalf("%d bytes of data from %d", len(m.Data), len(in))
			}
		}
		bufs, err := encodeAny(fr.kind, fr.reqID, string(fr.group), fr.msg, DefaultMaxFrameSize)
		if err != nil {
			t.Fatalf("re-encode %T: %v", fr.msg, err)
		}
		fr2, err := decodeMirrorFrame(joinBufs(bufs)[frameHeaderLen:])
		if err != nil {
			t.Fatalf("decode re-encoded %T: %v", fr.msg, err)
		}
		if fr2.kind != fr.kind || fr2.reqID != fr.reqID || !bytes.Equal(fr2.group, fr.group) || !reflect.DeepEqual(fr2.msg, fr.msg) {
			t.Fatalf("round trip changed the frame: %+v to %+v", fr, fr2)
		}
	})
}
