// Package history checks a history of produces and reads of a replicated
// log against Sluice's delivery contract, after Jepsen's Kafka checker. It
// is the one checker of the in-process fault tests (dataplane/celltest) and
// of the chaos run of real broker processes (cmd/chaos): both record what
// their clients observed and read the verdict from Result.
//
// It does no I/O and starts no goroutines. Tests and cmd/ may import it;
// production code does not.
package history
