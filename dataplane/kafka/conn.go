package kafka

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/scram"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// conn is one client connection. Its goroutine (serve) owns everything but
// principal, which the server's key watcher reads.
type conn struct {
	s      *Server
	nc     net.Conn // *net.TCPConn or *tls.Conn; Fetch hands it to sendfile
	br     *bufio.Reader
	remote string

	principal atomic.Pointer[cellview.Principal] // nil until authenticated
	dev       bool                               // principal is the DevTenant's, not a key's

	secret string // the key's secret, for control-plane calls as the caller

	mechanism string        // what SaslHandshake chose: PLAIN or a SCRAM mechanism's name
	rawSASL   bool          // SaslHandshake v0: the next frame is a bare PLAIN token
	scram     *scram.Server // a SCRAM exchange awaiting the client-final message
	scramKey  string        // the key id that exchange's client-first named

	redirect   *redirectSession // set when the key's tenant lives on another cell
	redirected atomic.Bool      // redirect != nil, for the key watcher
	holding    atomic.Bool      // a produce waits for its tenant's switch (awaitTenantSwitch)
	// For the key watcher (movefollow.go): the PLAIN secret of a session
	// that can follow its tenant to another cell, and whether the watcher
	// is asking, or asked, where the key's tenant went.
	following   atomic.Pointer[string]
	homeChecked atomic.Bool

	wbuf []byte // reused for responses

	usedAt time.Time // when the key's use was last noted (noteUse)

	throttle time.Duration // the current request's throttle (quota.go)
	muted    time.Duration // how long the current request waited out a throttle (quota.go)
	release  func()        // gives back the tenant's connection slot, once taken

	preAuthHost string // holds a place among this address's unauthenticated connections; guarded by s.preAuth.mu

	respErr int16 // the error code of the response handle wrote last (metrics.go)

	// Produce requests answered out of turn (pipeline.go): handed to their
	// partitions, awaiting their commits and then their responses, oldest
	// first; and the reader that reads the next request meanwhile.
	queue  []*pipelined
	reader *readAhead
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, br: bufio.NewReaderSize(nc, 64<<10), remote: nc.RemoteAddr().String()}
	if s.cfg.DevTenant != "" && isLoopback(nc.RemoteAddr()) {
		c.dev = true
		c.principal.Store(&cellview.Principal{TenantID: s.cfg.DevTenant, Role: authz.RoleAdmin})
	}
	return c
}

// errCloseAfterReply asks serve to close the connection once the response
// is written (a failed authentication).
var errCloseAfterReply = errors.New("close after reply")

