package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// The on-call commands of tenantd admin: finding a hot tenant (tenants
// top), throttling it for a while (tenants throttle / unthrottle),
// revoking a leaked key (keys revoke) and checking the cells (cells
// health).
const oncallUsage = `  tenants top [-sort bytes-in|bytes-out|msgs-in|throttle|connections|storage] [-cell C] [-n N] [-interval 5s] [-watch] [-metrics URL,...]
                                     tenants by load measured over -interval from the brokers' metrics, busiest first
  tenants throttle TENANT_ID [-bytes-in N] [-bytes-out N] [-msgs-in N] -for 10m|-until RFC3339 [-reason TEXT]
                                     a temporary quota (bytes/s in, bytes/s out, messages/s in) that reverts by itself
  tenants throttle-show TENANT_ID    the tenant's throttle and the quotas its brokers enforce with it
  tenants unthrottle TENANT_ID       lift the throttle before it expires
  keys revoke TENANT_ID KEY_ID       revoke one of a tenant's API keys (a leaked one)
  cells health [-stale 30s]          each cell's brokers: reporting, disk, health
`

// oncall is what the on-call commands need of the admin command line.
type oncall struct {
	c       *client.Client
	p       printer
	out     io.Writer
	hc      *http.Client
	apiURL  string
	keyID   string
	secret  string
	metrics string // default -metrics of tenants top (SLUICE_METRICS_URL)
}

// run serves cmd if it is an on-call command (handled false otherwise).
func (o oncall) run(ctx context.Context, cmd string, args []string) (handled bool, err error) {
	switch cmd {
	case "tenants top":
		return true, o.top(ctx, args)
	case "tenants throttle":
		return true, o.throttle(ctx, args)
	case "tenants throttle-show":
		return true, printFor(ctx, o.p, append([]string{"tenants", "throttle-show"}, args...), o.getThrottle)
	case "tenants unthrottle":
		return true, printFor(ctx, o.p, append([]string{"tenants", "unthrottle"}, args...), func(ctx context.Context, id string) (api.Throttle, error) {
			var t api.Throttle
			return t, o.c.Do(ctx, http.MethodDelete, "/v1/admin/tenants/"+pathEsc(id)+"/throttle", nil, &t)
		})
	case "keys revoke":
		return true, o.revokeKey(ctx, args)
	case "cells health":
		return true, o.cellsHealth(ctx, args)
	}
	return false, nil
}

func (o oncall) getThrottle(ctx context.Context, id string) (api.Throttle, error) {
	var t api.Throttle
	return t, o.c.Do(ctx, http.MethodGet, "/v1/admin/tenants/"+pathEsc(id)+"/throttle", nil, &t)
}

func pathEsc(s string) string { return strings.ReplaceAll(s, "/", "%2F") }

