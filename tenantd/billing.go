package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
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

// billingInterval is how often the billing worker reports to Stripe.
const billingInterval = 30 * time.Second

// startBillingWorker runs the billing worker in this control-plane
// process: every billingInterval it prunes the ledger's applied sources
// and batches older than billing.SourceRetention, and reports the ledger
// to Stripe when a Stripe secret key is configured (SLUICE_STRIPE_KEY;
// SLUICE_STRIPE_URL points it elsewhere, e.g. at stripe-mock). Without a
// key billing keeps the ledger only and nothing is sent. Any number of control planes may run it: a Postgres advisory lock
// lets one work at a time. stop ends it and waits.
func startBillingWorker(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (stop func()) {
	var r *billing.Reporter
	if key := os.Getenv("SLUICE_STRIPE_KEY"); key == "" {
		log.Info("billing: no Stripe key (SLUICE_STRIPE_KEY); keeping the usage ledger only")
	} else {
		var err error
		if r, err = billing.NewReporter(billing.StripeConfig{DB: pool, Key: key, URL: os.Getenv("SLUICE_STRIPE_URL"), Logger: log}); err != nil {
			log.Error("billing: no Stripe reporting", "err", err)
		}
	}
	l := billing.Ledger{DB: pool}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(billingInterval)
		defer t.Stop()
		for {
			// Forget sources and batches no usage partition still holds
			// (cheap, idempotent: every control plane may do it).
			if _, err := l.Prune(ctx, time.Now().Add(-billing.SourceRetention)); err != nil && ctx.Err() == nil {
				log.Warn("billing: prune the ledger's applied sources", "err", err)
			}
			if r != nil {
				if n, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
					log.Warn("billing: report to stripe; will retry", "err", err)
				} else if n > 0 {
					log.Info("billing: meter events sent", "events", n)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// billingReconcile is `tenantd admin billing reconcile [-since T]`: the
// hours whose Stripe meter event is pending, missing, or differs from the
// ledger (GET /v1/admin/billing/reconcile).
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
	return table(p, out.Items, []string{"HOUR", "TENANT", "METER", "LEDGER", "SENT", "STATE"}, func(d billing.Difference) []any {
		return []any{d.Hour.Format(time.RFC3339), d.Tenant, d.Meter, d.Ledger, d.Outbox, d.State}
	})
}
