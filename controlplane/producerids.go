package controlplane

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
)

// maxProducerIDBlock bounds one allocation: ids are int64, but a broker that
// crashes loses its unused block, so blocks stay small.
const maxProducerIDBlock = 100_000

// producerIDs hands a broker a block of n consecutive producer ids, unique
// platform-wide: setval under the sequence's own lock reserves them all.
func (s *Server) producerIDs(c echo.Context) error {
	if _, err := s.cellCaller(c); err != nil {
		return err
	}
	n, err := strconv.Atoi(c.QueryParam("n"))
	if err != nil || n < 1 || n > maxProducerIDBlock {
		return catalog.InvalidRequest.Newf("n must be a whole number from 1 to %d", maxProducerIDBlock)
	}
	var last int64
	// nextval then setval in one statement is not atomic, so lock the
	// sequence's block with an advisory lock for the two steps.
	tx, err := s.db.Begin(c.Request().Context())
	if err != nil {
		return dbError("allocate producer ids", err)
	}
	defer tx.Rollback(c.Request().Context())
	ctx := c.Request().Context()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('sluice_producer_ids'))`); err != nil {
		return dbError("allocate producer ids", err)
	}
	if err := tx.QueryRow(ctx, `SELECT setval('producer_ids', nextval('producer_ids') + $1 - 1)`, n).Scan(&last); err != nil {
		return dbError("allocate producer ids", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return dbError("allocate producer ids", err)
	}
	return c.JSON(http.StatusOK, wire.ProducerIDBlock{First: last - int64(n) + 1, Count: n})
}
