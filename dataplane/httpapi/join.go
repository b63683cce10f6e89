package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// Group membership defaults.
const (
	defaultSessionTimeout   = 30 * time.Second
	defaultRebalanceTimeout = 60 * time.Second
	maxRebalanceTimeout     = 5 * time.Minute
	httpProtocol            = "range"
)

type joinRequest struct {
	Topics             []string `json:"topics"`
	MemberID           string   `json:"member_id,omitempty"`
	SessionTimeoutMs   int64    `json:"session_timeout_ms,omitempty"`
	RebalanceTimeoutMs int64    `json:"rebalance_timeout_ms,omitempty"`
	AutoOffsetReset    string   `json:"auto_offset_reset,omitempty"`
}

type topicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

type joinResponse struct {
	MemberID         string           `json:"member_id"`
	Generation       int32            `json:"generation"`
	Leader           bool             `json:"leader"`
	Partitions       []topicPartition `json:"partitions"`
	SessionTimeoutMs int64            `json:"session_timeout_ms"`
}

// join serves POST /v1/groups/{group}/members: the caller joins (or, with
// its member_id, re-joins) the group and gets its partitions once the
// rebalance completes. The member the coordinator makes leader assigns
// the group's partitions with Kafka's range assignor.
func (s *Server) join(c echo.Context) error {
	var req joinRequest
	cl, group, raw, err := s.bindGroup(c, &req)
	if err != nil {
		return err
	}
	if len(req.Topics) == 0 {
		return catalog.InvalidRequest.New("topics is empty; name the topics to consume")
	}
	for _, name := range req.Topics {
		if _, ok := cl.v.Topic(cl.p.TenantID, name); !ok {
			return catalog.TopicNotFound.Newf("no such topic: %q", name)
		}
		if !cl.topicAllowed(name, authz.OpRead) {
			return catalog.TopicAccessDenied.Newf("the caller may not read topic %q", name)
		}
	}
	if !cl.groupAllowed(group, authz.OpRead) {
		return catalog.GroupAccessDenied.New("")
	}
	opts := memberOpts{AutoOffsetReset: req.AutoOffsetReset}
	switch opts.AutoOffsetReset {
	case "":
		opts.AutoOffsetReset = "earliest"
	case "earliest", "latest":
	default:
		return catalog.InvalidRequest.New("auto_offset_reset must be earliest or latest")
	}
	session := time.Duration(req.SessionTimeoutMs) * time.Millisecond
	session = cmp.Or(session, defaultSessionTimeout)
	rebalance := time.Duration(req.RebalanceTimeoutMs) * time.Millisecond
	rebalance = cmp.Or(rebalance, defaultRebalanceTimeout)
	if req.SessionTimeoutMs < 0 || req.RebalanceTimeoutMs < 0 || rebalance > maxRebalanceTimeout {
		return catalog.InvalidRequest.Newf("session_timeout_ms and rebalance_timeout_ms must be positive, the rebalance timeout at most %d", maxRebalanceTimeout.Milliseconds())
	}
	return s.onCoordinator(c, cl, group, raw, rebalance, func(coord *groups.Coordinator) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), rebalance+s.cfg.ForwardTimeout)
		defer cancel()
		res, err := coord.Join(ctx, groups.JoinRequest{
			TenantID: cl.p.TenantID, Group: group, MemberID: req.MemberID, ClientID: "sluice-http", ClientHost: c.RealIP(),
			ProtocolType: "consumer", SessionTimeout: session, RebalanceTimeout: rebalance,
			Protocols: []groups.Protocol{{Name: httpProtocol, Metadata: subscription(req.Topics, opts)}},
		})
		if err != nil {
			return err
		}
		var assignments map[string][]byte
		if res.LeaderID == res.MemberID {
			counts := map[string]int{}
			live := map[string]bool{}
			for _, m := range res.Members {
				live[m.MemberID] = true
				topics, _ := decodeSubscription(m.Metadata)
				for _, name := range topics {
					if t, ok := cl.v.Topic(cl.p.TenantID, name); ok {
						counts[name] = len(t.Partitions)
					}
				}
			}
			assignments = rangeAssign(res.Members, counts)
			s.sessions.keep(cl.p.TenantID, group, live)
		}
		mine, err := coord.Sync(ctx, cl.p.TenantID, group, res.MemberID, "", res.Generation, assignments)
		if err != nil {
			return err
		}
		sess := &memberSession{generation: res.Generation, opts: opts, parts: decodeAssignment(mine, cl.v, cl.p.TenantID),
			pos: map[groups.TopicPartition]int64{}, retry: map[groups.TopicPartition]retryState{}, hw: map[groups.TopicPartition]int64{}}
		k := memberKey{cl.p.TenantID, group, res.MemberID}
		if epoch, ok := coord.Epoch(cl.p.TenantID, group); ok {
			sess.epoch = epoch
			s.sessions.put(k, sess)
		} else {
			// The group moved away meanwhile; its next coordinator builds
			// the session from the group's state.
			s.sessions.drop(k)
		}
		out := joinResponse{MemberID: res.MemberID, Generation: res.Generation, Leader: res.LeaderID == res.MemberID,
			Partitions: []topicPartition{}, SessionTimeoutMs: session.Milliseconds()}
		for _, p := range sess.parts {
			out.Partitions = append(out.Partitions, topicPartition{Topic: p.topic, Partition: p.Partition})
		}
		return c.JSON(http.StatusOK, out)
	})
}