// serve reads, handles and answers requests in turn until the peer leaves,
// a request is not acceptable, or the server closes. A produce request may
// be read and handed to its partitions before the previous one is
// answered (pipeline.go); responses still go out in request order.
func (c *conn) serve() {
	log := c.s.cfg.Logger.With("remote", c.remote)
	defer c.nc.Close()
	defer c.releaseConnection()
	defer c.closePipeline()
	defer func() {
		if r := recover(); r != nil {
			log.Error("kafka connection panicked; closed", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	authBy := c.s.cfg.Now().Add(c.s.cfg.AuthTimeout)
	if tc, ok := c.nc.(*tls.Conn); ok {
		c.nc.SetDeadline(authBy)
		ctx, cancel := context.WithDeadline(c.s.ctx, authBy)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			log.Debug("tls handshake failed", "err", err)
			return
		}
		c.nc.SetDeadline(time.Time{})
	}
	for c.s.ctx.Err() == nil {
		limit := c.s.cfg.MaxRequestBytes
		if c.principal.Load() == nil {
			c.nc.SetReadDeadline(authBy)
			limit = min(limit, maxUnauthenticatedBytes)
		} else {
			c.nc.SetReadDeadline(c.s.cfg.Now().Add(c.s.cfg.IdleTimeout))
		}
		// A fresh buffer per request: Produce hands the batch bytes to the
		// partition, which may keep them after it returns.
		frame, err := c.nextFrame(limit)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Info("kafka connection closed", "err", err)
			}
			return
		}
		if c.rawSASL {
			if err := c.rawAuthenticate(frame); err != nil {
				log.Info("kafka authentication failed", "err", err)
				return
			}
			continue
		}
		req, err := parseRequest(frame)
		if err == nil && !c.s.serves(req.key) {
			err = fmt.Errorf("%w %d (not configured on this listener)", errUnknownAPI, req.key)
		}
		if err != nil {
			if errors.Is(err, errUnsupportedVer) && req.key == 18 {
				// The client retries with an older version after this.
				if werr := c.drain(); werr != nil {
					return
				}
				if werr := c.write(req, unsupportedApiVersions()); werr != nil {
					return
				}
				continue
			}
			log.Info("kafka request rejected; connection closed", "err", err)
			return
		}
		p := c.principal.Load()
		switch req.key {
		case 18, 17, 36:
		default:
			if p == nil {
				log.Info("kafka request before authentication; connection closed", "api", kmsg.NameForKey(req.key))
				return
			}
			if !c.dev && c.redirect == nil && !c.s.cfg.State.View().Valid(p, c.s.cfg.Now()) && !c.followHome(p) {
				log.Info("kafka key no longer valid; connection closed", "key_id", p.KeyID)
				return
			}
			if !c.dev && c.redirect == nil {
				c.noteUse(p)
			}
		}
		start := time.Now()
		if r, ok := c.pipelinable(req); ok {
			err = c.produceInTurn(req, r, len(frame), start)
		} else if err = c.drain(); err == nil {
			err = c.handle(req)
			c.observe(req, len(frame), start, err)
		}
		if err != nil {
			if !errors.Is(err, errCloseAfterReply) {
				log.Info("kafka connection closed", "api", kmsg.NameForKey(req.key), "err", err)
			}
			return
		}
	}
}

// observe counts a served request in the request metrics.
func (c *conn) observe(req *request, frameBytes int, start time.Time, err error) {
	c.s.rm.observe(req.key, c.metricsTenant(), frameBytes, time.Since(start)-c.muted, c.respErr, err != nil && !errors.Is(err, errCloseAfterReply))
	c.respErr, c.muted = 0, 0
}

// handle serves one request and writes its response, if it has one.
func (c *conn) handle(req *request) error {
	if c.redirect != nil {
		if done, err := c.handleRedirected(req); done {
			return err
		}
	}
	c.throttle = c.requestThrottle(req)
	return c.serveCounted(req)
}

