package lag

import (
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are gathered from the newest measurement at scrape time, so the
// series of a deleted group or topic disappear with it. Labels: tenant (id),
// group, topic (name), partition. A broker exports only the groups it
// coordinates, so each series comes from one broker. The series count is
// the number of partitions the broker's groups consume (committed or not); above
// MaxSeries every metric switches to one series per (tenant, group, topic)
// with partition="all" (records and bytes summed, seconds and retention
// fraction their maximum), and sluice_group_lag_aggregated is 1.
var (
	descRecords = prometheus.NewDesc("sluice_group_lag_records",
		"Records between a consumer group's committed offset and the high watermark.", labels, nil)
	descBytes = prometheus.NewDesc("sluice_group_lag_bytes",
		"Log bytes between a consumer group's committed offset and the high watermark.", labels, nil)
	descSeconds = prometheus.NewDesc("sluice_group_lag_seconds",
		"Age of the oldest record a consumer group has not consumed (0 when caught up).", labels, nil)
	descFraction = prometheus.NewDesc("sluice_group_lag_retention_fraction",
		"Consumer-group lag as a fraction of the topic's retention (time or bytes, whichever is nearer); 1 or more: unread records are or may be deleted.", labels, nil)
	descAggregated = prometheus.NewDesc("sluice_group_lag_aggregated",
		"1 when group lag is exported per topic (partition=\"all\") because the per-partition series would exceed the cap.", nil, nil)
	labels = []string{"tenant", "group", "topic", "partition"}
)

// Describe implements prometheus.Collector.
func (t *Tracker) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecords, descBytes, descSeconds, descFraction, descAggregated} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (t *Tracker) Collect(ch chan<- prometheus.Metric) {
	series := seriesOf(t.Lag(), t.cfg.MaxSeries)
	aggregated := 0.0
	for _, s := range series {
		if s.partition == "all" {
			aggregated = 1
		}
		lv := []string{s.tenant, s.group, s.topic, s.partition}
		if !utf8.ValidString(s.group) {
			// Kafka group ids are any bytes; Prometheus label values must
			// be UTF-8. Such a group is in the reports, not the metrics.
			continue
		}
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.GaugeValue, float64(s.records), lv...)
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.GaugeValue, float64(s.bytes), lv...)
		ch <- prometheus.MustNewConstMetric(descSeconds, prometheus.GaugeValue, s.seconds, lv...)
		ch <- prometheus.MustNewConstMetric(descFraction, prometheus.GaugeValue, s.fraction, lv...)
	}
	ch <- prometheus.MustNewConstMetric(descAggregated, prometheus.GaugeValue, aggregated)
}

type series struct {
	tenant, group, topic, partition string
	records, bytes                  int64
	seconds, fraction               float64
}

// seriesOf turns measured lag into metric series: one per partition, or,
// above limit, one per (tenant, group, topic). ls is sorted by tenant, group
// and topic id, so one topic's partitions are adjacent.
func seriesOf(ls []Lag, limit int) []series {
	var out []series
	n := 0
	for _, l := range ls {
		if l.Measured {
			n++
		}
	}
	perTopic := n > limit
	for _, l := range ls {
		if !l.Measured {
			continue
		}
		s := series{tenant: l.TenantID, group: l.Group, topic: l.Topic, partition: strconv.Itoa(int(l.Partition)),
			records: l.Records, bytes: l.Bytes, seconds: l.Seconds, fraction: l.RetentionFraction}
		if !perTopic {
			out = append(out, s)
			continue
		}
		s.partition = "all"
		if k := len(out) - 1; k >= 0 && out[k].tenant == s.tenant && out[k].group == s.group && out[k].topic == s.topic {
			o := &out[k]
			o.records += s.records
			o.bytes += s.bytes
			o.seconds = maxf(o.seconds, s.seconds)
			o.fraction = maxf(o.fraction, s.fraction)
			continue
		}
		out = append(out, s)
	}
	return out
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
