package main

import (
	"context"
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

// The tenant-move commands: move a tenant to another pool, then list,
// show, watch and cancel the moves. The control plane drives the move
// from the two cells' reports; these commands only ask for it and watch.

// tenantMovesUsage is admin's usage lines for the tenant-move commands.
const tenantMovesUsage = `  tenants move TENANT_ID -pool POOL [-rate BYTES_PER_SEC] [-watch] [-interval 2s]   move a tenant live to a cell of another pool (-rate: the most it copies from the tenant's cell a second, over all partitions; -watch: follow it until done)
  tenants moves list [-state mirroring|fencing|promoting|switching|offsets|done|cancelled] [-tenant T]
  tenants moves show MOVE_ID         one tenant move: its state, what holds it back, each partition's lag, copy rate (bytes a second its puller applies) and fence
  tenants moves rate MOVE_ID BYTES_PER_SEC   change the copy rate of a move that has not switched (0: the brokers' default)
  tenants moves cancel MOVE_ID       roll a move back before promoting (after it, a move back is a new move)
`

var tenantMoveStates = []string{"mirroring", "fencing", "promoting", "switching", "offsets", "done", "cancelled"}

// adminTenantMoves runs a tenant-move command; handled is false for any
// other command.
func adminTenantMoves(ctx context.Context, c *client.Client, p printer, out io.Writer, rest []string) (handled bool, err error) {
	switch rest[0] + " " + rest[1] {
	case "tenants move":
		return true, tenantMove(ctx, c, p, out, rest)
	case "tenants moves":
	default:
		return false, nil
	}
	if len(rest) < 3 {
		return true, fmt.Errorf("admin: tenants moves: name list, show, rate or cancel")
	}
	switch rest[2] {
	case "list":
		return true, tenantMovesList(ctx, c, p, out, rest[3:])
	case "show":
		return true, tenantMoveDo(ctx, p, rest, c.AdminTenantMove)
	case "cancel":
		return true, tenantMoveDo(ctx, p, rest, c.AdminCancelTenantMove)
	case "rate":
		return true, tenantMoveRate(ctx, c, p, rest)
	}
	return true, fmt.Errorf("admin: tenants moves %s: unknown command; want list, show, rate or cancel", rest[2])
}

func tenantMove(ctx context.Context, c *client.Client, p printer, out io.Writer, rest []string) error {
	tid, err := arg(rest, 2, "TENANT_ID")
	if err != nil {
		return err
	}
	var pool string
	var rate int64
	var watch bool
	var interval time.Duration
	if err := parseSub("tenants move", out, rest[3:], func(fs *flag.FlagSet) {
		fs.StringVar(&pool, "pool", "", "the pool to move the tenant to (required)")
		fs.Int64Var(&rate, "rate", 0, "the most the move copies from the tenant's cell, bytes a second over all its partitions (0: the brokers' default for each partition)")
		fs.BoolVar(&watch, "watch", false, "follow the move, printing each change, until it is done or cancelled")
		fs.DurationVar(&interval, "interval", 2*time.Second, "how often -watch looks")
	}); err != nil {
		return err
	}
	switch {
	case pool == "":
		return fmt.Errorf("admin: tenants move: -pool is required")
	case rate < 0:
		return fmt.Errorf("admin: tenants move: -rate %d is negative: bytes a second, 0 for the brokers' default", rate)
	case interval < 100*time.Millisecond:
		return fmt.Errorf("admin: tenants move: -interval must be at least 100ms (got %s)", interval)
	}
	m, err := c.AdminMoveTenant(ctx, tid, api.MoveTenantRequest{Pool: pool, BytesPerSec: rate})
	if err != nil {
		return err
	}
	if !watch {
		return tenantMoveShow(p, m)
	}
	last := ""
	for {
		if line := tenantMoveLine(m); line != last {
			if p.json {
				if err := p.value(m); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "%s  %s\n", time.Now().UTC().Format(time.RFC3339), line)
			}
			last = line
		}
		if m.FinishedAt != nil {
			return nil
		}
		if err := sleep(ctx, interval); err != nil {
			return err
		}
		if m, err = c.AdminTenantMove(ctx, m.ID); err != nil {
			return err
		}
	}
}

