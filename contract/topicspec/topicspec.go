// Package topicspec owns what a valid topic is: the rules for its name, its
// partition count and its explicit settings (the keys Sluice honours, their
// bounds and defaults). The control plane enforces them when topics are
// created or changed; the Terraform provider checks the same rules at plan
// time, before any call, so that a mistake fails the plan instead of the
// apply. It is pure: no I/O, and it imports only contract/api (for the
// tenant's quotas) and contract/catalog (for the errors).
//
// Any package may import it.
package topicspec

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
)

// Topic configuration keys Sluice honours, with Kafka's names so that
// clients' admin tools work unchanged.
const (
	CleanupPolicy   = "cleanup.policy"
	RetentionMs     = "retention.ms"
	RetentionBytes  = "retention.bytes"
	MaxMessageBytes = "max.message.bytes"
	SegmentBytes    = "segment.bytes"
	SegmentMs       = "segment.ms"

	// Compaction (cleanup.policy=compact); see Config.Compacted.
	MinCompactionLagMs     = "min.compaction.lag.ms"
	MaxCompactionLagMs     = "max.compaction.lag.ms"
	DeleteRetentionMs      = "delete.retention.ms"
	MinCleanableDirtyRatio = "min.cleanable.dirty.ratio"
)

// Keys lists the supported keys, sorted.
var Keys = []string{CleanupPolicy, DeleteRetentionMs, MaxCompactionLagMs, MaxMessageBytes,
	MinCleanableDirtyRatio, MinCompactionLagMs, RetentionBytes, RetentionMs, SegmentBytes, SegmentMs}

// Topic names follow Kafka's rules; names starting with "__" are Sluice's own.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// ValidName checks a topic name; the error is catalog.InvalidName.
func ValidName(name string) error {
	switch {
	case name == "":
		return catalog.InvalidName.New("a topic needs a name")
	case name == "." || name == "..":
		return catalog.InvalidName.New(`a topic may not be named "." or ".."`)
	case !nameRE.MatchString(name):
		return catalog.InvalidName.New("a topic name has 1 to 249 characters: letters, digits, '.', '_' and '-'")
	case strings.HasPrefix(name, "__"):
		return catalog.InvalidName.New(`topic names starting with "__" are reserved`)
	}
	return nil
}

// ValidPartitions checks a number of partitions: a topic, or a growth of
// one, has at least 1 and, when q is not nil, at most the tenant's
// max_partitions quota. The error is catalog.InvalidPartitions.
func ValidPartitions(n int, q *api.Quotas) error {
	switch {
	case q == nil && n < 1:
		return catalog.InvalidPartitions.New("partitions must be at least 1")
	case q != nil && (n < 1 || n > q.MaxPartitions):
		return catalog.InvalidPartitions.Newf("partitions must be from 1 to %d", q.MaxPartitions)
	}
	return nil
}

// The defaults of the keys, before the tenant's quotas bound them: the one
// definition that DescribeConfigs reports and the replicas apply.
const (
	DefaultRetentionMs     int64 = 7 * 24 * 3600 * 1000 // retention.ms: 7 days
	DefaultMaxMessageBytes       = 1 << 20              // max.message.bytes
	DefaultSegmentBytes    int64 = 128 << 20            // segment.bytes
	DefaultSegmentMs       int64 = 7 * 24 * 3600 * 1000 // segment.ms: 7 days

	// Kafka's compaction defaults.
	DefaultMinCompactionLagMs     int64   = 0                // min.compaction.lag.ms
	DefaultMaxCompactionLagMs     int64   = math.MaxInt64    // max.compaction.lag.ms: no bound
	DefaultDeleteRetentionMs      int64   = 24 * 3600 * 1000 // delete.retention.ms: 1 day
	DefaultMinCleanableDirtyRatio float64 = 0.5              // min.cleanable.dirty.ratio
)

// Defaults are the effective values of keys not set explicitly, given the
// tenant's quotas.
func Defaults(q api.Quotas) map[string]string {
	return map[string]string{
		CleanupPolicy:   "delete",
		RetentionMs:     strconv.FormatInt(min(DefaultRetentionMs, q.MaxRetentionMs), 10),
		RetentionBytes:  "-1",
		MaxMessageBytes: strconv.Itoa(min(DefaultMaxMessageBytes, q.MaxMessageBytes)),
		SegmentBytes:    strconv.FormatInt(DefaultSegmentBytes, 10),
		SegmentMs:       strconv.FormatInt(DefaultSegmentMs, 10),

		MinCompactionLagMs:     strconv.FormatInt(DefaultMinCompactionLagMs, 10),
		MaxCompactionLagMs:     strconv.FormatInt(DefaultMaxCompactionLagMs, 10),
		DeleteRetentionMs:      strconv.FormatInt(DefaultDeleteRetentionMs, 10),
		MinCleanableDirtyRatio: strconv.FormatFloat(DefaultMinCleanableDirtyRatio, 'g', -1, 64),
	}
}

