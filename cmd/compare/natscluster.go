package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sluicehq/sluice/cmd/internal/launch"
)

// natsCluster is three nats-server processes forming one JetStream cluster
// on loopback, each with file storage under its own directory and
// sync_interval: always, so a message is fsynced before it is acknowledged.
type natsCluster struct {
	servers []*launch.Proc
	urls    []string
	bin     string // nats-server, for restarts
	dir     string
}

func (n *natsCluster) name() string { return "NATS JetStream" }

func (n *natsCluster) pids() []int {
	out := make([]int, len(n.servers))
	for i, s := range n.servers {
		out[i] = s.Pid()
	}
	return out
}

// natsConfig renders one server's configuration file.
func natsConfig(name, clientAddr, clusterAddr string, routes []string, storeDir string) string {
	host, port, _ := strings.Cut(clientAddr, ":")
	chost, cport, _ := strings.Cut(clusterAddr, ":")
	var r strings.Builder
	for _, a := range routes {
		fmt.Fprintf(&r, "    nats-route://%s\n", a)
	}
	return fmt.Sprintf(`server_name: %s
host: %s
port: %s
jetstream {
  store_dir: %q
  sync_interval: always
}
cluster {
  name: compare
  host: %s
  port: %s
  routes: [
%s  ]
}
`, name, host, port, storeDir, chost, cport, r.String())
}

// startNATS writes the three configurations and starts the servers, then
// waits until JetStream answers (its meta group has a leader).
func startNATS(ctx context.Context, bin, dir string) (_ *natsCluster, err error) {
	n := &natsCluster{bin: bin, dir: dir}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	addrs, err := launch.FreeAddrs("127.0.0.1", 6)
	if err != nil {
		return nil, err
	}
	clientAddrs, clusterAddrs := addrs[:3], addrs[3:]
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		conf := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(conf, []byte(natsConfig(name, clientAddrs[i], clusterAddrs[i], clusterAddrs, filepath.Join(dir, "nats", name))), 0o644); err != nil {
			return nil, err
		}
		s, err := n.startServer(i)
		if err != nil {
			return nil, err
		}
		n.servers = append(n.servers, s)
		n.urls = append(n.urls, "nats://"+clientAddrs[i])
	}
	if err := launch.WaitFor(ctx, "nats jetstream cluster ready", 60*time.Second, func() error {
		for _, s := range n.servers {
			if err := s.Exited(); err != nil {
				return err
			}
		}
		nc, err := nats.Connect(strings.Join(n.urls, ","))
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err = js.AccountInfo(actx)
		return err
	}); err != nil {
		return nil, err
	}
	return n, nil
}

// startServer starts server i (0..2) from the configuration startNATS
// wrote, its output appended to its log file.
func (n *natsCluster) startServer(i int) (*launch.Proc, error) {
	name := fmt.Sprintf("n%d", i+1)
	return launch.Start("nats-server "+name, filepath.Join(n.dir, name+".log"), nil, n.bin, "-c", filepath.Join(n.dir, name+".conf"))
}

func (n *natsCluster) close() {
	for _, s := range n.servers {
		s.Stop(15 * time.Second)
	}
}

func (n *natsCluster) connect() (*nats.Conn, error) {
	return nats.Connect(strings.Join(n.urls, ","), nats.Name("sluice-compare"))
}

// jetStream connects and opens the JetStream API on the connection, which
// the caller closes.
func (n *natsCluster) jetStream(opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := n.connect()
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func streamName(log string, part int) string { return fmt.Sprintf("%s-%d", log, part) }
func subject(log string, part int) string    { return fmt.Sprintf("%s.%d", log, part) }

// createLog creates one stream per part: file storage, 3 replicas, limits
// retention, no size limits; everything else NATS's defaults.
func (n *natsCluster) createLog(ctx context.Context, log string, parts int) error {
	return n.eachStream(ctx, log, parts, "create", func(ctx context.Context, js jetstream.JetStream, p int) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name:      streamName(log, p),
			Subjects:  []string{subject(log, p)},
			Storage:   jetstream.FileStorage,
			Replicas:  3,
			Retention: jetstream.LimitsPolicy,
		})
		return err
	})
}

// eachStream calls fn for each part's stream of log in turn, on one
// connection, each call within 30 s; what names the step in errors.
func (n *natsCluster) eachStream(ctx context.Context, log string, parts int, what string, fn func(context.Context, jetstream.JetStream, int) error) error {
	nc, js, err := n.jetStream()
	if err != nil {
		return err
	}
	defer nc.Close()
	for p := range parts {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := fn(cctx, js, p)
		cancel()
		if err != nil {
			return fmt.Errorf("%s stream %s: %w", what, streamName(log, p), err)
		}
	}
	return nil
}

// settle has nothing to wait for: a stream keeps the leader it elected.
func (n *natsCluster) settle(ctx context.Context, log string, parts int) error { return nil }

// natsAsync publishes with PublishMsgAsync on its own connection; the ack
// and error handlers find each message's done callback by its *nats.Msg.
type natsAsync struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	subjs []string
	n     int        // messages published: the next subject is subjs[n mod len]
	mu    sync.Mutex // guards pending
	pend  map[*nats.Msg]func(error)
}

func (n *natsCluster) asyncPublisher(ctx context.Context, log string, parts []int, window int) (asyncPublisher, error) {
	nc, err := n.connect()
	if err != nil {
		return nil, err
	}
	p := &natsAsync{nc: nc, pend: make(map[*nats.Msg]func(error), window)}
	for _, part := range parts {
		p.subjs = append(p.subjs, subject(log, part))
	}
	// The library's own cap on pending acks is set above the window the
	// caller keeps, so that it never stalls a publish on its own.
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(2*window),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { p.finish(m, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			p.finish(m, fmt.Errorf("publish: %w", err))
		}),
	)
	if err != nil {
		nc.Close()
		return nil, err
	}
	p.js = js
	return p, nil
}

