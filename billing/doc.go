// Package billing owns the usage ledger and what is billed from it: it
// applies the usage records the brokers ship from their cells' usage
// partitions to Postgres exactly once (Ledger.Ship), answers usage queries
// by tenant, meter, topic, hour and day (Ledger.Usage), reports closed
// hours to Stripe as meter events from an outbox (Reporter, stripe-go v76),
// creates each signed-up tenant's Stripe customer from another outbox the
// signup fills (EnqueueCustomer), and compares the ledger with what was
// sent (Ledger.Reconcile).
//
// The control plane's internal usage endpoint and its /v1/usage handlers
// call it; tenantd runs the Reporter. It imports neither plane: the usage
// record's JSON form is restated here (Record), the contract being the
// JSON.
package billing
