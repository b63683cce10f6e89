package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/billing"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/replicas"
	metering "github.com/sluicehq/sluice/dataplane/usage"
)

// startUsage starts a broker's metering over its replica manager and
// meter (which the front doors count fetches into and the partitions'
// leaders their produce ranges): the flusher that writes the counts into
// the usage partition this broker leads, and the shipper that sends the
// records of the usage partitions it leads to the control plane's
// ledger. stop makes a last flush and stops both; call it before the
// replicas close.
func startUsage(cfg brokerConfig, nodeID int, syncer *cellview.Syncer, m *replicas.Manager, meter *metering.Meter, log *slog.Logger) (stop func(), err error) {
	meter.WaitWhen(m.HasUsage)
	f, err := metering.NewFlusher(metering.FlusherConfig{NodeID: nodeID, Meter: meter, Partition: m.UsageAppender, Logger: log})
	if err != nil {
		return nil, err
	}
	// Partition-seconds and storage byte-seconds of the partitions led
	// here, sized after retention.
	sm, err := metering.NewSampler(metering.SamplerConfig{Meter: meter, Led: func() []metering.Sample {
		v := syncer.View()
		var out []metering.Sample
		for _, st := range m.Status() {
			if st.LeaderNode != nodeID {
				continue
			}
			if t, ok := v.TopicByID(st.TopicID); ok {
				out = append(out, metering.Sample{Tenant: t.TenantID, Topic: t.ID, Bytes: st.SizeBytes})
			}
		}
		return out
	}, Interval: cfg.UsageSample})
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	cell := client.New(cfg.APIURL, client.WithAPIKey(cfg.CellKeyID, cfg.CellKeySecret), client.WithHTTPClient(cfg.TLS.httpClient()))
	sh, err := metering.NewShipper(metering.ShipperConfig{Led: m.UsageLed, Sink: usageSink{cell: cell, cellID: cfg.Cell}, Logger: log})
	if err != nil {
		_ = sm.Close()
		_ = f.Close()
		return nil, err
	}
	return func() {
		_ = sh.Close()
		_ = sm.Close()
		_ = f.Close()
	}, nil
}

// usageSink ships usage records to the control plane
// (POST /internal/v1/cells/{cell}/usage) with the cell's key.
type usageSink struct {
	cell   *client.Client
	cellID string
}

func (s usageSink) Ship(ctx context.Context, sh metering.Shipment) (int64, error) {
	records := make([]jsonRaw, len(sh.Records))
	for i, r := range sh.Records {
		records[i] = r
	}
	in := struct {
		Partition int32     `json:"partition"`
		From      int64     `json:"from"`
		Next      int64     `json:"next"`
		Records   []jsonRaw `json:"records"`
	}{sh.Partition, sh.From, sh.Next, records}
	var out struct {
		Position int64 `json:"position"`
	}
	if err := s.cell.Do(ctx, http.MethodPost, "/internal/v1/cells/"+s.cellID+"/usage", in, &out); err != nil {
		return 0, fmt.Errorf("ship usage partition %d: %w", sh.Partition, err)
	}
	return out.Position, nil
}

// jsonRaw is a record's JSON, sent as is.
type jsonRaw []byte

func (r jsonRaw) MarshalJSON() ([]byte, error) { return r, nil }

// defaultBillingInterval is how often a billing worker does a round
// (-billing-interval).
const defaultBillingInterval = 30 * time.Second

// billingWorker is the billing worker: every interval it prunes the
// ledger's applied sources and batches older than
// billing.SourceRetention, and reports the ledger to Stripe when a
// Stripe secret key is configured (SLUICE_STRIPE_KEY; SLUICE_STRIPE_URL
// points it elsewhere, e.g. at stripe-mock). Without a key billing keeps
// the ledger only and nothing is sent. It runs as its own role (tenantd
// billing) or inside a control-plane process (-billing-worker, default
// on); any number may run: a Postgres advisory lock lets one report at a
// time, the others standing by.
type billingWorker struct {
	pool     *pgxpool.Pool
	reporter *billing.Reporter // nil: no Stripe key
	interval time.Duration
	log      *slog.Logger
	metrics  *billingMetrics // nil: none (inside a control plane)
	// ready is whether the last round's prune reached the database.
	ready atomic.Bool
}

