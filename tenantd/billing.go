package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/replicas"
	metering "github.com/sluicehq/sluice/dataplane/usage"
)

// startUsage starts a broker's metering over its replica manager: the
// meter the front doors count into, the flusher that writes the counts
// into the usage partition this broker leads, and the shipper that sends
// the records of the usage partitions it leads to the control plane's
// ledger. stop makes a last flush and stops both; call it before the
// replicas close.
func startUsage(cfg brokerConfig, nodeID int, syncer *cellview.Syncer, m *replicas.Manager, log *slog.Logger) (meter *metering.Meter, stop func(), err error) {
	meter = metering.NewMeter(nil)
	f, err := metering.NewFlusher(metering.FlusherConfig{NodeID: nodeID, Meter: meter, Partition: m.UsageAppender, Logger: log})
	if err != nil {
		return nil, nil, err
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
	}})
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	cell := client.New(cfg.APIURL, client.WithAPIKey(cfg.CellKeyID, cfg.CellKeySecret), client.WithHTTPClient(cfg.TLS.httpClient()))
	sh, err := metering.NewShipper(metering.ShipperConfig{Led: m.UsageLed, Sink: usageSink{cell: cell, cellID: cfg.Cell}, Logger: log})
	if err != nil {
		_ = sm.Close()
		_ = f.Close()
		return nil, nil, err
	}
	return meter, func() {
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
