// Package dataplane is the root of the broker side of Sluice: partition logs,
// replication, the Kafka and HTTP front doors, consumer groups, tenant
// isolation. Its subpackages import nothing under controlplane/; what they
// share with the control plane lives under contract/ (the cell state in
// contract/wire, the error catalogue, the authorization model, credentials,
// topic rules, and contract/client for the cell's internal API). Only
// tenantd wires them together (imports_test.go holds the rules).
package dataplane