// tenantMoveLine is one line of -watch: the state, the partitions'
// largest lag and fenced and promoted counts, and what holds the move.
func tenantMoveLine(m api.TenantMove) string {
	var lag int64 = -1
	fenced, promoted := 0, 0
	for _, p := range m.Partitions {
		if p.Lag != nil {
			lag = max(lag, *p.Lag)
		}
		if p.Fenced {
			fenced++
		}
		if p.Promoted {
			promoted++
		}
	}
	lagText := "-"
	if lag >= 0 {
		lagText = strconv.FormatInt(lag, 10)
	}
	line := fmt.Sprintf("move %d of %s %s -> %s: %s; max lag %s, %d/%d fenced, %d/%d promoted", m.ID, m.TenantID, m.SourceCellID,
		m.DestCellID, m.State, lagText, fenced, len(m.Partitions), promoted, len(m.Partitions))
	if m.Error != "" {
		line += "; " + m.Error
	}
	return line
}

func tenantMoveDo(ctx context.Context, p printer, rest []string, do func(context.Context, int64) (api.TenantMove, error)) error {
	id, err := tenantMoveArg(rest, 4)
	if err != nil {
		return err
	}
	m, err := do(ctx, id)
	if err != nil {
		return err
	}
	return tenantMoveShow(p, m)
}

// tenantMoveArg reads MOVE_ID, the fourth word of rest, which has at
// most n words.
func tenantMoveArg(rest []string, n int) (int64, error) {
	return moveIDArg(rest, 3, n, "tenants moves "+rest[2], "tenant move")
}

// tenantMoveRate sets a move's copy rate: tenants moves rate MOVE_ID N.
func tenantMoveRate(ctx context.Context, c *client.Client, p printer, rest []string) error {
	id, err := tenantMoveArg(rest, 5)
	if err != nil {
		return err
	}
	if len(rest) < 5 || rest[4] == "" {
		return fmt.Errorf("admin: tenants moves rate: BYTES_PER_SEC is required (0 for the brokers' default)")
	}
	raw := rest[4]
	rate, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || rate < 0 {
		return fmt.Errorf("admin: tenants moves rate: BYTES_PER_SEC %q is not a rate: a whole number of bytes a second, 0 for the brokers' default", raw)
	}
	m, err := c.AdminUpdateTenantMove(ctx, id, api.UpdateTenantMoveRequest{BytesPerSec: &rate})
	if err != nil {
		return err
	}
	return tenantMoveShow(p, m)
}

// tenantMoveShow prints a move's fields, then its partitions as a table.
func tenantMoveShow(p printer, m api.TenantMove) error {
	if p.json {
		return p.value(m)
	}
	parts := m.Partitions
	m.Partitions = nil
	if err := p.value(m); err != nil {
		return err
	}
	if len(parts) == 0 {
		return nil
	}
	fmt.Fprintln(p.w)
	return table(p, parts, []string{"TOPIC", "PART", "REPLICAS", "MIRRORING", "LAG", "RATE", "FENCED", "PROMOTED", "ERROR"}, func(x api.TenantMovePartition) []any {
		lag, rate := "-", "-"
		if x.Lag != nil {
			lag = strconv.FormatInt(*x.Lag, 10)
		}
		switch {
		case x.MirrorBytesPerSec == nil:
		case *x.MirrorBytesPerSec == 0:
			rate = "unlimited"
		default:
			rate = strconv.FormatInt(*x.MirrorBytesPerSec, 10)
		}
		return []any{x.Topic + " (" + x.TopicID + ")", x.Partition, nodes(x.Replicas), x.Mirroring, lag, rate, x.Fenced, x.Promoted,
			firstNonEmpty(x.MirrorError, "-")}
	})
}

func tenantMovesList(ctx context.Context, c *client.Client, p printer, out io.Writer, args []string) error {
	var state, tenant string
	if err := parseSub("tenants moves list", out, args, func(fs *flag.FlagSet) {
		fs.StringVar(&state, "state", "", "only moves in this state: "+strings.Join(tenantMoveStates, ", "))
		fs.StringVar(&tenant, "tenant", "", "only this tenant's moves")
	}); err != nil {
		return err
	}
	if state != "" && !slices.Contains(tenantMoveStates, state) {
		return fmt.Errorf("admin: tenants moves list: -state %q: want %s", state, strings.Join(tenantMoveStates, ", "))
	}
	ms, err := c.AdminTenantMoves(ctx, state, tenant)
	if err != nil {
		return err
	}
	return table(p, ms, []string{"ID", "TENANT", "FROM", "TO", "POOL", "STATE", "PARTITIONS", "CREATED", "ERROR"}, func(m api.TenantMove) []any {
		return []any{m.ID, m.TenantID, m.SourceCellID, m.DestCellID, m.PoolID, m.State, len(m.Partitions),
			m.CreatedAt.UTC().Format(time.RFC3339), firstNonEmpty(m.Error, "-")}
	})
}