// Effective is every setting in force: the explicit ones over the defaults.
func Effective(explicit map[string]string, q api.Quotas) map[string]string {
	out := Defaults(q)
	maps.Copy(out, explicit)
	return out
}

// ValidateConfig checks explicit settings against the rules, key by key in
// sorted order, and against the tenant's quotas when q is not nil; the
// first broken rule is the error (catalog.InvalidConfig, or
// catalog.QuotaExceeded for a value above a quota). With a nil q it checks
// only what holds for every tenant: known keys and each value's own bounds.
func ValidateConfig(cfg map[string]string, q *api.Quotas) error {
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		v := cfg[k]
		bad := func(err error) error {
			return catalog.InvalidConfig.Newf("%s=%q: %s", k, v, err.Error())
		}
		switch k {
		case CleanupPolicy:
			if _, err := parseCleanupPolicy(v); err != nil {
				return bad(err)
			}
		case MinCompactionLagMs, MaxCompactionLagMs, DeleteRetentionMs:
			if _, err := parseLagMs(k, v); err != nil {
				return bad(err)
			}
		case MinCleanableDirtyRatio:
			if _, err := parseDirtyRatio(v); err != nil {
				return bad(err)
			}
		case RetentionMs:
			n, err := parseRetentionMs(v)
			if err != nil {
				return bad(err)
			}
			if q != nil && n > q.MaxRetentionMs {
				return catalog.QuotaExceeded.Newf("%s=%s is above the tenant's limit of %d ms", k, v, q.MaxRetentionMs)
			}
		case RetentionBytes:
			n, err := parseRetentionBytes(v)
			if err != nil {
				return bad(err)
			}
			if q != nil && n > q.MaxStorageBytes {
				return catalog.QuotaExceeded.Newf("%s=%s is above the tenant's storage limit of %d bytes", k, v, q.MaxStorageBytes)
			}
		case MaxMessageBytes:
			n, err := parseMaxMessageBytes(v)
			if err != nil {
				return bad(err)
			}
			if q != nil && n > q.MaxMessageBytes {
				return catalog.QuotaExceeded.Newf("%s=%s is above the tenant's limit of %d bytes", k, v, q.MaxMessageBytes)
			}
		case SegmentBytes:
			if _, err := parseSegmentBytes(v); err != nil {
				return bad(err)
			}
		case SegmentMs:
			if _, err := parseSegmentMs(v); err != nil {
				return bad(err)
			}
		default:
			return catalog.InvalidConfig.Newf("unknown topic config %q; supported: %s", k, strings.Join(Keys, ", "))
		}
	}
	// Kafka's one rule across keys: the lags bound a window.
	c := Config(cfg)
	if lo, hi := c.MinCompactionLagMs(), c.MaxCompactionLagMs(); lo > hi {
		return catalog.InvalidConfig.Newf("%s=%d is above %s=%d: a record cannot have to wait longer before compaction than it may", MinCompactionLagMs, lo, MaxCompactionLagMs, hi)
	}
	return nil
}

// A change of cleanup.policy is not refused either way: turning
// compaction on for a topic whose replicas rolled by their own clocks is
// made identical on every replica by the data plane (the leader's segment
// bases travel in its first compaction decision and every replica re-cuts
// its closed segments at them; dataplane/DESIGN.md, "Turning compaction
// on"), and turning it off stops the cleaner and brings retention back.

// The one parser of each key. Each returns the rule a bad value breaks,
// naming what is wrong: not a number, or which bound.

// errNotWhole is a value that is not a base-10 integer.
var errNotWhole = errors.New("must be a whole number (digits only, no unit)")

// errForever is retention.ms=-1, Kafka's "keep forever": no plan offers
// it (every plan has a max_retention_ms), so it is refused rather than
// quietly capped.
var errForever = errors.New("-1 (keep forever) is not offered: every plan has a maximum retention " +
	"(max_retention_ms in GET /v1/quotas); give a number of milliseconds up to it")

// cleanupPolicy is a parsed cleanup.policy: Kafka's list of "compact" and
// "delete", in either order.
type cleanupPolicy struct{ compact, delete bool }

func parseCleanupPolicy(v string) (cleanupPolicy, error) {
	var p cleanupPolicy
	bad := errors.New(`must be "delete", "compact" or "compact,delete"`)
	if v == "" {
		return p, bad
	}
	for _, item := range strings.Split(v, ",") {
		switch strings.TrimSpace(item) {
		case "compact":
			if p.compact {
				return p, bad
			}
			p.compact = true
		case "delete":
			if p.delete {
				return p, bad
			}
			p.delete = true
		default:
			return p, bad
		}
	}
	return p, nil
}

