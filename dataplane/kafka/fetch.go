package kafka

import (
	"encoding/binary"
	"io"
	"math"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/log"
)

// kafkaFetchSessionIDNotFound answers a fetch that names a session: this
// broker is sessionless (it always answers session id 0), so no session it
// could name exists. The catalogue has no entry because nothing but the
// Kafka protocol can meet this case.
const kafkaFetchSessionIDNotFound int16 = 70

// fetchPart is one partition of a Fetch response. Its records stay in the
// segment file until the response is written.
type fetchPart struct {
	partition int32
	errCode   int16
	// named says that leader and leaderEpoch name the current leader,
	// with NOT_LEADER_OR_FOLLOWER (v12+ CurrentLeader, KIP-951).
	named       bool
	leader      int32
	leaderEpoch int32
	hw          int64
	logStart    int64
	records     log.Slice
}

type fetchTopic struct {
	name  string
	parts []fetchPart
}

// fetch serves a Fetch request: it reads committed data, long-polls until
// MinBytes are there or MaxWaitMillis pass, and writes the response itself
// so that record bytes go from the segment files to the socket.
func (c *conn) fetch(req *request, r *kmsg.FetchRequest) error {
	var topErr int16
	if r.Version >= 7 && r.SessionID != 0 {
		topErr = kafkaFetchSessionIDNotFound
	}
	wait := time.Duration(max(r.MaxWaitMillis, 0)) * time.Millisecond
	wait = min(wait, c.s.cfg.MaxFetchWait)
	deadline := time.Now().Add(wait)
	wake := make(chan struct{}, 1)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var topics []fetchTopic
		var total int64
		var failed bool
		var watch []watchPoint
		if topErr == 0 {
			topics, total, failed, watch = c.readFetch(c.s.cfg.State.View(), r)
		}
		left := time.Until(deadline)
		if topErr != 0 || failed || total >= int64(r.MinBytes) || left <= 0 || c.s.ctx.Err() != nil {
			if late, err := c.egressFetch(deadline, total); err != nil {
				releaseFetch(topics)
				return err
			} else if late {
				// Not granted in time: answer without records; the
				// client fetches the same offsets again.
				dropRecords(topics)
			}
			metered := false
			err := c.respond(req, func() error {
				if h := c.s.cfg.beforeFetchWrite; h != nil {
					h(c.nc)
				}
				err := writeFetch(c.nc, c.s.cfg.Now().Add(c.s.cfg.WriteTimeout), req, topErr, throttleMillis(c.throttle), topics)
				if err == nil {
					// Counted once written: a response the connection
					// did not take is not billed (kafka/usage.go).
					metered = c.meterFetch(topics)
				}
				releaseFetch(topics) // before the mute: the records are sent
				topics = nil
				return err
			})
			releaseFetch(topics) // the delay before writing was cut short
			if metered {
				c.syncUsage(c.s.ctx)
			}
			return err
		}
		releaseFetch(topics)
		cancels := make([]func(), 0, len(watch))
		for _, w := range watch {
			cancels = append(cancels, w.part.Watch(w.hw, wake))
		}
		if timer == nil {
			timer = time.NewTimer(left)
		} else {
			timer.Reset(left)
		}
		select {
		case <-wake:
		case <-timer.C:
		case <-c.s.ctx.Done():
		}
		for _, cancel := range cancels {
			cancel()
		}
		select { // drop a wake-up that raced with the cancels
		case <-wake:
		default:
		}
	}
}

type watchPoint struct {
	part Partition
	hw   int64
}

// readFetch reads every requested partition once. failed reports a
// partition error (Kafka answers those at once instead of waiting); watch
// lists the partitions to wait on.
func (c *conn) readFetch(v *cellview.View, r *kmsg.FetchRequest) (topics []fetchTopic, total int64, failed bool, watch []watchPoint) {
	remaining := int64(r.MaxBytes)
	if remaining <= 0 {
		remaining = math.MaxInt32
	}
	topics = make([]fetchTopic, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		ft := &topics[i]
		ft.name = rt.Topic
		ft.parts = make([]fetchPart, len(rt.Partitions))
		t, found := v.Topic(c.tenant(), rt.Topic)
		readable := found && c.allowed(v, rt.Topic, authz.OpRead)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			fp := &ft.parts[j]
			fp.partition, fp.hw, fp.logStart = rp.Partition, -1, -1
			fail := func(e *catalog.Entry) {
				fp.errCode = e.KafkaCode
				failed = true
			}
			if !found || !hasPartition(t.Partitions, rp.Partition) {
				fail(catalog.TopicNotFound)
				continue
			}
			if !readable {
				fail(catalog.TopicAccessDenied)
				continue
			}
			part, ok := c.s.cfg.Partitions.Get(t.ID, rp.Partition)
			if !ok {
				fail(catalog.NotLeader)
				continue
			}
			if node, ok := part.Leader(); !ok || node != c.s.cfg.NodeID {
				fail(catalog.NotLeader)
				if ok {
					fp.named, fp.leader, fp.leaderEpoch = true, int32(node), part.LeaderEpoch()
				}
				continue
			}
			if e := checkEpoch(r.Version >= 9, rp.CurrentLeaderEpoch, part.LeaderEpoch()); e != nil {
				fail(e)
				continue
			}
			limit := min(int64(max(rp.PartitionMaxBytes, 0)), remaining)
			var hw int64
			if limit > 0 || total == 0 {
				s, h, err := part.Fetch(rp.FetchOffset, int32(max(limit, 1)))
				if err != nil {
					fp.errCode, _ = errCode(err)
					// OFFSET_OUT_OF_RANGE tells the client where the
					// log is now, for its auto.offset.reset.
					fp.hw, fp.logStart = part.HighWatermark(), part.LogStartOffset()
					failed = true
					continue
				}
				// Only the first non-empty partition may exceed the limits
				// (KIP-74), so that a consumer always makes progress.
				if total > 0 && s.Size > limit {
					s.Release()
				} else {
					fp.records = s
					total += s.Size
					remaining -= s.Size
				}
				hw = h
			} else {
				hw = part.HighWatermark()
			}
			fp.hw, fp.logStart = hw, part.LogStartOffset()
			watch = append(watch, watchPoint{part, max(hw, rp.FetchOffset)})
		}
	}
	return topics, total, failed, watch
}

