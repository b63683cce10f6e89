package kafka

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/toptenants"
)

// TopTenants is how many tenants get their own label value in the Kafka
// request metrics; the rest are counted as "other".
const TopTenants = 10

// requestMetrics are the Kafka listener's per-API request metrics, by
// tenant (bounded: toptenants).
type requestMetrics struct {
	labels   *toptenants.Labels
	requests *prometheus.CounterVec   // api, tenant
	errors   *prometheus.CounterVec   // api, tenant, error
	latency  *prometheus.HistogramVec // api, tenant
	bytesIn  *prometheus.CounterVec   // api, tenant
	records  *prometheus.CounterVec   // tenant
}

func newRequestMetrics(reg prometheus.Registerer, labels *toptenants.Labels) (*requestMetrics, error) {
	m := &requestMetrics{
		labels: labels,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_kafka_requests_total", Help: "Kafka requests served, by API and tenant (the busiest tenants by name, the rest as other).",
		}, []string{"api", "tenant"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_kafka_request_errors_total", Help: "Kafka requests answered with an error code (or that closed the connection: error=connection_closed), by API, tenant and error.",
		}, []string{"api", "tenant", "error"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_kafka_request_seconds", Help: "Kafka request latency from decoding to the response written (fetch long polls included, a quota throttle waited out left out), by API and tenant.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"api", "tenant"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_kafka_request_bytes_total", Help: "Bytes of Kafka request frames received, by API and tenant.",
		}, []string{"api", "tenant"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_kafka_produced_records_total", Help: "Records appended by Kafka produce requests and acknowledged, by tenant.",
		}, []string{"tenant"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.errors, m.latency, m.bytesIn, m.records} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	labels.OnDemote(func(t string) {
		for _, v := range []interface {
			DeletePartialMatch(prometheus.Labels) int
		}{m.requests, m.errors, m.latency, m.bytesIn, m.records} {
			v.DeletePartialMatch(prometheus.Labels{"tenant": t})
		}
	})
	return m, nil
}

// observe counts one request of frameBytes bytes that took took to handle
// (a throttle it waited out left out); code is the error code its response
// carried (0: none) and failed whether handling it closed the connection.
func (m *requestMetrics) observe(key int16, tenant string, frameBytes int, took time.Duration, code int16, failed bool) {
	if m == nil {
		return
	}
	api := kmsg.NameForKey(key)
	if api == "" {
		api = "unknown"
	}
	t := m.labels.Observe(tenant, 1+float64(frameBytes))
	m.requests.WithLabelValues(api, t).Inc()
	m.bytesIn.WithLabelValues(api, t).Add(float64(frameBytes))
	m.latency.WithLabelValues(api, t).Observe(took.Seconds())
	switch {
	case failed:
		m.errors.WithLabelValues(api, t, "connection_closed").Inc()
	case code != 0:
		name := "code_unknown"
		if e := kerr.ErrorForCode(code); e != nil {
			if ke, ok := e.(*kerr.Error); ok {
				name = ke.Message
			}
		}
		m.errors.WithLabelValues(api, t, name).Inc()
	}
}

// responseError is the first error code a response carries, at its top
// level or in its first failing topic partition (0: none).
func responseError(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		return firstCode(r.Topics, func(t kmsg.ProduceResponseTopic) int16 {
			return firstCode(t.Partitions, func(p kmsg.ProduceResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.MetadataResponse:
		return firstCode(r.Topics, func(t kmsg.MetadataResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.ListOffsetsResponse:
		return firstCode(r.Topics, func(t kmsg.ListOffsetsResponseTopic) int16 {
			return firstCode(t.Partitions, func(p kmsg.ListOffsetsResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.OffsetCommitResponse:
		return firstCode(r.Topics, func(t kmsg.OffsetCommitResponseTopic) int16 {
			return firstCode(t.Partitions, func(p kmsg.OffsetCommitResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.OffsetFetchResponse:
		return r.ErrorCode
	case *kmsg.CreateTopicsResponse:
		return firstCode(r.Topics, func(t kmsg.CreateTopicsResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.FindCoordinatorResponse:
		return r.ErrorCode
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		return r.ErrorCode
	case *kmsg.InitProducerIDResponse:
		return r.ErrorCode
	case *kmsg.SASLHandshakeResponse:
		return r.ErrorCode
	case *kmsg.SASLAuthenticateResponse:
		return r.ErrorCode
	case *kmsg.ApiVersionsResponse:
		return r.ErrorCode
	case *kmsg.FetchResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		return firstCode(r.Topics, func(t kmsg.FetchResponseTopic) int16 {
			return firstCode(t.Partitions, func(p kmsg.FetchResponseTopicPartition) int16 { return p.ErrorCode })
		})
	}
	return 0
}

// firstCode is the first nonzero code among items (0: none). Responses
// nest their codes in topics and partitions of different types; this is
// the one search they share, each case naming only where its codes sit.
func firstCode[T any](items []T, code func(T) int16) int16 {
	for _, it := range items {
		if c := code(it); c != 0 {
			return c
		}
	}
	return 0
}

// metricsTenant is the connection's tenant, "" before authentication.
func (c *conn) metricsTenant() string {
	if p := c.principal.Load(); p != nil {
		return p.TenantID
	}
	return ""
}

// produced counts the acknowledged records of a produce.
func (m *requestMetrics) produced(tenant string, records int64) {
	if m == nil || records <= 0 {
		return
	}
	m.records.WithLabelValues(m.labels.Label(tenant)).Add(float64(records))
}

// connectionsCollector is sluice_kafka_connections: the listener's open
// connections by tenant (label bounded as the request metrics'), counted
// at each scrape.
type connectionsCollector struct {
	s      *Server
	labels *toptenants.Labels
}

var descConnections = prometheus.NewDesc("sluice_kafka_connections",
	"Open Kafka connections by tenant (the busiest tenants by name, the rest as other; none: not authenticated yet).", []string{"tenant"}, nil)

func (cc connectionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descConnections }

func (cc connectionsCollector) Collect(ch chan<- prometheus.Metric) {
	cc.s.mu.Lock()
	conns := make([]*conn, 0, len(cc.s.conns))
	for c := range cc.s.conns {
		conns = append(conns, c)
	}
	cc.s.mu.Unlock()
	by := map[string]float64{}
	for _, c := range conns {
		by[cc.labels.Label(c.metricsTenant())]++
	}
	for t, n := range by {
		ch <- prometheus.MustNewConstMetric(descConnections, prometheus.GaugeValue, n, t)
	}
}
