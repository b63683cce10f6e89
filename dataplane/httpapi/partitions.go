package httpapi

import (
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
)

// Partitions are the partition replicas this broker holds: the one
// interface both front doors use (frontdoor.Partitions; the broker's
// replica manager, *partition.Replica implementing Partition).
type Partitions = frontdoor.Partitions

// Partition is one local replica (frontdoor.Partition).
type Partition = frontdoor.Partition

// routePartition resolves the topic and partition a
// /v1/topics/{topic}/partitions/{partition} route names, so that every
// partition endpoint refuses the same way and in the same order: a topic
// the caller does not have, then a caller allowed none of ops on it (with
// denied as the message; empty means the catalogue's), then a partition
// the topic does not have.
func (cl *caller) routePartition(c echo.Context, denied string, ops ...string) (*wire.Topic, int32, error) {
	name := c.Param("topic")
	t, ok := cl.v.Topic(cl.p.TenantID, name)
	if !ok {
		return nil, 0, catalog.TopicNotFound.Newf("no such topic: %q", name)
	}
	if !slices.ContainsFunc(ops, func(op string) bool { return cl.topicAllowed(name, op) }) {
		return nil, 0, catalog.TopicAccessDenied.New(denied)
	}
	pn, err := strconv.ParseInt(c.Param("partition"), 10, 32)
	if err != nil || pn < 0 || int(pn) >= len(t.Partitions) {
		return nil, 0, catalog.PartitionNotFound.Newf("the topic has partitions 0 to %d, not %q", len(t.Partitions)-1, c.Param("partition"))
	}
	return t, int32(pn), nil
}
