package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/billing"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/controlplane/mail"
)

// signup asks for a tenant and its owner. Every well-formed request gets
// the same answer (202, the same body, one password hash and one mail on
// every path), so the answer tells nobody whether the email or the tenant
// name is taken: the mail to the address says. A new address with a free
// name gets a token to confirm with (confirmSignup); a registered address
// gets the news that it is registered, and a taken name the news that it
// is taken. Tenant names are not secret (sign-in names them), but telling
// a taken name apart in the answer would also tell that the address is
// free, so the name's news goes by mail too.
func (s *Server) signup(c echo.Context) error {
	req, err := anonymousWrite[api.SignupRequest](s, c, "too many signups from this address; retry later")
	if err != nil {
		return err
	}
	if err := validTenantName(req.TenantName); err != nil {
		return err
	}
	email, err := normalizeEmail(req.Email)
	if err != nil {
		return err
	}
	if err := credential.CheckPasswordRules(req.Password); err != nil {
		return catalog.InvalidRequest.New(err.Error())
	}
	plan, _, err := signupPlan(req.Plan)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	// Hashed on every path, kept only on the one that stores a request.
	hash := credential.HashPassword(req.Password)
	msg, err := s.signupMail(ctx, email, req.TenantName, plan, hash)
	if err != nil {
		return dbError("sign up", err)
	}
	if err := s.cfg.Mailer.Send(ctx, msg); err != nil {
		return catalog.Unavailable.Wrap(fmt.Errorf("mail signup: %w", err), "the signup mail could not be sent; retry later")
	}
	return c.JSON(http.StatusAccepted, api.SignupAccepted{Status: "pending", Message: signupPendingMessage})
}

const signupPendingMessage = "we sent a message to this address: it has the token that finishes the signup " +
	"(POST /v1/signup/confirm), or says why there is none"

// signupMail decides what the address hears about a signup, storing the
// request (hashed token, hashed password) when it can go ahead.
func (s *Server) signupMail(ctx context.Context, email, name, plan, hash string) (mail.Message, error) {
	now := s.cfg.Now()
	if _, err := s.db.Exec(ctx, `DELETE FROM signup_requests WHERE expires_at < $1`, now); err != nil {
		s.log.Warn("sweep signup requests", "err", err)
	}
	var emailTaken, nameTaken bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE email = $1),
		EXISTS (SELECT 1 FROM tenants WHERE name = $2)`, email, name).Scan(&emailTaken, &nameTaken); err != nil {
		return mail.Message{}, err
	}
	switch {
	case emailTaken:
		return mail.Message{To: email, Subject: "Sluice: this address already has an account",
			Body: "Someone, perhaps you, asked to sign up to Sluice with this address, which already has an account.\n" +
				"Nothing was created. Sign in with your password (POST /v1/sessions or the console); a signed-in\n" +
				"user adds tenants with POST /v1/tenants or the console's New tenant page.\n" +
				"If it was not you, there is nothing to do."}, nil
	case nameTaken:
		return mail.Message{To: email, Subject: "Sluice: that tenant name is taken",
			Body: fmt.Sprintf("Someone, perhaps you, asked to sign up to Sluice with this address and the tenant name %q,\n"+
				"which another tenant has. Nothing was created: sign up again with another name.", name)}, nil
	}
	token := credential.NewToken()
	expires := now.Add(s.cfg.SignupTTL)
	if _, err := s.db.Exec(ctx, `INSERT INTO signup_requests (token_hash, email, tenant_name, plan, password_hash, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, credential.HashSecret(token), email, name, plan, hash, expires); err != nil {
		return mail.Message{}, err
	}
	return mail.Message{To: email, Subject: "Sluice: confirm your signup",
		Body: fmt.Sprintf("To create the tenant %q with this address as its owner, confirm before %s with this token:\n\n"+
			"token: %s\n\nPOST it to /v1/signup/confirm as {\"token\": \"...\"}, or paste it into the console's\n"+
			"Confirm signup page (/signup/confirm). If you did not ask for this, ignore this message.",
			name, expires.UTC().Format(time.RFC3339), token)}, nil
}