// leave serves DELETE /v1/groups/{group}/members/{member}.
func (s *Server) leave(c echo.Context) error {
	cl := callerOf(c)
	group, member := c.Param("group"), c.Param("member")
	if !cl.groupAllowed(group, authz.OpRead) {
		return catalog.GroupAccessDenied.New("")
	}
	return s.onCoordinator(c, cl, group, nil, 0, func(coord *groups.Coordinator) error {
		if err := coord.Leave(c.Request().Context(), cl.p.TenantID, group, []groups.MemberIdentity{{MemberID: member}}); err != nil {
			return err
		}
		s.sessions.drop(memberKey{cl.p.TenantID, group, member})
		return c.NoContent(http.StatusNoContent)
	})
}

// atCoordinator finds the group's coordinator. When it is this broker it
// returns it; otherwise the request is forwarded there (body as sent,
// long poll wait) and done is true once it was answered. A coordinator
// being elected or loading is waited for up to leaderWait.
func (s *Server) atCoordinator(c echo.Context, cl *caller, group string, body []byte, wait time.Duration) (coord *groups.Coordinator, done bool, err error) {
	coord = s.cfg.Groups
	if coord == nil {
		return nil, false, catalog.Unavailable.New("consumer groups are not served by this broker")
	}
	if group == "" || len(group) > 255 {
		return nil, false, catalog.InvalidGroupID.New("a consumer group id must be 1 to 255 bytes")
	}
	deadline := time.Now().Add(leaderWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		node, local, lerr := coord.Locate(cl.p.TenantID, group)
		switch {
		case lerr == nil && local:
			return coord, false, nil
		case lerr == nil && node != s.cfg.NodeID:
			// Another broker coordinates the group now: whatever this one
			// kept of its members is stale when the group comes back.
			s.sessions.keep(cl.p.TenantID, group, nil)
			return nil, true, s.proxy(c, cl.v, node, body, wait)
		}
		if time.Now().After(deadline) {
			if lerr == nil {
				lerr = catalog.CoordinatorLoading.New("")
			}
			return nil, false, lerr
		}
		select {
		case <-tick.C:
		case <-c.Request().Context().Done():
			return nil, false, c.Request().Context().Err()
		}
	}
}

// member checks a member's generation (a heartbeat: every fetch, commit
// and nack keeps the member alive) and returns its session, rebuilt from
// the coordinator's group state if this broker has none (it took the
// group over, or restarted).
func (s *Server) member(ctx context.Context, coord *groups.Coordinator, cl *caller, group, member string, generation int32) (*memberSession, error) {
	if member == "" {
		return nil, catalog.InvalidRequest.New("member_id is required; join the group first")
	}
	if err := coord.Heartbeat(ctx, cl.p.TenantID, group, member, "", generation); err != nil {
		if catalog.Has(err, catalog.RebalanceInProgress) {
			return nil, catalog.RebalanceInProgress.New("the consumer group is rebalancing; join again with your member_id (POST /v1/groups/{group}/members)")
		}
		return nil, err
	}
	epoch, ok := coord.Epoch(cl.p.TenantID, group)
	if !ok {
		return nil, catalog.NotCoordinator.New("")
	}
	k := memberKey{cl.p.TenantID, group, member}
	if sess := s.sessions.get(k); sess != nil && sess.generation == generation && sess.epoch == epoch {
		return sess, nil
	}
	d, err := coord.DescribeGroup(cl.p.TenantID, group)
	if err != nil {
		return nil, err
	}
	if d.Generation != generation {
		return nil, catalog.IllegalGeneration.New("")
	}
	for _, m := range d.Members {
		if m.MemberID != member {
			continue
		}
		_, opts := decodeSubscription(m.Metadata)
		opts.AutoOffsetReset = cmp.Or(opts.AutoOffsetReset, "earliest")
		sess := &memberSession{generation: generation, epoch: epoch, opts: opts, parts: decodeAssignment(m.Assignment, cl.v, cl.p.TenantID),
			pos: map[groups.TopicPartition]int64{}, retry: map[groups.TopicPartition]retryState{}, hw: map[groups.TopicPartition]int64{}}
		s.sessions.put(k, sess)
		return sess, nil
	}
	return nil, catalog.UnknownMember.New("")
}

// asMember runs fn on the group's coordinator (onCoordinator) with the
// member's session (member), which stays locked while fn runs.
func (s *Server) asMember(c echo.Context, cl *caller, group string, body []byte, wait time.Duration, member string, generation int32, fn func(*groups.Coordinator, *memberSession) error) error {
	return s.onCoordinator(c, cl, group, body, wait, func(coord *groups.Coordinator) error {
		sess, err := s.member(c.Request().Context(), coord, cl, group, member, generation)
		if err != nil {
			return err
		}
		sess.mu.Lock()
		defer sess.mu.Unlock()
		return fn(coord, sess)
	})
}

// onCoordinator runs fn on the group's coordinator: here, or by
// forwarding the request (then fn does not run). When the coordinator
// moves while fn runs (not_coordinator, coordinator_loading) the request
// is routed again, twice at most.
func (s *Server) onCoordinator(c echo.Context, cl *caller, group string, body []byte, wait time.Duration, fn func(*groups.Coordinator) error) error {
	for attempt := 0; ; attempt++ {
		coord, done, err := s.atCoordinator(c, cl, group, body, wait)
		if done || err != nil {
			return err
		}
		err = fn(coord)
		moved := catalog.Has(err, catalog.NotCoordinator) || catalog.Has(err, catalog.CoordinatorLoading)
		if !moved || attempt >= 2 || c.Response().Committed || c.Request().Context().Err() != nil {
			return err
		}
	}
}
