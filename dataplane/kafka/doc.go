// Package kafka is a broker's Kafka listener: it accepts Kafka clients,
// authenticates them with SASL/PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 against
// per-tenant API keys (sasl.go; SCRAM checks proofs against the salted
// credentials the control plane derived when the key was created), scopes
// every topic name to the caller's tenant, checks ACLs, and serves
// ApiVersions, Metadata, Produce, Fetch (zero-copy on plaintext
// connections), ListOffsets, OffsetForLeaderEpoch, DescribeConfigs,
// InitProducerId (idempotent producers) and the consumer-group APIs (through
// the broker's group coordinator) over the partitions this broker holds;
// CreateTopics, DeleteTopics and CreatePartitions, and DescribeAcls,
// CreateAcls and DeleteAcls (the tenant's ACLs, mapped from Kafka's model in
// acls.go), go to the control plane's public API with the caller's own key.
// DescribeUserScramCredentials lists the caller's tenant's keys and their
// SCRAM mechanisms; AlterUserScramCredentials is refused, since credentials
// are derived when a key is created (scramcredentials.go).
//
// A connection's requests are answered in order. Produce requests are
// pipelined: each is handed to its partitions as it is read and the next
// one is read while it commits, up to five per connection (pipeline.go);
// every other request waits until the earlier ones are answered.
//
// SCRAM never sends the key's secret, so a SCRAM connection cannot do what
// needs it: administration through the control plane (topics, ACLs) asks
// for PLAIN, and a key the cell does not hold (another cell's tenant) is
// refused instead of redirected, since finding its home needs the secret.
//
// The partitions themselves are behind the Partitions interface, which
// *partition.Replica implements (package replicated runs it in a
// three-broker cell); package localpart holds a single-replica
// implementation for tests and development. tenantd wires one Server per
// broker (tenantd/broker.go); in dataplane only kafka/localpart imports
// this package.
package kafka
