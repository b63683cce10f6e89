package celltest

import (
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/peercert"
)

// testCA is the cell CA of the transports tests start with PeerCredentials.
var testCA = sync.OnceValues(func() (*peercert.CA, error) { return peercert.NewCA("celltest", 0) })

// PeerCredentials returns Raft transport credentials for server id, issued
// by one CA shared by the whole test binary, so every transport a test
// starts with them trusts every other.
func PeerCredentials(t testing.TB, id raft.ServerID) peercert.Credentials {
	t.Helper()
	ca, err := testCA()
	if err != nil {
		t.Fatal(err)
	}
	cr, err := ca.Credentials(string(id))
	if err != nil {
		t.Fatal(err)
	}
	return cr
}
