package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// A redirect session is a connection authenticated with a valid API key of
// a tenant homed on another cell. This broker holds none of the tenant's
// data, so the session serves only what sends the client home: Metadata
// lists the home cell's brokers and the tenant's topics with their leaders
// there, and every other request (but ApiVersions, SASL and
// InitProducerId) is answered with a retriable error that makes the
// client refresh that metadata. Producer ids are unique platform-wide, so
// one handed out here is as good as one from the home cell.
type redirectSession struct {
	keyID  string
	secret string
	home   wire.KeyHome
	at     time.Time // when home was last confirmed valid
}

// authenticateElsewhere asks Config.Homes about a key this cell does not
// know. It returns the state package's errors, so the client gets exactly
// the answer a wrong key gets here; a key of this cell's own tenant that
// the state has not caught up with yet fails the same way, and the
// client's retry finds it.
func (c *conn) authenticateElsewhere(keyID, secret string) (*cellview.Principal, error) {
	home, err := c.s.homes.lookup(c.s.ctx, keyID, secret)
	if err != nil {
		level := slog.LevelWarn
		if errors.Is(err, errLookupLimited) {
			level = slog.LevelDebug // a flood of unknown keys must not flood the log
		}
		c.s.cfg.Logger.Log(c.s.ctx, level, "kafka key-home lookup failed", "remote", c.remote, "key_id", keyID, "err", err)
		return nil, fmt.Errorf("%w (key-home lookup: %w)", cellview.ErrBadCredentials, err)
	}
	switch {
	case home.Status == wire.KeyExpired:
		return nil, cellview.ErrKeyExpired
	case home.Status == wire.KeySuspended:
		return nil, cellview.ErrTenantSuspended
	case home.Status != wire.KeyValid:
		return nil, cellview.ErrBadCredentials
	case home.Cell == c.s.cfg.State.View().Cell:
		return nil, fmt.Errorf("%w (the key's tenant is homed here; the cell state has not caught up)", cellview.ErrBadCredentials)
	}
	c.redirect = &redirectSession{keyID: keyID, secret: secret, home: home, at: c.s.cfg.Now()}
	c.redirected.Store(true)
	c.s.cfg.Logger.Debug("kafka client of another cell's tenant; redirecting", "remote", c.remote, "key_id", keyID,
		"tenant_id", home.TenantID, "home_cell", home.Cell)
	return &cellview.Principal{KeyID: keyID, TenantID: home.TenantID, Role: home.Role}, nil
}

// A redirect session names the home cell's brokers to its client by
// RedirectNodeID(id), not by their own node ids. Cells number their brokers
// on their own (the chart's cells all have nodes 1-3), so the home's
// broker 1 would be, to the client, this cell's broker 1 at a new address:
// a client that learns every broker's new address from one Metadata
// answer drops all its connections together, which librdkafka reports as
// "all brokers down" and kcat ends on. Under ids of their own the home's
// brokers are new brokers to the client, which connects to them beside
// the connections it has; when the home then answers with its real ids,
// the client re-addresses brokers 1-3 while those connections stay up.
// Node ids are at most 1<<20 (the control plane's bound).
const redirectNodeBase = 1 << 21

// RedirectNodeID is the node id a redirect session gives the home cell's
// broker id.
func RedirectNodeID(id int) int32 { return int32(redirectNodeBase + id) }

// errRedirectEnded closes a redirect session whose key is no longer valid.
var errRedirectEnded = errors.New("redirect session: the key is no longer valid")

// refresh re-confirms the session's key (through the shared cache, so at
// most one lookup per HomeLimits.TTL for every connection of the key) and
// takes the newest answer. With the control plane unreachable the last
// answer keeps serving for up to homeStale.
func (rs *redirectSession) refresh(c *conn) error {
	home, err := c.s.homes.lookup(c.s.ctx, rs.keyID, rs.secret)
	now := c.s.cfg.Now()
	switch {
	case err != nil:
		if now.Sub(rs.at) >= homeStale {
			return fmt.Errorf("redirect session: key not confirmed for %s: %w", now.Sub(rs.at).Round(time.Second), err)
		}
		return nil
	case home.Status != wire.KeyValid || home.TenantID != rs.home.TenantID || home.Role != rs.home.Role:
		return errRedirectEnded
	case home.Cell == c.s.cfg.State.View().Cell:
		// The tenant moved here: the client reconnects and authenticates
		// against this cell's state.
		return errors.New("redirect session: the key's tenant is now homed on this cell")
	}
	rs.home, rs.at = home, now
	return nil
}

