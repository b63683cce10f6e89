package controlplane

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/controlplane/mail"
)

const memberSelect = `SELECT m.user_id, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id`

func scanMember(row pgx.Row) (api.Member, error) {
	var m api.Member
	err := row.Scan(&m.UserID, &m.Email, &m.Role, &m.CreatedAt)
	return m, err
}

func (s *Server) listMembers(c echo.Context) error {
	p, pg, err := s.tenantPage(c, authz.ObjMembers)
	if err != nil {
		return err
	}
	return listPage(c, s, "list members", pg, scanMember,
		func(m api.Member) string { return m.UserID },
		memberSelect+` WHERE m.tenant_id = $1 AND m.user_id > $2 ORDER BY m.user_id LIMIT $3`, p.tenantID, pg.after, pg.limit+1)
}

// addMember invites an address to the tenant. Every well-formed request
// gets the same answer (202, the same body, one password hash and one mail
// on every path), so the caller does not learn whether the address has an
// account or is a member already: the mail to the address says, with a
// token for acceptInvitation unless it is a member. The password is the
// new user's if the address has no account when it accepts; an existing
// user keeps theirs.
func (s *Server) addMember(c echo.Context) error {
	p, req, err := tenantWrite[api.AddMemberRequest](s, c, authz.ObjMembers)
	if err != nil {
		return err
	}
	email, err := normalizeEmail(req.Email)
	if err != nil {
		return err
	}
	if err := s.checkGrant(p, req.Role); err != nil {
		return err
	}
	if err := credential.CheckPasswordRules(req.Password); err != nil {
		return catalog.InvalidRequest.New(err.Error())
	}
	ctx := c.Request().Context()
	hash := credential.HashPassword(req.Password) // on every path, kept on one
	var msg mail.Message
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var name string
		var member bool
		if err := tx.QueryRow(ctx, `SELECT t.name, EXISTS (SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
			WHERE m.tenant_id = t.id AND u.email = $2) FROM tenants t WHERE t.id = $1`, p.tenantID, email).Scan(&name, &member); err != nil {
			return err
		}
		if member {
			msg = mail.Message{To: email, Subject: "Sluice: you are already a member of " + name,
				Body: fmt.Sprintf("Someone in the Sluice tenant %q asked to add this address, which is a member already.\n"+
					"Nothing changed.", name)}
			return nil
		}
		token := credential.NewToken()
		expires := s.cfg.Now().Add(s.cfg.SignupTTL)
		if _, err := tx.Exec(ctx, `INSERT INTO member_invitations (token_hash, tenant_id, email, role, password_hash, invited_by, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, credential.HashSecret(token), p.tenantID, email, req.Role, hash, p.actor(), expires); err != nil {
			return err
		}
		msg = mail.Message{To: email, Subject: "Sluice: an invitation to the tenant " + name,
			Body: fmt.Sprintf("You are invited to the Sluice tenant %q as %s. To accept before %s, use this token:\n\n"+
				"token: %s\n\nPOST it to /v1/invitations/accept as {\"token\": \"...\"}. Without a Sluice account, one is made\n"+
				"with the password the person who invited you chose; with one, you sign in with your own.\n"+
				"If you did not expect this, ignore this message.", name, req.Role, expires.UTC().Format(time.RFC3339), token)}
		return audit(ctx, tx, p, "member.invite", email, map[string]any{"role": req.Role})
	})
	if err := txError("invite member", err); err != nil {
		return err
	}
	if err := s.cfg.Mailer.Send(ctx, msg); err != nil {
		return catalog.Unavailable.Wrap(fmt.Errorf("mail invitation: %w", err), "the invitation could not be mailed; retry later")
	}
	return c.JSON(http.StatusAccepted, api.MemberInvited{Status: "invited", Message: invitedMessage})
}

const invitedMessage = "we sent a message to this address: it has the token that accepts the invitation, " +
	"or says why there is none; the member is listed once they accept"

// acceptInvitation makes the invited address a member of the tenant, with
// the role of its mailed token, making the user (with the inviter's
// initial password) if the address has no account. A token works once.
func (s *Server) acceptInvitation(c echo.Context) error {
	req, err := anonymousWrite[api.AcceptInvitationRequest](s, c, "too many requests from this address; retry later")
	if err != nil {
		return err
	}
	token := strings.TrimSpace(req.Token)
	if token == "" {
		return catalog.InvalidRequest.New(`"token" is required: the token from the invitation mail`)
	}
	ctx := c.Request().Context()
	var out api.Member
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var tenantID, email, role, hash, by string
		var expires time.Time
		err := tx.QueryRow(ctx, `DELETE FROM member_invitations WHERE token_hash = $1
			RETURNING tenant_id, email, role, password_hash, invited_by, expires_at`, credential.HashSecret(token)).
			Scan(&tenantID, &email, &role, &hash, &by, &expires)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !s.cfg.Now().Before(expires)) {
			return catalog.NotFound.New("this invitation token is unknown, used or expired: ask for a new invitation")
		}
		if err != nil {
			return err
		}
		userID := credential.NewID("us_")
		if err := tx.QueryRow(ctx, `INSERT INTO users (id, email, password_hash) VALUES ($1, $2, $3)
			ON CONFLICT (email) DO UPDATE SET email = EXCLUDED.email RETURNING id`, userID, email, hash).Scan(&userID); err != nil {
			return err
		}
		if err := insertNew(ctx, tx, catalog.AlreadyExists.New("you are already a member of this tenant"),
			`INSERT INTO memberships (user_id, tenant_id, role) VALUES ($1, $2, $3)`, userID, tenantID, role); err != nil {
			return err
		}
		out, err = scanMember(tx.QueryRow(ctx, memberSelect+` WHERE m.tenant_id = $1 AND m.user_id = $2`, tenantID, userID))
		if err != nil {
			return err
		}
		actor := &principal{kind: "user", userID: userID, tenantID: tenantID}
		return audit(ctx, tx, actor, "member.add", userID, map[string]any{"role": role, "invited_by": by})
	})
	if err := txError("accept invitation", err); err != nil {
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
	p, req, err := tenantWrite[api.UpdateMemberRequest](s, c, authz.ObjMembers)
	if err != nil {
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
