package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/wire"
)

// longPollSlack is how much longer than a long-poll's wait its request may
// take: the server's answer, a slow database, a busy machine.
const longPollSlack = 15 * time.Second

// AdminCreateCellKey creates a credential for a cell's brokers.
func (c *Client) AdminCreateCellKey(ctx context.Context, cellID string) (api.CellKey, error) {
	return call[api.CellKey](ctx, c, http.MethodPost, "/v1/admin/cells/"+esc(cellID)+"/keys", nil)
}

// CellState long-polls a cell's desired state: it returns once the state's
// version exceeds after, or changed=false when wait passes without a change.
// The client must carry a cell key (WithAPIKey with its id and secret). The
// HTTP timeout of this one request is at least wait plus longPollSlack, so
// an idle poll ends in the server's 304, never in a client timeout.
func (c *Client) CellState(ctx context.Context, cell string, after int64, wait time.Duration) (st wire.CellState, changed bool, err error) {
	path := fmt.Sprintf("/internal/v1/cells/%s/state?after=%d&wait=%s", esc(cell), after, wait)
	lc := c
	if c.hc.Timeout != 0 && c.hc.Timeout < wait+longPollSlack {
		hc := *c.hc
		hc.Timeout = wait + longPollSlack
		lc = c.With(WithHTTPClient(&hc))
	}
	if err := lc.Do(ctx, http.MethodGet, path, nil, &st); err != nil {
		return st, false, err
	}
	return st, st.StateVersion > after, nil
}

// CellReport sends a broker's observations.
func (c *Client) CellReport(ctx context.Context, cell string, r wire.Report) error {
	return c.Do(ctx, http.MethodPost, "/internal/v1/cells/"+esc(cell)+"/report", r, nil)
}

// AllocateProducerIDs reserves n consecutive producer ids for a broker of
// cell and returns the first. The client must carry a cell key.
func (c *Client) AllocateProducerIDs(ctx context.Context, cell string, n int) (int64, error) {
	var b wire.ProducerIDBlock
	if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/internal/v1/cells/%s/producer-ids?n=%d", esc(cell), n), nil, &b); err != nil {
		return 0, err
	}
	if b.Count != n {
		return 0, fmt.Errorf("allocate producer ids: asked for %d, got %d", n, b.Count)
	}
	return b.First, nil
}

// KeyHome asks whether an API key unknown to cell is valid and, if so,
// where its tenant lives (its home cell's brokers and the tenant's topics
// with their leaders). The secret travels to the control plane, which
// checks it; the answer's Status says the outcome. The client must carry a
// cell key of cell.
func (c *Client) KeyHome(ctx context.Context, cell, keyID, secret string) (wire.KeyHome, error) {
	var h wire.KeyHome
	err := c.Do(ctx, http.MethodPost, "/internal/v1/cells/"+esc(cell)+"/key-home", wire.KeyHomeRequest{KeyID: keyID, Secret: secret}, &h)
	return h, err
}