// throttle puts a temporary quota on a tenant. Bad input is refused here
// or by the control plane, and nothing changes.
func (o oncall) throttle(ctx context.Context, args []string) error {
	tid, err := arg(append([]string{"tenants", "throttle"}, args...), 2, "TENANT_ID")
	if err != nil {
		return err
	}
	sub := flag.NewFlagSet("tenants throttle", flag.ContinueOnError)
	sub.SetOutput(o.out)
	var in, out, msgs int64
	sub.Int64Var(&in, "bytes-in", 0, "produce bytes per second, cell-wide, while throttled")
	sub.Int64Var(&out, "bytes-out", 0, "fetch bytes per second, cell-wide, while throttled")
	sub.Int64Var(&msgs, "msgs-in", 0, "produce messages per second, cell-wide, while throttled")
	dur := sub.Duration("for", 0, "how long the throttle lasts (e.g. 10m)")
	until := sub.String("until", "", "when the throttle ends (RFC 3339), instead of -for")
	reason := sub.String("reason", "", "why, for the audit log")
	if err := sub.Parse(args[1:]); err != nil {
		return err
	}
	if sub.NArg() > 0 {
		return fmt.Errorf("admin: tenants throttle: unexpected argument %q", sub.Arg(0))
	}
	req := api.ThrottleRequest{Reason: *reason}
	set := map[string]bool{}
	sub.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, r := range []struct {
		name string
		v    int64
		dst  **int64
	}{{"bytes-in", in, &req.ProduceBytesPerSec}, {"bytes-out", out, &req.FetchBytesPerSec}, {"msgs-in", msgs, &req.ProduceMessagesPerSec}} {
		if !set[r.name] {
			continue
		}
		if r.v <= 0 {
			return fmt.Errorf("admin: tenants throttle: -%s must be greater than 0 (got %d)", r.name, r.v)
		}
		v := r.v
		*r.dst = &v
	}
	if req.ProduceBytesPerSec == nil && req.FetchBytesPerSec == nil && req.ProduceMessagesPerSec == nil {
		return errors.New("admin: tenants throttle: name a rate: -bytes-in, -bytes-out or -msgs-in")
	}
	switch {
	case set["for"] && *until != "":
		return errors.New("admin: tenants throttle: give -for or -until, not both")
	case set["for"]:
		if *dur <= 0 {
			return fmt.Errorf("admin: tenants throttle: -for must be greater than 0 (got %s)", *dur)
		}
		if *dur%time.Second != 0 {
			return fmt.Errorf("admin: tenants throttle: -for is in whole seconds (got %s)", *dur)
		}
		req.DurationSeconds = int64(*dur / time.Second)
	case *until != "":
		t, err := time.Parse(time.RFC3339, *until)
		if err != nil {
			return fmt.Errorf("admin: tenants throttle: -until %q: want RFC 3339, e.g. 2026-01-02T15:04:05Z", *until)
		}
		if !t.After(time.Now()) {
			return fmt.Errorf("admin: tenants throttle: -until %s is in the past", t.Format(time.RFC3339))
		}
		req.ExpiresAt = &t
	default:
		return errors.New("admin: tenants throttle: say how long: -for 10m or -until RFC3339")
	}
	var t api.Throttle
	if err := o.c.Do(ctx, http.MethodPut, "/v1/admin/tenants/"+pathEsc(tid)+"/throttle", req, &t); err != nil {
		return err
	}
	return o.p.value(t)
}

// revokeKey revokes one of a tenant's keys.
func (o oncall) revokeKey(ctx context.Context, args []string) error {
	full := append([]string{"keys", "revoke"}, args...)
	tid, err := arg(full, 2, "TENANT_ID")
	if err != nil {
		return err
	}
	kid, err := arg(full, 3, "KEY_ID")
	if err != nil {
		return err
	}
	if len(full) > 4 {
		return fmt.Errorf("admin: keys revoke: unexpected argument %q", full[4])
	}
	var k api.APIKey
	if err := o.c.Do(ctx, http.MethodDelete, "/v1/admin/tenants/"+pathEsc(tid)+"/api-keys/"+pathEsc(kid), nil, &k); err != nil {
		return err
	}
	return o.p.value(k)
}

// cellHealth is one line of cells health.
type cellHealth struct {
	Cell         string   `json:"cell"`
	Pool         string   `json:"pool"`
	Status       string   `json:"status"`
	Brokers      int      `json:"brokers"`
	Reporting    int      `json:"reporting"`
	Silent       []string `json:"silent"` // brokers with no report within -stale
	WorstDisk    string   `json:"worst_disk"`
	MaxDiskUsed  float64  `json:"max_disk_used"` // fraction
	StateVersion int64    `json:"state_version"`
	Health       string   `json:"health"` // ok, degraded (a broker silent or a disk above soft) or down (no quorum of brokers reporting)
}

