package controlplane

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
)

// onBehalfOf authenticates a broker acting for an API key on /v1
// (api.OnBehalfOfHeader): header must hold a valid cell key, and keyID an
// active API key of a tenant whose home cell is that key's cell. The
// principal is the API key's own, so its role and ACLs decide, as when the
// key calls with its secret: a broker gets no more than the key has, and
// nothing for keys of another cell's tenants. Brokers use it for Kafka
// administration over SCRAM, which never sends the secret; they hold the
// cell key already and serve the tenants of their cell anyway.
func (s *Server) onBehalfOf(ctx context.Context, header, keyID string) (*principal, error) {
	cell, err := s.cellKeyCell(ctx, header)
	if err != nil {
		return nil, err
	}
	if !credential.ValidKeyID(keyID) {
		return nil, catalog.Unauthenticated.New("no such API key on this cell")
	}
	var tenantID, tenantStatus, homeCell *string
	var role string
	var expires, revoked *time.Time
	err = s.db.QueryRow(ctx, `
		SELECT k.tenant_id, t.status, t.home_cell_id, k.role, k.expires_at, k.revoked_at
		FROM api_keys k LEFT JOIN tenants t ON t.id = k.tenant_id
		WHERE k.id = $1`, keyID).Scan(&tenantID, &tenantStatus, &homeCell, &role, &expires, &revoked)
	// A key of no tenant (an operator's) or of another cell's tenant is as
	// unknown to this cell as a made-up id.
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (tenantID == nil || homeCell == nil || *homeCell != cell)) {
		return nil, catalog.Unauthenticated.New("no such API key on this cell")
	}
	if err != nil {
		return nil, dbError("look up api key", err)
	}
	now := s.cfg.Now()
	if revoked != nil {
		return nil, catalog.KeyRevoked.New("")
	}
	if expires != nil && !now.Before(*expires) {
		return nil, catalog.KeyExpired.New("")
	}
	return &principal{kind: "api_key", keyID: keyID, role: role, tenantID: *tenantID, tenantStatus: *tenantStatus}, nil
}
