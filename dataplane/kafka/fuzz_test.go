package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seedRequests are well-formed requests of every served API at a few
// versions, with realistic contents.
func seedRequests() [][]byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed"))
	var out [][]byte
	add := func(r kmsg.Request) { out = append(out, f.AppendRequest(nil, r, 7)) }
	for key, rng := range apis {
		for _, v := range []int16{rng.min, (rng.min + rng.max) / 2, rng.max} {
			r := kmsg.RequestForKey(key)
			r.SetVersion(v)
			switch r := r.(type) {
			case *kmsg.ProduceRequest:
				r.Acks, r.TimeoutMillis = -1, 1000
				r.Topics = []kmsg.ProduceRequestTopic{{Topic: "orders", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: makeBatch("a", "b")}}}}
			case *kmsg.FetchRequest:
				p := kmsg.NewFetchRequestTopicPartition()
				p.PartitionMaxBytes = 1 << 20
				r.Topics = []kmsg.FetchRequestTopic{{Topic: "orders", Partitions: []kmsg.FetchRequestTopicPartition{p}}}
			case *kmsg.MetadataRequest:
				r.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
			case *kmsg.ListOffsetsRequest:
				p := kmsg.NewListOffsetsRequestTopicPartition()
				r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "orders", Partitions: []kmsg.ListOffsetsRequestTopicPartition{p}}}
			case *kmsg.DescribeConfigsRequest:
				r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"}}
			case *kmsg.SASLHandshakeRequest:
				r.Mechanism = "PLAIN"
			case *kmsg.SASLAuthenticateRequest:
				r.SASLAuthBytes = []byte("\x00key\x00secret")
			case *kmsg.ApiVersionsRequest:
				r.ClientSoftwareName, r.ClientSoftwareVersion = "seed", "1.0"
			}
			add(r)
		}
	}
	return out
}

// FuzzDecodeRequest feeds arbitrary bytes to the request decoder as a
// connection would: size-prefixed frames, then each frame's header and
// body. The seed corpus (every served API, whole and truncated) runs as an
// ordinary test.
//
// Invariants: decoding never panics and never reads past its frame; a frame
// over the limit is refused before its body is read; an accepted request
// has a served key and version, and encodes again.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s)
		f.Add(s[:len(s)/2])
		f.Add(s[:len(s)-1])
		two := append(append([]byte{}, s...), s...)
		f.Add(two)
	}
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 10, 0x7f, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 16
		r := bytes.NewReader(data)
		for {
			before := r.Len()
			frame, err := readFrame(r, limit, nil)
			if err != nil {
				if before-r.Len() > 4+limit {
					t.Fatalf("read %d bytes for a refused frame", before-r.Len())
				}
				return
			}
			req, err := parseRequest(frame)
			if err != nil {
				continue
			}
			rng, ok := apis[req.key]
			if !ok || req.version < rng.min || req.version > rng.max {
				t.Fatalf("accepted %d v%d", req.key, req.version)
			}
			if req.body.GetVersion() != req.version {
				t.Fatalf("body version %d, header %d", req.body.GetVersion(), req.version)
			}
			_ = req.body.AppendTo(nil)
		}
	})
}

// TestReadFrameLarge: frames beyond the first allocation arrive whole; a
// frame cut short is an error, not a short read.
func TestReadFrameLarge(t *testing.T) {
	body := make([]byte, 20<<20+3)
	for i := range body {
		body[i] = byte(i * 7)
	}
	framed := append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	got, err := readFrame(bytes.NewReader(framed), 32<<20, nil)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("whole frame: %d bytes, %v", len(got), err)
	}
	if _, err := readFrame(bytes.NewReader(framed[:len(framed)/2]), 32<<20, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut frame: %v", err)
	}
	if _, err := readFrame(bytes.NewReader(framed), 16<<20, nil); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
}