func (p *natsAsync) finish(m *nats.Msg, err error) {
	p.mu.Lock()
	done := p.pend[m]
	delete(p.pend, m)
	p.mu.Unlock()
	if done != nil {
		done(err)
	}
}

// publish is called from one goroutine at a time (produce's loop).
func (p *natsAsync) publish(ctx context.Context, value []byte, done func(error)) error {
	m := &nats.Msg{Subject: p.subjs[p.n%len(p.subjs)], Data: value}
	p.n++
	p.mu.Lock()
	p.pend[m] = done
	p.mu.Unlock()
	if _, err := p.js.PublishMsgAsync(m); err != nil {
		p.mu.Lock()
		delete(p.pend, m)
		p.mu.Unlock()
		return err
	}
	return nil
}

func (p *natsAsync) close() { p.nc.Close() }

type natsSync struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subj    string
	timeout time.Duration // per publish; 30 s unless tuned
}

func (n *natsCluster) syncPublisher(ctx context.Context, log string, part int) (syncPublisher, error) {
	nc, js, err := n.jetStream()
	if err != nil {
		return nil, err
	}
	return &natsSync{nc: nc, js: js, subj: subject(log, part), timeout: 30 * time.Second}, nil
}

func (p *natsSync) publish(ctx context.Context, value []byte) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	_, err := p.js.Publish(ctx, p.subj, value)
	return err
}

func (p *natsSync) close() { p.nc.Close() }

// consume reads one stream from its first message with an ordered consumer
// (ephemeral, no acknowledgements, flow-controlled: the NATS reader closest
// to a Kafka consumer reading a partition by offset), with the library's
// default pull settings.
func (n *natsCluster) consume(ctx context.Context, log string, part int, want int) error {
	nc, js, err := n.jetStream()
	if err != nil {
		return err
	}
	defer nc.Close()
	cons, err := js.OrderedConsumer(ctx, streamName(log, part), jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return fmt.Errorf("ordered consumer on %s: %w", streamName(log, part), err)
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	deadline := time.AfterFunc(10*time.Minute, it.Stop)
	defer deadline.Stop()
	got := 0
	for got < want {
		m, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return fmt.Errorf("read %d of %d messages of %s: stopped (cancelled or 10 min passed)", got, want, streamName(log, part))
			}
			return fmt.Errorf("read %s: %w", streamName(log, part), err)
		}
		if len(m.Data()) != msgSize {
			return fmt.Errorf("message %d of %s has %d bytes, want %d", got, streamName(log, part), len(m.Data()), msgSize)
		}
		got++
	}
	return nil
}

// streamCluster is the Raft group of the first stream of log.
func (n *natsCluster) streamCluster(ctx context.Context, log string) (*jetstream.ClusterInfo, error) {
	nc, js, err := n.jetStream()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := js.Stream(ictx, streamName(log, 0))
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ictx)
	if err != nil {
		return nil, err
	}
	if info.Cluster == nil {
		return nil, fmt.Errorf("stream %s has no cluster info", streamName(log, 0))
	}
	return info.Cluster, nil
}

// killLeader SIGKILLs the server leading the first stream of log; restart
// starts it again and waits until the stream has a leader and every
// replica is current (a stream keeps the leader it elected: there is no
// preferred replica to wait for).
func (n *natsCluster) killLeader(ctx context.Context, log string) (func(context.Context) error, error) {
	var idx int
	err := launch.WaitFor(ctx, "a leader of stream "+streamName(log, 0), time.Minute, func() error {
		ci, err := n.streamCluster(ctx, log)
		if err != nil {
			return err
		}
		if _, err := fmt.Sscanf(ci.Leader, "n%d", &idx); err != nil || idx < 1 || idx > len(n.servers) {
			return fmt.Errorf("stream leader %q", ci.Leader)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	i := idx - 1
	n.servers[i].Kill()
	return func(ctx context.Context) error {
		p, err := n.startServer(i)
		if err != nil {
			return err
		}
		n.servers[i] = p
		return launch.WaitFor(ctx, "stream "+streamName(log, 0)+" whole again", 2*time.Minute, func() error {
			ci, err := n.streamCluster(ctx, log)
			if err != nil {
				return err
			}
			if ci.Leader == "" || len(ci.Replicas) != 2 {
				return fmt.Errorf("stream leader %q, replicas %d", ci.Leader, len(ci.Replicas))
			}
			for _, r := range ci.Replicas {
				if !r.Current || r.Offline {
					return fmt.Errorf("replica %s not current", r.Name)
				}
			}
			return nil
		})
	}, nil
}

// gapPublisher is the latency run's publisher (30 s per publish); tuned
// gives each publish 1 s instead (the kill-gap loop publishes again after
// a failure): a publish whose acknowledgement died with the leader
// otherwise waits out its whole timeout.
func (n *natsCluster) gapPublisher(ctx context.Context, log string, tuned bool) (syncPublisher, error) {
	p, err := n.syncPublisher(ctx, log, 0)
	if err != nil || !tuned {
		return p, err
	}
	p.(*natsSync).timeout = gapTunedNATSTimeout
	return p, nil
}

// gapTunedNATSTimeout is the tuned NATS publisher's timeout per publish.
const gapTunedNATSTimeout = time.Second
