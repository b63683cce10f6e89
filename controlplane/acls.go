package controlplane

import (
	"context"
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
)

const aclColumns = `id, principal, resource_type, resource_name, pattern_type, operation, permission, created_at`

func scanACL(row pgx.Row) (api.ACL, error) {
	var a api.ACL
	err := row.Scan(&a.ID, &a.Principal, &a.ResourceType, &a.ResourceName, &a.PatternType, &a.Operation, &a.Permission, &a.CreatedAt)
	return a, err
}

func (s *Server) listACLs(c echo.Context) error {
	p, pg, err := s.tenantPage(c, authz.ObjACLs)
	if err != nil {
		return err
	}
	return listPage(c, s, "list acls", pg, scanACL,
		func(a api.ACL) string { return a.ID },
		`SELECT `+aclColumns+` FROM acls WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3`, p.tenantID, pg.after, pg.limit+1)
}

func (s *Server) getACL(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjACLs, authz.ActRead)
	if err != nil {
		return err
	}
	a, err := scanACL(s.db.QueryRow(c.Request().Context(), `SELECT `+aclColumns+` FROM acls WHERE id = $1 AND tenant_id = $2`,
		c.Param("id"), p.tenantID))
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.NotFound.New("no such ACL")
	}
	if err != nil {
		return dbError("load acl", err)
	}
	return c.JSON(http.StatusOK, a)
}

func validateACL(req *api.CreateACLRequest) error {
	if req.PatternType == "" {
		req.PatternType = authz.PatternLiteral
	}
	if req.Permission == "" {
		req.Permission = authz.Allow
	}
	switch {
	case req.Principal != authz.AnyKey && !credential.ValidKeyID(req.Principal):
		return catalog.InvalidRequest.New(`principal must be an API key id of this tenant, or "*" for all of them`)
	case !authz.Valid(authz.ResourceTypes, req.ResourceType):
		return catalog.InvalidRequest.Newf("resource_type must be one of %v", authz.ResourceTypes)
	case !authz.Valid(authz.PatternTypes, req.PatternType):
		return catalog.InvalidRequest.Newf("pattern_type must be one of %v", authz.PatternTypes)
	case !authz.Valid(authz.Operations, req.Operation):
		return catalog.InvalidRequest.Newf("operation must be one of %v", authz.Operations)
	case !authz.Valid(authz.Permissions, req.Permission):
		return catalog.InvalidRequest.Newf("permission must be one of %v", authz.Permissions)
	case req.ResourceName == "":
		return catalog.InvalidRequest.New(`resource_name is required ("*" matches every name)`)
	case len(req.ResourceName) > 249:
		return catalog.InvalidRequest.New("resource_name may be at most 249 characters")
	case req.PatternType == authz.PatternLiteral && req.ResourceName != "*" && req.ResourceName[len(req.ResourceName)-1] == '*':
		return catalog.InvalidRequest.New(`a literal resource_name may not end in "*"; use pattern_type "prefixed"`)
	}
	return nil
}

func (s *Server) createACL(c echo.Context) error {
	p, req, err := tenantWrite[api.CreateACLRequest](s, c, authz.ObjACLs)
	if err != nil {
		return err
	}
	if err := validateACL(&req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var out api.ACL
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if req.Principal != authz.AnyKey {
			var ok bool
			err := tx.QueryRow(ctx, `SELECT true FROM api_keys WHERE id = $1 AND tenant_id = $2`, req.Principal, p.tenantID).Scan(&ok)
			if errors.Is(err, pgx.ErrNoRows) {
				return catalog.NotFound.New("no API key of this tenant has that id")
			}
			if err != nil {
				return err
			}
		}
		var err error
		out, err = scanACL(tx.QueryRow(ctx, `INSERT INTO acls (id, tenant_id, principal, resource_type, resource_name,
			pattern_type, operation, permission) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+aclColumns,
			credential.NewID("acl_"), p.tenantID, req.Principal, req.ResourceType, req.ResourceName, req.PatternType,
			req.Operation, req.Permission))
		if isUniqueViolation(err) {
			return catalog.AlreadyExists.New("an identical ACL already exists")
		}
		if err != nil {
			return err
		}
		return bumpAndAudit(ctx, tx, p.tenantID, p, "acl.create", out.ID, map[string]any{"acl": out})
	})
	if err := txError("create acl", err); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

func (s *Server) deleteACL(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjACLs, authz.ActWrite)
	if err != nil {
		return err
	}
	return s.deleteTenantRow(c, p, "acl", c.Param("id"), `DELETE FROM acls WHERE tenant_id = $1 AND id = $2`,
		catalog.NotFound.New("no such ACL"))
}

// rowsQuerier is a pool or a transaction.
type rowsQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// callerACL is the tenant's data-plane ACL for an API-key caller, built as
// brokers build it (the key's role defaults and the tenant's rules), or nil
// for a user session: ACLs bind API keys, the principals of Kafka and the
// HTTP data API, while console users act by their role alone.
func (s *Server) callerACL(ctx context.Context, p *principal) (*authz.ACL, error) {
	if p.kind != "api_key" {
		return nil, nil
	}
	acl, err := s.keyACL(ctx, s.db, p.tenantID, p.keyID, p.role)
	if err != nil {
		return nil, dbError("load acls", err)
	}
	return acl, nil
}

// aclAllows reports whether the caller behind acl (nil for a user) may do
// op on a resource.
func aclAllows(acl *authz.ACL, p *principal, rtype, name, op string) bool {
	return acl == nil || acl.Allowed(p.keyID, rtype, name, op)
}

// requireTopicOps checks the caller's ACLs for every op on a topic, on top
// of its role, and returns them (nil for a user): topic_access_denied names
// the first op refused.
func (s *Server) requireTopicOps(ctx context.Context, p *principal, topic string, ops ...string) (*authz.ACL, error) {
	acl, err := s.callerACL(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		if !aclAllows(acl, p, authz.ResourceTopic, topic, op) {
			return nil, catalog.TopicAccessDenied.Newf("the ACLs of API key %s do not allow %s on topic %q", p.keyID, op, topic)
		}
	}
	return acl, nil
}

// topicDescribable applies the brokers' rule for learning that a topic
// exists to an API-key caller; a user may describe every topic.
func topicDescribable(acl *authz.ACL, p *principal, topic string) bool {
	return acl == nil || describable(acl, p.keyID, topic)
}
