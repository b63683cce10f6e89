package celltest

import (
	"cmp"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/peercert"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// TransportNetwork is a Network over dataplane/transport: one transport.Node
// per broker on loopback, every partition group multiplexed over the Nodes'
// shared connections, links cut with one shared transport.Faults.
//
// A broker's Node lives while any of its replicas is attached. When the last
// one detaches (the broker stops or crashes) the Node closes its listener and
// every connection, as a process exit would, and peers see refused dials
// until the broker is attached again on the same address.
type TransportNetwork struct {
	brokers int
	faults  *transport.Faults
	mod     func(*transport.Config)
	onNode  func(int, *transport.Node)
	ca      *peercert.CA
	creds   []peercert.Credentials // per broker, of ca

	// mu guards the fields below.
	mu       sync.Mutex
	addrs    []string // fixed for the network's life: Raft configurations hold them
	nodes    []*transport.Node
	attached []map[int]bool
	closed   bool
}

// NewTransportNetwork starts one listening transport Node per broker, on a
// random 127.x.y.z address (so that re-listening on a stopped broker's port
// cannot collide with other sockets of the machine, almost all on
// 127.0.0.1), falling back to 127.0.0.1. mod, if not nil, adjusts each Node's
// Config (ID, ListenAddr, Faults and Credentials are set by the network:
// every broker has a certificate of one cell CA naming BrokerID(b)).
func NewTransportNetwork(brokers int, mod func(*transport.Config)) (*TransportNetwork, error) {
	return NewTransportNetworkFrom(TransportNetworkConfig{Brokers: brokers, Mod: mod})
}

// TransportNetworkConfig is a TransportNetwork's shape, for tests that
// need more than NewTransportNetwork's: a cell of its own CA (two cells
// that mirror one another) or a hook on every Node started.
type TransportNetworkConfig struct {
	Brokers int
	// Cell names the CA that signs every broker's certificate; default
	// "celltest".
	Cell string
	// Mod, if not nil, adjusts each Node's Config, as NewTransportNetwork's
	// mod does.
	Mod func(*transport.Config)
	// OnNode, if not nil, is called with each Node the network starts, the
	// first time and at every restart of its broker, before any replica
	// attaches to it. It runs with the network's lock held and must not
	// call the network.
	OnNode func(b int, n *transport.Node)
}

// NewTransportNetworkFrom is NewTransportNetwork with every setting of cfg.
func NewTransportNetworkFrom(cfg TransportNetworkConfig) (*TransportNetwork, error) {
	brokers := cfg.Brokers
	n := &TransportNetwork{
		brokers:  brokers,
		faults:   transport.NewFaults(),
		mod:      cfg.Mod,
		onNode:   cfg.OnNode,
		addrs:    make([]string, brokers),
		nodes:    make([]*transport.Node, brokers),
		attached: make([]map[int]bool, brokers),
	}
	cell := cmp.Or(cfg.Cell, "celltest")
	ca, err := peercert.NewCA(cell, 0)
	if err != nil {
		return nil, fmt.Errorf("start transport network: %w", err)
	}
	n.ca = ca
	for b := range brokers {
		cr, err := ca.Credentials(string(BrokerID(b)))
		if err != nil {
			return nil, fmt.Errorf("start transport network: %w", err)
		}
		n.creds = append(n.creds, cr)
	}
	host := LoopbackHost()
	for b := range brokers {
		n.attached[b] = map[int]bool{}
		node, err := n.newNode(b, host+":0")
		if err != nil {
			n.Close()
			return nil, err
		}
		n.nodes[b] = node
		n.addrs[b] = string(node.Addr())
	}
	return n, nil
}

func (n *TransportNetwork) newNode(b int, listen string) (*transport.Node, error) {
	cfg := transport.Config{ID: BrokerID(b), ListenAddr: listen, Faults: n.faults}
	if n.mod != nil {
		n.mod(&cfg)
	}
	cfg.ID, cfg.ListenAddr, cfg.Faults, cfg.Credentials = BrokerID(b), listen, n.faults, n.creds[b]
	node, err := transport.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("start transport of broker %d: %w", b, err)
	}
	if n.onNode != nil {
		n.onNode(b, node)
	}
	return node, nil
}

// CA is the cell CA that signed every broker's certificate.
func (n *TransportNetwork) CA() *peercert.CA { return n.ca }

// Faults is the network's fault injector, for faults beyond Isolate: link
// partitions, delays, drop rates (broker ids are BrokerID(b)).
func (n *TransportNetwork) Faults() *transport.Faults { return n.faults }

// Node returns broker b's transport Node, or nil while b is stopped.
func (n *TransportNetwork) Node(b int) *transport.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodes[b]
}

// Addr implements Network: every group of a broker shares its Node's
// address.
func (n *TransportNetwork) Addr(b, _ int) raft.ServerAddress {
	n.mu.Lock()
	defer n.mu.Unlock()
	return raft.ServerAddress(n.addrs[b])
}

// groupID names partition part's Raft group on the transport.
func groupID(part int) string { return fmt.Sprintf("p%d", part) }

// Attach implements Network. It restarts broker b's Node on its old address
// if the broker was stopped.
func (n *TransportNetwork) Attach(b, part int) (raft.Transport, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("attach broker %d partition %d: %w", b, part, transport.ErrClosed)
	}
	if n.nodes[b] == nil {
		node, err := n.relisten(b)
		if err != nil {
			return nil, err
		}
		n.nodes[b] = node
	}
	g, err := n.nodes[b].Group(groupID(part))
	if err != nil {
		return nil, fmt.Errorf("attach broker %d partition %d: %w", b, part, err)
	}
	n.attached[b][part] = true
	return g, nil
}

// relisten starts broker b's Node on its fixed address. The port was free a
// moment ago; retry briefly in case the kernel still holds it.
func (n *TransportNetwork) relisten(b int) (*transport.Node, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		node, err := n.newNode(b, n.addrs[b])
		if err == nil || time.Now().After(deadline) {
			return node, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Detach implements Network. Detaching a broker's last replica closes its
// Node: listener and connections go away.
func (n *TransportNetwork) Detach(b, part int) {
	n.mu.Lock()
	delete(n.attached[b], part)
	var node *transport.Node
	if len(n.attached[b]) == 0 {
		node, n.nodes[b] = n.nodes[b], nil
	}
	n.mu.Unlock()
	if node != nil {
		_ = node.Close() // closes the broker's groups; their Rafts see ErrClosed
	}
}

// Isolate implements Network.
func (n *TransportNetwork) Isolate(b int) { n.faults.Isolate(string(BrokerID(b))) }

// Heal implements Network.
func (n *TransportNetwork) Heal() { n.faults.Heal() }

// Close closes every Node. It is idempotent.
func (n *TransportNetwork) Close() error {
	n.mu.Lock()
	n.closed = true
	nodes := n.nodes
	n.nodes = make([]*transport.Node, n.brokers)
	n.mu.Unlock()
	var errs []error
	for _, node := range nodes {
		if node != nil {
			errs = append(errs, node.Close())
		}
	}
	return errors.Join(errs...)
}
