// Package celltest runs a broker cell inside one test process: three
// brokers, each with its own data directory and group committer, hosting
// N partitions that are 3-replica Raft groups, with links that tests can
// cut and brokers they can stop and restart from disk. It also builds and
// decodes record batches and checks histories of produces and fetches
// against the delivery contract, and holds the data plane tests' shared
// helpers: the one bounded WaitFor, the one test Logger (testkit's), the
// in-memory usage partition UsageLog and Gauge for reading a Prometheus
// series. Only tests import it.
package celltest
