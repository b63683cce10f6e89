package controlplane

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/billing"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
)

// Usage ranges: at most maxHourlyRange by hour, maxDailyRange by day.
const (
	maxHourlyRange = 31 * 24 * time.Hour
	maxDailyRange  = 400 * 24 * time.Hour
)

// usageShipment is the body of POST /internal/v1/cells/{cell}/usage: a
// range of a usage partition's records, sent by the broker that leads it
// (dataplane/usage's Shipper). From -1 asks for the position only.
type usageShipment struct {
	Partition int32             `json:"partition"`
	From      int64             `json:"from"`
	Next      int64             `json:"next"`
	Records   []json.RawMessage `json:"records"`
}

type usageShipResult struct {
	Position int64 `json:"position"`
	Applied  bool  `json:"applied"`
}

// shipUsage applies a cell's usage shipment to the ledger.
func (s *Server) shipUsage(c echo.Context) error {
	cell, in, err := cellWrite[usageShipment](s, c)
	if err != nil {
		return err
	}
	if in.From >= 0 && in.Next < in.From {
		return catalog.InvalidRequest.Newf("next %d is before from %d", in.Next, in.From)
	}
	l := billing.Ledger{DB: s.db}
	res, err := l.Ship(c.Request().Context(), billing.Shipment{Cell: cell, Partition: in.Partition, From: in.From, Next: in.Next, Records: in.Records})
	if err != nil {
		return dbError("ship usage", err)
	}
	if res.Rejected > 0 {
		s.log.Error("usage records rejected", "cell_id", cell, "usage_partition", in.Partition, "from", in.From, "rejected", res.Rejected)
	}
	return c.JSON(http.StatusOK, usageShipResult{Position: res.Position, Applied: res.Applied})
}

// usagePeriod is one meter's value in one period.
type usagePeriod struct {
	TenantID string    `json:"tenant_id,omitempty"`
	Topic    *string   `json:"topic,omitempty"`
	TopicID  *string   `json:"topic_id,omitempty"`
	Meter    string    `json:"meter"`
	Start    time.Time `json:"start"`
	Value    int64     `json:"value"`
}

type usageList struct {
	Granularity string        `json:"granularity"`
	From        time.Time     `json:"from"`
	To          time.Time     `json:"to"`
	Meters      []string      `json:"meters"`
	Usage       []usagePeriod `json:"usage"`
}

// usageQuery reads the query parameters of /v1/usage and /v1/admin/usage:
// granularity (hour, the default, or day), from and to (RFC 3339; default
// the last 24 hours or 30 days, rounded out to whole periods), meter
// (comma separated; default all) and group_by=topic.
func usageQuery(c echo.Context, now time.Time) (billing.Query, string, error) {
	var q billing.Query
	gran := c.QueryParam("granularity")
	unit, span, limit := time.Hour, 24*time.Hour, maxHourlyRange
	switch gran {
	case "", "hour":
		gran = "hour"
	case "day":
		q.Day, unit, span, limit = true, 24*time.Hour, 30*24*time.Hour, maxDailyRange
	default:
		return q, "", catalog.InvalidRequest.Newf("granularity %q: want hour or day", gran)
	}
	parse := func(name string, def time.Time) (time.Time, error) {
		v := c.QueryParam(name)
		if v == "" {
			return def, nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return t, catalog.InvalidRequest.Newf("%s %q is not an RFC 3339 time (e.g. 2026-01-02T15:00:00Z)", name, v)
		}
		return t, nil
	}
	// Periods are UTC hours or days; Truncate on a UTC time rounds to
	// them (days since the epoch are whole UTC days).
	to, err := parse("to", now)
	if err != nil {
		return q, "", err
	}
	if r := to.UTC().Truncate(unit); !r.Equal(to) {
		to = r.Add(unit) // round up: the period holding to is included
	}
	from, err := parse("from", to.Add(-span))
	if err != nil {
		return q, "", err
	}
	from = from.UTC().Truncate(unit)
	switch {
	case !from.Before(to):
		return q, "", catalog.InvalidRequest.Newf("from %s is not before to %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
	case to.Sub(from) > limit:
		return q, "", catalog.InvalidRequest.Newf("the range is %s; by %s it may be at most %d days", to.Sub(from), gran, int(limit.Hours()/24))
	}
	q.From, q.To = from, to.UTC()
	if m := c.QueryParam("meter"); m != "" {
		for _, name := range strings.Split(m, ",") {
			if !billing.IsMeter(name) {
				return q, "", catalog.InvalidRequest.Newf("unknown meter %q: the meters are %s", name, strings.Join(billing.Meters, ", "))
			}
			q.Meters = append(q.Meters, name)
		}
	}
	switch g := c.QueryParam("group_by"); g {
	case "":
	case "topic":
		q.ByTopic = true
	default:
		return q, "", catalog.InvalidRequest.Newf("group_by %q: want topic", g)
	}
	return q, gran, nil
}

func usageOut(q billing.Query, gran string, rows []billing.Row, withTenant bool) usageList {
	out := usageList{Granularity: gran, From: q.From, To: q.To, Meters: q.Meters, Usage: []usagePeriod{}}
	if len(out.Meters) == 0 {
		out.Meters = billing.Meters
	}
	for _, r := range rows {
		p := usagePeriod{Meter: r.Meter, Start: r.Start, Value: r.Value}
		if withTenant {
			p.TenantID = r.Tenant
		}
		if q.ByTopic {
			p.Topic, p.TopicID = &r.Topic, &r.TopicID
		}
		out.Usage = append(out.Usage, p)
	}
	return out
}

// getUsage answers GET /v1/usage: the caller's own tenant's usage.
func (s *Server) getUsage(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjUsage, authz.ActRead)
	if err != nil {
		return err
	}
	if c.QueryParam("tenant_id") != "" {
		// Never another tenant's; not even an answer that says whether
		// the id exists.
		return catalog.InvalidRequest.New("tenant_id is not a parameter of /v1/usage: it shows the caller's own tenant")
	}
	q, gran, err := usageQuery(c, time.Now())
	if err != nil {
		return err
	}
	q.Tenant = p.tenantID
	return s.answerUsage(c, q, gran, false)
}

