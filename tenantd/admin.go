package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/controlplane/api"
	"github.com/sluicehq/sluice/controlplane/client"
)

const adminUsage = `usage: tenantd admin [-api URL] [-key ID:SECRET] [-o table|json] <command>

commands:
  tenants list [-sort name|load]     tenants with their load
  tenants show TENANT_ID             one tenant, its load and quotas
  tenants suspend TENANT_ID          refuse the tenant's changes (reads go on)
  tenants resume TENANT_ID
  quota show TENANT_ID
  quota set TENANT_ID [-produce-bytes-per-sec N] [-fetch-bytes-per-sec N] ...
  pools list
  cells list
  brokers list

The API URL and operator key come from SLUICE_ENDPOINT, SLUICE_API_KEY_ID
and SLUICE_API_KEY_SECRET (as tenantd dev prints them, and as the Terraform
provider reads them) unless given as flags; the older SLUICE_API_URL and
SLUICE_API_KEY (id:secret) still work.
`

// admin runs one operator command over the control plane API.
func admin(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("tenantd admin", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprint(out, adminUsage) }
	env, err := client.ReadEnv(getenv)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	envKey := ""
	if env.APIKeyID != "" || env.APIKeySecret != "" {
		envKey = env.APIKeyID + ":" + env.APIKeySecret
	}
	apiURL := fs.String("api", firstNonEmpty(env.Endpoint, "http://127.0.0.1:8080"), "control plane URL")
	key := fs.String("key", envKey, "operator API key as id:secret")
	format := fs.String("o", "table", "output: table or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) < 2 {
		fs.Usage()
		if len(rest) == 1 && rest[0] == "help" {
			return nil
		}
		return errors.New("admin: name a command")
	}
	id, secret, ok := strings.Cut(*key, ":")
	if !ok || id == "" || secret == "" {
		return errors.New("admin: set SLUICE_API_KEY_ID and SLUICE_API_KEY_SECRET, or -key id:secret (tenantd dev prints one)")
	}
	c := client.New(*apiURL, client.WithAPIKey(id, secret))
	p := printer{w: out, json: *format == "json"}
	if *format != "table" && *format != "json" {
		return fmt.Errorf("admin: -o %q: want table or json", *format)
	}

	switch rest[0] + " " + rest[1] {
	case "tenants list":
		sub := flag.NewFlagSet("tenants list", flag.ContinueOnError)
		sort := sub.String("sort", "name", "name or load")
		if err := sub.Parse(rest[2:]); err != nil {
			return err
		}
		ts, err := c.AdminTenants(ctx, *sort)
		if err != nil {
			return err
		}
		return table(p, ts, []string{"ID", "NAME", "PLAN", "STATUS", "CELL", "TOPICS", "PARTITIONS", "KEYS"}, func(t api.AdminTenant) []any {
			return []any{t.ID, t.Name, t.Plan, t.Status, t.HomeCellID, t.Topics, t.Partitions, t.ActiveKeys}
		})
	case "tenants show":
		tid, err := arg(rest, 2, "TENANT_ID")
		if err != nil {
			return err
		}
		t, err := c.AdminTenant(ctx, tid)
		if err != nil {
			return err
		}
		return p.value(t)
	case "tenants suspend", "tenants resume":
		tid, err := arg(rest, 2, "TENANT_ID")
		if err != nil {
			return err
		}
		status := map[string]string{"suspend": "suspended", "resume": "active"}[rest[1]]
		t, err := c.AdminUpdateTenant(ctx, tid, api.UpdateTenantRequest{Status: &status})
		if err != nil {
			return err
		}
		return p.value(t)
	case "quota show":
		tid, err := arg(rest, 2, "TENANT_ID")
		if err != nil {
			return err
		}
		q, err := c.AdminQuotas(ctx, tid)
		if err != nil {
			return err
		}
		return p.value(q)
	case "quota set":
		tid, err := arg(rest, 2, "TENANT_ID")
		if err != nil {
			return err
		}
		q, err := c.AdminQuotas(ctx, tid)
		if err != nil {
			return err
		}
		sub := flag.NewFlagSet("quota set", flag.ContinueOnError)
		sub.Int64Var(&q.ProduceBytesPerSec, "produce-bytes-per-sec", q.ProduceBytesPerSec, "produce bytes per second, cell-wide")
		sub.Int64Var(&q.ProduceMessagesPerSec, "produce-messages-per-sec", q.ProduceMessagesPerSec, "produce messages per second")
		sub.Int64Var(&q.FetchBytesPerSec, "fetch-bytes-per-sec", q.FetchBytesPerSec, "fetch bytes per second")
		sub.IntVar(&q.MaxPartitions, "max-partitions", q.MaxPartitions, "partitions in all topics")
		sub.IntVar(&q.MaxTopics, "max-topics", q.MaxTopics, "topics")
		sub.IntVar(&q.MaxConnections, "max-connections", q.MaxConnections, "client connections")
		sub.Int64Var(&q.MaxStorageBytes, "max-storage-bytes", q.MaxStorageBytes, "stored bytes")
		sub.IntVar(&q.MaxMessageBytes, "max-message-bytes", q.MaxMessageBytes, "largest record batch")
		sub.IntVar(&q.MaxRequestsPerSec, "max-requests-per-sec", q.MaxRequestsPerSec, "requests per second")
		sub.Int64Var(&q.MaxRetentionMs, "max-retention-ms", q.MaxRetentionMs, "longest retention.ms")
		if err := sub.Parse(rest[3:]); err != nil {
			return err
		}
		q.UpdatedAt = q.UpdatedAt.UTC()
		out, err := c.AdminSetQuotas(ctx, tid, q)
		if err != nil {
			return err
		}
		return p.value(out)
	case "pools list":
		ps, err := c.AdminPools(ctx)
		if err != nil {
			return err
		}
		return table(p, ps, []string{"ID", "KIND", "CELLS", "DESCRIPTION"}, func(x api.Pool) []any {
			return []any{x.ID, x.Kind, x.Cells, x.Description}
		})
	case "cells list":
		cs, err := c.AdminCells(ctx)
		if err != nil {
			return err
		}
		return table(p, cs, []string{"ID", "POOL", "STATUS", "TENANTS", "PARTITIONS", "BROKERS", "STATE_VERSION"}, func(x api.Cell) []any {
			return []any{x.ID, x.PoolID, x.Status, x.Tenants, x.Partitions, len(x.Brokers), x.StateVersion}
		})
	case "brokers list":
		bs, err := c.AdminBrokers(ctx)
		if err != nil {
			return err
		}
		return table(p, bs, []string{"ID", "CELL", "NODE", "KAFKA", "HTTP", "STATUS", "DISK_USED", "DISK_TOTAL"}, func(x api.Broker) []any {
			return []any{x.ID, x.CellID, x.NodeID, x.KafkaAddr, x.HTTPAddr, x.Status, x.DiskUsedBytes, x.DiskTotalBytes}
		})
	}
	fs.Usage()
	return fmt.Errorf("admin: unknown command %q", strings.Join(rest[:2], " "))
}

func arg(args []string, i int, name string) (string, error) {
	if len(args) <= i || args[i] == "" {
		return "", fmt.Errorf("admin: %s is required", name)
	}
	return args[i], nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

type printer struct {
	w    io.Writer
	json bool
}

func (p printer) value(v any) error {
	enc := json.NewEncoder(p.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table[T any](p printer, items []T, header []string, row func(T) []any) error {
	if p.json {
		return p.value(items)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, item := range items {
		r := row(item)
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = fmt.Sprint(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
