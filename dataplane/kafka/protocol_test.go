package kafka_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/dataplane/kafka"
)

// TestRevokedKeyIsDisconnected: revoking a key closes its open connections
// within seconds, without the client sending anything; also on a listener
// that asks key homes, where a PLAIN session of a key the cell no longer
// serves stays open only if its tenant moved to another cell.
func TestRevokedKeyIsDisconnected(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("alpha", "developer")
	b.waitForKey(t, a)
	homes := &countingHomes{api: b.cp.CellClient()}
	withHomes := b.startServer(t, func(c *kafka.Config) { c.Homes = homes })
	rc := dialRaw(t, b.addr)
	rcHomes := dialRaw(t, withHomes)
	for _, c := range []*rawConn{rc, rcHomes} {
		if resp := c.authenticate(a.KeyID, a.Secret); resp.ErrorCode != 0 {
			t.Fatalf("authenticate: %d %v", resp.ErrorCode, resp.ErrorMessage)
		}
		if _, err := c.roundTrip(kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("metadata before revocation: %v", err)
		}
	}
	if _, err := a.Owner.RevokeAPIKey(context.Background(), a.KeyID); err != nil {
		t.Fatal(err)
	}
	rc.expectClosed(15 * time.Second)
	rcHomes.expectClosed(15 * time.Second)
	if homes.calls.Load() == 0 {
		t.Fatal("the listener with key homes closed the session without asking the key's home")
	}

	// The key no longer authenticates either.
	rc2 := dialRaw(t, b.addr)
	resp := rc2.authenticate(a.KeyID, a.Secret)
	if resp.ErrorCode != 58 {
		t.Fatalf("revoked key authenticates: code %d", resp.ErrorCode)
	}
	rc2.expectClosed(5 * time.Second)
}

// TestExpiredKeyIsDisconnected: a key that expires while its connection
// is open loses the connection soon after, with no state change to
// trigger the check.
func TestExpiredKeyIsDisconnected(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("alpha", "developer")
	expires := time.Now().Add(5 * time.Second)
	k, err := a.Owner.CreateAPIKey(context.Background(), api.CreateAPIKeyRequest{Description: "short lived", Role: "developer", ExpiresAt: &expires})
	if err != nil {
		t.Fatal(err)
	}
	b.waitForSecret(t, "the short-lived key", k.ID, k.Secret)
	rc := dialRaw(t, b.addr)
	if resp := rc.authenticate(k.ID, k.Secret); resp.ErrorCode != 0 {
		t.Skipf("the key expired before the connection authenticated (slow machine): %d", resp.ErrorCode)
	}
	rc.expectClosed(time.Until(expires) + 10*time.Second)
	if time.Now().Before(expires) {
		t.Fatal("closed before the key expired")
	}
}

