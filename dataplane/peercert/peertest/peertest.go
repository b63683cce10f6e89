// Package peertest gives tests Raft transport credentials from one cell CA
// per test binary, so every transport a test starts trusts every other.
// Only tests (and test harnesses such as dataplane/celltest) import it.
package peertest

import (
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/peercert"
)

// ca is the test binary's cell CA.
var ca = sync.OnceValues(func() (*peercert.CA, error) { return peercert.NewCA("test-cell", 0) })

// Credentials returns credentials for server id issued by the test
// binary's CA.
func Credentials(t testing.TB, id raft.ServerID) peercert.Credentials {
	t.Helper()
	c, err := ca()
	if err != nil {
		t.Fatal(err)
	}
	cr, err := c.Credentials(string(id))
	if err != nil {
		t.Fatal(err)
	}
	return cr
}
