package cellview

import (
	"fmt"
	"sort"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/wire"
)

// View is one immutable version of the cell's state with indexes for the
// lookups of the request path.
type View struct {
	wire.CellState

	keys    map[string]*wire.Key
	tenants map[string]*wire.Tenant
	topics  map[topicKey]*wire.Topic
	byID    map[string]*wire.Topic
	acls    map[string]*authz.ACL
	brokers map[int]*wire.Broker
}

type topicKey struct{ tenant, name string }

func emptyView(cell string) *View {
	v, _ := newView(wire.CellState{Version: wire.Version, Cell: cell})
	return v
}

func newView(st wire.CellState) (*View, error) {
	v := &View{CellState: st,
		keys: map[string]*wire.Key{}, tenants: map[string]*wire.Tenant{}, topics: map[topicKey]*wire.Topic{},
		byID: map[string]*wire.Topic{}, acls: map[string]*authz.ACL{}, brokers: map[int]*wire.Broker{}}
	for i := range st.Brokers {
		v.brokers[st.Brokers[i].NodeID] = &st.Brokers[i]
	}
	for i := range st.Tenants {
		v.tenants[st.Tenants[i].ID] = &st.Tenants[i]
	}
	keysOf := map[string][]authz.Key{}
	for i := range st.Keys {
		k := &st.Keys[i]
		v.keys[k.ID] = k
		keysOf[k.TenantID] = append(keysOf[k.TenantID], authz.Key{ID: k.ID, Role: k.Role})
	}
	rulesOf := map[string][]authz.Rule{}
	for _, a := range st.ACLs {
		rulesOf[a.TenantID] = append(rulesOf[a.TenantID], authz.Rule{Principal: a.Principal, ResourceType: a.ResourceType,
			ResourceName: a.ResourceName, PatternType: a.PatternType, Operation: a.Operation, Permission: a.Permission})
	}
	for id := range v.tenants {
		acl, err := authz.NewACL(keysOf[id], rulesOf[id])
		if err != nil {
			return nil, fmt.Errorf("build acls of tenant %s: %w", id, err)
		}
		v.acls[id] = acl
	}
	for i := range st.Topics {
		t := &st.Topics[i]
		v.topics[topicKey{t.TenantID, t.Name}] = t
		v.byID[t.ID] = t
	}
	return v, nil
}

// Tenant returns a tenant of the cell.
func (v *View) Tenant(id string) (*wire.Tenant, bool) {
	t, ok := v.tenants[id]
	return t, ok
}

// Topic returns the tenant's topic by the name its clients use. Another
// tenant's topic of the same name is a different topic, never this one.
func (v *View) Topic(tenantID, name string) (*wire.Topic, bool) {
	t, ok := v.topics[topicKey{tenantID, name}]
	return t, ok
}

// TopicByID returns a topic by its id.
func (v *View) TopicByID(id string) (*wire.Topic, bool) {
	t, ok := v.byID[id]
	return t, ok
}

// Topics returns the tenant's topics sorted by name.
func (v *View) Topics(tenantID string) []*wire.Topic {
	var out []*wire.Topic
	for i := range v.CellState.Topics {
		if t := &v.CellState.Topics[i]; t.TenantID == tenantID {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// HasKey reports whether an unrevoked key of the cell has this id.
func (v *View) HasKey(id string) bool {
	_, ok := v.keys[id]
	return ok
}

// Broker returns a broker of the cell by node id.
func (v *View) Broker(node int) (*wire.Broker, bool) {
	b, ok := v.brokers[node]
	return b, ok
}
