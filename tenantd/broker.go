package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/admission"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/peercert"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/transport"
	metering "github.com/sluicehq/sluice/dataplane/usage"
)

// brokerConfig is what one broker needs.
type brokerConfig struct {
	// Metrics, when set, gets the broker's Prometheus metrics.
	Metrics prometheus.Registerer

	Cell, BrokerID string
	APIURL         string
	CellKeyID      string
	CellKeySecret  string
	DataDir        string
	// RaftListen and RaftAdvertise override the raft_addr the cell state
	// lists for this broker (listen defaults to advertise).
	RaftListen, RaftAdvertise string
	// Peer holds the PEM files the Raft transport authenticates with.
	Peer peercert.Files
	// KafkaListen overrides the kafka_addr the cell state lists for this
	// broker as the Kafka listener's address.
	KafkaListen string
	// HTTPListen overrides the http_addr the cell state lists for this
	// broker as the HTTP data API's address.
	HTTPListen string
	// Register, when its NodeID is set, is what the broker registers with
	// the control plane at start (brokerregister.go).
	Register wire.Registration
	// DebugListen, when set, is where the broker serves pprof.
	DebugListen string
	// HealthListen, when set, is where the broker serves /livez and
	// /readyz (brokerhealth.go).
	HealthListen string
	// SeedRate is replicas.Config.SeedRate.
	SeedRate int64
	// MirrorRate is replicas.Config.MirrorRate.
	MirrorRate int64
	// UsageSample is the usage sampler's interval (0: its default).
	UsageSample time.Duration
	// CompactInterval is replicas.Config.CompactInterval.
	CompactInterval time.Duration
	// Journal makes the replicas' appends durable through a journal under
	// DataDir (Config.Journal).
	Journal bool
	// TLS is the Kafka listener's and HTTP data API's certificate and the
	// roots trusted in the control plane's and other brokers'; nil or
	// without a certificate, they serve plaintext.
	TLS *listenerTLS
	// Isolation configures tenant isolation (isolation.go).
	Isolation isolationConfig

	adm     *admission.Admission // set by runBroker for startKafka
	applied *applyState          // set by runBroker: the last reconciliation's outcome, for /readyz
	parts   *brokerParts         // set by runBroker unless set (dev): what the broker's metrics read
	usage   *metering.Meter      // set by runReplicas for the front doors
}

func brokerConfigOf(cfg Config) brokerConfig {
	id, secret, _ := strings.Cut(cfg.CellKey, ":")
	return brokerConfig{Cell: cfg.Cell, BrokerID: cfg.BrokerID, APIURL: cfg.APIURL, CellKeyID: id, CellKeySecret: secret,
		DataDir: cfg.DataDir, RaftListen: cfg.RaftListen, RaftAdvertise: cfg.RaftAdvertise,
		KafkaListen: cfg.KafkaListen, HTTPListen: cfg.HTTPListen, DebugListen: cfg.DebugListen, HealthListen: cfg.HealthListen, SeedRate: cfg.SeedRate,
		MirrorRate:      cfg.MirrorRate,
		UsageSample:     cfg.usageSample(),
		CompactInterval: cfg.CompactInterval,
		Journal:         cfg.Journal,
		Register:        wire.Registration{NodeID: cfg.NodeID, KafkaAddr: cfg.KafkaAdvertise, HTTPAddr: cfg.HTTPAdvertise, RaftAddr: cfg.RaftAdvertise},
		Peer:            peercert.Files{CA: cfg.PeerCAFile, Cert: cfg.PeerCertFile, Key: cfg.PeerKeyFile},
		Isolation: isolationConfig{RedisAddr: cfg.RedisAddr, DiskSoft: cfg.DiskSoftWatermark, DiskHard: cfg.DiskHardWatermark,
			EgressBytesPerSec: float64(cfg.EgressBytesPerSec)}}
}

// applyRetry is how soon a failed reconciliation of the replicas is tried
// again when the state does not change meanwhile.
const applyRetry = 5 * time.Second

