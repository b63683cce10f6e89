package httpapi

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/records"
	"github.com/sluicehq/sluice/dataplane/usage"
)

// Read limits.
const (
	defaultReadBytes = 1 << 20
	maxReadBytes     = 16 << 20
)

// Message is a record as reads and fetches return it.
type Message struct {
	Topic       string       `json:"topic,omitempty"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	TimestampMs int64        `json:"timestamp_ms"`
	Key         []byte       `json:"key"`
	Value       []byte       `json:"value"`
	Headers     []jsonHeader `json:"headers"`
	MessageID   string       `json:"message_id,omitempty"`
	// DeliveryAttempt is set by group fetches for a message being
	// delivered again after a nack: 2 for the first retry.
	DeliveryAttempt int `json:"delivery_attempt,omitempty"`
}

type readResponse struct {
	Messages       []Message `json:"messages"`
	NextOffset     int64     `json:"next_offset"`
	HighWatermark  int64     `json:"high_watermark"`
	LogStartOffset int64     `json:"log_start_offset"`
	// billed is the bytes out of Messages: their share of the stored
	// batches they were read from (usage.BatchShare). Set on the
	// leader's reads only.
	billed int64
}

// readParams are a read's query parameters.
type readParams struct {
	offset   int64 // -2 earliest, -1 latest
	maxBytes int32
	wait     time.Duration
}

func (s *Server) readParams(c echo.Context) (readParams, error) {
	rp := readParams{maxBytes: defaultReadBytes}
	q := c.QueryParams()
	for k := range q {
		switch k {
		case "offset", "max_bytes", "max_wait_ms":
		default:
			return rp, catalog.InvalidRequest.Newf("unknown query parameter %q; use offset, max_bytes, max_wait_ms", k)
		}
	}
	switch o := q.Get("offset"); o {
	case "":
		return rp, catalog.InvalidRequest.New("offset is required: a number, earliest or latest")
	case "earliest":
		rp.offset = -2
	case "latest":
		rp.offset = -1
	default:
		n, err := strconv.ParseInt(o, 10, 64)
		if err != nil || n < 0 {
			return rp, catalog.InvalidRequest.Newf("offset %q is not a number ≥ 0, earliest or latest", o)
		}
		rp.offset = n
	}
	if v := q.Get("max_bytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 || n > maxReadBytes {
			return rp, catalog.InvalidFetchSize.Newf("max_bytes must be a number from 1 to %d", maxReadBytes)
		}
		rp.maxBytes = int32(n)
	}
	if v := q.Get("max_wait_ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return rp, catalog.InvalidRequest.New("max_wait_ms must be a number of milliseconds ≥ 0")
		}
		rp.wait = min(time.Duration(n)*time.Millisecond, s.cfg.MaxWait)
	}
	return rp, nil
}

// read serves GET /v1/topics/{topic}/partitions/{p}/messages: committed
// messages from an offset, long-polling up to max_wait_ms while there are
// none; on a broker that does not lead the partition it is forwarded to
// the leader's.
func (s *Server) read(c echo.Context) error {
	cl := callerOf(c)
	t, pn, err := cl.routePartition(c, "", authz.OpRead)
	if err != nil {
		return err
	}
	rp, err := s.readParams(c)
	if err != nil {
		return err
	}
	// Admitted here, where the request entered the cell (the leader's
	// broker then counts no request again, only the bytes it reads), or
	// on the leader with only its throughput checked when another broker
	// forwarded it.
	if err := s.admit(c.Request().Context(), Admission{Principal: cl.p, Op: OpRead, Topic: t.Name, Forwarded: cl.forwarded}); err != nil {
		return err
	}
	part, leader, known := s.leaderOf(c.Request().Context(), t, pn)
	switch {
	case !known:
		return frontdoor.NoLeader(part, "the partition has no leader right now; retry")
	case leader != s.cfg.NodeID:
		return s.proxy(c, cl.v, leader, nil, rp.wait)
	}
	out, err := s.readLocal(c.Request().Context(), part, pn, rp)
	if err != nil {
		return err
	}
	var size int64
	for _, m := range out.Messages {
		size += int64(len(m.Key) + len(m.Value))
	}
	s.record(Admission{Principal: cl.p, Op: OpRead, Topic: t.Name, Messages: len(out.Messages), Bytes: size})
	return s.writeMetered(c, out, []meteredRead{readOf(t.ID, out)})
}

// readLocal reads from the local leader replica, waiting up to rp.wait
// for data at the offset.
func (s *Server) readLocal(ctx context.Context, part Partition, pn int32, rp readParams) (*readResponse, error) {
	switch rp.offset {
	case -2:
		rp.offset = part.LogStartOffset()
	case -1:
		rp.offset = part.HighWatermark()
	}
	deadline := time.Now().Add(rp.wait)
	wake := make(chan struct{}, 1)
	for {
		msgs, billed, next, hw, err := readOnce(part, pn, rp.offset, rp.maxBytes)
		if err != nil {
			return nil, err
		}
		left := time.Until(deadline)
		if len(msgs) > 0 || left <= 0 {
			return &readResponse{Messages: msgs, NextOffset: next, HighWatermark: hw, LogStartOffset: part.LogStartOffset(), billed: billed}, nil
		}
		if next > rp.offset {
			// Only control batches: move past them and look again.
			rp.offset = next
			continue
		}
		cancel := part.Watch(max(hw, rp.offset), wake)
		timer := time.NewTimer(left)
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// readOnce decodes the committed records at or after offset, up to
// about maxBytes of batches (at least one batch when there is one), and
// returns with them their bytes out (billed): each batch's share for the
// records returned from it.
func readOnce(part Partition, pn int32, offset int64, maxBytes int32) (msgs []Message, billed, next, hw int64, err error) {
	sl, hw, err := part.Fetch(offset, maxBytes)
	if err != nil {
		if catalogued(err).Entry == catalog.OffsetOutOfRange {
			return nil, 0, 0, 0, catalog.OffsetOutOfRange.Wrap(err, fmt.Sprintf("offset %d is outside the partition's retained range, which starts at %d and ends at the high watermark %d",
				offset, part.LogStartOffset(), part.HighWatermark()))
		}
		return nil, 0, 0, 0, err
	}
	defer sl.Release()
	if sl.Size == 0 {
		return []Message{}, 0, offset, hw, nil
	}
	data, err := sl.AppendTo(nil)
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("read partition %d at %d: %w", pn, offset, err)
	}
	recs, next, err := records.Decode(data, offset, 0)
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("decode partition %d at %d: %w", pn, offset, err)
	}
	return toMessages("", pn, recs), billedBytes(data, recs), next, hw, nil
}

// billedBytes is the bytes out of recs, decoded from the batches in data
// (whole, as the partition stored them): per batch of n records, the
// records returned from it are its last k (those before the requested
// offset are skipped), whose share is usage.BatchShare(size, n-k, n, n).
func billedBytes(data []byte, recs []records.Record) int64 {
	var billed int64
	i := 0
	for len(data) > 0 && i < len(recs) {
		h, err := log.ParseHeader(data)
		if err != nil || h.Size() > int64(len(data)) {
			break // Decode accepted data: not reached
		}
		data = data[h.Size():]
		k := 0
		for i < len(recs) && recs[i].Offset <= h.LastOffset() {
			k++
			i++
		}
		if n := int(h.NumRecords); k > 0 {
			billed += usage.BatchShare(h.Size(), n-k, n, n)
		}
	}
	return billed
}

// toMessages converts decoded records; the message id header becomes
// MessageID and is left out of Headers.
func toMessages(topic string, pn int32, recs []records.Record) []Message {
	out := make([]Message, len(recs))
	for i, r := range recs {
		m := Message{Topic: topic, Partition: pn, Offset: r.Offset, TimestampMs: r.Timestamp, Key: r.Key, Value: r.Value, Headers: make([]jsonHeader, 0, len(r.Headers))}
		for _, h := range r.Headers {
			if h.Key == MessageIDHeader && m.MessageID == "" {
				m.MessageID = string(h.Value)
				continue
			}
			m.Headers = append(m.Headers, jsonHeader{Key: h.Key, Value: h.Value})
		}
		out[i] = m
	}
	return out
}
