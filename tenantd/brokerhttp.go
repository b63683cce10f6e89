package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/httpapi"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/keyhome"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// startHTTP serves the HTTP data API (and the broker's /metrics) on the
// broker's HTTP address over its replicas and group coordinator, with
// producer ids from the control plane and dead-letter topics created
// through its API with the caller's own key.
func startHTTP(ctx context.Context, cfg brokerConfig, self wire.Broker, syncer *cellview.Syncer, m *replicas.Manager, coord *groups.Coordinator, ids *kafka.ProducerIDBlocks, log *slog.Logger) (*httpapi.Server, error) {
	addr := cfg.HTTPListen
	if addr == "" {
		addr = self.HTTPAddr
	}
	if addr == "" {
		return nil, fmt.Errorf("broker %s has no http_addr in the cell state: set it (tenantd admin) or pass -http-listen", cfg.BrokerID)
	}
	// The API's metrics go with the broker's (its -metrics-listen, or in
	// dev the control plane's operators-only /metrics), never on the
	// tenants' data port.
	var reg prometheus.Registerer = prometheus.NewRegistry()
	if cfg.Metrics != nil {
		reg = cfg.Metrics
	}
	hc := httpapi.Config{
		Addr:         addr,
		NodeID:       self.NodeID,
		State:        syncer,
		Partitions:   replicaPartitions{m},
		ProducerIDs:  ids,
		Groups:       coord,
		ControlPlane: client.New(cfg.APIURL, client.WithHTTPClient(cfg.TLS.httpClient())),
		// The brokers of a cell share its cell key, so its secret is
		// what they prove their forwards with: a forward is then not
		// counted again against the tenant's request rate. Brokers with
		// different cell keys cannot verify each other's forwards and
		// count them as the tenants' own requests.
		PeerKey:    httpapi.PeerKeyFrom(cfg.CellKeySecret),
		Registerer: reg,
		Usage:      cfg.usage,
		// One top set of tenants for both front doors' series.
		TenantLabels: cfg.parts.labels,
		Logger:       log,
		TLS:          cfg.TLS.server(),
	}
	if cfg.TLS != nil {
		hc.ForwardCAs = cfg.TLS.roots
	}
	// Keys of other cells' tenants: the control plane checks them and says
	// where they live, and the request is proxied there.
	cell := client.New(cfg.APIURL, client.WithAPIKey(cfg.CellKeyID, cfg.CellKeySecret), client.WithHTTPClient(cfg.TLS.httpClient()))
	hc.Homes = keyhome.HomesFunc(func(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
		return cell.KeyHome(ctx, cfg.Cell, keyID, secret)
	})
	if cfg.adm != nil {
		hc.Admit, hc.Record = httpapi.AdmitWith(cfg.adm)
	}
	hs, err := httpapi.New(hc)
	if err != nil {
		return nil, err
	}
	serveInBackground(ctx, log, "http data api stopped", hs.Serve)
	log.Info("http data api listening", "http_listen", hs.Addr().String(), "tls", cfg.TLS.enabled())
	return hs, nil
}
