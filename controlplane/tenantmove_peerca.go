package controlplane

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
)

// recordPeerCA keeps the peer CA a registering broker of cell sends
// (wire.Registration.PeerCA): the first one becomes the cell's, which a
// tenant move publishes to the other cell; a broker with another one is
// refused, since the other cell would then reject one of the two. An
// empty one (a broker without transport TLS) changes nothing.
func recordPeerCA(ctx context.Context, tx pgx.Tx, cell, ca string) error {
	ca = strings.TrimSpace(ca)
	if ca == "" {
		return nil
	}
	if _, err := (wire.MirrorGrant{PeerCA: ca}).CAs(); err != nil {
		return catalog.InvalidRequest.Newf("peer_ca: %s", err.Error())
	}
	var have string
	if err := tx.QueryRow(ctx, `SELECT peer_ca FROM cells WHERE id = $1 FOR UPDATE`, cell).Scan(&have); err != nil {
		return err
	}
	switch {
	case have == ca:
		return nil
	case have != "":
		return catalog.AlreadyExists.Newf("cell %s already has another peer CA; every broker of a cell registers the same one", cell)
	}
	_, err := tx.Exec(ctx, `UPDATE cells SET peer_ca = $2 WHERE id = $1`, cell, ca)
	return err
}
