package celltest

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// LoopbackHost returns a random address in 127.0.0.0/8 that can be
// listened on, or 127.0.0.1 where only that one can. Servers that must
// come back on the same port after a restart listen there: every outgoing
// loopback connection on the machine takes its local port on 127.0.0.1,
// so while such a server is down no client of another test can take its
// port, as one could on 127.0.0.1.
func LoopbackHost() string {
	host := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "127.0.0.1"
	}
	_ = ln.Close()
	return host
}
