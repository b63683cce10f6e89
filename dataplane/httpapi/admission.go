package httpapi

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/dataplane/admission"
)

// AdmitWith returns Config.Admit and Config.Record over a broker's tenant
// isolation: a request the tenant is over its rate, throughput, storage
// or disk budget for is refused before it moves anything (429 or 507 with
// Retry-After where waiting helps), and what an admitted request moved is
// recorded against the tenant's buckets.
func AdmitWith(adm *admission.Admission) (func(context.Context, Admission) error, func(Admission)) {
	op := func(a Admission) admission.Op {
		if a.Op == OpPublish {
			return admission.OpProduce
		}
		return admission.OpFetch
	}
	admit := func(_ context.Context, a Admission) error {
		// Message sizes are checked against max.message.bytes where the
		// batches are built; here the disk, storage, rate and throughput
		// verdicts. A forwarded request's rate was counted where it
		// entered the cell.
		var err error
		if a.Forwarded {
			err = adm.AdmitForwarded(a.Principal.TenantID, op(a), 0)
		} else {
			err = adm.Admit(a.Principal.TenantID, op(a), 0)
		}
		var r *admission.Refusal
		if errors.As(err, &r) {
			return retryAfterOf(err, r.RetryAfter)
		}
		return err
	}
	record := func(a Admission) {
		adm.Record(a.Principal.TenantID, op(a), a.Bytes, int64(a.Messages))
	}
	return admit, record
}
