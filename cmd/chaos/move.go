package main

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// The move nemesis replaces one replica of a random partition by a broker
// that holds none of it, through the control plane's /v1/admin/moves, and
// half the time cancels it within 3 s (at whatever step it has reached);
// otherwise the move goes on under the faults that follow. A cell with a
// move nemesis has one broker more than a partition has replicas, so
// there is always somewhere to move to.

// startMove starts a move of a random partition without an unfinished one
// and returns its description and heal. A refusal (the cell has just lost
// a broker, every partition is moving) is a no-op fault.
func (c *Cluster) startMove(rng *rand.Rand) (string, func() error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topicID, err := c.topicID(ctx)
	if err != nil {
		return "move: " + err.Error(), func() error { return nil }
	}
	t, err := c.tenantClient.Topic(ctx, c.cfg.Topic)
	if err != nil {
		return "move: read the topic's assignments: " + err.Error(), func() error { return nil }
	}
	busy := map[int]bool{}
	for _, state := range []string{"running", "cancelling"} {
		ms, err := c.cp.Operator.AdminMoves(ctx, client.MoveFilter{State: state, Cell: cellID})
		if err != nil {
			return "move: list moves: " + err.Error(), func() error { return nil }
		}
		for _, m := range ms {
			busy[m.Partition] = true
		}
	}
	var free []api.Partition
	for _, a := range t.Assignments {
		if !busy[a.Partition] {
			free = append(free, a)
		}
	}
	if len(free) == 0 {
		return "move: every partition is moving already", func() error { return nil }
	}
	a := free[rng.Intn(len(free))]
	var spare []int
	for _, b := range c.brokers {
		if !slices.Contains(a.Replicas, b.NodeID) {
			spare = append(spare, b.NodeID)
		}
	}
	if len(spare) == 0 {
		return fmt.Sprintf("move: partition %d is on every broker", a.Partition), func() error { return nil }
	}
	target := slices.Clone(a.Replicas)
	target[rng.Intn(len(target))] = spare[rng.Intn(len(spare))]
	m, err := c.cp.Operator.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: topicID, Partition: a.Partition, Replicas: target})
	if err != nil {
		return fmt.Sprintf("move partition %d %v -> %v refused: %v", a.Partition, a.Replicas, target, err), func() error { return nil }
	}
	desc := fmt.Sprintf("move %d: partition %d %v -> %v", m.ID, a.Partition, a.Replicas, target)
	if rng.Intn(2) == 0 {
		return desc + " (left to finish)", func() error { return nil }
	}
	// Cancelled soon, at a random step: a small partition's move takes a
	// few seconds, so a cancel at heal would find it finished.
	after := time.Duration(rng.Intn(3000)) * time.Millisecond
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(after)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got, err := c.cp.Operator.AdminCancelMove(ctx, m.ID)
		if err != nil {
			// A move that finished first cannot be cancelled.
			c.log.Info("nemesis: move not cancelled", "move", m.ID, "err", err)
			return
		}
		c.log.Info("nemesis: move cancelled", "move", m.ID, "state", got.State)
	}()
	return fmt.Sprintf("%s (cancelled after %v)", desc, after), func() error { <-done; return nil }
}

// topicID is the workload topic's id, which /v1/admin/moves names it by,
// read from the scratch database.
func (c *Cluster) topicID(ctx context.Context) (string, error) {
	if c.topic != "" {
		return c.topic, nil
	}
	conn, err := pgx.Connect(ctx, c.db.URL)
	if err != nil {
		return "", fmt.Errorf("connect to the scratch database: %w", err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT id FROM topics WHERE name = $1`, c.cfg.Topic).Scan(&c.topic); err != nil {
		return "", fmt.Errorf("read the id of topic %s: %w", c.cfg.Topic, err)
	}
	return c.topic, nil
}

// SettleMoves waits, bounded, until no move of the cell is unfinished and
// describes the moves of the run; stuck counts those still unfinished.
func (c *Cluster) SettleMoves(ctx context.Context, limit time.Duration) (desc string, stuck int, err error) {
	deadline := time.Now().Add(limit)
	for {
		ms, err := c.cp.Operator.AdminMoves(ctx, client.MoveFilter{Cell: cellID})
		if err != nil {
			return "", 0, fmt.Errorf("list moves: %w", err)
		}
		states := map[string]int{}
		var open []string
		for _, m := range ms {
			states[m.State]++
			if m.State == "running" || m.State == "cancelling" {
				open = append(open, fmt.Sprintf("%d (partition %d, %s, voters %v, non-voters %v)", m.ID, m.Partition, m.State, m.Voters, m.Nonvoters))
			}
		}
		if len(open) == 0 || time.Now().After(deadline) {
			var parts []string
			for k, v := range states {
				parts = append(parts, fmt.Sprintf("%s=%d", k, v))
			}
			sort.Strings(parts)
			desc = fmt.Sprintf("%d started (%s)", len(ms), strings.Join(parts, " "))
			if len(open) > 0 {
				desc += "; unfinished after " + limit.String() + ": " + strings.Join(open, ", ")
			}
			return desc, len(open), nil
		}
		select {
		case <-ctx.Done():
			return "", 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