// confirmSignup creates the tenant on the least-loaded cell of a shared
// pool, its owner, and the plan's quotas, from the signup its mailed token
// names, enqueues its Stripe customer (billing.EnqueueCustomer), and signs
// the owner in. A token works once.
func (s *Server) confirmSignup(c echo.Context) error {
	req, err := anonymousWrite[api.ConfirmSignupRequest](s, c, "too many signups from this address; retry later")
	if err != nil {
		return err
	}
	if strings.TrimSpace(req.Token) == "" {
		return catalog.InvalidRequest.New(`"token" is required: the token from the signup mail`)
	}
	ctx := c.Request().Context()
	var tenant api.Tenant
	var sess api.Session
	var user api.User
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var name, plan, hash string
		var expires time.Time
		err := tx.QueryRow(ctx, `DELETE FROM signup_requests WHERE token_hash = $1
			RETURNING email, tenant_name, plan, password_hash, expires_at`, credential.HashSecret(strings.TrimSpace(req.Token))).
			Scan(&user.Email, &name, &plan, &hash, &expires)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !s.cfg.Now().Before(expires)) {
			return catalog.NotFound.New("this signup token is unknown, used or expired: sign up again")
		}
		if err != nil {
			return err
		}
		_, quotas, err := signupPlan(plan)
		if err != nil {
			return err
		}
		user.ID = credential.NewID("us_")
		// The mailbox's owner asks, so the answer may say it.
		taken := catalog.AlreadyExists.New("an account with this email was made since the signup: sign in, then " +
			"create the tenant with POST /v1/tenants or the console's New tenant page")
		if err := insertNew(ctx, tx, taken, `INSERT INTO users (id, email, password_hash) VALUES ($1, $2, $3)`,
			user.ID, user.Email, hash); err != nil {
			return err
		}
		p := &principal{kind: "user", userID: user.ID}
		tenant, sess, err = s.placeTenant(ctx, tx, p, name, plan, quotas, "tenant.signup")
		if err != nil {
			return err
		}
		// The billing worker creates the tenant's Stripe customer from
		// this outbox row: Stripe is never called inside a signup.
		return billing.EnqueueCustomer(ctx, tx, tenant.ID, tenant.Name, user.Email)
	})
	if err := txError("confirm signup", err); err != nil {
		return err
	}
	s.log.Info("tenant signed up", "tenant_id", tenant.ID, "cell", tenant.HomeCellID)
	return c.JSON(http.StatusCreated, api.SignupResponse{Tenant: tenant, User: user, Session: sess})
}

// signupPlan checks a plan a tenant may be created on without the platform
// team (free, the default, or standard) and returns its quotas.
func signupPlan(plan string) (string, api.Quotas, error) {
	if plan == "" {
		plan = "free"
	}
	quotas, ok := plans[plan]
	if !ok || plan == "dedicated" {
		return "", api.Quotas{}, catalog.InvalidRequest.New(`plan must be "free" or "standard"; dedicated pools are arranged with the platform team`)
	}
	return plan, quotas, nil
}