// runBroker wires one broker: its cached view of the cell's state, kept
// current from the control plane; its partition replicas, reconciled with
// every new view over the broker's Raft transport; and its reports back. It
// returns when ctx ends and every subsystem has stopped.
func runBroker(ctx context.Context, cfg brokerConfig, log *slog.Logger) error {
	log = log.With("broker", cfg.BrokerID)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create broker data dir: %w", err)
	}
	api := client.New(cfg.APIURL, client.WithAPIKey(cfg.CellKeyID, cfg.CellKeySecret), client.WithHTTPClient(cfg.TLS.httpClient()))
	syncer, err := cellview.New(cellview.Config{Cell: cfg.Cell, API: api, CacheFile: filepath.Join(cfg.DataDir, "cell-state.json"), Logger: log})
	if err != nil {
		return err
	}
	var manager atomic.Pointer[replicas.Manager] // set while the replicas run
	// dev passes its own parts, to see when its cell serves groups.
	if cfg.parts == nil {
		cfg.parts = newBrokerParts()
	}
	// runReplicas hands gl its group coordinator's committed offsets.
	gl, err := newGroupLag(syncer, replicaOf(&manager), log)
	if err != nil {
		return err
	}
	if cfg.Metrics != nil {
		if err := cfg.Metrics.Register(gl.tracker); err != nil {
			return fmt.Errorf("register group lag metrics: %w", err)
		}
		defer cfg.Metrics.Unregister(gl.tracker)
		unregister, err := registerReplicaMetrics(cfg.Metrics, &manager, syncer, cfg.parts)
		if err != nil {
			return err
		}
		defer unregister()
	}
	if cfg.Isolation.Registerer == nil {
		cfg.Isolation.Registerer = cfg.Metrics
	}
	iso, err := newIsolation(cfg, syncer, &manager, log)
	if err != nil {
		return err
	}
	cfg.adm = iso.adm
	cfg.applied = &applyState{}
	partitions := func() []wire.PartitionStatus {
		if m := manager.Load(); m != nil {
			return m.ReportStatus()
		}
		return []wire.PartitionStatus{}
	}
	// While the cell state names a tenant move, its steps are watched and
	// reported sooner (moveSoonFast, cellview's FastGap).
	moving := func() bool { return tenantMoving(syncer.View().Tenants) }
	reporter, err := cellview.NewReporter(cellview.ReporterConfig{Cell: cfg.Cell, BrokerID: cfg.BrokerID, API: api, DataDir: cfg.DataDir, Logger: log, OffsetsImported: cfg.parts.offsetsImported,
		Groups:    gl.report,
		Soon:      gl.soon,
		Fast:      moving,
		DiskState: func() string { return iso.adm.DiskState().String() },
		KeysUsed:  syncer.TakeKeysUsed,
		// The HTTP data API serves TLS exactly when the listeners do.
		HTTPScheme: cfg.TLS.scheme(),
		Partitions: partitions,
		// This broker takes part in tenant moves, and says which state
		// its replicas applied last (the control plane waits for it).
		Moves: true,
		StateVersion: func() int64 {
			if m := manager.Load(); m != nil {
				return m.AppliedVersion()
			}
			return 0
		}})
	if err != nil {
		return err
	}
	runReplicas := func(ctx context.Context) error { return runReplicas(ctx, cfg, syncer, &manager, gl, log) }
	runs := []func(context.Context) error{syncer.Run, reporter.Run, runReplicas, func(ctx context.Context) error { return iso.run(ctx, syncer) },
		func(ctx context.Context) error { return watchMoves(ctx, partitions, moving, gl.soon) },
		func(ctx context.Context) error {
			return watchChanges(ctx, func() string { return tenantMoveSteps(syncer.View().Tenants, cfg.parts.offsetsImported()) }, moving, gl.soon)
		}}
	if cfg.Register.PeerCA, err = peerCAPEM(cfg.Peer.CA); err != nil {
		return err
	}
	switch {
	case cfg.Register.NodeID > 0:
		runs = append(runs, func(ctx context.Context) error { return registerBroker(ctx, api, cfg, log) })
	case cfg.Register.PeerCA != "":
		// A broker the operator created registers only its cell's peer
		// CA (its node id from the state, no addresses: they stay as the
		// operator set them), so the control plane can publish it to the
		// other cell of a tenant move.
		runs = append(runs, func(ctx context.Context) error {
			self, err := waitForSelf(ctx, syncer, cfg.BrokerID, log)
			if err != nil {
				return err
			}
			rc := cfg
			rc.Register = wire.Registration{NodeID: self.NodeID, PeerCA: cfg.Register.PeerCA}
			if err := registerBroker(ctx, api, rc, log); err != nil && ctx.Err() == nil {
				// The broker serves on: the CA matters only to tenant
				// moves, which the control plane refuses for a cell
				// without one agreed CA.
				log.Warn("the control plane refused this broker's peer CA; tenant moves into or out of its cell need one CA for all its brokers",
					"err", err)
			}
			return nil
		})
	}
	if cfg.HealthListen != "" {
		runs = append(runs, func(ctx context.Context) error { return serveHealth(ctx, cfg.HealthListen, &manager, cfg.applied, log) })
	}
	if cfg.DebugListen != "" {
		runs = append(runs, func(ctx context.Context) error { return serveDebug(ctx, cfg.DebugListen, log) })
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(runs))
	for _, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// runReplicas waits for a cell state that lists this broker, starts the
