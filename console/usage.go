package console

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/usagewire"
)

// usageMeters are the meters the usage page charts, with their titles and
// how their values read.
var usageMeters = []struct {
	name, title string
	format      func(int64) string
}{
	{usagewire.BytesIn, "Bytes in", humanBytes},
	{usagewire.BytesOut, "Bytes out", humanBytes},
	{usagewire.MessagesIn, "Messages in", count},
	{usagewire.MessagesOut, "Messages out", count},
	{usagewire.PartitionSeconds, "Partition-hours", func(v int64) string { return strconv.FormatFloat(float64(v)/3600, 'f', 1, 64) }},
	{usagewire.StorageByteSeconds, "Storage (byte-hours)", func(v int64) string { return humanBytes(v/3600) + "·h" }},
}

func count(v int64) string { return strconv.FormatInt(v, 10) }

// usagePeriod is one row of /v1/usage.
type usagePeriod struct {
	Meter   string    `json:"meter"`
	Start   time.Time `json:"start"`
	Value   int64     `json:"value"`
	Topic   *string   `json:"topic"`
	TopicID *string   `json:"topic_id"`
}

type usageAnswer struct {
	Usage []usagePeriod `json:"usage"`
}

// usageChart is one meter over one span: a server-rendered SVG bar chart
// (no script: the console's CSP allows none inline).
type usageChart struct {
	ID, Title, Span, Total string
	SVG                    template.HTML
}

type usageData struct {
	Any      bool
	Charts   []usageChart
	Quotas   *api.Quotas
	Estimate *estimate
}

// estimate is /v1/billing: this month's charges at the plan's list prices.
type estimate struct {
	Plan       string    `json:"plan"`
	MonthStart time.Time `json:"month_start"`
	Lines      []struct {
		Meter     string  `json:"meter"`
		Unit      string  `json:"unit"`
		UnitPrice float64 `json:"unit_price"`
		Amount    float64 `json:"amount"`
	} `json:"lines"`
	MonthToDate float64 `json:"month_to_date"`
	Projected   float64 `json:"projected"`
}

// usagePage shows the tenant's usage of the last 24 hours by hour and the
// last 30 days by day, one chart per meter, from /v1/usage.
func (c *Console) usagePage(w http.ResponseWriter, r *http.Request, s *session) {
	d := usageData{}
	now := time.Now().UTC()
	spans := []struct {
		gran, span string
		unit       time.Duration
		n          int
	}{{"hour", "last 24 hours", time.Hour, 24}, {"day", "last 30 days", 24 * time.Hour, 30}}
	for _, sp := range spans {
		to := now.Truncate(sp.unit).Add(sp.unit)
		from := to.Add(-time.Duration(sp.n) * sp.unit)
		var out usageAnswer
		path := "/v1/usage?granularity=" + sp.gran + "&from=" + from.Format(time.RFC3339) + "&to=" + to.Format(time.RFC3339)
		if err := s.api.Do(r.Context(), http.MethodGet, path, nil, &out); err != nil {
			c.fail(w, r, s, err)
			return
		}
		vals := map[string][]int64{}
		for _, m := range usageMeters {
			vals[m.name] = make([]int64, sp.n)
		}
		for _, u := range out.Usage {
			i := int(u.Start.Sub(from) / sp.unit)
			if v, ok := vals[u.Meter]; ok && i >= 0 && i < sp.n {
				v[i] += u.Value
				d.Any = true
			}
		}
		for _, m := range usageMeters {
			var total int64
			for _, v := range vals[m.name] {
				total += v
			}
			d.Charts = append(d.Charts, usageChart{ID: "usage-" + m.name + "-" + sp.gran, Title: m.title, Span: sp.span,
				Total: m.format(total), SVG: barChart(m.title+", "+sp.span, vals[m.name], from, sp.unit, m.format)})
		}
	}
	var est estimate
	if err := s.api.Do(r.Context(), http.MethodGet, "/v1/billing", nil, &est); err == nil {
		d.Estimate = &est
	} else if c.partLost(w, r, err, "billing estimate") {
		return
	}
	if q, err := s.api.Quotas(r.Context()); err == nil {
		d.Quotas = &q
	} else if c.partLost(w, r, err, "quotas") {
		return
	}
	p := sessionPage(s, "Usage", "usage")
	p.Data = d
	c.render(w, r, http.StatusOK, "usage", p)
}

// partLost handles the failed call of a part of a page the page can do
// without (the usage page's estimate and quotas): a lost session goes to
// the sign-in page and ends the page (true); any other failure is logged
// and the page is shown without that part.
func (c *Console) partLost(w http.ResponseWriter, r *http.Request, err error, what string) bool {
	if c.authLost(w, r, err) {
		return true
	}
	c.log.Warn("console load "+what, "err", err)
	return false
}

