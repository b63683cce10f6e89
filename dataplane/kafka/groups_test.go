package kafka_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupAPIsNeedACoordinator: a listener without Config.Groups does
// not advertise the consumer-group APIs, and a request for one closes the
// connection, as for any API it does not serve.
func TestGroupAPIsNeedACoordinator(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	rc := dialRaw(t, b.addr)
	resp := apiVersions(t, rc)
	for _, k := range resp.ApiKeys {
		switch k.ApiKey {
		case 8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47:
			t.Errorf("api %s advertised without a coordinator", kmsg.NameForKey(k.ApiKey))
		}
	}
	a := b.cp.Signup("nogroups", "admin")
	b.waitForKey(t, a)
	rc = dialRaw(t, b.addr)
	if r := rc.authenticate(a.KeyID, a.Secret); r.ErrorCode != 0 {
		t.Fatalf("authenticate: %+v", r)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	rc.send(fc)
	rc.expectClosed(5 * time.Second)
}
