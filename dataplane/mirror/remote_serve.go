package mirror

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// Serve makes node answer other cells' mirror reads of group, a
// partition of topic id topic of tenant, from replica: this broker's
// replica of it, nil while there is none. Only a replica that leads
// answers; the others name their leader. Who may call is the cell
// state's grants (transport.Node.SetMirrorGrants). Stop with
// node.SetMirrorSource(group, "", "", nil).
func Serve(node *transport.Node, group, tenant, topic string, replica func() *partition.Replica) {
	node.SetMirrorSource(group, tenant, topic, replicaServer{replica: replica})
}

// replicaServer is a transport.MirrorSource over a replica.
type replicaServer struct {
	replica func() *partition.Replica
}

func (s replicaServer) get() (*partition.Replica, error) {
	if r := s.replica(); r != nil {
		return r, nil
	}
	return nil, &transport.MirrorNotLeaderError{}
}

func (s replicaServer) MirrorRead(offset int64, maxBytes int) ([]byte, error) {
	r, err := s.get()
	if err != nil {
		return nil, err
	}
	b, err := r.ReadRaw(offset, maxBytes)
	return b, serveError(err)
}

func (s replicaServer) MirrorState() (transport.MirrorState, error) {
	r, err := s.get()
	if err != nil {
		return transport.MirrorState{}, err
	}
	st, err := r.MoveState()
	if err != nil {
		return transport.MirrorState{}, serveError(err)
	}
	return transport.MirrorState{LogStart: st.LogStart, HighWatermark: st.HighWatermark, Fenced: st.Fenced, FencedEnd: st.FencedEnd}, nil
}

func (s replicaServer) MirrorSnapshot() ([]byte, error) {
	r, err := s.get()
	if err != nil {
		return nil, err
	}
	m, err := r.MirrorSnapshot()
	if err != nil {
		return nil, serveError(err)
	}
	return raftlog.EncodeMirrorStart(m), nil
}

// serveError maps a replica's error to what the transport answers: not
// the leader (naming it if known), or below the log start.
func serveError(err error) error {
	var nl *partition.NotLeaderError
	var gone interface{ LeaderNode() (int, bool) }
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nl):
		return &transport.MirrorNotLeaderError{Leader: nl.Leader}
	case errors.As(err, &gone):
		return &transport.MirrorNotLeaderError{}
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return fmt.Errorf("%w: %w", transport.ErrMirrorOutOfRange, err)
	}
	return err
}
