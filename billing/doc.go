// Package billing owns the usage ledger: it applies the usage records the
// brokers ship from their cells' usage partitions to Postgres exactly once
// (Ledger.Ship) and answers usage queries by tenant, meter, topic, hour and
// day (Ledger.Usage).
//
// The control plane's internal usage endpoint and its /v1/usage handlers
// call it; tenantd wires it. It imports neither plane: the usage record's
// JSON form is restated here (Record), the contract being the JSON.
package billing
