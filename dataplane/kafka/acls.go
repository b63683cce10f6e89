package kafka

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/client"
)

// DescribeAcls, CreateAcls and DeleteAcls manage the tenant's ACLs, which
// the control plane owns: each request goes to /v1/acls with the caller's
// own API key, as topic administration does (topics.go), so the control
// plane's role check, validation and audit apply unchanged: listing needs
// a role that may read ACLs, creating and deleting one that may write
// them; its permission_denied reaches the client as
// CLUSTER_AUTHORIZATION_FAILED. The three keys share one mapping, so they
// share this file.
//
// Kafka's model maps onto Sluice's as follows: principal "User:<key id>"
// is an API key of the tenant and "User:*" every key; resource types
// TOPIC, GROUP and CLUSTER; patterns LITERAL and PREFIXED (ANY and MATCH
// in filters); the operations Sluice ACLs know; ALLOW and DENY. Sluice
// ACLs have no host, so the host is always "*". Anything else is refused
// with INVALID_REQUEST and a message naming what is supported.

// aclAPIs are served only when Config.ControlPlane is set.
var aclAPIs = map[int16]bool{29: true, 30: true, 31: true}

var (
	kafkaResourceTypes = map[kmsg.ACLResourceType]string{
		kmsg.ACLResourceTypeTopic:   authz.ResourceTopic,
		kmsg.ACLResourceTypeGroup:   authz.ResourceGroup,
		kmsg.ACLResourceTypeCluster: authz.ResourceCluster,
	}
	kafkaPatterns = map[kmsg.ACLResourcePatternType]string{
		kmsg.ACLResourcePatternTypeLiteral:  authz.PatternLiteral,
		kmsg.ACLResourcePatternTypePrefixed: authz.PatternPrefixed,
	}
	kafkaOperations = map[kmsg.ACLOperation]string{
		kmsg.ACLOperationAll:             authz.OpAll,
		kmsg.ACLOperationRead:            authz.OpRead,
		kmsg.ACLOperationWrite:           authz.OpWrite,
		kmsg.ACLOperationCreate:          authz.OpCreate,
		kmsg.ACLOperationDelete:          authz.OpDelete,
		kmsg.ACLOperationAlter:           authz.OpAlter,
		kmsg.ACLOperationDescribe:        authz.OpDescribe,
		kmsg.ACLOperationDescribeConfigs: authz.OpDescribeConfigs,
		kmsg.ACLOperationAlterConfigs:    authz.OpAlterConfigs,
	}
	kafkaPermissions = map[kmsg.ACLPermissionType]string{
		kmsg.ACLPermissionTypeAllow: authz.Allow,
		kmsg.ACLPermissionTypeDeny:  authz.Deny,
	}
)

