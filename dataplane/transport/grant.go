package transport

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/peercert"
)

// MirrorGrant lets the brokers of another cell call the mirror read RPCs
// (mirror.go) for the partitions of Topics (topic ids) of Tenant: a
// client whose certificate chains to CAs and names Cell.
type MirrorGrant struct {
	Cell   string
	Tenant string
	Topics []string
	CAs    []*x509.Certificate // the cell's peer CA
}

// GrantsFromWire converts the grants of a cell state (already validated
// on decode; checked again here).
func GrantsFromWire(gs wire.MirrorGrants) ([]MirrorGrant, error) {
	if err := gs.Validate(); err != nil {
		return nil, err
	}
	out := make([]MirrorGrant, 0, len(gs))
	for _, g := range gs {
		cas, err := g.CAs()
		if err != nil {
			return nil, err
		}
		out = append(out, MirrorGrant{Cell: g.Cell, Tenant: g.TenantID, Topics: g.Topics, CAs: cas})
	}
	return out, nil
}

// cellGrant is what one cell was granted.
type cellGrant struct {
	gen    uint64 // bumped whenever the cell's grant changes
	pool   *x509.CertPool
	cas    []byte                     // the CA certificates, concatenated: to see a change
	topics map[string]map[string]bool // tenant → topic ids
}

func (g *cellGrant) same(o *cellGrant) bool {
	return bytes.Equal(g.cas, o.cas) && maps.EqualFunc(g.topics, o.topics, maps.Equal)
}

// grants is a Node's mirror grants and the groups it serves to mirrors.
type grants struct {
	refused      atomic.Uint64 // mirror rpcs refused
	refusedConns atomic.Uint64 // mirror connections refused
	served       atomic.Uint64 // mirror rpcs answered by a source
	inflight     atomic.Int64  // mirror rpcs being answered

	// mu guards the fields below. It is a leaf: nothing else is locked
	// while it is held.
	mu      sync.Mutex
	gen     uint64
	cells   map[string]*cellGrant
	sources map[string]servedSource // by group id
}

// SetMirrorGrants replaces the cells that may mirror from this broker
// (a new cell state). A cell whose grant changed or went away has every
// mirror connection closed at once; its next one is checked against the
// new grants, and every call is checked against the grants of the moment.
func (n *Node) SetMirrorGrants(gs []MirrorGrant) error {
	next := map[string]*cellGrant{}
	for i, g := range gs {
		switch {
		case g.Cell == "":
			return fmt.Errorf("set mirror grants: grant %d: %w", i, wire.ErrGrantNoCell)
		case g.Cell == n.cell:
			return fmt.Errorf("set mirror grants: grant %d names this broker's own cell %q", i, g.Cell)
		case g.Tenant == "":
			return fmt.Errorf("set mirror grants: grant %d: %w", i, wire.ErrGrantNoTenant)
		case len(g.CAs) == 0:
			return fmt.Errorf("set mirror grants: grant %d: %w", i, wire.ErrGrantBadCA)
		}
		var raw []byte
		for _, c := range g.CAs {
			raw = append(raw, c.Raw...)
		}
		cg := next[g.Cell]
		if cg == nil {
			cg = &cellGrant{pool: x509.NewCertPool(), cas: raw, topics: map[string]map[string]bool{}}
			for _, c := range g.CAs {
				cg.pool.AddCert(c)
			}
			next[g.Cell] = cg
		} else if !bytes.Equal(cg.cas, raw) {
			return fmt.Errorf("set mirror grants: grant %d (cell %q): %w", i, g.Cell, wire.ErrGrantCAConflict)
		}
		if cg.topics[g.Tenant] == nil {
			cg.topics[g.Tenant] = map[string]bool{}
		}
		for _, t := range g.Topics {
			cg.topics[g.Tenant][t] = true
		}
	}
	m := &n.mirror
	m.mu.Lock()
	var changed []string
	for cell, old := range m.cells {
		if g := next[cell]; g == nil || !g.same(old) {
			changed = append(changed, cell)
		}
	}
	for cell, g := range next {
		if old := m.cells[cell]; old != nil && g.same(old) {
			g.gen = old.gen
		} else {
			m.gen++
			g.gen = m.gen
		}
	}
	m.cells = next
	m.mu.Unlock()
	if len(changed) > 0 {
		n.closeMirrorConns(func(cell string) bool { return slices.Contains(changed, cell) }, ErrGrantRevoked)
	}
	return nil
}

// ErrGrantRevoked closes a mirror connection whose cell's grant changed
// or went away.
var ErrGrantRevoked = errors.New("mirror grant revoked")

// closeMirrorConns closes the accepted mirror connections of the cells
// match picks.
func (n *Node) closeMirrorConns(match func(cell string) bool, why error) {
	n.mu.Lock()
	var victims []*conn
	for c := range n.conns {
		if c.mirror != nil && !c.client && match(c.mirror.cell) {
			victims = append(victims, c)
		}
	}
	n.mu.Unlock()
	for _, c := range victims {
		n.log.Info("mirror connection closed", "peer", c.peer, "reason", why.Error())
		c.close(why)
	}
}

// verifyMirrorClient verifies the certificate chain of a client on the
// mirror lane: it must name a broker of a cell that holds a grant, and
// chain to that cell's CA. It returns the cell, the broker id and the
// grant's generation.
func (n *Node) verifyMirrorClient(certs []*x509.Certificate) (cell, broker string, gen uint64, err error) {
	if len(certs) == 0 {
		return "", "", 0, errors.New("mirror client sent no certificate")
	}
	cell, broker, err = peercert.Identity(certs[0])
	if err != nil {
		return "", "", 0, err
	}
	m := &n.mirror
	m.mu.Lock()
	g := m.cells[cell]
	m.mu.Unlock()
	if g == nil {
		return "", "", 0, fmt.Errorf("cell %q: %w", cell, ErrNotGranted)
	}
	if err := verifyChain(certs, g.pool, x509.ExtKeyUsageClientAuth); err != nil {
		return "", "", 0, fmt.Errorf("verify mirror client of cell %q: %w", cell, err)
	}
	return cell, broker, g.gen, nil
}

// granted checks a call of cell's connection (accepted under grant
// generation gen) for a topic of a tenant. revoked says the connection's
// grant is gone or changed: it must close.
func (m *grants) granted(cell string, gen uint64, tenant, topic string) (revoked bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.cells[cell]
	if g == nil || g.gen != gen {
		return true, fmt.Errorf("cell %q: %w", cell, ErrGrantRevoked)
	}
	if !g.topics[tenant][topic] {
		return false, fmt.Errorf("cell %q, tenant %q, topic %q: %w", cell, tenant, topic, ErrNotGranted)
	}
	return false, nil
}
