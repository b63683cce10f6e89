package cellview

import (
	"errors"
	"sort"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
)

// ErrNoScram means the key has no SCRAM credential of the mechanism asked
// for: it was created before the control plane derived them.
var ErrNoScram = errors.New("the API key has no SCRAM credentials")

// ScramCredential returns the key's credential for a SCRAM mechanism:
// ErrBadCredentials for a key the cell does not know (unknown, revoked, or
// of another cell's tenant), ErrNoScram for a key without one.
func (v *View) ScramCredential(id, mechanism string) (wire.ScramCredential, error) {
	k, ok := v.keys[id]
	if !ok {
		return wire.ScramCredential{}, ErrBadCredentials
	}
	for _, c := range k.Scram {
		if c.Mechanism == mechanism {
			return c, nil
		}
	}
	return wire.ScramCredential{}, ErrNoScram
}

// AdmitScram returns the principal of a key whose SCRAM proof the caller
// has just given, with the checks Authenticate makes once the secret is
// right. A key revoked during the exchange fails like an unknown one.
func (v *View) AdmitScram(id string, now time.Time) (*Principal, error) {
	k, ok := v.keys[id]
	if !ok {
		return nil, ErrBadCredentials
	}
	return v.admit(k, now)
}

// TenantKeys returns the tenant's unrevoked keys sorted by id.
func (v *View) TenantKeys(tenantID string) []*wire.Key {
	var out []*wire.Key
	for i := range v.CellState.Keys {
		if k := &v.CellState.Keys[i]; k.TenantID == tenantID {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
