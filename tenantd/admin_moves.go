package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// The replica-move commands: list, show, start and cancel moves, drain
// and delete brokers. The control plane publishes moves and the brokers
// carry them out; these commands only ask for them and watch them.

// movesUsage is admin's usage lines for the move commands.
const movesUsage = `  moves list [-state running|completed|cancelling|cancelled|failed] [-cell C] [-broker B] [-watch] [-interval 2s]
  moves show MOVE_ID                 one move: its replicas, the leader's Raft configuration, bytes remaining and ETA
  moves start [-cell C] -topic TOPIC_ID|__offsets -partition N -replicas NODE,NODE,NODE   move a partition's replicas (the first leads)
  moves cancel MOVE_ID               roll a running move back to its original replicas
  brokers drain BROKER_ID            stop placing on the broker and move every replica off it
  brokers delete BROKER_ID           remove a broker that holds no replicas
`

var moveStates = []string{"running", "completed", "cancelling", "cancelled", "failed"}

// adminMoves runs a move command; handled is false for any other command.
func adminMoves(ctx context.Context, c *client.Client, p printer, out io.Writer, rest []string) (handled bool, err error) {
	switch rest[0] + " " + rest[1] {
	case "moves list":
		return true, movesList(ctx, c, p, out, rest[2:])
	case "moves show":
		return true, moveDo(ctx, p, rest, c.AdminMove)
	case "moves cancel":
		return true, moveDo(ctx, p, rest, c.AdminCancelMove)
	case "moves start":
		return true, moveStart(ctx, c, p, out, rest[2:])
	case "brokers drain":
		id, err := fleetID(rest, "BROKER_ID", "broker")
		if err != nil {
			return true, err
		}
		d, err := c.AdminDrainBroker(ctx, id)
		if err != nil {
			return true, err
		}
		if p.json {
			return true, p.value(d)
		}
		fmt.Fprintf(out, "broker %s is %s; %d moves started\n", d.Broker.ID, d.Broker.Status, len(d.Moves))
		return true, movesTable(p, d.Moves)
	case "brokers delete":
		id, err := fleetID(rest, "BROKER_ID", "broker")
		if err != nil {
			return true, err
		}
		if err := c.AdminDeleteBroker(ctx, id); err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(out, "broker %s deleted\n", id)
		return true, err
	}
	return false, nil
}

func moveDo(ctx context.Context, p printer, rest []string, do func(context.Context, int64) (api.Move, error)) error {
	id, err := moveIDArg(rest, 2, 3, rest[0]+" "+rest[1], "move")
	if err != nil {
		return err
	}
	m, err := do(ctx, id)
	if err != nil {
		return err
	}
	return p.value(m)
}

// moveIDArg reads MOVE_ID, the word of rest at i, which has at most n
// words; replica moves and tenant moves take their ids alike, and cmd and
// what (the kind of move) name them in the errors.
func moveIDArg(rest []string, i, n int, cmd, what string) (int64, error) {
	raw, err := arg(rest, i, "MOVE_ID")
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("admin: %s: MOVE_ID %q is not a %s id (a whole number)", cmd, raw, what)
	}
	if len(rest) > n {
		return 0, fmt.Errorf("admin: %s: unexpected arguments %s", cmd, strings.Join(rest[n:], " "))
	}
	return id, nil
}

func moveStart(ctx context.Context, c *client.Client, p printer, out io.Writer, args []string) error {
	var req api.CreateMoveRequest
	var replicas string
	if err := parseSub("moves start", out, args, func(fs *flag.FlagSet) {
		fs.StringVar(&req.TopicID, "topic", "", "the topic id (as moves list and the cell state show it), or __offsets for an offsets partition of -cell")
		fs.StringVar(&req.CellID, "cell", "", "the cell (required with -topic __offsets)")
		fs.IntVar(&req.Partition, "partition", -1, "the partition, from 0")
		fs.StringVar(&replicas, "replicas", "", "the target broker node ids, comma-separated, the preferred leader first")
	}); err != nil {
		return err
	}
	switch {
	case req.TopicID == "":
		return errors.New("admin: moves start: -topic is required")
	case req.Partition < 0:
		return errors.New("admin: moves start: -partition is required (0 or more)")
	case replicas == "":
		return errors.New("admin: moves start: -replicas is required")
	}
	for _, s := range strings.Split(replicas, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("admin: moves start: -replicas %q: want node ids (whole numbers from 1) separated by commas", replicas)
		}
		req.Replicas = append(req.Replicas, n)
	}
	m, err := c.AdminCreateMove(ctx, req)
	if err != nil {
		return err
	}
	return p.value(m)
}

func movesList(ctx context.Context, c *client.Client, p printer, out io.Writer, args []string) error {
	var f client.MoveFilter
	var watch bool
	var interval time.Duration
	if err := parseSub("moves list", out, args, func(fs *flag.FlagSet) {
		fs.StringVar(&f.State, "state", "", "only moves in this state: "+strings.Join(moveStates, ", "))
		fs.StringVar(&f.Cell, "cell", "", "only this cell's moves")
		fs.StringVar(&f.Broker, "broker", "", "only moves onto or off this broker")
		fs.BoolVar(&watch, "watch", false, "refresh every -interval until interrupted")
		fs.DurationVar(&interval, "interval", 2*time.Second, "how often -watch refreshes")
	}); err != nil {
		return err
	}
	if f.State != "" && !slices.Contains(moveStates, f.State) {
		return fmt.Errorf("admin: moves list: -state %q: want %s", f.State, strings.Join(moveStates, ", "))
	}
	if interval < 100*time.Millisecond {
		return fmt.Errorf("admin: moves list: -interval must be at least 100ms (got %s)", interval)
	}
	for {
		ms, err := c.AdminMoves(ctx, f)
		if err != nil {
			return err
		}
		if watch && !p.json {
			fmt.Fprintf(out, "\n%s  %d moves\n", time.Now().UTC().Format(time.RFC3339), len(ms))
		}
		if err := movesTable(p, ms); err != nil {
			return err
		}
		if !watch {
			return nil
		}
		if err := sleep(ctx, interval); err != nil {
			return err
		}
	}
}

func movesTable(p printer, ms []api.Move) error {
	return table(p, ms, []string{"ID", "CELL", "TOPIC", "PART", "STATE", "ORIGINAL", "TARGET", "REMAINING", "ETA", "REASON"}, func(m api.Move) []any {
		eta := "-"
		if m.ETASeconds != nil {
			eta = (time.Duration(*m.ETASeconds * float64(time.Second))).Round(time.Second).String()
		}
		remaining := "-"
		if m.FinishedAt == nil && m.ProgressAt != nil {
			remaining = humanBytes(m.BytesRemaining)
		}
		topic := m.Topic + " (" + m.TopicID + ")"
		if m.Topic == m.TopicID {
			topic = m.TopicID // an offsets partition: no topic of a tenant
		}
		reason := firstNonEmpty(m.Reason, "-")
		if m.Failure != "" { // why it failed first: what the operator acts on
			reason = "failed: " + m.Failure + strings.TrimSuffix("; "+m.Reason, "; ")
		}
		return []any{m.ID, m.CellID, topic, m.Partition, m.State, nodes(m.Original), nodes(m.Target),
			remaining, eta, reason}
	})
}

// nodes writes node ids as 1,2,3.
func nodes(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