// parseLagMs parses min.compaction.lag.ms and delete.retention.ms (at
// least 0) and max.compaction.lag.ms (at least 1), Kafka's bounds.
func parseLagMs(k, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	floor := int64(0)
	if k == MaxCompactionLagMs {
		floor = 1
	}
	switch {
	case err != nil:
		return 0, errNotWhole
	case n < floor:
		return 0, fmt.Errorf("must be at least %d milliseconds", floor)
	}
	return n, nil
}

func parseDirtyRatio(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || math.IsNaN(f):
		return 0, errors.New("must be a number from 0 to 1")
	case f < 0 || f > 1:
		return 0, errors.New("must be from 0 to 1")
	}
	return f, nil
}

func parseRetentionMs(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		return 0, errNotWhole
	case n == -1:
		return 0, errForever
	case n < 1000:
		return 0, errors.New("must be at least 1000 milliseconds")
	}
	return n, nil
}

func parseRetentionBytes(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		return 0, errNotWhole
	case n != -1 && n < 1:
		return 0, errors.New("must be -1 (no limit but the tenant's storage quota) or a positive number of bytes")
	}
	return n, nil
}

func parseMaxMessageBytes(v string) (int, error) {
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return 0, errNotWhole
	case n < 1:
		return 0, errors.New("must be a positive number of bytes")
	}
	return n, nil
}

// segment.bytes is bounded to [1 MiB, 1 GiB]. The floor is Kafka 4.0's
// (Kafka 3.x accepted 14 bytes, a segment file per batch, which costs a
// file, an index and a descriptor per record batch and is never what a
// user wants); the ceiling keeps a segment, the unit retention deletes,
// small enough to be deleted promptly.
func parseSegmentBytes(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		return 0, errNotWhole
	case n < 1<<20 || n > 1<<30:
		return 0, errors.New("must be from 1 MiB (1048576) to 1 GiB (1073741824)")
	}
	return n, nil
}

func parseSegmentMs(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		return 0, errNotWhole
	case n < 60_000:
		return 0, errors.New("must be at least 60000 milliseconds")
	}
	return n, nil
}

// Config reads a topic's settings (the effective ones brokers get in the
// cell state, or a topic's explicit ones) through the one parser of each
// key. Each accessor says false when the key is absent or its value is not
// valid, so the reader falls back to its own default.
type Config map[string]string

// MaxMessageBytes is max.message.bytes: the largest record batch accepted.
func (c Config) MaxMessageBytes() (int, bool) {
	n, err := parseMaxMessageBytes(c[MaxMessageBytes])
	return n, err == nil
}

// RetentionMs is retention.ms.
func (c Config) RetentionMs() (int64, bool) {
	n, err := parseRetentionMs(c[RetentionMs])
	return n, err == nil
}

// RetentionBytes is retention.bytes; -1 means no limit.
func (c Config) RetentionBytes() (int64, bool) {
	n, err := parseRetentionBytes(c[RetentionBytes])
	return n, err == nil
}

// SegmentBytes is segment.bytes.
func (c Config) SegmentBytes() (int64, bool) {
	n, err := parseSegmentBytes(c[SegmentBytes])
	return n, err == nil
}

// SegmentMs is segment.ms.
func (c Config) SegmentMs() (int64, bool) {
	n, err := parseSegmentMs(c[SegmentMs])
	return n, err == nil
}

// Compacted reports whether cleanup.policy includes compact; an absent or
// invalid value is Kafka's default, delete alone.
func (c Config) Compacted() bool {
	p, err := parseCleanupPolicy(c[CleanupPolicy])
	return err == nil && p.compact
}

// Deletes reports whether cleanup.policy includes delete, so that
// retention.ms and retention.bytes delete segments; true when the value is
// absent or invalid (Kafka's default).
func (c Config) Deletes() bool {
	p, err := parseCleanupPolicy(c[CleanupPolicy])
	return err != nil || p.delete
}

// MinCompactionLagMs is min.compaction.lag.ms, or its default.
func (c Config) MinCompactionLagMs() int64 {
	return c.lag(MinCompactionLagMs, DefaultMinCompactionLagMs)
}

// MaxCompactionLagMs is max.compaction.lag.ms, or its default.
func (c Config) MaxCompactionLagMs() int64 {
	return c.lag(MaxCompactionLagMs, DefaultMaxCompactionLagMs)
}

// DeleteRetentionMs is delete.retention.ms, or its default.
func (c Config) DeleteRetentionMs() int64 {
	return c.lag(DeleteRetentionMs, DefaultDeleteRetentionMs)
}

func (c Config) lag(k string, dflt int64) int64 {
	if n, err := parseLagMs(k, c[k]); err == nil {
		return n
	}
	return dflt
}

// MinCleanableDirtyRatio is min.cleanable.dirty.ratio, or its default.
func (c Config) MinCleanableDirtyRatio() float64 {
	if f, err := parseDirtyRatio(c[MinCleanableDirtyRatio]); err == nil {
		return f
	}
	return DefaultMinCleanableDirtyRatio
}
