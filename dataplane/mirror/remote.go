package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// RemoteBroker is a broker of the source cell: its Raft server id (what
// its certificate names) and transport address.
type RemoteBroker struct {
	ID   raft.ServerID
	Addr raft.ServerAddress
}

// RemoteConfig configures a RemoteSource.
type RemoteConfig struct {
	// Client reaches the source cell's brokers over their transport
	// (transport.Node.MirrorClient with the source cell's peer CA); the
	// caller owns it. Required.
	Client *transport.MirrorClient
	// Brokers are the source cell's brokers (its state's broker list).
	// Required.
	Brokers []RemoteBroker
	// Group is the source partition's Raft group id
	// (replicas.GroupID). Required.
	Group string
	// Timeout bounds each call to one broker. Default 5s.
	Timeout time.Duration
}

func (c *RemoteConfig) validate() error {
	switch {
	case c.Client == nil:
		return errors.New("config: Client is required: the source cell's transport")
	case len(c.Brokers) == 0:
		return errors.New("config: Brokers is required: the source cell's brokers")
	case c.Group == "":
		return errors.New("config: Group is required: the source partition's raft group")
	}
	for i, b := range c.Brokers {
		if b.ID == "" || b.Addr == "" {
			return fmt.Errorf("config: broker %d needs an id and an address", i)
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	return nil
}

// RemoteSource is a Source in another cell, read over the source brokers'
// transport (the mirror lane, admitted by the source cell's grant). It
// asks the broker that last answered as leader first; a not-leader answer
// sends it to the leader named, or to the next broker when none is named,
// as does a broker that cannot be reached or does not hold the group. A
// call gives up after asking every broker once (plus one hop to a named
// leader); the Puller tries again after its poll.
type RemoteSource struct {
	cfg RemoteConfig

	// mu guards the field below.
	mu     sync.Mutex
	leader int // index in cfg.Brokers of the broker to ask first
}

// NewRemoteSource returns a RemoteSource for cfg.
func NewRemoteSource(cfg RemoteConfig) (*RemoteSource, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new remote mirror source: %w", err)
	}
	cfg.Brokers = append([]RemoteBroker(nil), cfg.Brokers...)
	return &RemoteSource{cfg: cfg}, nil
}

// Leader is the broker the source asks first: the last one that answered.
func (s *RemoteSource) Leader() RemoteBroker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Brokers[s.leader]
}

// Read implements Source.
func (s *RemoteSource) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	return ask(ctx, s, "read", func(ctx context.Context, b RemoteBroker) ([]byte, error) {
		return s.cfg.Client.Read(ctx, b.ID, b.Addr, s.cfg.Group, offset, maxBytes)
	})
}

// State implements Source.
func (s *RemoteSource) State(ctx context.Context) (partition.MoveState, error) {
	st, err := ask(ctx, s, "state", func(ctx context.Context, b RemoteBroker) (transport.MirrorState, error) {
		return s.cfg.Client.State(ctx, b.ID, b.Addr, s.cfg.Group)
	})
	if err != nil {
		return partition.MoveState{}, err
	}
	return partition.MoveState{LogStart: st.LogStart, HighWatermark: st.HighWatermark, Fenced: st.Fenced, FencedEnd: st.FencedEnd}, nil
}

// Snapshot implements Source.
func (s *RemoteSource) Snapshot(ctx context.Context) (raftlog.MirrorStart, error) {
	data, err := ask(ctx, s, "snapshot", func(ctx context.Context, b RemoteBroker) ([]byte, error) {
		return s.cfg.Client.Snapshot(ctx, b.ID, b.Addr, s.cfg.Group)
	})
	if err != nil {
		return raftlog.MirrorStart{}, err
	}
	m, err := raftlog.DecodeMirrorStart(data)
	if err != nil {
		return raftlog.MirrorStart{}, fmt.Errorf("remote mirror snapshot of %s: %w", s.cfg.Group, err)
	}
	return m, nil
}

// errNoRemoteLeader: no source broker answered as the group's leader.
var errNoRemoteLeader = errors.New("mirror: no source broker answered as the partition's leader")

// ask is do for a call that answers a value: the answer of the attempt
// that succeeded.
func ask[T any](ctx context.Context, s *RemoteSource, op string, call func(context.Context, RemoteBroker) (T, error)) (T, error) {
	var out T
	err := s.do(ctx, op, func(ctx context.Context, b RemoteBroker) error {
		var err error
		out, err = call(ctx, b)
		return err
	})
	return out, err
}

// do runs call against the source's leader, following not-leader answers
// and skipping brokers that fail, each attempt bounded by cfg.Timeout.
func (s *RemoteSource) do(ctx context.Context, op string, call func(context.Context, RemoteBroker) error) error {
	n := len(s.cfg.Brokers)
	s.mu.Lock()
	at := s.leader
	s.mu.Unlock()
	var errs []error
	for range n + 1 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("remote mirror %s of %s: %w", op, s.cfg.Group, err)
		}
		b := s.cfg.Brokers[at]
		actx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		err := call(actx, b)
		cancel()
		if err == nil {
			s.mu.Lock()
			s.leader = at
			s.mu.Unlock()
			return nil
		}
		var nl *transport.MirrorNotLeaderError
		switch {
		case errors.Is(err, transport.ErrMirrorOutOfRange):
			return fmt.Errorf("remote mirror %s of %s at %s: %w: %w", op, s.cfg.Group, b.ID, log.ErrOffsetOutOfRange, err)
		case errors.Is(err, transport.ErrNotGranted), errors.Is(err, transport.ErrMirrorOnly):
			return fmt.Errorf("remote mirror %s of %s at %s: %w", op, s.cfg.Group, b.ID, err)
		case errors.As(err, &nl) && nl.Leader != "" && s.index(nl.Leader) >= 0 && s.index(nl.Leader) != at:
			at = s.index(nl.Leader)
		default: // not the leader and no hint, unreachable, timed out, no such group
			at = (at + 1) % n
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("remote mirror %s of %s: %w: %w", op, s.cfg.Group, errNoRemoteLeader, errors.Join(errs...))
}

func (s *RemoteSource) index(id raft.ServerID) int {
	for i, b := range s.cfg.Brokers {
		if b.ID == id {
			return i
		}
	}
	return -1
}