// checkEpoch compares a request's current leader epoch with the
// partition's: older is fenced, newer is not known here yet, -1 skips it.
func checkEpoch(has bool, requested, current int32) *catalog.Entry {
	switch {
	case !has || requested < 0:
		return nil
	case requested < current:
		return catalog.FencedLeaderEpoch
	case requested > current:
		return catalog.UnknownLeaderEpoch
	}
	return nil
}

func releaseFetch(topics []fetchTopic) {
	for i := range topics {
		for j := range topics[i].parts {
			topics[i].parts[j].records.Release()
		}
	}
}

// dropRecords releases the records of a response and leaves it without
// them; partition errors and watermarks stay.
func dropRecords(topics []fetchTopic) {
	for i := range topics {
		for j := range topics[i].parts {
			topics[i].parts[j].records.Release()
			topics[i].parts[j].records = log.Slice{}
		}
	}
}

// writeFetch encodes a Fetch response (v4–v12) by hand. The fixed fields
// are built in memory; each partition's records are written from their
// segment file with Slice.WriteTo, which uses sendfile(2) when w is a plain
// TCP connection and copies otherwise (TLS).
func writeFetch(w io.Writer, deadline time.Time, req *request, topErr int16, throttleMs int32, topics []fetchTopic) error {
	ver := req.version
	flex := ver >= 12
	type piece struct {
		b []byte
		s *log.Slice
	}
	var pieces []piece
	b := appendHeader(nil, req)
	b = be32(b, throttleMs)
	if ver >= 7 {
		b = be16(b, topErr)
		b = be32(b, 0) // session id: always sessionless
	}
	b = appendArrayLen(b, flex, len(topics))
	for i := range topics {
		t := &topics[i]
		b = appendString(b, flex, t.name)
		b = appendArrayLen(b, flex, len(t.parts))
		for j := range t.parts {
			p := &t.parts[j]
			b = be32(b, p.partition)
			b = be16(b, p.errCode)
			b = be64(b, p.hw)
			b = be64(b, p.hw) // last stable offset: no transactions, so the high watermark
			if ver >= 5 {
				b = be64(b, p.logStart)
			}
			// aborted transactions: null
			if flex {
				b = append(b, 0)
			} else {
				b = be32(b, -1)
			}
			if ver >= 11 {
				b = be32(b, -1) // preferred read replica: none
			}
			if flex {
				b = binary.AppendUvarint(b, uint64(p.records.Size)+1)
			} else {
				b = be32(b, int32(p.records.Size))
			}
			if p.records.Size > 0 {
				pieces = append(pieces, piece{b: b}, piece{s: &p.records})
				b = nil
			}
			if flex {
				b = appendPartitionTags(b, p)
			}
		}
		if flex {
			b = append(b, 0) // topic tags
		}
	}
	if flex {
		b = append(b, 0) // response tags
	}
	pieces = append(pieces, piece{b: b})
	var size int64
	for _, p := range pieces {
		size += int64(len(p.b))
		if p.s != nil {
			size += p.s.Size
		}
	}
	binary.BigEndian.PutUint32(pieces[0].b, uint32(size-4))
	if dc, ok := w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		dc.SetWriteDeadline(deadline)
	}
	var bufs net.Buffers
	for _, p := range pieces {
		if p.s == nil {
			bufs = append(bufs, p.b)
			continue
		}
		if _, err := bufs.WriteTo(w); err != nil {
			return err
		}
		bufs = bufs[:0]
		if _, err := p.s.WriteTo(w); err != nil {
			return err
		}
	}
	_, err := bufs.WriteTo(w)
	return err
}

// appendPartitionTags writes a v12+ partition's tagged fields: none, or
// CurrentLeader (tag 1: leader id, leader epoch, its own empty tags) when
// the answer names the leader.
func appendPartitionTags(b []byte, p *fetchPart) []byte {
	if !p.named {
		return append(b, 0)
	}
	b = append(b, 1, 1, 9) // one field: tag 1, 9 bytes
	b = be32(b, p.leader)
	b = be32(b, p.leaderEpoch)
	return append(b, 0)
}

func be16(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func be32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func be64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

func appendArrayLen(b []byte, flex bool, n int) []byte {
	if flex {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return be32(b, int32(n))
}

func appendString(b []byte, flex bool, s string) []byte {
	if flex {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = be16(b, int16(len(s)))
	}
	return append(b, s...)
}
