// Package dataplane is the root of the broker side of Sluice: partition logs,
// replication, the Kafka and HTTP front doors. Its subpackages never import
// controlplane internals; they share only the public wire, catalog and authz
// packages with the control plane.
package dataplane
