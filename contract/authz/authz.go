// Package authz decides who may do what, with casbin. It holds two models:
//
//   - the control-plane model: roles (owner, admin, developer, viewer,
//     client, operator) against API objects and read/write actions;
//   - the data-plane model: a tenant's ACLs (allow and deny rules on topics,
//     groups and the cluster, literal or prefixed names) layered over the
//     defaults of each API key's role. Deny always wins.
//
// The control plane and the data plane both import it; it imports only the
// catalogue of Sluice's own packages.
package authz

import (
	"fmt"
	"slices"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
)

// Roles of users (owner, admin, developer, viewer) and of API keys (admin,
// developer, viewer, client), plus the platform operator.
const (
	RoleOwner     = "owner"
	RoleAdmin     = "admin"
	RoleDeveloper = "developer"
	RoleViewer    = "viewer"
	RoleClient    = "client" // data-plane only: nothing but what ACLs allow
	RoleOperator  = "operator"
)

// UserRoles and KeyRoles list the roles each kind of principal may hold.
var (
	UserRoles = []string{RoleOwner, RoleAdmin, RoleDeveloper, RoleViewer}
	KeyRoles  = []string{RoleAdmin, RoleDeveloper, RoleViewer, RoleClient}
)

// rank orders tenant roles so nobody grants more than they hold.
var rank = map[string]int{RoleClient: 0, RoleViewer: 1, RoleDeveloper: 2, RoleAdmin: 3, RoleOwner: 4}

// AtMost reports whether role a grants no more than role b.
func AtMost(a, b string) bool {
	ra, oka := rank[a]
	rb, okb := rank[b]
	return oka && okb && ra <= rb
}

// Objects of the control-plane API.
const (
	ObjTenant  = "tenant"
	ObjTopics  = "topics"
	ObjKeys    = "api-keys"
	ObjACLs    = "acls"
	ObjQuotas  = "quotas"
	ObjMembers = "members"
	ObjGroups  = "groups"
	ObjUsage   = "usage"
	ObjBilling = "billing"
	ObjAdmin   = "admin" // operator endpoints
)

// Actions of the control-plane API.
const (
	ActRead  = "read"
	ActWrite = "write"
)

const apiModel = `
[request_definition]
r = sub, obj, act

[policy_definition]
p = sub, obj, act

[role_definition]
g = _, _

[policy_effect]
e = some(where (p.eft == allow))

[matchers]
m = g(r.sub, p.sub) && (p.obj == "*" || r.obj == p.obj) && (p.act == "*" || r.act == p.act)
`

var apiPolicies = [][]string{
	{RoleViewer, ObjTenant, ActRead},
	{RoleViewer, ObjTopics, ActRead},
	{RoleViewer, ObjKeys, ActRead},
	{RoleViewer, ObjACLs, ActRead},
	{RoleViewer, ObjQuotas, ActRead},
	{RoleViewer, ObjMembers, ActRead},
	{RoleViewer, ObjGroups, ActRead},
	{RoleViewer, ObjUsage, ActRead},
	{RoleDeveloper, ObjTopics, ActWrite},
	{RoleDeveloper, ObjKeys, ActWrite},
	{RoleAdmin, ObjACLs, ActWrite},
	{RoleAdmin, ObjMembers, ActWrite},
	{RoleAdmin, ObjBilling, ActRead},
	{RoleOwner, ObjTenant, ActWrite},
	{RoleOwner, ObjBilling, ActWrite},
	{RoleOperator, ObjAdmin, "*"},
	// A client key reads only what describes its own tenant.
	{RoleClient, ObjTenant, ActRead},
}

var apiInherits = [][]string{
	{RoleDeveloper, RoleViewer},
	{RoleAdmin, RoleDeveloper},
	{RoleOwner, RoleAdmin},
}

// API answers control-plane authorization questions. It is safe for
// concurrent use and immutable after NewAPI.
type API struct {
	e *casbin.Enforcer
}

// NewAPI builds the control-plane enforcer from the embedded model and policy.
func NewAPI() (*API, error) {
	e, err := newEnforcer("api", apiModel)
	if err != nil {
		return nil, err
	}
	if _, err := e.AddPolicies(apiPolicies); err != nil {
		return nil, fmt.Errorf("add api policies: %w", err)
	}
	if _, err := e.AddGroupingPolicies(apiInherits); err != nil {
		return nil, fmt.Errorf("add api roles: %w", err)
	}
	return &API{e: e}, nil
}

// newEnforcer builds an enforcer of the model text, with no policies yet;
// name ("api" or "acl") says in errors which of the two models failed.
func newEnforcer(name, text string) (*casbin.Enforcer, error) {
	m, err := model.NewModelFromString(text)
	if err != nil {
		return nil, fmt.Errorf("load %s model: %w", name, err)
	}
	e, err := casbin.NewEnforcer(m)
	if err != nil {
		return nil, fmt.Errorf("create %s enforcer: %w", name, err)
	}
	return e, nil
}

// Allowed reports whether role may do act on obj.
func (a *API) Allowed(role, obj, act string) bool {
	ok, err := a.e.Enforce(role, obj, act)
	return err == nil && ok
}

// Valid reports whether s is one of roles.
func Valid(roles []string, s string) bool { return slices.Contains(roles, s) }
