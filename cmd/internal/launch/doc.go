// Package launch starts and stops real Sluice processes for the tools in
// cmd/ (chaos, compare): a scratch Postgres database, `tenantd
// controlplane` with an operator key, a cell of `tenantd broker` processes
// with their peer certificates, data directories and ports, and a tenant
// with an API key; and it signals them (stop, continue, terminate, kill).
// Only the commands under cmd/ import it.
package launch