// reverse inverts one of the maps above.
func reverse[K comparable](m map[K]string) map[string]K {
	out := make(map[string]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

var (
	sluiceResourceTypes = reverse(kafkaResourceTypes)
	sluicePatterns      = reverse(kafkaPatterns)
	sluiceOperations    = reverse(kafkaOperations)
	sluicePermissions   = reverse(kafkaPermissions)
)

const userPrefix = "User:"

func aclInvalid(format string, args ...any) *catalog.Error {
	return catalog.InvalidRequest.Newf(format, args...)
}

func resourceTypeOf(t kmsg.ACLResourceType) (string, error) {
	if s, ok := kafkaResourceTypes[t]; ok {
		return s, nil
	}
	return "", aclInvalid("resource type %s is not supported: Sluice ACLs cover TOPIC, GROUP and CLUSTER", t)
}

func operationOf(op kmsg.ACLOperation) (string, error) {
	if s, ok := kafkaOperations[op]; ok {
		return s, nil
	}
	return "", aclInvalid("operation %s is not supported: Sluice ACLs cover ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS and ALTER_CONFIGS", op)
}

func permissionOf(p kmsg.ACLPermissionType) (string, error) {
	if s, ok := kafkaPermissions[p]; ok {
		return s, nil
	}
	return "", aclInvalid("permission type %s is not supported: give ALLOW or DENY", p)
}

// principalOf maps "User:<key id>" to the key id and "User:*" to every key.
func principalOf(p string) (string, error) {
	id, ok := strings.CutPrefix(p, userPrefix)
	if !ok || id == "" {
		return "", aclInvalid(`principal %q is not supported: give "User:<API key id>" or "User:*"`, p)
	}
	return id, nil
}

func hostOK(h string) error {
	if h != "*" {
		return aclInvalid(`host %q is not supported: Sluice ACLs apply from every host; give "*"`, h)
	}
	return nil
}

// patternOf is a request's pattern type; version 0 has none and means
// LITERAL.
func patternOf(version int16, p kmsg.ACLResourcePatternType) kmsg.ACLResourcePatternType {
	if version == 0 {
		return kmsg.ACLResourcePatternTypeLiteral
	}
	return p
}

// aclKey is an ACL's identity as the cell state carries it (wire.ACL has
// no id); the control plane keeps ACLs unique on these fields.
type aclKey struct{ principal, rtype, name, pattern, op, perm string }

func keyOfACL(a api.ACL) aclKey {
	return aclKey{a.Principal, a.ResourceType, a.ResourceName, a.PatternType, a.Operation, a.Permission}
}

// tenantACLKeys are the caller's tenant's ACLs in the broker's state.
func (c *conn) tenantACLKeys() map[aclKey]bool {
	v := c.s.cfg.State.View()
	out := map[aclKey]bool{}
	for _, a := range v.ACLs {
		if a.TenantID == c.tenant() {
			out[aclKey{a.Principal, a.ResourceType, a.ResourceName, a.PatternType, a.Operation, a.Permission}] = true
		}
	}
	return out
}

// waitForACLs answers once the broker's state has the created ACLs and not
// the deleted ones, so that the client's next request is authorized by
// them (bounded by ctx).
func (c *conn) waitForACLs(ctx context.Context, created, deleted []aclKey) {
	if len(created) == 0 && len(deleted) == 0 {
		return
	}
	c.waitForState(ctx, func() bool {
		have := c.tenantACLKeys()
		for _, k := range created {
			if !have[k] {
				return false
			}
		}
		for _, k := range deleted {
			if have[k] {
				return false
			}
		}
		return true
	})
}

// aclFilter is a DescribeAcls or DeleteAcls filter in Sluice's terms; an
// empty field matches any value.
type aclFilter struct {
	rtype     string
	name      *string
	pattern   kmsg.ACLResourcePatternType // ANY, MATCH, LITERAL or PREFIXED
	principal *string
	op, perm  string
}

func newACLFilter(version int16, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType,
	principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) (aclFilter, error) {
	f := aclFilter{name: name, pattern: patternOf(version, pt)}
	var err error
	if rt != kmsg.ACLResourceTypeAny {
		if f.rtype, err = resourceTypeOf(rt); err != nil {
			return f, err
		}
	}
	switch f.pattern {
	case kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch,
		kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return f, aclInvalid("pattern type %s is not supported in a filter: give ANY, MATCH, LITERAL or PREFIXED", f.pattern)
	}
	if principal != nil {
		id, err := principalOf(*principal)
		if err != nil {
			return f, err
		}
		f.principal = &id
	}
	if host != nil {
		if err := hostOK(*host); err != nil {
			return f, err
		}
	}
	if op != kmsg.ACLOperationAny {
		if f.op, err = operationOf(op); err != nil {
			return f, err
		}
	}
	if perm != kmsg.ACLPermissionTypeAny {
		if f.perm, err = permissionOf(perm); err != nil {
			return f, err
		}
	}
	return f, nil
}

// matches applies Kafka's filter semantics: a named MATCH filter finds the
// literal ACLs of that name or of "*" and the prefixed ACLs whose prefix
// starts the name; ANY finds every pattern type of exactly that name;
// LITERAL and PREFIXED that pattern type of exactly that name.
func (f aclFilter) matches(a api.ACL) bool {
	switch {
	case f.rtype != "" && a.ResourceType != f.rtype,
		f.principal != nil && a.Principal != *f.principal,
		f.op != "" && a.Operation != f.op,
		f.perm != "" && a.Permission != f.perm:
		return false
	}
	switch f.pattern {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
		if a.PatternType != kafkaPatterns[f.pattern] {
			return false
		}
	}
	if f.name == nil {
		return true
	}
	if f.pattern == kmsg.ACLResourcePatternTypeMatch {
		if a.PatternType == authz.PatternPrefixed {
			return strings.HasPrefix(*f.name, a.ResourceName)
		}
		return a.ResourceName == *f.name || a.ResourceName == "*"
	}
	return a.ResourceName == *f.name
}

// kafkaPrincipal is an ACL's principal as Kafka names it.
func kafkaPrincipal(p string) string { return userPrefix + p }

func (c *conn) describeACLs(r *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	ctx, cancel := adminContext(c.s.ctx, 0)
	defer cancel()
	cpc, err := c.callerAPI()
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err)
		return resp
	}
	f, err := newACLFilter(r.Version, r.ResourceType, r.ResourceName, r.ResourcePatternType, r.Principal, r.Host,
		r.Operation, r.PermissionType)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err)
		return resp
	}
	acls, err := cpc.ACLs(ctx)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = apiError(err)
		return resp
	}
	type resource struct{ rtype, name, pattern string }
	index := map[resource]int{}
	for _, a := range acls {
		if !f.matches(a) {
			continue
		}
		res := resource{a.ResourceType, a.ResourceName, a.PatternType}
		i, ok := index[res]
		if !ok {
			i = len(resp.Resources)
			index[res] = i
			or := kmsg.NewDescribeACLsResponseResource()
			or.ResourceType, or.ResourceName = sluiceResourceTypes[a.ResourceType], a.ResourceName
			or.ResourcePatternType = sluicePatterns[a.PatternType]
			resp.Resources = append(resp.Resources, or)
		}
		oa := kmsg.NewDescribeACLsResponseResourceACL()
		oa.Principal, oa.Host = kafkaPrincipal(a.Principal), "*"
		oa.Operation, oa.PermissionType = sluiceOperations[a.Operation], sluicePermissions[a.Permission]
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, oa)
	}
	return resp
}