// placeTenant creates, in tx, a tenant named name on the least-loaded cell of
// a shared pool with the plan's quotas, makes the user behind p its owner,
// and opens a session of that user on it. Signup and POST /v1/tenants share
// it, so both follow the same naming, plan and placement rules. The caller
// has checked name and plan; p.userID must exist in tx.
func (s *Server) placeTenant(ctx context.Context, tx pgx.Tx, p *principal, name, plan string, quotas api.Quotas,
	action string) (api.Tenant, api.Session, error) {
	tenant := api.Tenant{ID: credential.NewID("tn_"), Name: name, Plan: plan, Status: "active"}
	pool, cell, err := pickSharedCell(ctx, tx)
	if err != nil {
		return api.Tenant{}, api.Session{}, err
	}
	tenant.PoolID, tenant.HomeCellID = pool, cell
	if err := tx.QueryRow(ctx, `INSERT INTO tenants (id, name, plan, pool_id, home_cell_id)
		VALUES ($1, $2, $3, $4, $5) RETURNING created_at`,
		tenant.ID, tenant.Name, tenant.Plan, pool, cell).Scan(&tenant.CreatedAt); err != nil {
		if isUniqueViolation(err) {
			return api.Tenant{}, api.Session{}, catalog.AlreadyExists.New("a tenant with that name already exists")
		}
		return api.Tenant{}, api.Session{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO memberships (user_id, tenant_id, role) VALUES ($1, $2, 'owner')`,
		p.userID, tenant.ID); err != nil {
		return api.Tenant{}, api.Session{}, err
	}
	if err := storeQuotas(ctx, tx, tenant.ID, quotas); err != nil {
		return api.Tenant{}, api.Session{}, err
	}
	token := credential.NewToken()
	expires := s.cfg.Now().Add(s.cfg.SessionTTL)
	if _, err := tx.Exec(ctx, `INSERT INTO sessions (token_hash, user_id, tenant_id, expires_at) VALUES ($1, $2, $3, $4)`,
		credential.HashSecret(token), p.userID, tenant.ID, expires); err != nil {
		return api.Tenant{}, api.Session{}, err
	}
	if err := bumpCell(ctx, tx, cell); err != nil {
		return api.Tenant{}, api.Session{}, err
	}
	// The audit entry belongs to the new tenant, whoever's session asked.
	actor := &principal{kind: "user", userID: p.userID, tenantID: tenant.ID}
	if err := audit(ctx, tx, actor, action, tenant.ID, map[string]any{"plan": tenant.Plan, "cell": cell}); err != nil {
		return api.Tenant{}, api.Session{}, err
	}
	return tenant, api.Session{Token: token, ExpiresAt: expires, TenantID: tenant.ID, Role: authz.RoleOwner}, nil
}

// pickSharedCell chooses the active cell of a shared pool with the fewest
// tenants, those moving in counted (ties by fewest partitions, then id), skipping cells with a broker
// above its soft disk watermark.
func pickSharedCell(ctx context.Context, tx pgx.Tx) (pool, cell string, err error) {
	return pickCellOf(ctx, tx, "")
}

// pickCellOf is pickSharedCell within one shared pool ("" for any), as a
// tenant move to a shared pool places the tenant.
func pickCellOf(ctx context.Context, tx pgx.Tx, onlyPool string) (pool, cell string, err error) {
	err = tx.QueryRow(ctx, `
		SELECT c.pool_id, c.id FROM cells c JOIN pools p ON p.id = c.pool_id
		WHERE p.kind = 'shared' AND c.status = 'active' AND ($1 = '' OR c.pool_id = $1)
		  AND NOT EXISTS (SELECT 1 FROM brokers b WHERE b.cell_id = c.id AND b.status = 'active' AND b.disk_state <> 'ok')
		ORDER BY (SELECT count(*) FROM tenants t WHERE t.home_cell_id = c.id)
		           + (SELECT count(*) FROM tenant_moves m WHERE m.dest_cell_id = c.id AND `+tmUnfinished+`),
		         (SELECT count(*) FROM partitions x WHERE x.cell_id = c.id), c.id
		LIMIT 1 FOR UPDATE OF c`, onlyPool).Scan(&pool, &cell)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", catalog.NoCapacity.New("no shared cell is accepting tenants now; try again later")
	}
	return pool, cell, err
}

func (s *Server) createSession(c echo.Context) error {
	var req api.SessionRequest
	if err := s.bind(c, &req); err != nil {
		return err
	}
	if req.APIKey != "" {
		if req.Email != "" || req.Password != "" || req.Tenant != "" {
			return catalog.InvalidRequest.New("sign in with an email and password, or with an operator API key alone, not both")
		}
		return s.createKeySession(c, req.APIKey)
	}
	email, err := normalizeEmail(req.Email)
	if err != nil {
		return err
	}
	if ok, wait := s.logins.allow(c.Request().Context(), "email:"+email, s.clientKey(c)); !ok {
		return rateLimited(wait, "too many sign-in attempts; retry later")
	}
	ctx := c.Request().Context()
	var userID, hash string
	var operator bool
	err = s.db.QueryRow(ctx, `SELECT id, password_hash, is_operator FROM users WHERE email = $1`, email).
		Scan(&userID, &hash, &operator)
	if errors.Is(err, pgx.ErrNoRows) {
		credential.DummyPasswordCheck(req.Password)
		return catalog.Unauthenticated.New("the email or password is wrong")
	}
	if err != nil {
		return dbError("look up user", err)
	}
	if !credential.CheckPassword(hash, req.Password) {
		return catalog.Unauthenticated.New("the email or password is wrong")
	}

	tenantID, role, err := s.sessionTenant(ctx, userID, operator, req.Tenant)
	if err != nil {
		return err
	}
	token := credential.NewToken()
	expires := s.cfg.Now().Add(s.cfg.SessionTTL)
	var tenant *string
	if tenantID != "" {
		tenant = &tenantID
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO sessions (token_hash, user_id, tenant_id, expires_at) VALUES ($1, $2, $3, $4)`,
		credential.HashSecret(token), userID, tenant, expires); err != nil {
		return dbError("create session", err)
	}
	// Expired sessions of this user are swept on sign-in.
	if _, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1 AND expires_at < $2`, userID, s.cfg.Now()); err != nil {
		s.log.Warn("sweep sessions", "err", err)
	}
	return c.JSON(http.StatusCreated, api.Session{Token: token, ExpiresAt: expires, TenantID: tenantID, Role: role})
}

// createKeySession signs a platform operator in with an operator API key
// ("id:secret"), for the console: the session acts as the key, belongs to no
// tenant, lasts at most SessionTTL and no longer than the key, and stops
// working when the key is revoked. Tenant keys cannot sign in: tenant
// members sign in with their email and password.
func (s *Server) createKeySession(c echo.Context, key string) error {
	id, secret, _ := strings.Cut(strings.TrimSpace(key), ":")
	keys := []string{s.clientKey(c)}
	if credential.ValidKeyID(id) {
		keys = append(keys, "key:"+id)
	}
	if ok, wait := s.logins.allow(c.Request().Context(), keys...); !ok {
		return rateLimited(wait, "too many sign-in attempts; retry later")
	}
	ctx := c.Request().Context()
	p, err := s.keyPrincipal(ctx, id, secret)
	if err != nil {
		return err
	}
	if p.role != authz.RoleOperator || p.tenantID != "" {
		return catalog.PermissionDenied.New("only an operator API key can sign in; tenant members sign in with email and password")
	}
	token := credential.NewToken()
	var expires time.Time
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO sessions (token_hash, api_key_id, expires_at)
			SELECT $1, id, LEAST($3::timestamptz, coalesce(expires_at, $3::timestamptz)) FROM api_keys WHERE id = $2
			RETURNING expires_at`, credential.HashSecret(token), id, s.cfg.Now().Add(s.cfg.SessionTTL)).Scan(&expires); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE api_key_id = $1 AND expires_at < $2`, id, s.cfg.Now()); err != nil {
			return err
		}
		return audit(ctx, tx, p, "session.create", id, map[string]any{"via": "operator_api_key"})
	})
	if err := txError("create operator session", err); err != nil {
		return err
	}
	s.log.Info("operator signed in with an api key", "key_id", id)
	return c.JSON(http.StatusCreated, api.Session{Token: token, ExpiresAt: expires, Role: authz.RoleOperator})
}

// sessionTenant picks the tenant a sign-in is for: the one named, the only
// one, or none for an operator without memberships.
func (s *Server) sessionTenant(ctx context.Context, userID string, operator bool, want string) (string, string, error) {
	rows, err := s.db.Query(ctx, `SELECT t.id, t.name, m.role FROM memberships m JOIN tenants t ON t.id = m.tenant_id
		WHERE m.user_id = $1 ORDER BY t.name`, userID)
	if err != nil {
		return "", "", dbError("list memberships", err)
	}
	type m struct{ id, name, role string }
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (m, error) {
		var x m
		return x, r.Scan(&x.id, &x.name, &x.role)
	})
	if err != nil {
		return "", "", dbError("list memberships", err)
	}
	if want != "" {
		for _, x := range ms {
			if x.id == want || x.name == want {
				return x.id, x.role, nil
			}
		}
		return "", "", catalog.NotFound.New("you are not a member of that tenant")
	}
	switch {
	case operator && len(ms) == 0:
		return "", authz.RoleOperator, nil
	case len(ms) == 1:
		return ms[0].id, ms[0].role, nil
	case len(ms) == 0:
		return "", "", catalog.Unauthenticated.New("this user belongs to no tenant")
	}
	names := make([]string, len(ms))
	for i, x := range ms {
		names[i] = x.name
	}
	return "", "", catalog.InvalidRequest.Newf("you belong to several tenants; name one in \"tenant\": %v", names)
}

func (s *Server) deleteSession(c echo.Context) error {
	p := callerOf(c)
	if p.sessionHash == nil {
		return catalog.InvalidRequest.New("only a session can sign out; API keys are revoked instead")
	}
	if _, err := s.db.Exec(c.Request().Context(), `DELETE FROM sessions WHERE token_hash = $1`, p.sessionHash); err != nil {
		return dbError("delete session", err)
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) me(c echo.Context) error {
	p := callerOf(c)
	out := api.Me{Kind: p.kind, UserID: p.userID, Email: p.email, KeyID: p.keyID, TenantID: p.tenantID,
		Role: p.role, Operator: p.role == authz.RoleOperator}
	if p.tenantID != "" {
		if err := s.db.QueryRow(c.Request().Context(), `SELECT name FROM tenants WHERE id = $1`, p.tenantID).
			Scan(&out.TenantName); err != nil {
			return dbError("load tenant", err)
		}
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) getTenant(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjTenant, authz.ActRead)
	if err != nil {
		return err
	}
	t, err := loadTenant(c.Request().Context(), s.db, p.tenantID)
	if err != nil {
		return dbError("load tenant", err)
	}
	return c.JSON(http.StatusOK, t)
}

const tenantColumns = `id, name, plan, status, pool_id, home_cell_id, created_at`

func tenantFields(t *api.Tenant) []any {
	return []any{&t.ID, &t.Name, &t.Plan, &t.Status, &t.PoolID, &t.HomeCellID, &t.CreatedAt}
}

func loadTenant(ctx context.Context, q querier, id string) (api.Tenant, error) {
	var t api.Tenant
	err := q.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1`, id).Scan(tenantFields(&t)...)
	return t, err
}

func (s *Server) getCluster(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjTenant, authz.ActRead)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	out := api.Cluster{TenantID: p.tenantID, BootstrapServers: []string{}, HTTPEndpoints: []string{}}
	rows, err := s.db.Query(ctx, `SELECT t.home_cell_id, b.kafka_addr, b.http_addr, b.http_scheme FROM tenants t
		LEFT JOIN brokers b ON b.cell_id = t.home_cell_id AND b.status = 'active'
		WHERE t.id = $1 ORDER BY b.node_id`, p.tenantID)
	if err != nil {
		return dbError("load cluster", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kafka, httpAddr, scheme *string
		if err := rows.Scan(&out.CellID, &kafka, &httpAddr, &scheme); err != nil {
			return dbError("load cluster", err)
		}
		if kafka != nil && *kafka != "" {
			out.BootstrapServers = append(out.BootstrapServers, *kafka)
		}
		if httpAddr != nil && *httpAddr != "" {
			// The scheme the broker last reported serving (http until it reports).
			out.HTTPEndpoints = append(out.HTTPEndpoints, *scheme+"://"+*httpAddr)
		}
	}
	if err := rows.Err(); err != nil {
		return dbError("load cluster", err)
	}
	return c.JSON(http.StatusOK, out)
}