// barChart draws vals as an SVG bar chart, one bar per period from from,
// each with a title (the browser's tooltip) naming its period and value.
func barChart(label string, vals []int64, from time.Time, unit time.Duration, format func(int64) string) template.HTML {
	const width, height = 480, 100
	var peak int64 = 1
	for _, v := range vals {
		peak = max(peak, v)
	}
	bar := float64(width) / float64(len(vals))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		width, height+2, template.HTMLEscapeString(label))
	fmt.Fprintf(&b, `<line x1="0" y1="%d" x2="%d" y2="%d" stroke="#999" stroke-width="1"/>`, height+1, width, height+1)
	layout := "Jan 2 15:00"
	if unit >= 24*time.Hour {
		layout = "Jan 2"
	}
	for i, v := range vals {
		h := float64(v) / float64(peak) * height
		if v > 0 && h < 1 {
			h = 1
		}
		period := from.Add(time.Duration(i) * unit).Format(layout)
		fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#3b6fd4" data-value="%d"><title>%s: %s</title></rect>`,
			float64(i)*bar+1, height-h, bar-2, h, v, template.HTMLEscapeString(period), template.HTMLEscapeString(format(v)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from numbers and escaped text only
}

// usageCSV serves /usage.csv: the tenant's usage by day for the last 30
// days (granularity=hour: by hour for the last 24 hours), per meter and
// topic, as /v1/usage returns it.
func (c *Console) usageCSV(w http.ResponseWriter, r *http.Request, s *session) {
	gran := r.URL.Query().Get("granularity")
	if gran != "hour" {
		gran = "day"
	}
	var out usageAnswer
	if err := s.api.Do(r.Context(), http.MethodGet, "/v1/usage?group_by=topic&granularity="+gran, nil, &out); err != nil {
		c.fail(w, r, s, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="usage-by-`+gran+`.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"start", "meter", "topic", "topic_id", "value"})
	for _, u := range out.Usage {
		topic, id := "", ""
		if u.Topic != nil {
			topic = *u.Topic
		}
		if u.TopicID != nil {
			id = *u.TopicID
		}
		_ = cw.Write([]string{u.Start.UTC().Format(time.RFC3339), u.Meter, topic, id, strconv.FormatInt(u.Value, 10)})
	}
	cw.Flush()
}

// tenantUsage is one tenant's totals over the operators' usage page's 30
// days, in usageMeters' order.
type tenantUsage struct {
	ID, Name string
	Totals   []string
}

type adminUsageData struct {
	Meters  []string
	Tenants []tenantUsage
}

// adminUsagePage shows operators every tenant's usage of the last 30 days
// by meter, from /v1/admin/usage, most bytes in first.
func (c *Console) adminUsagePage(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	var out struct {
		Usage []struct {
			TenantID string `json:"tenant_id"`
			Meter    string `json:"meter"`
			Value    int64  `json:"value"`
		} `json:"usage"`
	}
	if err := s.api.Do(r.Context(), http.MethodGet, "/v1/admin/usage?granularity=day", nil, &out); err != nil {
		c.fail(w, r, s, err)
		return
	}
	names := map[string]string{}
	if ts, err := s.api.AdminTenants(r.Context(), "name"); err == nil {
		for _, t := range ts {
			names[t.ID] = t.Name
		}
	}
	sums := map[string]map[string]int64{}
	for _, u := range out.Usage {
		if sums[u.TenantID] == nil {
			sums[u.TenantID] = map[string]int64{}
		}
		sums[u.TenantID][u.Meter] += u.Value
	}
	ids := make([]string, 0, len(sums))
	for id := range sums {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := cmp.Compare(sums[b]["bytes_in"], sums[a]["bytes_in"]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	d := adminUsageData{}
	for _, m := range usageMeters {
		d.Meters = append(d.Meters, m.title)
	}
	for _, id := range ids {
		tu := tenantUsage{ID: id, Name: names[id]}
		for _, m := range usageMeters {
			tu.Totals = append(tu.Totals, m.format(sums[id][m.name]))
		}
		d.Tenants = append(d.Tenants, tu)
	}
	p := sessionPage(s, "Usage by tenant", "admin-usage")
	p.Data = d
	c.render(w, r, http.StatusOK, "admin_usage", p)
}

// dollars writes a US dollar amount: cents, or more digits below a cent
// (a unit price).
func dollars(x float64) string {
	if x != 0 && x < 0.01 {
		return "$" + strconv.FormatFloat(x, 'f', -1, 64)
	}
	return "$" + strconv.FormatFloat(x, 'f', 2, 64)
}
