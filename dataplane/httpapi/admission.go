package httpapi

import (
	"context"
	"errors"
	"time"

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
		// verdicts.
		err := adm.Admit(a.Principal.TenantID, op(a), 0)
		var r *admission.Refusal
		if errors.As(err, &r) && r.RetryAfter > 0 {
			return retryAfter{r}
		}
		return err
	}
	record := func(a Admission) {
		adm.Record(a.Principal.TenantID, op(a), a.Bytes, int64(a.Messages))
	}
	return admit, record
}

// retryAfter gives a refusal the RetryAfter method writeError reads for
// the Retry-After header.
type retryAfter struct{ r *admission.Refusal }

func (e retryAfter) Error() string             { return e.r.Error() }
func (e retryAfter) Unwrap() error             { return e.r }
func (e retryAfter) RetryAfter() time.Duration { return e.r.RetryAfter }
