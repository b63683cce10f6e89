package transport

import (
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/peercert"
)

// testCA is the cell CA of every test Node of the package.
var testCA = sync.OnceValues(func() (*peercert.CA, error) { return peercert.NewCA("test-cell", 0) })

// testCredentials issues credentials for broker id from testCA.
func testCredentials(t testing.TB, id raft.ServerID) peercert.Credentials {
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

// anyTestBroker is the membership of groups served by fakes: brokers b1 to
// b9, addresses unchecked. The slice is made once, as Raft's own
// configuration is, so benchmarks count no allocation for it.
func anyTestBroker() []raft.Server { return testBrokers }

var testBrokers = func() []raft.Server {
	var s []raft.Server
	for i := range 9 {
		s = append(s, raft.Server{ID: brokerID(i)})
	}
	return s
}()

// header is the RPC header a request from broker id carries.
func header(id raft.ServerID) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(fmt.Sprintf("%s.addr", id))}
}
