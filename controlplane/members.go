package controlplane

import (
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
)

const memberSelect = `SELECT m.user_id, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id`

func scanMember(row pgx.Row) (api.Member, error) {
	var m api.Member
	err := row.Scan(&m.UserID, &m.Email, &m.Role, &m.CreatedAt)
	return m, err
}

func (s *Server) listMembers(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjMembers, authz.ActRead)
	if err != nil {
		return err
	}
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	return listPage(c, s, "list members", pg, func(r pgx.CollectableRow) (api.Member, error) { return scanMember(r) },
		func(m api.Member) string { return m.UserID },
		memberSelect+` WHERE m.tenant_id = $1 AND m.user_id > $2 ORDER BY m.user_id LIMIT $3`, p.tenantID, pg.after, pg.limit+1)
}

// addMember creates a new user with the given password as a member.
func (s *Server) addMember(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjMembers, authz.ActWrite)
	if err != nil {
		return err
	}
	var req api.AddMemberRequest
	if err := s.bind(c, &req); err != nil {
		return err
	}
	email, err := normalizeEmail(req.Email)
	if err != nil {
		return err
	}
	if err := s.checkGrant(p, req.Role); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var out api.Member
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := credential.CheckPasswordRules(req.Password); err != nil {
			return catalog.InvalidRequest.New(err.Error())
		}
		userID := credential.NewID("us_")
		if _, err := tx.Exec(ctx, `INSERT INTO users (id, email, password_hash) VALUES ($1, $2, $3)`,
			userID, email, credential.HashPassword(req.Password)); err != nil {
			if isUniqueViolation(err) {
				// Adding a user who exists would need their consent (an
				// invitation); until then members are new users.
				return catalog.AlreadyExists.New("a user with that email already exists; members are added as new users")
			}
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO memberships (user_id, tenant_id, role) VALUES ($1, $2, $3)`,
			userID, p.tenantID, req.Role); err != nil {
			if isUniqueViolation(err) {
				return catalog.AlreadyExists.New("that user is already a member")
			}
			return err
		}
		var err error
		out, err = scanMember(tx.QueryRow(ctx, memberSelect+` WHERE m.tenant_id = $1 AND m.user_id = $2`, p.tenantID, userID))
		if err != nil {
			return err
		}
		return audit(ctx, tx, p, "member.add", userID, map[string]any{"role": req.Role})
	})
	if err := txError("add member", err); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

// checkGrant: roles are user roles, and nobody grants more than they hold.
func (s *Server) checkGrant(p *principal, role string) error {
	if !authz.Valid(authz.UserRoles, role) {
		return catalog.InvalidRequest.Newf("role must be one of %v", authz.UserRoles)
	}
	if !authz.AtMost(role, p.role) {
		return catalog.PermissionDenied.Newf("a %s may not grant the role %s", p.role, role)
	}
	return nil
}

func (s *Server) updateMember(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjMembers, authz.ActWrite)
	if err != nil {
		return err
	}
	var req api.UpdateMemberRequest
	if err := s.bind(c, &req); err != nil {
		return err
	}
	if err := s.checkGrant(p, req.Role); err != nil {
		return err
	}
	return s.changeMember(c, p, &req.Role)
}

func (s *Server) removeMember(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjMembers, authz.ActWrite)
	if err != nil {
		return err
	}
	return s.changeMember(c, p, nil)
}

// changeMember sets a member's role, or removes the member for a nil role,
// keeping at least one owner and never touching a member who outranks the
// caller.
func (s *Server) changeMember(c echo.Context, p *principal, role *string) error {
	ctx := c.Request().Context()
	userID := c.Param("user_id")
	var out api.Member
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE`, p.tenantID); err != nil {
			return err
		}
		cur, err := scanMember(tx.QueryRow(ctx, memberSelect+` WHERE m.tenant_id = $1 AND m.user_id = $2`, p.tenantID, userID))
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotFound.New("no such member")
		}
		if err != nil {
			return err
		}
		if !authz.AtMost(cur.Role, p.role) {
			return catalog.PermissionDenied.Newf("a %s may not change a %s", p.role, cur.Role)
		}
		if cur.Role == authz.RoleOwner && (role == nil || *role != authz.RoleOwner) {
			var owners int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM memberships WHERE tenant_id = $1 AND role = 'owner'`, p.tenantID).Scan(&owners); err != nil {
				return err
			}
			if owners <= 1 {
				return catalog.InvalidRequest.New("a tenant needs at least one owner")
			}
		}
		if role == nil {
			if _, err := tx.Exec(ctx, `DELETE FROM memberships WHERE tenant_id = $1 AND user_id = $2`, p.tenantID, userID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE tenant_id = $1 AND user_id = $2`, p.tenantID, userID); err != nil {
				return err
			}
			return audit(ctx, tx, p, "member.remove", userID, nil)
		}
		if _, err := tx.Exec(ctx, `UPDATE memberships SET role = $3 WHERE tenant_id = $1 AND user_id = $2`, p.tenantID, userID, *role); err != nil {
			return err
		}
		cur.Role = *role
		out = cur
		return audit(ctx, tx, p, "member.update", userID, map[string]any{"role": *role})
	})
	if err := txError("change member", err); err != nil {
		return err
	}
	if role == nil {
		return c.NoContent(http.StatusNoContent)
	}
	return c.JSON(http.StatusOK, out)
}
