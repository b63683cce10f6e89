package controlplane

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
)

// principal is the authenticated caller of a request.
type principal struct {
	kind         string // "user" or "api_key"
	userID       string
	email        string
	keyID        string
	tenantID     string // empty for operators
	tenantStatus string
	role         string
	sessionHash  []byte // set for session callers, so logout can end it
}

func (p *principal) actor() string {
	if p.kind == "api_key" {
		return "key:" + p.keyID
	}
	return "user:" + p.userID
}

const principalKey = "sluice.principal"

// authenticate resolves the Authorization header: "Bearer <session token>"
// or "Basic base64(key id:secret)". Routes that need no caller skip it.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		var p *principal
		var err error
		if key := h.Get(api.OnBehalfOfHeader); key != "" {
			p, err = s.onBehalfOf(c.Request().Context(), h.Get(echo.HeaderAuthorization), key)
		} else {
			p, err = s.principalFrom(c.Request().Context(), h.Get(echo.HeaderAuthorization))
		}
		if err != nil {
			return err
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

func (s *Server) principalFrom(ctx context.Context, header string) (*principal, error) {
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || cred == "" {
		return nil, catalog.Unauthenticated.New("send Authorization: Bearer <session token> or Basic <key id:secret>")
	}
	switch strings.ToLower(scheme) {
	case "bearer":
		return s.sessionPrincipal(ctx, cred)
	case "basic":
		raw, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			return nil, catalog.Unauthenticated.New("basic credentials are not valid base64")
		}
		id, secret, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, catalog.Unauthenticated.New("basic credentials must be key id:secret")
		}
		return s.keyPrincipal(ctx, id, secret)
	}
	return nil, catalog.Unauthenticated.Newf("authorization scheme %q is not supported", scheme)
}

func (s *Server) sessionPrincipal(ctx context.Context, token string) (*principal, error) {
	hash := credential.HashSecret(token)
	var userID, email, tenantID, role, tenantStatus *string
	var operator *bool
	var expires time.Time
	var keyID, keyTenant, keyRole *string
	var keyRevoked, keyExpires *time.Time
	err := s.db.QueryRow(ctx, `
		SELECT s.user_id, u.email, u.is_operator, s.tenant_id, m.role, t.status, s.expires_at,
		       s.api_key_id, k.tenant_id, k.role, k.revoked_at, k.expires_at
		FROM sessions s
		LEFT JOIN users u ON u.id = s.user_id
		LEFT JOIN memberships m ON m.user_id = s.user_id AND m.tenant_id = s.tenant_id
		LEFT JOIN tenants t ON t.id = s.tenant_id
		LEFT JOIN api_keys k ON k.id = s.api_key_id
		WHERE s.token_hash = $1`, hash).Scan(&userID, &email, &operator, &tenantID, &role, &tenantStatus, &expires,
		&keyID, &keyTenant, &keyRole, &keyRevoked, &keyExpires)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, catalog.Unauthenticated.New("the session token is not valid")
	}
	if err != nil {
		return nil, dbError("look up session", err)
	}
	now := s.cfg.Now()
	if !now.Before(expires) {
		return nil, catalog.SessionExpired.New("")
	}
	if keyID != nil {
		// An operator key's session acts as the key while the key works.
		if keyRole == nil || *keyRole != authz.RoleOperator || keyTenant != nil || keyRevoked != nil ||
			(keyExpires != nil && !now.Before(*keyExpires)) {
			return nil, catalog.Unauthenticated.New("the operator key of this session no longer works; sign in again")
		}
		return &principal{kind: "api_key", keyID: *keyID, role: authz.RoleOperator, sessionHash: hash}, nil
	}
	p := &principal{kind: "user", sessionHash: hash}
	if userID != nil && email != nil {
		p.userID, p.email = *userID, *email
	}
	switch {
	case userID != nil && tenantID != nil && role != nil:
		p.tenantID, p.role, p.tenantStatus = *tenantID, *role, *tenantStatus
	case userID != nil && tenantID == nil && operator != nil && *operator:
		p.role = authz.RoleOperator
	default:
		// The membership behind the session is gone.
		return nil, catalog.Unauthenticated.New("the session no longer grants access; sign in again")
	}
	return p, nil
}

func (s *Server) keyPrincipal(ctx context.Context, id, secret string) (*principal, error) {
	if !credential.ValidKeyID(id) {
		return nil, catalog.Unauthenticated.New("the API key id or secret is wrong")
	}
	var hash []byte
	var tenantID, tenantStatus *string
	var role string
	var expires, revoked *time.Time
	err := s.db.QueryRow(ctx, `
		SELECT k.secret_hash, k.tenant_id, t.status, k.role, k.expires_at, k.revoked_at
		FROM api_keys k LEFT JOIN tenants t ON t.id = k.tenant_id
		WHERE k.id = $1`, id).Scan(&hash, &tenantID, &tenantStatus, &role, &expires, &revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		credential.CheckSecret(make([]byte, 32), secret) // same work as a known id
		return nil, catalog.Unauthenticated.New("the API key id or secret is wrong")
	}
	if err != nil {
		return nil, dbError("look up api key", err)
	}
	if !credential.CheckSecret(hash, secret) {
		return nil, catalog.Unauthenticated.New("the API key id or secret is wrong")
	}
	// Only a caller who holds the secret learns why a key stopped working.
	now := s.cfg.Now()
	if revoked != nil {
		return nil, catalog.KeyRevoked.New("")
	}
	if expires != nil && !now.Before(*expires) {
		return nil, catalog.KeyExpired.New("")
	}
	// Note the use at most once a minute, to keep writes off the hot path.
	if _, err := s.db.Exec(ctx, `UPDATE api_keys SET last_used_at = $2::timestamptz
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2::timestamptz - interval '1 minute')`, id, now); err != nil {
		s.log.Warn("note api key use", "key_id", id, "err", err)
	}
	p := &principal{kind: "api_key", keyID: id, role: role}
	if tenantID != nil {
		p.tenantID, p.tenantStatus = *tenantID, *tenantStatus
	}
	return p, nil
}