// broker's Raft transport, group committer and replica manager, and applies
// every new view until ctx ends; then it closes them, replicas first.
func runReplicas(ctx context.Context, cfg brokerConfig, syncer *cellview.Syncer, slot *atomic.Pointer[replicas.Manager], gl *groupLag, log *slog.Logger) error {
	self, err := waitForSelf(ctx, syncer, cfg.BrokerID, log)
	if err != nil {
		return err
	}
	advertise := cfg.RaftAdvertise
	advertise = cmp.Or(advertise, self.RaftAddr)
	if advertise == "" {
		return fmt.Errorf("broker %s has no raft_addr in the cell state: set it (tenantd admin) or pass -raft-advertise", cfg.BrokerID)
	}
	if self.RaftAddr != "" && advertise != self.RaftAddr {
		log.Warn("raft advertise address differs from the cell state's; peers dial the cell state's and refuse RPCs that name another address for this broker", "raft_advertise", advertise, "raft_addr", self.RaftAddr)
	}
	listen := cfg.RaftListen
	listen = cmp.Or(listen, advertise)
	creds, cert, err := peercert.LoadCredentials(cfg.Peer.CA, cfg.Peer.Cert, cfg.Peer.Key)
	if err != nil {
		return err
	}
	node, err := transport.New(transport.Config{ID: replicas.ServerID(self.NodeID), ListenAddr: listen, AdvertiseAddr: advertise, Logger: log, Credentials: creds})
	if err != nil {
		return err
	}
	defer node.Close()
	cfg.parts.selfID.Store(int64(self.NodeID))
	stopReload := reloadOnHangup("peer certificate", cfg.Peer.Cert, func() error { return cert.Load(cfg.Peer.Cert, cfg.Peer.Key) }, log)
	defer stopReload()
	com, closeCommitter, err := openCommitter(cfg.Metrics, cfg.DataDir, cfg.Journal, log)
	if err != nil {
		return err
	}
	defer closeCommitter()
	unobserve, err := observeFsync(cfg.Metrics, com)
	if err != nil {
		return err
	}
	defer unobserve()
	// The meter before the replicas: their leaders record produce into it.
	meter := metering.NewMeter(nil)
	m, err := replicas.New(replicas.Config{NodeID: self.NodeID, DataDir: filepath.Join(cfg.DataDir, "replicas"), Transport: node, Committer: com, SeedRate: cfg.SeedRate, MirrorRate: cfg.MirrorRate, CompactInterval: cfg.CompactInterval, Usage: meter, Logger: log})
	if err != nil {
		return err
	}
	defer func() {
		slot.Store(nil)
		if err := m.Close(); err != nil {
			log.Error("close replicas", "err", err)
		}
	}()
	slot.Store(m)
	log.Info("raft transport listening", "raft_listen", listen, "raft_advertise", advertise, "node_id", self.NodeID)

	coord, err := startGroups(self, m, gl.changed, log)
	if err != nil {
		return err
	}
	defer coord.Close()
	cfg.parts.coord.Store(coord)
	defer cfg.parts.coord.Store(nil)
	gl.useCoordinator(coord.AllGroups)
	defer gl.useCoordinator(nil)
	// One producer-id allocator per broker: both front doors hand out ids
	// from its blocks.
	cell := client.New(cfg.APIURL, client.WithAPIKey(cfg.CellKeyID, cfg.CellKeySecret), client.WithHTTPClient(cfg.TLS.httpClient()))
	ids := &kafka.ProducerIDBlocks{Allocate: func(ctx context.Context, n int) (int64, error) {
		return cell.AllocateProducerIDs(ctx, cfg.Cell, n)
	}}
	stopUsage, err := startUsage(cfg, self.NodeID, syncer, m, meter, log)
	if err != nil {
		return err
	}
	defer stopUsage() // before the replicas close: its last flush needs them
	cfg.usage = meter
	ks, err := startKafka(ctx, cfg, self, syncer, m, coord, ids, log)
	if err != nil {
		return err
	}
	defer ks.Close()
	hs, err := startHTTP(ctx, cfg, self, syncer, m, coord, ids, log)
	if err != nil {
		return err
	}
	defer hs.Close()
	retry := time.NewTimer(applyRetry)
	retry.Stop()
	for {
		changed := syncer.Changed()
		var retryC <-chan time.Time // nil unless the last Apply failed
		coord.SetMoves(syncer.View().Tenants)
		err := m.Apply(ctx, syncer.View())
		cfg.applied.set(err)
		if err != nil && ctx.Err() == nil {
			log.Warn("reconcile replicas with the cell state; will retry", "err", err)
			retry.Reset(applyRetry)
			retryC = retry.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-retryC:
		}
		retry.Stop()
	}
}