// createACLRequest maps one CreateAcls creation to /v1's request.
func createACLRequest(version int16, cr kmsg.CreateACLsRequestCreation) (api.CreateACLRequest, error) {
	var req api.CreateACLRequest
	var err error
	if req.ResourceType, err = resourceTypeOf(cr.ResourceType); err != nil {
		return req, err
	}
	pt := patternOf(version, cr.ResourcePatternType)
	var ok bool
	if req.PatternType, ok = kafkaPatterns[pt]; !ok {
		return req, aclInvalid("pattern type %s is not supported for a new ACL: give LITERAL or PREFIXED", pt)
	}
	if req.Principal, err = principalOf(cr.Principal); err != nil {
		return req, err
	}
	if err := hostOK(cr.Host); err != nil {
		return req, err
	}
	if req.Operation, err = operationOf(cr.Operation); err != nil {
		return req, err
	}
	if req.Permission, err = permissionOf(cr.PermissionType); err != nil {
		return req, err
	}
	req.ResourceName = cr.ResourceName
	return req, nil
}

func (c *conn) createACLs(r *kmsg.CreateACLsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	ctx, cancel := adminContext(c.s.ctx, 0)
	defer cancel()
	cpc, apiErr := c.callerAPI()
	var created []aclKey
	for _, cr := range r.Creations {
		or := kmsg.NewCreateACLsResponseResult()
		req, err := createACLRequest(r.Version, cr)
		switch {
		case apiErr != nil:
			or.ErrorCode, or.ErrorMessage = errCode(apiErr)
		case err != nil:
			or.ErrorCode, or.ErrorMessage = errCode(err)
		default:
			a, err := cpc.CreateACL(ctx, req)
			if err != nil {
				or.ErrorCode, or.ErrorMessage = apiError(err)
				break
			}
			created = append(created, keyOfACL(a))
		}
		resp.Results = append(resp.Results, or)
	}
	c.waitForACLs(ctx, created, nil)
	return resp
}

