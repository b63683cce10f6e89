package controlplane

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
)

// userCaller returns the caller of a route about the signed-in user's own
// tenants: a user's session. API keys belong to one tenant and speak for no
// user; a platform operator's session (key or tenantless user) owns no
// tenants.
func userCaller(c echo.Context) (*principal, error) {
	p := callerOf(c)
	if p == nil {
		return nil, catalog.Unauthenticated.New("")
	}
	if p.kind != "user" || p.userID == "" {
		return nil, catalog.PermissionDenied.New("only a signed-in user's session may do this; API keys belong to one tenant")
	}
	if p.tenantID == "" {
		return nil, catalog.PermissionDenied.New("an operator session belongs to no tenant; sign in as a tenant member to create or list tenants")
	}
	return p, nil
}

// listUserTenants lists the tenants the caller belongs to, with the caller's
// role in each: the choices for POST /v1/sessions' "tenant".
func (s *Server) listUserTenants(c echo.Context) error {
	p, err := userCaller(c)
	if err != nil {
		return err
	}
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	return listPage(c, s, "list user tenants", pg,
		func(r pgx.Row) (api.UserTenant, error) {
			var t api.UserTenant
			return t, r.Scan(&t.ID, &t.Name, &t.Plan, &t.Status, &t.Role)
		},
		func(t api.UserTenant) string { return t.Name },
		`SELECT t.id, t.name, t.plan, t.status, m.role FROM memberships m JOIN tenants t ON t.id = m.tenant_id
		WHERE m.user_id = $1 AND t.name > $2 ORDER BY t.name LIMIT $3`, p.userID, pg.after, pg.limit+1)
}

// createTenant creates another tenant for the signed-in user, with signup's
// name, plan and placement rules, makes the user its owner and answers with
// a session on it. It is limited per user (TenantCreateRate) and by the
// tenants the user owns (MaxOwnedTenants).
func (s *Server) createTenant(c echo.Context) error {
	p, err := userCaller(c)
	if err != nil {
		return err
	}
	if p.tenantStatus == "suspended" {
		// Otherwise a suspension could be walked around with a new tenant.
		return catalog.TenantSuspended.New("this session's tenant is suspended; no tenant can be created from it")
	}
	if ok, wait := s.tenantCreates.allow(c.Request().Context(), "user:"+p.userID); !ok {
		return rateLimited(wait, "too many tenants created by this user; retry later")
	}
	var req api.CreateTenantRequest
	if err := s.bind(c, &req); err != nil {
		return err
	}
	if err := validTenantName(req.Name); err != nil {
		return err
	}
	plan, quotas, err := signupPlan(req.Plan)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var out api.CreateTenantResponse
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := s.checkOwnedTenants(ctx, tx, p.userID); err != nil {
			return err
		}
		var err error
		out.Tenant, out.Session, err = s.placeTenant(ctx, tx, p, req.Name, plan, quotas, "tenant.create")
		return err
	})
	if err := txError("create tenant", err); err != nil {
		return err
	}
	s.log.Info("tenant created by existing user", "tenant_id", out.Tenant.ID, "user_id", p.userID, "cell", out.Tenant.HomeCellID)
	return c.JSON(http.StatusCreated, out)
}

// checkOwnedTenants refuses a new tenant to a user who owns MaxOwnedTenants
// already. The user's row is locked, so concurrent creates count in turn.
func (s *Server) checkOwnedTenants(ctx context.Context, tx pgx.Tx, userID string) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, userID); err != nil {
		return err
	}
	var owned int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM memberships WHERE user_id = $1 AND role = 'owner'`, userID).Scan(&owned); err != nil {
		return err
	}
	if owned >= s.cfg.MaxOwnedTenants {
		return catalog.QuotaExceeded.Newf("a user may own %d tenants; this user owns %d", s.cfg.MaxOwnedTenants, owned)
	}
	return nil
}
