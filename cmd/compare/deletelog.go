package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A finished throughput run's log is deleted before the next run, on both
// systems. Otherwise every run writes into a page cache that still holds
// the earlier runs' data, and on a virtual machine whose host takes back
// the guest's free memory, a write into memory the guest has not touched
// lately costs several times the CPU of one into memory it freed a moment
// ago: dd of 1 GiB fdatasynced files on this machine took 0.4 s of system
// time each for the first 3 GiB and 3.2 s each after that. Later runs then
// measured the machine's memory, not the systems.

// deleteLog deletes the topic and waits until every broker has removed its
// replicas' files (one topic directory fewer under each broker's replicas
// directory than before: in compare's cell of three brokers every broker
// holds a replica of every partition, and nothing else is created or
// deleted meanwhile).
func (c *sluiceCell) deleteLog(ctx context.Context, log string, parts int) error {
	before := make([]int, len(c.specs))
	for i, b := range c.specs {
		n, err := topicDirs(b.DataDir, b.ID)
		if err != nil {
			return err
		}
		before[i] = n
	}
	if err := c.tenant.DeleteTopic(ctx, log); err != nil {
		return fmt.Errorf("delete topic %s: %w", log, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for i, b := range c.specs {
		for {
			n, err := topicDirs(b.DataDir, b.ID)
			if err != nil {
				return err
			}
			if n < before[i] {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("topic %s deleted, but broker %s still holds %d topic directories after 2m", log, b.ID, n)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// topicDirs counts the topic directories of a broker's replicas.
func topicDirs(dataDir, broker string) (int, error) {
	ents, err := os.ReadDir(filepath.Join(dataDir, broker, "replicas"))
	if err != nil {
		return 0, fmt.Errorf("list broker %s's replicas: %w", broker, err)
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() {
			n++
		}
	}
	return n, nil
}

// deleteLog deletes the log's streams, and with them their files.
func (n *natsCluster) deleteLog(ctx context.Context, log string, parts int) error {
	return n.eachStream(ctx, log, parts, "delete", func(ctx context.Context, js jetstream.JetStream, p int) error {
		return js.DeleteStream(ctx, streamName(log, p))
	})
}
