package transport

import "testing"

// FuzzDecodeSegmentFrame feeds arbitrary bytes to the frame decoder as a
// segment RPC (list or read, request or response). Invariants: decoding
// never panics and never allocates a segment list longer than the bytes
// could describe (maxSegmentsPerList, two bytes per entry); offsets and
// positions decode as non-negative; whatever decodes re-encodes to a frame
// that decodes to the same message.
func FuzzDecodeSegmentFrame(f *testing.F) {
	for _, tc := range codecCases() {
		if tc.kind&^kindResponse != kindSegmentList && tc.kind&^kindResponse != kindSegmentRead {
			continue
		}
		bufs, _, err := encodeFrame(tc.kind, 9, "tp_x/0", tc.msg, DefaultMaxFrameSize)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(joinBufs(bufs)[frameHeaderLen:])
	}
	f.Add([]byte{kindSegmentList | kindResponse, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 0 && in[0]&^kindResponse != kindSegmentList && in[0]&^kindResponse != kindSegmentRead {
			in[0] = kindSegmentList | in[0]&kindResponse
		}
		fr, err := decodeFrame(in)
		if err != nil {
			return
		}
		switch m := fr.msg.(type) {
		case *SegmentListResponse:
			if len(m.Segments) > len(in)/2 || m.Start < 0 {
				t.Fatalf("decoded %d segments from %d bytes, start %d", len(m.Segments), len(in), m.Start)
			}
			for _, s := range m.Segments {
				if s.Base < 0 || s.Size < 0 {
					t.Fatalf("negative segment %+v", s)
				}
			}
		case *SegmentListRequest:
			if m.From < 0 || m.To < 0 {
				t.Fatalf("negative range %+v", m)
			}
		case *SegmentReadRequest:
			if m.Base < 0 || m.Pos < 0 || m.Limit < 0 {
				t.Fatalf("negative read %+v", m)
			}
		}
		checkReencodes(t, fr)
	})
}
