package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// awaitTopics waits, up to Config.UnknownTopicWait or the server's end,
// until this broker's cell state holds every topic named. A topic created
// through the control plane reaches the brokers a few milliseconds after
// the create call returns, each broker on its own: a client that asked
// for it at once, or produced to a broker that had not heard of it yet
// after another had answered its Metadata, got
// UNKNOWN_TOPIC_OR_PARTITION, and franz-go waits 250 ms before it asks
// again, which was most of a new topic's time to its first acknowledged
// record.
func (c *conn) awaitTopics(names []string) {
	known := func() bool {
		v := c.s.cfg.State.View()
		for _, name := range names {
			if _, ok := v.Topic(c.tenant(), name); !ok {
				return false
			}
		}
		return true
	}
	if known() {
		return
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.UnknownTopicWait)
	defer cancel()
	c.waitForState(ctx, known)
}

// metadataNames are the topics a Metadata request names (none for a
// request for every topic; topics named by id only are left out).
func metadataNames(r *kmsg.MetadataRequest) []string {
	if metadataAllTopics(r) {
		return nil
	}
	var names []string
	for _, rt := range r.Topics {
		if rt.Topic != nil {
			names = append(names, *rt.Topic)
		}
	}
	return names
}

// produceNames are the topics a Produce request writes to.
func produceNames(r *kmsg.ProduceRequest) []string {
	names := make([]string, len(r.Topics))
	for i, rt := range r.Topics {
		names[i] = rt.Topic
	}
	return names
}
