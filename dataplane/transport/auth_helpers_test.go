package transport

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/peercert"
	"github.com/sluicehq/sluice/dataplane/peercert/peertest"
)

// testCredentials issues credentials for broker id from the test binary's CA.
func testCredentials(t testing.TB, id raft.ServerID) peercert.Credentials {
	t.Helper()
	return peertest.Credentials(t, id)
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
