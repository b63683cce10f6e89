package catalog

import "net/http"

// Entries of the data plane's HTTP API (dataplane/httpapi) beyond the
// shared ones above.
var (
	PartitionNotFound = def("partition_not_found", http.StatusNotFound, kafkaUnknownTopicOrPartition, false, "no such partition")
)
