package controlplane

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/contract/credential"
)

// CreateOperatorKey makes a platform-operator API key directly in the
// database, for the first start of a deployment when no operator can yet call
// the API. It returns the key id and its secret, which is shown only now.
func CreateOperatorKey(ctx context.Context, db *pgxpool.Pool, description string) (id, secret string, err error) {
	id, secret = credential.NewAPIKey()
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO api_keys (id, tenant_id, secret_hash, role, description, created_by, scram_credentials)
			VALUES ($1, NULL, $2, 'operator', $3, 'bootstrap', $4)`, id, credential.HashSecret(secret), description, scramCredentials(secret)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO audit_log (actor, action, target) VALUES ('bootstrap', 'operator_key.create', $1)`, id)
		return err
	})
	if err != nil {
		return "", "", fmt.Errorf("create operator key: %w", err)
	}
	return id, secret, nil
}