// TestProtocolRules covers the rules real clients rarely exercise, one
// named case each, on fresh connections.
func TestProtocolRules(t *testing.T) {
	b := startBroker(t, brokerOpts{maxRequestBytes: 1 << 20})
	a := b.cp.Signup("alpha", "developer")
	b.createTopic(t, a, "small", 1, map[string]string{"max.message.bytes": "2048"})
	b.waitForKey(t, a)
	authed := func(t *testing.T) *rawConn {
		rc := dialRaw(t, b.addr)
		if resp := rc.authenticate(a.KeyID, a.Secret); resp.ErrorCode != 0 {
			t.Fatalf("authenticate: %d", resp.ErrorCode)
		}
		return rc
	}
	// produceRequest is a produce of batch to one partition of "small".
	produceRequest := func(version, acks int16, partition int32, batch []byte) *kmsg.ProduceRequest {
		r := kmsg.NewPtrProduceRequest()
		r.Version, r.Acks, r.TimeoutMillis = version, acks, 5000
		r.Topics = []kmsg.ProduceRequestTopic{{Topic: "small", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: batch}}}}
		return r
	}
	produce := func(t *testing.T, rc *rawConn, version int16, batch []byte) *kmsg.ProduceResponseTopicPartition {
		t.Helper()
		resp, err := rc.roundTrip(produceRequest(version, -1, 0, batch))
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		return &resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}

	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"api versions of an unknown version answer v0 UNSUPPORTED_VERSION", func(t *testing.T) {
			rc := dialRaw(t, b.addr)
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = 9
			rc.send(req)
			body, err := rc.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version = 0
			if err := resp.ReadFrom(body[4:]); err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != 35 || len(resp.ApiKeys) == 0 {
				t.Fatalf("got %+v", resp)
			}
		}},
		{"api versions v3 lists every served api", func(t *testing.T) {
			rc := dialRaw(t, b.addr)
			resp := apiVersions(t, rc)
			keys := map[int16]bool{}
			for _, k := range resp.ApiKeys {
				keys[k.ApiKey] = true
			}
			for _, k := range []int16{0, 1, 2, 3, 17, 18, 23, 32, 36} {
				if !keys[k] {
					t.Errorf("api %s missing", kmsg.NameForKey(k))
				}
			}
		}},
		{"requests before authentication close the connection", func(t *testing.T) {
			rc := dialRaw(t, b.addr)
			rc.send(kmsg.NewPtrMetadataRequest())
			rc.expectClosed(5 * time.Second)
		}},
		{"an unsupported SASL mechanism lists PLAIN and SCRAM", func(t *testing.T) {
			rc := dialRaw(t, b.addr)
			r := rc.handshake(1, "GSSAPI")
			if r.ErrorCode != 33 || strings.Join(r.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
				t.Fatalf("got %+v", r)
			}
		}},
		{"a wrong secret fails with a message and closes", func(t *testing.T) {
			rc := dialRaw(t, b.addr)
			resp := rc.authenticate(a.KeyID, "wrong")
			if resp.ErrorCode != 58 || resp.ErrorMessage == nil || *resp.ErrorMessage == "" {
				t.Fatalf("got %+v", resp)
			}
			rc.expectClosed(5 * time.Second)
		}},
		{"SASL handshake v0 then a bare PLAIN token", func(t *testing.T) {
			rc := dialRaw(t, b.addr)
			if hs := rc.handshake(0, "PLAIN"); hs.ErrorCode != 0 {
				t.Fatalf("handshake: %+v", hs)
			}
			tok := []byte("\x00" + a.KeyID + "\x00" + a.Secret)
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(tok)))
			if _, err := rc.c.Write(append(frame, tok...)); err != nil {
				t.Fatal(err)
			}
			if body, err := rc.readFrame(); err != nil || len(body) != 0 {
				t.Fatalf("token answer %q %v", body, err)
			}
			if _, err := rc.roundTrip(kmsg.NewPtrMetadataRequest()); err != nil {
				t.Fatalf("metadata after v0 authentication: %v", err)
			}
		}},
		{"a valid batch is acknowledged at offset 0 and up", func(t *testing.T) {
			rc := authed(t)
			p := produce(t, rc, 10, makeBatch("a", "b"))
			if p.ErrorCode != 0 || p.BaseOffset < 0 {
				t.Fatalf("got %+v", p)
			}
		}},
		{"a batch over max.message.bytes is MESSAGE_TOO_LARGE", func(t *testing.T) {
			rc := authed(t)
			p := produce(t, rc, 10, makeBatch(string(make([]byte, 4096))))
			if p.ErrorCode != 10 || p.ErrorMessage == nil {
				t.Fatalf("got code %d msg %v", p.ErrorCode, p.ErrorMessage)
			}
		}},
		{"a bad CRC is CORRUPT_MESSAGE with a message", func(t *testing.T) {
			rc := authed(t)
			batch := makeBatch("x")
			batch[len(batch)-1] ^= 0xff
			p := produce(t, rc, 10, batch)
			if p.ErrorCode != 2 || p.ErrorMessage == nil {
				t.Fatalf("got code %d msg %v", p.ErrorCode, p.ErrorMessage)
			}
		}},
		{"a wrong record count is CORRUPT_MESSAGE", func(t *testing.T) {
			rc := authed(t)
			batch := makeBatch("x", "y")
			binary.BigEndian.PutUint32(batch[57:], 5) // NumRecords disagrees with LastOffsetDelta
			binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
			p := produce(t, rc, 7, batch)
			if p.ErrorCode != 2 {
				t.Fatalf("got code %d", p.ErrorCode)
			}
		}},
		{"magic 1 is CORRUPT_MESSAGE", func(t *testing.T) {
			rc := authed(t)
			batch := makeBatch("x")
			batch[16] = 1
			p := produce(t, rc, 3, batch)
			if p.ErrorCode != 2 {
				t.Fatalf("got code %d", p.ErrorCode)
			}
		}},
		{"acks=0 gets no response, and the next request is answered in order", func(t *testing.T) {
			rc := authed(t)
			rc.send(produceRequest(8, 0, 0, makeBatch("fire and forget")))
			if _, err := rc.roundTrip(kmsg.NewPtrMetadataRequest()); err != nil { // roundTrip checks the correlation id
				t.Fatal(err)
			}
		}},
		{"a failed acks=0 produce closes the connection", func(t *testing.T) {
			rc := authed(t)
			rc.send(produceRequest(8, 0, 7, makeBatch("lost")))
			rc.expectClosed(5 * time.Second)
		}},
		{"fetching past the end is OFFSET_OUT_OF_RANGE", func(t *testing.T) {
			rc := authed(t)
			r := kmsg.NewPtrFetchRequest()
			r.Version, r.MaxBytes, r.SessionEpoch = 11, 1<<20, -1
			p := kmsg.NewFetchRequestTopicPartition()
			p.FetchOffset, p.PartitionMaxBytes = 1<<40, 1<<20
			r.Topics = []kmsg.FetchRequestTopic{{Topic: "small", Partitions: []kmsg.FetchRequestTopicPartition{p}}}
			resp, err := rc.roundTrip(r)
			if err != nil {
				t.Fatal(err)
			}
			if c := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; c != 1 {
				t.Fatalf("got code %d", c)
			}
		}},
		{"a long poll at the end waits MaxWaitMillis and returns empty", func(t *testing.T) {
			rc := authed(t)
			end := listOffset(t, rc, "small", -1).Offset
			r := longPoll("small", end, 200)
			resp, err := rc.roundTrip(r)
			if err != nil {
				t.Fatal(err)
			}
			fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
			if fp.ErrorCode != 0 || len(fp.RecordBatches) != 0 || fp.HighWatermark != end {
				t.Fatalf("got code %d, %d bytes, hw %d (end %d)", fp.ErrorCode, len(fp.RecordBatches), fp.HighWatermark, end)
			}
		}},
		{"a long poll wakes when data is committed", func(t *testing.T) {
			rc := authed(t)
			end := listOffset(t, rc, "small", -1).Offset
			r := longPoll("small", end, 8000)
			rc.send(r)
			if pp := produce(t, authed(t), 9, makeBatch("wake up")); pp.ErrorCode != 0 || pp.BaseOffset != end {
				t.Fatalf("produce: code %d offset %d, want offset %d", pp.ErrorCode, pp.BaseOffset, end)
			}
			body, err := rc.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			resp := r.ResponseKind().(*kmsg.FetchResponse)
			if err := resp.ReadFrom(body[5:]); err != nil { // correlation id and header tags
				t.Fatal(err)
			}
			fp := resp.Topics[0].Partitions[0]
			if fp.ErrorCode != 0 || fp.HighWatermark != end+1 || len(fp.RecordBatches) == 0 {
				t.Fatalf("got code %d, %d bytes, hw %d", fp.ErrorCode, len(fp.RecordBatches), fp.HighWatermark)
			}
		}},
		{"list offsets: earliest, latest and by timestamp", func(t *testing.T) {
			rc := authed(t)
			before := time.Now().Add(-time.Hour).UnixMilli()
			p := produce(t, rc, 10, makeBatch("timed"))
			if p.ErrorCode != 0 {
				t.Fatalf("produce: %d", p.ErrorCode)
			}
			ask := func(ts int64) kmsg.ListOffsetsResponseTopicPartition { return listOffset(t, rc, "small", ts) }
			if e := ask(-2); e.ErrorCode != 0 || e.Offset != 0 {
				t.Fatalf("earliest: %+v", e)
			}
			if l := ask(-1); l.ErrorCode != 0 || l.Offset != p.BaseOffset+1 {
				t.Fatalf("latest: %+v, produced at %d", l, p.BaseOffset)
			}
			if o := ask(before); o.ErrorCode != 0 || o.Offset != 0 {
				t.Fatalf("an hour ago: %+v", o)
			}
			if o := ask(time.Now().Add(time.Hour).UnixMilli()); o.ErrorCode != 0 || o.Offset != -1 {
				t.Fatalf("in an hour: %+v", o)
			}
		}},
		{"describe configs returns the topic's effective config", func(t *testing.T) {
			rc := authed(t)
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.Version = 4
			r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "small"}}
			resp, err := rc.roundTrip(r)
			if err != nil {
				t.Fatal(err)
			}
			res := resp.(*kmsg.DescribeConfigsResponse).Resources[0]
			got := map[string]string{}
			for _, c := range res.Configs {
				got[c.Name] = *c.Value
			}
			if res.ErrorCode != 0 || got["max.message.bytes"] != "2048" || got["cleanup.policy"] != "delete" {
				t.Fatalf("got code %d, %v", res.ErrorCode, got)
			}
		}},
		{"offset for leader epoch: the current epoch ends at the high watermark", func(t *testing.T) {
			rc := authed(t)
			p := produce(t, rc, 10, makeBatch("epoch"))
			ask := func(epoch, current int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
				r := kmsg.NewPtrOffsetForLeaderEpochRequest()
				r.Version, r.ReplicaID = 4, -1
				r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "small", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, LeaderEpoch: epoch, CurrentLeaderEpoch: current}}}}
				resp, err := rc.roundTrip(r)
				if err != nil {
					t.Fatal(err)
				}
				return resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
			}
			if got := ask(0, 0); got.ErrorCode != 0 || got.LeaderEpoch != 0 || got.EndOffset != p.BaseOffset+1 {
				t.Fatalf("epoch 0: %+v (produced at %d)", got, p.BaseOffset)
			}
			if got := ask(0, 3); got.ErrorCode != 75 {
				t.Fatalf("a newer current epoch: code %d, want 75 (UNKNOWN_LEADER_EPOCH)", got.ErrorCode)
			}
			if got := ask(5, -1); got.ErrorCode != 0 || got.EndOffset != -1 {
				t.Fatalf("an unknown epoch: %+v", got)
			}
		}},
		{"a frame above MaxRequestBytes closes the connection", func(t *testing.T) {
			rc := authed(t)
			if _, err := rc.c.Write(binary.BigEndian.AppendUint32(nil, 2<<20)); err != nil {
				t.Fatal(err)
			}
			rc.expectClosed(5 * time.Second)
		}},
		{"an unknown api key closes the connection", func(t *testing.T) {
			rc := authed(t)
			frame := binary.BigEndian.AppendUint32(nil, 10)
			frame = append(frame, 0x7f, 0x00, 0, 0, 0, 0, 0, 9, 0xff, 0xff)
			if _, err := rc.c.Write(frame); err != nil {
				t.Fatal(err)
			}
			rc.expectClosed(5 * time.Second)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

// listOffset asks, with ListOffsets v7 on rc, for partition 0 of topic's
// offset at timestamp ts (-1 the end, -2 the start).
func listOffset(t *testing.T, rc *rawConn, topic string, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 7
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = ts
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{lp}}}
	resp, err := rc.roundTrip(lo)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

// longPoll is a sessionless Fetch v12 of partition 0 of topic from offset,
// waiting up to waitMs for at least one byte.
func longPoll(topic string, offset int64, waitMs int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.MaxBytes, r.MinBytes, r.MaxWaitMillis, r.SessionEpoch = 12, 1<<20, 1, waitMs, -1
	p := kmsg.NewFetchRequestTopicPartition()
	p.FetchOffset, p.PartitionMaxBytes = offset, 1<<20
	r.Topics = []kmsg.FetchRequestTopic{{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{p}}}
	return r
}