func newBillingWorker(pool *pgxpool.Pool, cfg Config, log *slog.Logger, m *billingMetrics) *billingWorker {
	w := &billingWorker{pool: pool, interval: cfg.billingInterval(), log: log, metrics: m}
	if cfg.StripeKey == "" {
		log.Info("billing: no Stripe key (SLUICE_STRIPE_KEY); keeping the usage ledger only")
		return w
	}
	r, err := billing.NewReporter(billing.StripeConfig{DB: pool, Key: cfg.StripeKey, URL: cfg.StripeURL, Logger: log})
	if err != nil {
		log.Error("billing: no Stripe reporting", "err", err)
	}
	w.reporter = r
	return w
}

// start runs rounds until ctx ends or stop is called; stop waits.
func (w *billingWorker) start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(w.interval)
		defer t.Stop()
		for {
			w.round(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// round prunes (cheap, idempotent: every worker may) and, with a Stripe
// key, reports if it gets the lock.
func (w *billingWorker) round(ctx context.Context) {
	ok := true
	if _, err := (&billing.Ledger{DB: w.pool}).Prune(ctx, time.Now().Add(-billing.SourceRetention)); err != nil {
		if ctx.Err() != nil {
			return
		}
		ok = false
		w.log.Warn("billing: prune the ledger's applied sources", "err", err)
	}
	// Ready while the database answers; a Stripe failure is the
	// metrics' and the log's (the worker retries with backoff).
	w.ready.Store(ok)
	result := "ledger_only"
	if w.reporter != nil {
		worked, n, err := w.reporter.Round(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			ok = false
			w.log.Warn("billing: report to stripe; will retry", "err", err)
		case !worked:
			result = "standby"
		default:
			result = "worked"
		}
		if n > 0 {
			w.log.Info("billing: meter events sent", "events", n)
		}
		w.metrics.sent(n)
	}
	if !ok {
		result = "failed"
	}
	w.metrics.round(result)
}

// startBillingWorker runs the billing worker inside a control-plane
// process (tenantd controlplane, tenantd dev) unless cfg.BillingWorker is
// off (a deployment that runs tenantd billing). stop ends it and waits.
func startBillingWorker(ctx context.Context, pool *pgxpool.Pool, cfg Config, log *slog.Logger) (stop func()) {
	if !cfg.BillingWorker {
		log.Info("billing: no billing worker in this process (-billing-worker=false); tenantd billing runs it")
		return func() {}
	}
	return newBillingWorker(pool, cfg, log, nil).start(ctx)
}

// billingReconcile is `tenantd admin billing reconcile [-since T]`: the
// hours whose Stripe meter event is pending, held, missing, or differs
// from the ledger (GET /v1/admin/billing/reconcile).
func billingReconcile(ctx context.Context, c *client.Client, p printer, args []string) error {
	sub := flag.NewFlagSet("billing reconcile", flag.ContinueOnError)
	since := sub.String("since", "", "RFC 3339 time of the first hour to compare (default 7 days ago)")
	if err := sub.Parse(args); err != nil {
		return err
	}
	path := "/v1/admin/billing/reconcile"
	if *since != "" {
		path += "?since=" + url.QueryEscape(*since)
	}
	var out struct {
		Items []billing.Difference `json:"items"`
	}
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return err
	}
	return table(p, out.Items, []string{"HOUR", "TENANT", "METER", "LEDGER", "SENT", "STATE", "REASON"}, func(d billing.Difference) []any {
		return []any{d.Hour.Format(time.RFC3339), d.Tenant, d.Meter, d.Ledger, d.Outbox, d.State, d.Reason}
	})
}