// waitForSelf returns this broker's entry in the cell state, waiting for a
// state that lists it (a new broker has none until its first sync).
func waitForSelf(ctx context.Context, syncer *cellview.Syncer, brokerID string, log *slog.Logger) (wire.Broker, error) {
	for {
		changed := syncer.Changed()
		for _, b := range syncer.View().Brokers {
			if b.ID == brokerID {
				return b, nil
			}
		}
		if syncer.View().StateVersion > 0 {
			log.Warn("the cell state does not list this broker; waiting")
		}
		select {
		case <-ctx.Done():
			return wire.Broker{}, ctx.Err()
		case <-changed:
		}
	}
}

// startKafka serves the Kafka protocol on the broker's Kafka address over
// its replicas, with producer ids from the control plane and topic admin
// forwarded to the control plane's API under the caller's own key.
func startKafka(ctx context.Context, cfg brokerConfig, self wire.Broker, syncer *cellview.Syncer, m *replicas.Manager, coord *groups.Coordinator, ids *kafka.ProducerIDBlocks, log *slog.Logger) (*kafka.Server, error) {
	addr := cfg.KafkaListen
	addr = cmp.Or(addr, self.KafkaAddr)
	if addr == "" {
		return nil, fmt.Errorf("broker %s has no kafka_addr in the cell state: set it (tenantd admin) or pass -kafka-listen", cfg.BrokerID)
	}
	cell := client.New(cfg.APIURL, client.WithAPIKey(cfg.CellKeyID, cfg.CellKeySecret), client.WithHTTPClient(cfg.TLS.httpClient()))
	ks, err := kafka.New(kafka.Config{
		Addr:         addr,
		NodeID:       self.NodeID,
		State:        syncer,
		Partitions:   replicaPartitions{m},
		ControlPlane: client.New(cfg.APIURL, client.WithHTTPClient(cfg.TLS.httpClient())),
		// Administration over SCRAM acts for the key with the cell key.
		CellControlPlane: cell,
		ProducerIDs:      ids,
		Groups:           coord,
		// Keys of other cells' tenants: the control plane checks them and
		// says where they live, so any broker sends a client home.
		Homes: kafka.HomesFunc(func(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
			return cell.KeyHome(ctx, cfg.Cell, keyID, secret)
		}),
		Logger:       log,
		Admission:    cfg.adm,
		Usage:        cfg.usage,
		TLS:          cfg.TLS.server(),
		Metrics:      cfg.Metrics,
		TenantLabels: cfg.parts.labels,
	})
	if err != nil {
		return nil, err
	}
	serveInBackground(ctx, log, "kafka listener stopped", ks.Serve)
	log.Info("kafka listening", "kafka_listen", ks.Addr().String(), "tls", cfg.TLS.enabled())
	return ks, nil
}

// serveInBackground runs serve, one of the broker's front doors, until ctx
// ends; a front door that stops for any other reason is logged with
// stopped and not retried, as the broker's other parts keep running.
func serveInBackground(ctx context.Context, log *slog.Logger, stopped string, serve func(context.Context) error) {
	go func() {
		if err := serve(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error(stopped, "err", err)
		}
	}()
}

// replicaPartitions serves both front doors (the Kafka listener and the
// HTTP data API) the broker's replicas.
type replicaPartitions struct{ m *replicas.Manager }

// A replica takes batches in two steps, so the Kafka listener reads a
// connection's next produce request while the previous one commits.
var _ frontdoor.Submitter = (*partition.Replica)(nil)

func (p replicaPartitions) Get(topicID string, part int32) (frontdoor.Partition, bool) {
	r, ok := p.m.Get(topicID, part)
	if !ok {
		return nil, false
	}
	return r, true
}

// startGroups starts the broker's consumer-group coordinator over its
// replicas of the cell's offsets partitions (which the replica manager
// opens once the cell state lists enough brokers).
func startGroups(self wire.Broker, m *replicas.Manager, changed func(), log *slog.Logger) (*groups.Coordinator, error) {
	return groups.New(groups.Config{NodeID: self.NodeID, Logger: log, Changed: changed,
		Offsets: func(p int32) (groups.Log, bool) {
			r, ok := m.Get(groups.OffsetsTopicID, p)
			if !ok {
				return nil, false
			}
			return r, true
		},
		Placement: m.OffsetsReplicas})
}
