package celltest

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/peercert"
	"github.com/sluicehq/sluice/dataplane/peercert/peertest"
)

// PeerCredentials returns Raft transport credentials for server id, issued
// by one CA shared by the whole test binary, so every transport a test
// starts with them trusts every other.
func PeerCredentials(t testing.TB, id raft.ServerID) peercert.Credentials {
	t.Helper()
	return peertest.Credentials(t, id)
}
