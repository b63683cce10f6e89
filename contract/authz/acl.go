package authz

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/casbin/casbin/v2"
)

// Resource types, operations, pattern types and permissions of ACLs.
const (
	ResourceTopic   = "topic"
	ResourceGroup   = "group"
	ResourceCluster = "cluster"

	OpAll             = "all"
	OpRead            = "read"
	OpWrite           = "write"
	OpCreate          = "create"
	OpDelete          = "delete"
	OpDescribe        = "describe"
	OpAlter           = "alter"
	OpDescribeConfigs = "describe_configs"
	OpAlterConfigs    = "alter_configs"

	PatternLiteral  = "literal"
	PatternPrefixed = "prefixed"

	Allow = "allow"
	Deny  = "deny"

	// AnyKey as an ACL principal means every API key of the tenant.
	AnyKey = "*"

	// ClusterName is the name of the cluster resource, as Kafka names it.
	// A tenant has one cluster: a cluster rule applies whatever its name.
	ClusterName = "kafka-cluster"
)

// Valid values, for request validation.
var (
	ResourceTypes = []string{ResourceTopic, ResourceGroup, ResourceCluster}
	Operations    = []string{OpAll, OpRead, OpWrite, OpCreate, OpDelete, OpDescribe, OpAlter, OpDescribeConfigs, OpAlterConfigs}
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
m = (p.sub == "*" || g(r.sub, p.sub)) && resourceMatch(r.rtype, r.rname, r.act, p.rtype, p.rname) && opMatch(r.act, p.act, p.eft)
`

// resourceMatch matches a request's resource against a rule's. A cluster
// rule covers the tenant's one cluster whatever its name, and also every
// topic for create: creating a topic needs create on the topic or on the
// cluster (as in Kafka), and a deny on either refuses it.
func resourceMatch(rtype, name, op, ruleType, ruleName string) bool {
	switch {
	case rtype == ResourceCluster:
		return ruleType == ResourceCluster
	case rtype == ResourceTopic && op == OpCreate && ruleType == ResourceCluster:
		return true
	}
	return rtype == ruleType && nameMatch(name, ruleName)
}

// opMatch matches a request's operation against a rule's. Besides all and
// the operation itself:
//   - a rule on alter also covers alter_configs, and one on describe also
//     covers describe_configs, both to allow and to deny: the configs
//     operations are the narrower ones;
//   - an allowed alter_configs implies describe_configs, and any allowed
//     operation but delete implies describe, as in Kafka.
func opMatch(op, ruleOp, effect string) bool {
	switch {
	case ruleOp == OpAll || op == ruleOp:
		return true
	case op == OpAlterConfigs && ruleOp == OpAlter, op == OpDescribeConfigs && ruleOp == OpDescribe:
		return true
	case effect != Allow:
		return false
	case op == OpDescribeConfigs:
		return ruleOp == OpAlterConfigs
	case op == OpDescribe:
		return ruleOp != OpDelete
	}
	return false
}

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
//
// An ACL never changes once built, so it remembers its answers: the
// enforcer evaluates its matcher against every rule (about 20 µs), and the
// Kafka front door asks for each topic of each produce and fetch. At most
// maxDecisions answers are kept, since names come from clients; past that
// the enforcer answers each time.
type ACL struct {
	e    *casbin.Enforcer
	keys map[string]bool

	decisions sync.Map // decision → bool
	kept      atomic.Int32
}

// maxDecisions bounds an ACL's remembered answers.
const maxDecisions = 4096

// decision is one question asked of an ACL.
type decision struct{ keyID, resourceType, name, op string }

// NewACL builds the enforcer for one tenant's keys and rules.
func NewACL(keys []Key, rules []Rule) (*ACL, error) {
	e, err := newEnforcer("acl", aclModel)
	if err != nil {
		return nil, err
	}
	e.AddFunction("resourceMatch", func(args ...any) (any, error) {
		return resourceMatch(args[0].(string), args[1].(string), args[2].(string), args[3].(string), args[4].(string)), nil
	})
	e.AddFunction("opMatch", func(args ...any) (any, error) {
		return opMatch(args[0].(string), args[1].(string), args[2].(string)), nil
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
// do nothing. Ask about the cluster with any name (ClusterName, say).
func (a *ACL) Allowed(keyID, resourceType, name, op string) bool {
	if !a.keys[keyID] {
		return false
	}
	d := decision{keyID, resourceType, name, op}
	if v, ok := a.decisions.Load(d); ok {
		return v.(bool)
	}
	ok, err := a.e.Enforce("key:"+keyID, resourceType, name, op)
	allowed := err == nil && ok
	if err == nil && a.kept.Load() < maxDecisions && a.kept.Add(1) <= maxDecisions {
		a.decisions.Store(d, allowed)
	}
	return allowed
}
