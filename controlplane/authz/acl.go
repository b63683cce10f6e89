package authz

import (
	"fmt"
	"strings"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
)

// Resource types, operations, pattern types and permissions of ACLs.
const (
	ResourceTopic   = "topic"
	ResourceGroup   = "group"
	ResourceCluster = "cluster"

	OpAll      = "all"
	OpRead     = "read"
	OpWrite    = "write"
	OpCreate   = "create"
	OpDelete   = "delete"
	OpDescribe = "describe"
	OpAlter    = "alter"

	PatternLiteral  = "literal"
	PatternPrefixed = "prefixed"

	Allow = "allow"
	Deny  = "deny"

	// AnyKey as an ACL principal means every API key of the tenant.
	AnyKey = "*"
)

// Valid values, for request validation.
var (
	ResourceTypes = []string{ResourceTopic, ResourceGroup, ResourceCluster}
	Operations    = []string{OpAll, OpRead, OpWrite, OpCreate, OpDelete, OpDescribe, OpAlter}
	PatternTypes  = []string{PatternLiteral, PatternPrefixed}
	Permissions   = []string{Allow, Deny}
)

// Rule is one ACL of a tenant.
type Rule struct {
	Principal    string // key id, or AnyKey
	ResourceType string
	ResourceName string
	PatternType  string
	Operation    string
	Permission   string
}

// Key is an API key as the data plane knows it: its id and role.
type Key struct {
	ID   string
	Role string
}

const aclModel = `
[request_definition]
r = sub, rtype, rname, act

[policy_definition]
p = sub, rtype, rname, act, eft

[role_definition]
g = _, _

[policy_effect]
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))

[matchers]
m = (p.sub == "*" || g(r.sub, p.sub)) && r.rtype == p.rtype && nameMatch(r.rname, p.rname) && (p.act == "all" || r.act == p.act || (r.act == "describe" && p.eft == "allow" && p.act != "delete"))
`

// Role defaults: what a key of each role may do when no ACL says otherwise.
// A describe is implied by any other allowed operation on the resource, as in
// Kafka. The "role:" prefix keeps role names apart from key ids.
var roleDefaults = [][]string{
	{"role:" + RoleAdmin, ResourceTopic, "*", OpAll, Allow},
	{"role:" + RoleAdmin, ResourceGroup, "*", OpAll, Allow},
	{"role:" + RoleAdmin, ResourceCluster, "*", OpAll, Allow},
	{"role:" + RoleDeveloper, ResourceTopic, "*", OpAll, Allow},
	{"role:" + RoleDeveloper, ResourceGroup, "*", OpAll, Allow},
	{"role:" + RoleDeveloper, ResourceCluster, "*", OpDescribe, Allow},
	{"role:" + RoleViewer, ResourceTopic, "*", OpRead, Allow},
	{"role:" + RoleViewer, ResourceTopic, "*", OpDescribe, Allow},
	{"role:" + RoleViewer, ResourceGroup, "*", OpRead, Allow},
	{"role:" + RoleViewer, ResourceGroup, "*", OpDescribe, Allow},
	{"role:" + RoleViewer, ResourceCluster, "*", OpDescribe, Allow},
}

// nameMatch matches a resource name against a rule's name: "*" matches all,
// a trailing "*" (from a prefixed rule) matches by prefix, else literally.
func nameMatch(name, pattern string) bool {
	if pattern == "*" {
		return true
	}
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return name == pattern
}

// ACL answers one tenant's data-plane questions. Build a new one when the
// tenant's keys or rules change; it is safe for concurrent use.
type ACL struct {
	e    *casbin.Enforcer
	keys map[string]bool
}

// NewACL builds the enforcer for one tenant's keys and rules.
func NewACL(keys []Key, rules []Rule) (*ACL, error) {
	m, err := model.NewModelFromString(aclModel)
	if err != nil {
		return nil, fmt.Errorf("load acl model: %w", err)
	}
	e, err := casbin.NewEnforcer(m)
	if err != nil {
		return nil, fmt.Errorf("create acl enforcer: %w", err)
	}
	e.AddFunction("nameMatch", func(args ...any) (any, error) {
		return nameMatch(args[0].(string), args[1].(string)), nil
	})
	policies := append([][]string(nil), roleDefaults...)
	for _, r := range rules {
		name := r.ResourceName
		if r.PatternType == PatternPrefixed {
			name += "*"
		} else if strings.HasSuffix(name, "*") && name != "*" {
			return nil, fmt.Errorf("literal acl name %q may not end in *", name)
		}
		sub := r.Principal
		if sub != AnyKey {
			sub = "key:" + sub
		}
		policies = append(policies, []string{sub, r.ResourceType, name, r.Operation, r.Permission})
	}
	if _, err := e.AddPolicies(dedupe(policies)); err != nil {
		return nil, fmt.Errorf("add acl policies: %w", err)
	}
	var groups [][]string
	known := make(map[string]bool, len(keys))
	for _, k := range keys {
		known[k.ID] = true
		groups = append(groups, []string{"key:" + k.ID, "role:" + k.Role})
	}
	if len(groups) > 0 {
		if _, err := e.AddGroupingPolicies(groups); err != nil {
			return nil, fmt.Errorf("add acl keys: %w", err)
		}
	}
	return &ACL{e: e, keys: known}, nil
}

func dedupe(p [][]string) [][]string {
	seen := map[string]bool{}
	out := p[:0]
	for _, r := range p {
		k := strings.Join(r, "\x00")
		if !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}

// Allowed reports whether key may do op on the resource. An unknown key may
// do nothing.
func (a *ACL) Allowed(keyID, resourceType, name, op string) bool {
	if !a.keys[keyID] {
		return false
	}
	ok, err := a.e.Enforce("key:"+keyID, resourceType, name, op)
	return err == nil && ok
}