// serveCounted is handle once the request is counted against its
// tenant's request rate, its throttle in c.throttle.
func (c *conn) serveCounted(req *request) error {
	var resp kmsg.Response
	var after error
	switch r := req.body.(type) {
	case *kmsg.ApiVersionsRequest:
		resp = c.apiVersions(r)
	case *kmsg.SASLHandshakeRequest:
		resp = c.saslHandshake(r)
	case *kmsg.SASLAuthenticateRequest:
		resp, after = c.saslAuthenticate(r)
	case *kmsg.MetadataRequest:
		resp = c.metadata(r)
	case *kmsg.ProduceRequest:
		resp = c.produce(r)
		if c.s.ctx.Err() != nil {
			// The listener is closing and cut the commit waits short: the
			// outcome is unknown, as when a broker dies. Close without an
			// answer, so the client retries on another connection (an
			// idempotent producer's retry is deduplicated) instead of
			// failing the records on a non-retriable error code.
			return errors.New("listener closing during produce")
		}
		if r.Acks == 0 {
			// acks=0: the client expects no response. As Kafka does, a
			// failure closes the connection instead, the only signal such
			// a client gets to refresh its metadata.
			if produceFailed(resp.(*kmsg.ProduceResponse)) {
				return errors.New("acks=0 produce failed")
			}
			return c.mute(c.throttle)
		}
	case *kmsg.FetchRequest:
		return c.fetch(req, r)
	case *kmsg.ListOffsetsRequest:
		resp = c.listOffsets(r)
	case *kmsg.DeleteRecordsRequest:
		resp = c.deleteRecords(r)
	case *kmsg.OffsetForLeaderEpochRequest:
		resp = c.offsetForLeaderEpoch(r)
	case *kmsg.CreateTopicsRequest:
		resp = c.createTopics(r)
	case *kmsg.DeleteTopicsRequest:
		resp = c.deleteTopics(r)
	case *kmsg.CreatePartitionsRequest:
		resp = c.createPartitions(r)
	case *kmsg.DescribeConfigsRequest:
		resp = c.describeConfigs(r)
	case *kmsg.AlterConfigsRequest:
		resp = c.alterConfigs(r)
	case *kmsg.IncrementalAlterConfigsRequest:
		resp = c.incrementalAlterConfigs(r)
	case *kmsg.DescribeACLsRequest:
		resp = c.describeACLs(r)
	case *kmsg.CreateACLsRequest:
		resp = c.createACLs(r)
	case *kmsg.DeleteACLsRequest:
		resp = c.deleteACLs(r)
	case *kmsg.InitProducerIDRequest:
		resp = c.initProducerID(r)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp = c.describeUserScramCredentials(r)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp = c.alterUserScramCredentials(r)
	default:
		if resp = c.handleGroup(req); resp == nil {
			return fmt.Errorf("%w %d", errUnknownAPI, req.key)
		}
	}
	if err := c.reply(req, resp); err != nil {
		return err
	}
	return after
}

// reply writes resp with the request's throttle (c.throttle) and notes
// its error code for the metrics.
func (c *conn) reply(req *request, resp kmsg.Response) error {
	if tr, ok := resp.(kmsg.SetThrottleResponse); ok && c.throttle > 0 {
		tr.SetThrottle(throttleMillis(c.throttle))
	}
	c.respErr = responseError(resp)
	return c.respond(req, func() error { return c.write(req, resp) })
}

// appendHeader starts a response frame: a size placeholder, the
// correlation id and, for flexible requests other than ApiVersions, an
// empty tag section.
func appendHeader(b []byte, req *request) []byte {
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(req.corr))
	if req.flexible && req.key != 18 {
		b = append(b, 0)
	}
	return b
}

// write sends one kmsg response.
func (c *conn) write(req *request, resp kmsg.Response) error {
	b := appendHeader(c.wbuf[:0], req)
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	c.wbuf = b[:0]
	c.nc.SetWriteDeadline(c.s.cfg.Now().Add(c.s.cfg.WriteTimeout))
	_, err := c.nc.Write(b)
	return err
}

// noteUse tells the broker's state that the caller's key is in use, at
// most once a minute per connection: the control plane keeps a key's
// last_used_at to the minute.
func (c *conn) noteUse(p *cellview.Principal) {
	now := c.s.cfg.Now()
	if !c.usedAt.IsZero() && now.Sub(c.usedAt) < time.Minute {
		return
	}
	c.usedAt = now
	c.s.cfg.State.NoteKeyUse(p.KeyID)
}

// tenant is the authenticated caller's tenant id.
func (c *conn) tenant() string { return c.principal.Load().TenantID }

// allowed checks the caller's ACLs on one of its topics.
func (c *conn) allowed(v *cellview.View, topic, op string) bool {
	if c.dev {
		return true
	}
	return v.Allowed(c.principal.Load(), authz.ResourceTopic, topic, op)
}

// clusterAllowed checks the caller's ACLs on its cluster.
func (c *conn) clusterAllowed(v *cellview.View, op string) bool {
	if c.dev {
		return true
	}
	return v.Allowed(c.principal.Load(), authz.ResourceCluster, authz.ClusterName, op)
}

// describable reports whether the caller may learn that its topic exists:
// describe, which any allowed operation but delete implies, and which a
// deny on describe refuses even to a caller who may read or write.
func (c *conn) describable(v *cellview.View, topic string) bool {
	return c.allowed(v, topic, authz.OpDescribe)
}