func callerOf(c echo.Context) *principal {
	p, _ := c.Get(principalKey).(*principal)
	return p
}

// tenantCaller returns the caller of a tenant-scoped route after checking it
// may do act on obj. Every tenant-scoped query filters by its tenantID.
func (s *Server) tenantCaller(c echo.Context, obj, act string) (*principal, error) {
	p := callerOf(c)
	if p == nil {
		return nil, catalog.Unauthenticated.New("")
	}
	if p.tenantID == "" {
		return nil, catalog.PermissionDenied.New("operator credentials belong to no tenant; use /v1/admin routes")
	}
	if p.tenantStatus == "suspended" && act != authz.ActRead {
		return nil, catalog.TenantSuspended.New("the tenant is suspended; changes are refused")
	}
	if !s.authz.Allowed(p.role, obj, act) {
		return nil, catalog.PermissionDenied.Newf("role %s may not %s %s", p.role, act, obj)
	}
	return p, nil
}

// operatorCaller returns the caller of an operator route.
func (s *Server) operatorCaller(c echo.Context, act string) (*principal, error) {
	p := callerOf(c)
	if p == nil {
		return nil, catalog.Unauthenticated.New("")
	}
	if !s.authz.Allowed(p.role, authz.ObjAdmin, act) {
		return nil, catalog.PermissionDenied.New("this route is for platform operators")
	}
	return p, nil
}

// clientKey identifies the caller's address for rate limits: the browser's,
// for a call the console tagged with the shared secret, else the peer's.
func (s *Server) clientKey(c echo.Context) string {
	if v := c.Request().Header.Get(credential.ConsoleClientHeader); v != "" && s.cfg.ConsoleSecret != nil {
		if addr, ok := credential.CheckConsoleClient(s.cfg.ConsoleSecret, v); ok {
			return "ip:" + addr
		}
	}
	return "ip:" + c.RealIP()
}

// operatorWrite authorizes a platform operator's write and decodes its
// request body into a T: the start of every admin route that changes
// something.
func operatorWrite[T any](s *Server, c echo.Context) (*principal, T, error) {
	p, err := s.operatorCaller(c, authz.ActWrite)
	return boundAfter[T](s, c, p, err)
}

// tenantWrite authorizes a tenant caller's write of obj and decodes its
// request body into a T.
func tenantWrite[T any](s *Server, c echo.Context, obj string) (*principal, T, error) {
	p, err := s.tenantCaller(c, obj, authz.ActWrite)
	return boundAfter[T](s, c, p, err)
}

// anonymousWrite admits a write from a caller without credentials
// (signing up, confirming it, accepting an invitation) while the caller's
// address is within the signup rate, answering limited once it is not,
// and decodes its request body into a T.
func anonymousWrite[T any](s *Server, c echo.Context, limited string) (T, error) {
	var req T
	if ok, wait := s.signups.allow(c.Request().Context(), s.clientKey(c)); !ok {
		return req, rateLimited(wait, limited)
	}
	err := s.bind(c, &req)
	return req, err
}

// boundAfter decodes the request body into a T once the caller p is
// authorized (err nil).
func boundAfter[T any](s *Server, c echo.Context, p *principal, err error) (*principal, T, error) {
	var req T
	if err != nil {
		return nil, req, err
	}
	if err := s.bind(c, &req); err != nil {
		return nil, req, err
	}
	return p, req, nil
}

// operatorGet answers a platform operator's read of the one resource that
// load finds by the id in the path.
func operatorGet[T any](s *Server, c echo.Context, load func(ctx context.Context, id string) (T, error)) error {
	if _, err := s.operatorCaller(c, authz.ActRead); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusOK, load, c.Param("id"))
}

// answerLoaded answers with the resource as load reads it by id: after a
// write has committed, so that the write's answer is what a read returns.
func answerLoaded[K, T any](c echo.Context, status int, load func(ctx context.Context, id K) (T, error), id K) error {
	v, err := load(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(status, v)
}

// byNumericID adapts a load by a numeric id to a route's :id: one that is
// not a positive whole number is no such what, as idParam answers.
func byNumericID[T any](what string, load func(ctx context.Context, id int64) (T, error)) func(ctx context.Context, id string) (T, error) {
	return func(ctx context.Context, param string) (T, error) {
		id, err := parseID(param, what)
		if err != nil {
			var zero T
			return zero, err
		}
		return load(ctx, id)
	}
}

// idParam is the route's numeric :id; anything else is no such what.
func idParam(c echo.Context, what string) (int64, error) { return parseID(c.Param("id"), what) }

func parseID(param, what string) (int64, error) {
	id, err := strconv.ParseInt(param, 10, 64)
	if err != nil || id < 1 {
		return 0, catalog.NotFound.Newf("no such %s", what)
	}
	return id, nil
}
