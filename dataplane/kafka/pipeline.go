package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce requests in turn. Kafka serves a connection's requests one at a
// time and answers them in order; Java's and librdkafka's producers keep
// up to five produce requests in flight on a connection. A broker that
// waited for each one's commit before reading the next would give every
// partition one Raft entry per round trip, however many requests wait
// behind it. Here a produce request is read, checked and handed to its
// partitions (frontdoor.Submitter, which keeps the order of hand-offs),
// and the next request is read while it commits: up to maxPipelined
// produce requests commit together, their batches of one partition in the
// order they arrived, and their responses are written in that order too.
// Every other request, and a produce that cannot go ahead (acks=0, a
// throttled tenant, an old client that expects its throttle as a delay, a
// redirected session, a partition that cannot take batches in order),
// first waits until every earlier response is written, so it is served
// exactly as before.

// maxPipelined bounds the produce requests of one connection handed to
// their partitions and not yet answered: Java's and librdkafka's
// idempotent producers keep at most five in flight.
const maxPipelined = 5

// pipelined is a produce request handed to its partitions.
type pipelined struct {
	req   *request
	p     *pendingProduce
	size  int       // the request's frame bytes, for the metrics
	start time.Time // when it was read
	done  chan struct{}
}

// pipelinable returns the request as a produce that may go ahead of its
// predecessors' responses.
func (c *conn) pipelinable(req *request) (*kmsg.ProduceRequest, bool) {
	r, ok := req.body.(*kmsg.ProduceRequest)
	if !ok || r.Acks == 0 || !kip219(req) || c.redirect != nil {
		return nil, false
	}
	return r, true
}

// produceInTurn serves a produce request that pipelinable accepted: it
// hands the batches to their partitions and leaves the response to
// finishHead, unless the request must wait for every earlier one.
func (c *conn) produceInTurn(req *request, r *kmsg.ProduceRequest, size int, start time.Time) error {
	if t := c.requestThrottle(req); t > 0 {
		// A throttled tenant's connection is muted after each response:
		// serve it in series, as every request was.
		if err := c.drain(); err != nil {
			return err
		}
		c.throttle = t
		err := c.serveCounted(req)
		c.observe(req, size, start, err)
		return err
	}
	pp := &pipelined{req: req, p: c.startProduce(r), size: size, start: start, done: make(chan struct{})}
	go func() {
		defer close(pp.done)
		c.awaitProduce(pp.p)
	}()
	c.queue = append(c.queue, pp)
	switch {
	case !pp.p.ordered:
		// Some batch is handed over only as it is awaited: nothing may
		// be handed to a partition before it.
		return c.drain()
	case len(c.queue) >= maxPipelined:
		return c.finishHead()
	}
	return nil
}

// finishHead waits for the oldest pipelined produce's commits and writes
// its response.
func (c *conn) finishHead() error {
	pp := c.queue[0]
	c.queue[0] = nil
	c.queue = c.queue[1:]
	<-pp.done
	resp := c.finishProduce(pp.p)
	if c.s.ctx.Err() != nil {
		// As in serveCounted: the outcome is unknown, the client retries
		// elsewhere.
		return errors.New("listener closing during produce")
	}
	err := c.reply(pp.req, resp)
	c.observe(pp.req, pp.size, pp.start, err)
	return err
}

// drain writes the responses of every pipelined produce, oldest first.
func (c *conn) drain() error {
	for len(c.queue) > 0 {
		if err := c.finishHead(); err != nil {
			return err
		}
	}
	return nil
}

// closePipeline answers the produces still pipelined when serve ends,
// as it answered each request before reading the next when requests were
// served one at a time (a connection closed for a revoked key, say); what
// cannot be answered (the peer left, the listener closes) is abandoned:
// its outcome is unknown to the client, as with any lost connection.
func (c *conn) closePipeline() {
	_ = c.drain()
	for _, pp := range c.queue {
		pp.p.cancel()
	}
	c.queue = nil
	if c.reader != nil {
		close(c.reader.quit)
	}
}

// frameRead is one frame the reader read, or why it could not.
type frameRead struct {
	frame []byte
	err   error
}

// readAhead reads the connection's next frame while serve waits for
// pipelined produces: one frame per ask, so nothing is read that serve
// has not asked for (a SASL exchange changes how the next frame reads).
type readAhead struct {
	asks   chan int32 // the size limit of the frame to read
	frames chan frameRead
	quit   chan struct{}
}

// nextFrame returns the next request's frame. With produces pipelined it
// reads through the reader and meanwhile writes their responses as they
// commit; otherwise it reads on the caller's goroutine.
func (c *conn) nextFrame(limit int32) ([]byte, error) {
	if len(c.queue) == 0 {
		return readFrame(c.br, limit, nil)
	}
	if c.reader == nil {
		c.reader = &readAhead{asks: make(chan int32), frames: make(chan frameRead), quit: make(chan struct{})}
		go c.reader.run(c)
	}
	c.reader.asks <- limit
	for {
		var head chan struct{}
		if len(c.queue) > 0 {
			head = c.queue[0].done
		}
		select {
		case f := <-c.reader.frames:
			return f.frame, f.err
		case <-head:
			if err := c.finishHead(); err != nil {
				return nil, err
			}
		}
	}
}

func (r *readAhead) run(c *conn) {
	for {
		select {
		case limit := <-r.asks:
			f, err := readFrame(c.br, limit, nil)
			select {
			case r.frames <- frameRead{f, err}:
			case <-r.quit:
				return
			}
			if err != nil {
				return
			}
		case <-r.quit:
			return
		}
	}
}