// answerUsage answers with the ledger's usage that q selects, per gran
// period; withTenant names each period's tenant, as the operators' view
// of every tenant needs.
func (s *Server) answerUsage(c echo.Context, q billing.Query, gran string, withTenant bool) error {
	l := billing.Ledger{DB: s.db}
	rows, err := l.Usage(c.Request().Context(), q)
	if err != nil {
		return dbError("query usage", err)
	}
	return c.JSON(http.StatusOK, usageOut(q, gran, rows, withTenant))
}

// adminGetUsage answers GET /v1/admin/usage: every tenant's usage, or
// one's (tenant_id).
func (s *Server) adminGetUsage(c echo.Context) error {
	if _, err := s.operatorCaller(c, authz.ActRead); err != nil {
		return err
	}
	q, gran, err := usageQuery(c, time.Now())
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if id := c.QueryParam("tenant_id"); id != "" {
		var exists bool
		if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)`, id).Scan(&exists); err != nil {
			return dbError("look up tenant", err)
		}
		if !exists {
			return catalog.NotFound.Newf("no tenant %q", id)
		}
		q.Tenant = id
	}
	return s.answerUsage(c, q, gran, true)
}

// adminBillingReconcile answers GET /v1/admin/billing/reconcile: the
// closed hours since since (RFC 3339; default 7 days ago) whose meter
// event was not sent, never enqueued, or was sent with a value the ledger
// no longer holds.
func (s *Server) adminBillingReconcile(c echo.Context) error {
	if _, err := s.operatorCaller(c, authz.ActRead); err != nil {
		return err
	}
	now := time.Now()
	since := now.Add(-7 * 24 * time.Hour)
	if v := c.QueryParam("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return catalog.InvalidRequest.Newf("since %q is not an RFC 3339 time (e.g. 2026-01-02T15:00:00Z)", v)
		}
		if now.Sub(t) > 35*24*time.Hour {
			return catalog.InvalidRequest.New("since may be at most 35 days ago: Stripe takes no older meter events")
		}
		since = t
	}
	l := billing.Ledger{DB: s.db}
	d, err := l.Reconcile(c.Request().Context(), since, now, billing.DefaultCloseAfter)
	if err != nil {
		return dbError("reconcile billing", err)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": d})
}

// getBilling answers GET /v1/billing: the caller's tenant's plan, its list
// prices and its charges this UTC month so far, projected to the month's
// end.
func (s *Server) getBilling(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjBilling, authz.ActRead)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var plan string
	if err := s.db.QueryRow(ctx, `SELECT plan FROM tenants WHERE id = $1`, p.tenantID).Scan(&plan); err != nil {
		return dbError("load plan", err)
	}
	now := time.Now().UTC()
	est := billing.EstimateFor(plan, nil, now)
	l := billing.Ledger{DB: s.db}
	totals, err := l.Totals(ctx, p.tenantID, est.MonthStart, now.Truncate(time.Hour).Add(time.Hour))
	if err != nil {
		return dbError("query usage", err)
	}
	return c.JSON(http.StatusOK, billing.EstimateFor(plan, totals, now))
}
