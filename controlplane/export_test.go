package controlplane

import (
	"context"

	"github.com/sluicehq/sluice/contract/wire"
)

// LookupKeyHome is the key-home lookup without its HTTP handler and rate
// limit, for benchmarks.
func (s *Server) LookupKeyHome(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
	return s.lookupKeyHome(ctx, keyID, secret)
}

// CellStateWaiters is how many cell-state long-polls wait now.
func (s *Server) CellStateWaiters() int {
	s.stateChanges.mu.Lock()
	defer s.stateChanges.mu.Unlock()
	return s.stateChanges.waiters
}
