package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

const adminUsage = `usage: tenantd admin [-api URL] [-key ID:SECRET] [-o table|json] <command>

commands:
  tenants list [-sort name|load]     tenants with their topics, partitions, stored bytes and keys (load: most partitions first)
  tenants show TENANT_ID             one tenant, its load and quotas
  tenants suspend TENANT_ID          refuse the tenant's changes (reads go on)
  tenants resume TENANT_ID
` + tenantMovesUsage + `  quota show TENANT_ID
  quota set TENANT_ID [-produce-bytes-per-sec N] [-fetch-bytes-per-sec N] ...
  pools list
  cells list
  brokers list
` + fleetUsage + movesUsage + `
` + oncallUsage + `
  billing reconcile [-since RFC3339]  closed hours whose Stripe meter event is pending, missing, or differs from the usage ledger

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
	apiURL := fs.String("api", env.Endpoint, "control plane URL (env SLUICE_ENDPOINT; required)")
	key := fs.String("key", envKey, "operator API key as id:secret")
	format := fs.String("o", "table", "output: table or json")
	caFile := fs.String("tls-ca-file", getenv("SLUICE_TLS_CA_FILE"), "PEM CA bundle to trust in an https control plane's certificate (env SLUICE_TLS_CA_FILE; default the system's roots)")
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
	if cmd := rest[0] + " " + rest[1]; wantsHelp(rest[2:]) {
		return commandHelp(out, cmd)
	}
	id, secret, ok := strings.Cut(*key, ":")
	if !ok || id == "" || secret == "" {
		return errors.New("admin: set SLUICE_API_KEY_ID and SLUICE_API_KEY_SECRET, or -key id:secret (tenantd dev prints one)")
	}
	if *apiURL == "" {
		return errors.New("admin: no control plane: set SLUICE_ENDPOINT or -api URL (tenantd dev prints it)")
	}
	lt, err := loadListenerTLS(Config{TLSCAFile: *caFile})
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	c := client.New(*apiURL, client.WithAPIKey(id, secret), client.WithHTTPClient(lt.httpClient()))
	p := printer{w: out, json: *format == "json"}
	if *format != "table" && *format != "json" {
		return fmt.Errorf("admin: -o %q: want table or json", *format)
	}

	if handled, err := adminFleet(ctx, c, p, out, rest); handled {
		return err
	}
	if handled, err := adminMoves(ctx, c, p, out, rest); handled {
		return err
	}
	if handled, err := adminTenantMoves(ctx, c, p, out, rest); handled {
		return err
	}
	oc := oncall{c: c, p: p, out: out, hc: lt.httpClient(), apiURL: *apiURL, keyID: id, secret: secret, metrics: getenv("SLUICE_METRICS_URL")}
	if handled, err := oc.run(ctx, rest[0]+" "+rest[1], rest[2:]); handled {
		return err
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
		return table(p, ts, []string{"ID", "NAME", "PLAN", "STATUS", "CELL", "TOPICS", "PARTITIONS", "STORED", "KEYS"}, func(t api.AdminTenant) []any {
			return []any{t.ID, t.Name, t.Plan, t.Status, t.HomeCellID, t.Topics, t.Partitions, humanBytes(t.StoredBytes), t.ActiveKeys}
		})
	case "billing reconcile":
		return billingReconcile(ctx, c, p, rest[2:])
	case "tenants show":
		return printFor(ctx, p, rest, c.AdminTenant)
	case "tenants suspend", "tenants resume":
		status := map[string]string{"suspend": "suspended", "resume": "active"}[rest[1]]
		return printFor(ctx, p, rest, func(ctx context.Context, tid string) (api.AdminTenant, error) {
			return c.AdminUpdateTenant(ctx, tid, api.UpdateTenantRequest{Status: &status})
		})
	case "quota show":
		return printFor(ctx, p, rest, c.AdminQuotas)
	case "quota set":
		tid, err := arg(rest, 2, "TENANT_ID")
		if err != nil {
			return err
		}
		q, err := c.AdminQuotas(ctx, tid)
		if err != nil {
			return err
		}
		sub := quotaFlags(&q)
		sub.SetOutput(out)
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
			return []any{x.ID, x.CellID, x.NodeID, x.KafkaAddr, x.HTTPAddr, x.Status, diskUse(x.DiskUsedBytes, x.DiskTotalBytes), humanBytes(x.DiskTotalBytes)}
		})
	}
	fs.Usage()
	return fmt.Errorf("admin: unknown command %q", strings.Join(rest[:2], " "))
}

// printFor prints what do answers for the command's TENANT_ID argument.
func printFor[T any](ctx context.Context, p printer, rest []string, do func(context.Context, string) (T, error)) error {
	tid, err := arg(rest, 2, "TENANT_ID")
	if err != nil {
		return err
	}
	v, err := do(ctx, tid)
	if err != nil {
		return err
	}
	return p.value(v)
}

func arg(args []string, i int, name string) (string, error) {
	if len(args) <= i || args[i] == "" {
		return "", fmt.Errorf("admin: %s is required", name)
	}
	if strings.HasPrefix(args[i], "-") {
		return "", fmt.Errorf("admin: %s comes before any flags (got %q)", name, args[i])
	}
	return args[i], nil
}

// quotaFlags are quota set's flags, each defaulting to the value in q.
func quotaFlags(q *api.Quotas) *flag.FlagSet {
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
	return sub
}

// wantsHelp reports whether a command's arguments ask for its help.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandHelp prints one command's line of the usage (and quota set's
// flags) without calling the control plane.
func commandHelp(out io.Writer, cmd string) error {
	found := false
	for _, l := range strings.Split(adminUsage, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), cmd) {
			fmt.Fprintln(out, "usage: tenantd admin [-api URL] [-key ID:SECRET] [-o table|json]", strings.TrimSpace(l))
			found = true
		}
	}
	if !found {
		fmt.Fprint(out, adminUsage)
		return fmt.Errorf("admin: unknown command %q", cmd)
	}
	if cmd == "quota set" {
		sub := quotaFlags(&api.Quotas{})
		sub.SetOutput(out)
		fmt.Fprintln(out, "flags (each defaults to the tenant's current value):")
		sub.PrintDefaults()
	}
	return nil
}

// humanBytes writes n bytes in binary units (1.5 GiB).
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// diskUse is used bytes with their share of the total.
func diskUse(used, total int64) string {
	if total <= 0 {
		return humanBytes(used)
	}
	return fmt.Sprintf("%s (%.0f%%)", humanBytes(used), 100*float64(used)/float64(total))
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

// value prints one object: indented JSON with -o json, else a FIELD VALUE
// table of its fields in order (nested objects as dotted names).
func (p printer) value(v any) error {
	if !p.json {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var rows [][2]string
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := flatten(dec, "", &rows); err == nil {
			tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "FIELD\tVALUE")
			for _, r := range rows {
				fmt.Fprintln(tw, r[0]+"\t"+r[1])
			}
			return tw.Flush()
		}
	}
	enc := json.NewEncoder(p.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// flatten reads one JSON value from dec and appends its leaves, in the
// order they come, as (dotted name, value) rows.
func flatten(dec *json.Decoder, name string, rows *[][2]string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			var items []string
			for dec.More() {
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					return err
				}
				items = append(items, strings.Trim(string(v), `"`))
			}
			*rows = append(*rows, [2]string{name, strings.Join(items, ", ")})
			_, err := dec.Token()
			return err
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			if name != "" {
				key = name + "." + key
			}
			if err := flatten(dec, key, rows); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	case nil:
		*rows = append(*rows, [2]string{name, "-"})
	default:
		*rows = append(*rows, [2]string{name, fmt.Sprint(t)})
	}
	return nil
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