// handleRedirected serves req on a redirect session. done is false for the
// requests served as on any connection.
func (c *conn) handleRedirected(req *request) (done bool, err error) {
	switch req.body.(type) {
	case *kmsg.ApiVersionsRequest, *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest, *kmsg.InitProducerIDRequest:
		return false, nil
	}
	if err := c.redirect.refresh(c); err != nil {
		return true, err
	}
	if r, ok := req.body.(*kmsg.MetadataRequest); ok {
		return true, c.write(req, c.redirectMetadata(r))
	}
	if r, ok := req.body.(*kmsg.FindCoordinatorRequest); ok {
		return true, c.write(req, redirectFindCoordinator(r, c.redirect.home, c.offsetsPartitions()))
	}
	if r, ok := req.body.(*kmsg.ProduceRequest); ok && r.Acks == 0 {
		// No response is expected: closing is the only signal.
		return true, errors.New("acks=0 produce on a redirect session")
	}
	resp := redirectAnswer(req.body)
	if pr, ok := resp.(*kmsg.ProduceResponse); ok && pr.Version >= 10 {
		hintHomeLeaders(pr, c.redirect.home)
	}
	if resp == nil {
		return true, fmt.Errorf("%s on a redirect session", kmsg.NameForKey(req.key))
	}
	return true, c.write(req, resp)
}

// redirectMetadata answers Metadata from the home cell's answer: its
// brokers, and the tenant's topics with the leaders its brokers last
// reported (the preferred replica while none did). Topics the key may not
// describe answer as on the home cell.
func (c *conn) redirectMetadata(r *kmsg.MetadataRequest) kmsg.Response {
	home := c.redirect.home
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	cluster := home.Cell
	resp.ClusterID = &cluster
	resp.ControllerID = -1
	for _, b := range home.Brokers {
		host, port, ok := splitKafkaAddr(b.KafkaAddr)
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = RedirectNodeID(b.NodeID), host, port
		resp.Brokers = append(resp.Brokers, mb)
		if resp.ControllerID < 0 {
			resp.ControllerID = mb.NodeID
		}
	}
	if metadataAllTopics(r) {
		for i := range home.Topics {
			if home.Topics[i].Describable {
				resp.Topics = append(resp.Topics, homeTopicMetadata(&home.Topics[i]))
			}
		}
		return resp
	}
	for _, rt := range r.Topics {
		name := metadataTopicName(rt)
		var t *wire.HomeTopic
		for i := range home.Topics {
			if home.Topics[i].Name == name {
				t = &home.Topics[i]
			}
		}
		switch {
		case t == nil:
			resp.Topics = append(resp.Topics, topicError(name, catalog.TopicNotFound))
		case !t.Describable:
			resp.Topics = append(resp.Topics, topicError(name, catalog.TopicAccessDenied))
		default:
			resp.Topics = append(resp.Topics, homeTopicMetadata(t))
		}
	}
	return resp
}

func homeTopicMetadata(t *wire.HomeTopic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	for _, hp := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(hp.Partition)
		mp.Leader, mp.LeaderEpoch = -1, -1
		switch {
		case hp.Leader > 0:
			mp.Leader, mp.LeaderEpoch = RedirectNodeID(hp.Leader), int32(hp.LeaderEpoch)
		case len(hp.Replicas) > 0:
			mp.Leader = RedirectNodeID(hp.Replicas[0]) // the preferred leader, until a broker reports one
		}
		for _, n := range hp.Replicas {
			mp.Replicas = append(mp.Replicas, RedirectNodeID(n))
			mp.ISR = append(mp.ISR, RedirectNodeID(n))
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// offsetsPartitions is the offsets partition count groups live by: the
// coordinator's, or the default on a broker that runs none.
func (c *conn) offsetsPartitions() int {
	if g := c.coordinator(); g != nil {
		return g.Partitions()
	}
	return groups.DefaultPartitions
}