func (c *conn) deleteACLs(r *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	ctx, cancel := adminContext(c.s.ctx, 0)
	defer cancel()
	cpc, apiErr := c.callerAPI()
	if apiErr == nil {
		apiErr = c.mayWriteACLs()
	}
	var acls []api.ACL
	var listErr error
	if apiErr == nil {
		acls, listErr = cpc.ACLs(ctx)
	}
	// An ACL matched by several filters is deleted once, under the first.
	done := map[string]bool{}
	var deleted []aclKey
	var denied error
	for _, rf := range r.Filters {
		or := kmsg.NewDeleteACLsResponseResult()
		if apiErr != nil || listErr != nil {
			if apiErr != nil {
				or.ErrorCode, or.ErrorMessage = errCode(apiErr)
			} else {
				or.ErrorCode, or.ErrorMessage = apiError(listErr)
			}
			resp.Results = append(resp.Results, or)
			continue
		}
		f, ferr := newACLFilter(r.Version, rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal,
			rf.Host, rf.Operation, rf.PermissionType)
		if ferr != nil {
			or.ErrorCode, or.ErrorMessage = errCode(ferr)
			resp.Results = append(resp.Results, or)
			continue
		}
		for _, a := range acls {
			if done[a.ID] || !f.matches(a) {
				continue
			}
			done[a.ID] = true
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = sluiceResourceTypes[a.ResourceType], a.ResourceName
			m.ResourcePatternType = sluicePatterns[a.PatternType]
			m.Principal, m.Host = kafkaPrincipal(a.Principal), "*"
			m.Operation, m.PermissionType = sluiceOperations[a.Operation], sluicePermissions[a.Permission]
			if derr := cpc.DeleteACL(ctx, a.ID); isPermissionDenied(derr) {
				denied = derr
				break
			} else if derr != nil {
				m.ErrorCode, m.ErrorMessage = apiError(derr)
			} else {
				deleted = append(deleted, keyOfACL(a))
			}
			or.MatchingACLs = append(or.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, or)
		if denied != nil {
			break
		}
	}
	if denied != nil {
		// The control plane refused the first deletion (the key's role
		// changed since the broker's state was built): as above, the
		// refusal for every filter and no matches.
		resp.Results = resp.Results[:0]
		for range r.Filters {
			or := kmsg.NewDeleteACLsResponseResult()
			or.ErrorCode, or.ErrorMessage = apiError(denied)
			resp.Results = append(resp.Results, or)
		}
	}
	c.waitForACLs(ctx, nil, deleted)
	return resp
}

// apiRoles is the control plane's role model, which contract/authz shares
// with the brokers.
var apiRoles = sync.OnceValues(authz.NewAPI)

// mayWriteACLs checks the caller's role as /v1/acls will, before DeleteAcls
// lists anything: a caller that may not delete ACLs is refused for every
// filter, as in Kafka, even one that matches nothing. The control plane
// still decides each deletion.
func (c *conn) mayWriteACLs() error {
	roles, err := apiRoles()
	if err != nil {
		return catalog.Internal.Wrap(err, "")
	}
	p := c.principal.Load()
	if !roles.Allowed(p.Role, authz.ObjACLs, authz.ActWrite) {
		return catalog.PermissionDenied.Newf("role %s may not write acls", p.Role)
	}
	return nil
}

// isPermissionDenied reports whether a control-plane call was refused for
// the caller's role.
func isPermissionDenied(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && catalog.Code(ce.Code) == catalog.PermissionDenied.Code
}
