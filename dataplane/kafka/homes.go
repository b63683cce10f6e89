package kafka

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/keyhome"
)

// Homes says where the tenant of an API key that this broker's cell does
// not know lives (keyhome.Homes). Production: the control plane's key-home
// lookup (client.KeyHome with the broker's cell key).
type Homes = keyhome.Homes

// HomesFunc adapts a function to Homes.
type HomesFunc = keyhome.HomesFunc

// HomeLimits bound what key-home lookups cost the control plane.
type HomeLimits = keyhome.Limits

// homeStale is how long a valid answer may stand in when the control plane
// cannot be asked.
const homeStale = keyhome.Stale

// errLookupLimited: the lookup limit is reached and nothing usable is
// cached.
var errLookupLimited = keyhome.ErrLimited

// homeCache is the listener's key-home cache (keyhome.Cache).
type homeCache struct{ c *keyhome.Cache }

func newHomeCache(h Homes, l HomeLimits, now func() time.Time) *homeCache {
	return &homeCache{keyhome.NewCache(h, l, now)}
}

func (h *homeCache) lookup(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
	return h.c.Lookup(ctx, keyID, secret)
}

func (h *homeCache) size() int { return h.c.Size() }