func (o oncall) cellsHealth(ctx context.Context, args []string) error {
	sub := flag.NewFlagSet("cells health", flag.ContinueOnError)
	sub.SetOutput(o.out)
	stale := sub.Duration("stale", 30*time.Second, "a broker without a report for this long counts as silent")
	if err := sub.Parse(args); err != nil {
		return err
	}
	if *stale <= 0 {
		return fmt.Errorf("admin: cells health: -stale must be greater than 0 (got %s)", *stale)
	}
	cells, err := o.c.AdminCells(ctx)
	if err != nil {
		return err
	}
	brokers, err := o.c.AdminBrokers(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	var rows []cellHealth
	for _, c := range cells {
		h := cellHealth{Cell: c.ID, Pool: c.PoolID, Status: c.Status, StateVersion: c.StateVersion, WorstDisk: "ok", Silent: []string{}}
		for _, b := range brokers {
			if b.CellID != c.ID {
				continue
			}
			h.Brokers++
			if b.LastSeenAt != nil && now.Sub(*b.LastSeenAt) <= *stale {
				h.Reporting++
			} else {
				h.Silent = append(h.Silent, b.ID)
			}
			if diskRank(b.DiskState) > diskRank(h.WorstDisk) {
				h.WorstDisk = b.DiskState
			}
			if b.DiskTotalBytes > 0 {
				h.MaxDiskUsed = max(h.MaxDiskUsed, float64(b.DiskUsedBytes)/float64(b.DiskTotalBytes))
			}
		}
		switch {
		case h.Brokers == 0 || h.Reporting < h.Brokers/2+1:
			h.Health = "down"
		case h.Reporting < h.Brokers || h.WorstDisk != "ok":
			h.Health = "degraded"
		default:
			h.Health = "ok"
		}
		rows = append(rows, h)
	}
	return table(o.p, rows, []string{"CELL", "POOL", "STATUS", "HEALTH", "REPORTING", "SILENT", "DISK", "DISK_MAX", "STATE_VERSION"}, func(h cellHealth) []any {
		silent := strings.Join(h.Silent, ",")
		if silent == "" {
			silent = "-"
		}
		return []any{h.Cell, h.Pool, h.Status, h.Health, fmt.Sprintf("%d/%d", h.Reporting, h.Brokers), silent, h.WorstDisk,
			fmt.Sprintf("%.0f%%", 100*h.MaxDiskUsed), h.StateVersion}
	})
}

func diskRank(s string) int {
	return map[string]int{"soft": 1, "hard": 2}[s]
}

// tenantLoad is one line of tenants top.
type tenantLoad struct {
	Tenant      string  `json:"tenant"`
	Name        string  `json:"name"`
	Cell        string  `json:"cell"`
	BytesIn     float64 `json:"bytes_in_per_sec"`
	BytesOut    float64 `json:"bytes_out_per_sec"`
	MsgsIn      float64 `json:"msgs_in_per_sec"`
	Throttle    float64 `json:"throttle_seconds_per_sec"`
	Connections float64 `json:"connections"`
	Stored      int64   `json:"stored_bytes"`
	QuotaIn     int64   `json:"quota_bytes_in_per_sec"`
}

var topSorts = map[string]func(a, b tenantLoad) int{
	"bytes-in":    func(a, b tenantLoad) int { return cmp.Compare(b.BytesIn, a.BytesIn) },
	"bytes-out":   func(a, b tenantLoad) int { return cmp.Compare(b.BytesOut, a.BytesOut) },
	"msgs-in":     func(a, b tenantLoad) int { return cmp.Compare(b.MsgsIn, a.MsgsIn) },
	"throttle":    func(a, b tenantLoad) int { return cmp.Compare(b.Throttle, a.Throttle) },
	"connections": func(a, b tenantLoad) int { return cmp.Compare(b.Connections, a.Connections) },
	"storage":     func(a, b tenantLoad) int { return cmp.Compare(b.Stored, a.Stored) },
}

func (o oncall) top(ctx context.Context, args []string) error {
	sub := flag.NewFlagSet("tenants top", flag.ContinueOnError)
	sub.SetOutput(o.out)
	sortBy := sub.String("sort", "bytes-in", "bytes-in, bytes-out, msgs-in, throttle, connections or storage")
	cell := sub.String("cell", "", "only this cell's tenants")
	n := sub.Int("n", 20, "show this many tenants")
	interval := sub.Duration("interval", 5*time.Second, "measure rates over this long")
	watch := sub.Bool("watch", false, "refresh every -interval until interrupted")
	metricsURLs := sub.String("metrics", o.metrics, "comma-separated Prometheus endpoints of the brokers (default: the control plane's /metrics, which tenantd dev serves the brokers' series on; env SLUICE_METRICS_URL)")
	if err := sub.Parse(args); err != nil {
		return err
	}
	less, ok := topSorts[*sortBy]
	switch {
	case !ok:
		return fmt.Errorf("admin: tenants top: -sort %q: want bytes-in, bytes-out, msgs-in, throttle, connections or storage", *sortBy)
	case *n <= 0:
		return fmt.Errorf("admin: tenants top: -n must be greater than 0 (got %d)", *n)
	case *interval < 100*time.Millisecond:
		return fmt.Errorf("admin: tenants top: -interval must be at least 100ms (got %s)", *interval)
	}
	urls := strings.Split(cmp.Or(*metricsURLs, strings.TrimSuffix(o.apiURL, "/")+"/metrics"), ",")
	prev, err := o.scrape(ctx, urls)
	if err != nil {
		return err
	}
	for {
		if err := sleep(ctx, *interval); err != nil {
			return err
		}
		cur, err := o.scrape(ctx, urls)
		if err != nil {
			return err
		}
		rows, err := o.loads(ctx, prev, cur, *interval, *cell)
		if err != nil {
			return err
		}
		slices.SortStableFunc(rows, func(a, b tenantLoad) int { return cmp.Or(less(a, b), cmp.Compare(a.Name, b.Name)) })
		rows = rows[:min(len(rows), *n)]
		if *watch && !o.p.json {
			fmt.Fprintf(o.out, "\n%s  over %s, by %s\n", time.Now().UTC().Format(time.RFC3339), *interval, *sortBy)
		}
		if err := table(o.p, rows, []string{"TENANT", "NAME", "CELL", "IN/S", "OUT/S", "MSGS/S", "THROTTLE", "CONNS", "STORED", "QUOTA_IN/S"}, func(l tenantLoad) []any {
			return []any{l.Tenant, l.Name, l.Cell, humanBytes(int64(l.BytesIn)), humanBytes(int64(l.BytesOut)), fmt.Sprintf("%.0f", l.MsgsIn),
				fmt.Sprintf("%.0f%%", 100*l.Throttle), int64(l.Connections), humanBytes(l.Stored), humanBytes(l.QuotaIn)}
		}); err != nil {
			return err
		}
		if !*watch {
			return nil
		}
		prev = cur
	}
}

// loads joins the tenants' rates between two scrapes with the control
// plane's tenants (name, cell, storage, quota).
func (o oncall) loads(ctx context.Context, prev, cur samples, over time.Duration, cell string) ([]tenantLoad, error) {
	ts, err := o.c.AdminTenants(ctx, "name")
	if err != nil {
		return nil, err
	}
	secs := over.Seconds()
	rate := func(name, tenant string, match ...string) float64 {
		d := cur.sum(name, tenant, match...) - prev.sum(name, tenant, match...)
		return max(d, 0) / secs
	}
	var rows []tenantLoad
	for _, t := range ts {
		if cell != "" && t.HomeCellID != cell {
			continue
		}
		rows = append(rows, tenantLoad{Tenant: t.ID, Name: t.Name, Cell: t.HomeCellID, Stored: t.StoredBytes, QuotaIn: t.Quotas.ProduceBytesPerSec,
			BytesIn:     rate("sluice_quota_recorded_bytes_total", t.ID, `direction="produce"`),
			BytesOut:    rate("sluice_quota_recorded_bytes_total", t.ID, `direction="fetch"`),
			MsgsIn:      rate("sluice_kafka_produced_records_total", t.ID),
			Throttle:    rate("sluice_quota_throttle_seconds_total", t.ID),
			Connections: cur.sum("sluice_kafka_connections", t.ID),
		})
	}
	return rows, nil
}

// samples are the lines of Prometheus text expositions.
type samples []sample

type sample struct {
	name, labels string
	v            float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)`)
)

// sum adds the samples of name for tenant whose labels contain every
// match.
func (ss samples) sum(name, tenant string, match ...string) float64 {
	want := append([]string{`tenant="` + tenant + `"`}, match...)
	var total float64
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for _, m := range want {
			ok = ok && strings.Contains(s.labels, m)
		}
		if ok {
			total += s.v
		}
	}
	return total
}

// scrape reads every endpoint's metrics, with the operator key (the
// control plane's /metrics asks for it; a broker's metrics listener
// ignores it).
func (o oncall) scrape(ctx context.Context, urls []string) (samples, error) {
	var out samples
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSpace(u), nil)
		if err != nil {
			return nil, fmt.Errorf("admin: tenants top: metrics %q: %w", u, err)
		}
		req.SetBasicAuth(o.keyID, o.secret)
		resp, err := o.hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("admin: tenants top: scrape %s: %w", u, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("admin: tenants top: scrape %s: %w", u, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("admin: tenants top: scrape %s: %s: %.200s", u, resp.Status, body)
		}
		for _, l := range strings.Split(string(body), "\n") {
			m := sampleLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			v, err := strconv.ParseFloat(m[3], 64)
			if err == nil {
				out = append(out, sample{m[1], m[2], v})
			}
		}
	}
	return out, nil
}
