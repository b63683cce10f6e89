package testkit

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Ports handed to a server started later come from below Linux's default
// ephemeral range (32768–60999): a port picked with ":0" and released
// until the server binds it can meanwhile become the source port of any
// outgoing connection on the machine (a CI run failed with "bind: address
// already in use" that way). Below the range only a listener can take it,
// and one already there is skipped.
const freePortLow, freePortHigh = 20000, 32768

var (
	freeMu    sync.Mutex
	freeGiven = map[string]bool{} // host:port handed out by this process
)

// FreeAddr returns an address on host whose port was free a moment ago and
// that this process has not handed out before, for a server that needs its
// port in advance.
func FreeAddr(host string) (string, error) {
	freeMu.Lock()
	defer freeMu.Unlock()
	for range 1000 {
		a := net.JoinHostPort(host, strconv.Itoa(freePortLow+rand.IntN(freePortHigh-freePortLow)))
		if freeGiven[a] {
			continue
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			continue // taken
		}
		ln.Close()
		freeGiven[a] = true
		return a, nil
	}
	return "", fmt.Errorf("no free port on %s in [%d, %d) after 1000 tries", host, freePortLow, freePortHigh)
}
