// Package quotas is the deterministic core of per-tenant isolation in the
// data plane. It owns the arithmetic and the state machines; the data plane
// drives them and owns everything else (connections, Redis, metrics, timers).
//
//   - Buckets: per-tenant token buckets for produce bytes, produce messages and
//     fetch bytes, with Kafka's record-then-throttle semantics (debt).
//   - Split and EvenSplit: a tenant's cell-wide rate divided among the brokers
//     of a cell by demand, or evenly when demand is unknown.
//   - DRR: deficit round robin over tenants for fetch response bytes.
//   - Watermarks: the disk soft/hard watermark state machine and the choice of
//     which writers to throttle first.
//
// Nothing here starts a goroutine, does I/O or reads the clock: every call
// that depends on time takes it as a parameter, so scenarios can be scripted
// and replayed exactly. Only the data plane (dataplane/admission,
// dataplane/quotashare) and tenantd's wiring import this package; it imports
// no other Sluice package (dataplane/quotashare maps the wire quotas onto
// Limits).
package quotas
