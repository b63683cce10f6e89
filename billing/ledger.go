package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/contract/usagewire"
)

// Meters are the ledger's meters, in display order.
var Meters = usagewire.Meters

// IsMeter reports whether m is one of Meters.
func IsMeter(m string) bool {
	for _, x := range Meters {
		if x == m {
			return true
		}
	}
	return false
}

// Record is a usage record as the brokers write it (dataplane/usage's
// Record): version 2 carries produce Ranges; version 1, which brokers
// wrote before produce was metered from the partitions' logs, carried
// produced Batches instead, and is still applied for the records of it
// left in usage partitions.
type Record struct {
	Version int     `json:"v"`
	Node    int     `json:"node"`
	Boot    string  `json:"boot"`
	Seq     int64   `json:"seq"`
	At      int64   `json:"at"`
	Entries []Entry `json:"entries"`
	Batches []Batch `json:"batches"`
	Ranges  []Range `json:"ranges"`
}

// Batch is one produced batch of a version 1 Record: counted once per (topic,
// partition, base offset) as bytes_in and messages_in.
type Batch struct {
	Tenant    string `json:"tenant"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Base      int64  `json:"base"`
	Hour      int64  `json:"hour"`
	Bytes     int64  `json:"bytes"`
	Messages  int64  `json:"messages"`
}

type batchKey struct {
	topic     string
	partition int32
	base      int64
}

// Entry is one counter of a Record (usagewire.Entry).
type Entry = usagewire.Entry

// Shipment is one range of a usage partition's records.
type Shipment struct {
	Cell      string
	Partition int32
	// From is the offset the range starts at (-1: only ask for the
	// position); Next the offset after it.
	From, Next int64
	Records    []json.RawMessage
}

// ShipResult is what Ship did.
type ShipResult struct {
	// Position is the partition's applied position after the call.
	Position int64
	// Applied is true if the shipment was applied (its From was the
	// position).
	Applied bool
	// Records is how many records were new; Duplicates how many had
	// been applied before (a flush retried); Rejected how many could not
	// be read (logged by the caller, never applied).
	Records, Duplicates, Rejected int
}

// Ledger is the usage ledger in Postgres (migrations 00012 and 00017).
type Ledger struct {
	DB *pgxpool.Pool
}

type ledgerKey struct {
	tenant, topic, meter string
	hour                 int64
}

// Ship applies s in one transaction: only if s.From is the partition's
// position, each record whose source was not applied before, and the
// position moves to s.Next. Concurrent shipments of one partition are
// serialized on its position row.
func (l *Ledger) Ship(ctx context.Context, s Shipment) (ShipResult, error) {
	var res ShipResult
	if s.From >= 0 && s.Next < s.From {
		return res, fmt.Errorf("ship usage: range [%d, %d) is inverted", s.From, s.Next)
	}
	err := pgx.BeginFunc(ctx, l.DB, func(tx pgx.Tx) error {
		res = ShipResult{}
		if _, err := tx.Exec(ctx, `INSERT INTO usage_positions (cell_id, partition, next_offset) VALUES ($1, $2, 0)
			ON CONFLICT DO NOTHING`, s.Cell, s.Partition); err != nil {
			return fmt.Errorf("create usage position: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT next_offset FROM usage_positions WHERE cell_id = $1 AND partition = $2 FOR UPDATE`,
			s.Cell, s.Partition).Scan(&res.Position); err != nil {
			return fmt.Errorf("read usage position: %w", err)
		}
		if s.From < 0 || s.From != res.Position {
			return nil
		}
		sums := map[ledgerKey]int64{}
		batches := map[batchKey]Batch{}
		var ranges []Range
		recs := make([]Record, 0, len(s.Records))
		for _, raw := range s.Records {
			r, err := decode(raw)
			if err != nil {
				res.Rejected++
				continue
			}
			recs = append(recs, r)
		}
		fresh, err := newSources(ctx, tx, s.Cell, recs)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if !fresh[sourceKey{r.Node, r.Boot, r.Seq}] {
				res.Duplicates++
				continue
			}
			// A source twice in one shipment counts once.
			delete(fresh, sourceKey{r.Node, r.Boot, r.Seq})
			res.Records++
			for _, e := range r.Entries {
				sums[ledgerKey{e.Tenant, e.Topic, e.Meter, e.Hour}] += e.Value
			}
			for _, b := range r.Batches {
				batches[batchKey{b.Topic, b.Partition, b.Base}] = b
			}
			ranges = append(ranges, r.Ranges...)
		}
		if err := newBatches(ctx, tx, batches, sums); err != nil {
			return err
		}
		if err := newRanges(ctx, tx, ranges, sums); err != nil {
			return err
		}
		if err := addSums(ctx, tx, sums); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE usage_positions SET next_offset = $3, updated_at = now() WHERE cell_id = $1 AND partition = $2`,
			s.Cell, s.Partition, s.Next); err != nil {
			return fmt.Errorf("move usage position: %w", err)
		}
		res.Position, res.Applied = s.Next, true
		return nil
	})
	return res, err
}

type sourceKey struct {
	node int
	boot string
	seq  int64
}

// newSources records the sources of recs in usage_sources and returns
// those not applied before.
func newSources(ctx context.Context, tx pgx.Tx, cell string, recs []Record) (map[sourceKey]bool, error) {
	fresh := map[sourceKey]bool{}
	if len(recs) == 0 {
		return fresh, nil
	}
	nodes, boots, seqs := make([]int32, len(recs)), make([]string, len(recs)), make([]int64, len(recs))
	for i, r := range recs {
		nodes[i], boots[i], seqs[i] = int32(r.Node), r.Boot, r.Seq
	}
	rows, err := tx.Query(ctx, `INSERT INTO usage_sources (cell_id, node, boot, seq)
		SELECT $1, * FROM unnest($2::integer[], $3::text[], $4::bigint[]) ON CONFLICT DO NOTHING
		RETURNING node, boot, seq`, cell, nodes, boots, seqs)
	if err != nil {
		return nil, fmt.Errorf("record usage sources: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k sourceKey
		if err := rows.Scan(&k.node, &k.boot, &k.seq); err != nil {
			return nil, fmt.Errorf("record usage sources: %w", err)
		}
		fresh[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("record usage sources: %w", err)
	}
	return fresh, nil
}

// newBatches records batches in usage_batches and adds those not counted
// before to sums.
func newBatches(ctx context.Context, tx pgx.Tx, batches map[batchKey]Batch, sums map[ledgerKey]int64) error {
	if len(batches) == 0 {
		return nil
	}
	var topics []string
	var parts []int32
	var bases []int64
	for k := range batches {
		topics, parts, bases = append(topics, k.topic), append(parts, k.partition), append(bases, k.base)
	}
	// In key order, as addSums: two leaders of a partition may report
	// one batch in shipments of different usage partitions.
	rows, err := tx.Query(ctx, `INSERT INTO usage_batches (topic_id, partition, base_offset)
		SELECT * FROM unnest($1::text[], $2::integer[], $3::bigint[]) AS u(t, p, b) ORDER BY t, p, b
		ON CONFLICT DO NOTHING RETURNING topic_id, partition, base_offset`, topics, parts, bases)
	if err != nil {
		return fmt.Errorf("record usage batches: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k batchKey
		if err := rows.Scan(&k.topic, &k.partition, &k.base); err != nil {
			return fmt.Errorf("record usage batches: %w", err)
		}
		b := batches[k]
		sums[ledgerKey{b.Tenant, b.Topic, "bytes_in", b.Hour}] += b.Bytes
		sums[ledgerKey{b.Tenant, b.Topic, "messages_in", b.Hour}] += b.Messages
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("record usage batches: %w", err)
	}
	return nil
}

// addSums adds sums to the ledger in one statement.
func addSums(ctx context.Context, tx pgx.Tx, sums map[ledgerKey]int64) error {
	if len(sums) == 0 {
		return nil
	}
	var tenants, topics, meters []string
	var hours []time.Time
	var values []int64
	for k, v := range sums {
		tenants, topics, meters = append(tenants, k.tenant), append(topics, k.topic), append(meters, k.meter)
		hours, values = append(hours, time.Unix(k.hour, 0).UTC()), append(values, v)
	}
	// In the ledger key's order: the usage partitions of a cell ship at
	// once and add to the same rows (a tenant's hour), and two upserts
	// that lock shared rows in different orders deadlock.
	_, err := tx.Exec(ctx, `INSERT INTO usage_ledger (tenant_id, topic_id, meter, hour, value)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::bigint[]) AS u(tn, tp, m, h, v)
		ORDER BY tn, m, h, tp
		ON CONFLICT (tenant_id, meter, hour, topic_id) DO UPDATE SET value = usage_ledger.value + EXCLUDED.value`,
		tenants, topics, meters, hours, values)
	if err != nil {
		return fmt.Errorf("add usage to the ledger: %w", err)
	}
	return nil
}

var errBadRecord = errors.New("bad usage record")

// decode parses and checks one record: a record that fails is never
// applied, and does not stop the records after it.
func decode(raw []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("%w: %w", errBadRecord, err)
	}
	if (r.Version != 1 && r.Version != 2) || (r.Version == 1 && len(r.Ranges) > 0) || (r.Version == 2 && len(r.Batches) > 0) || r.Node <= 0 || r.Boot == "" || r.Seq <= 0 {
		return r, fmt.Errorf("%w: version %d, source %d/%q/%d", errBadRecord, r.Version, r.Node, r.Boot, r.Seq)
	}
	for _, e := range r.Entries {
		if e.Tenant == "" || !IsMeter(e.Meter) || e.Value < 0 || e.Hour%3600 != 0 {
			return r, fmt.Errorf("%w: entry %+v", errBadRecord, e)
		}
	}
	for _, b := range r.Batches {
		if b.Tenant == "" || b.Topic == "" || b.Partition < 0 || b.Base < 0 || b.Bytes < 0 || b.Messages < 0 || b.Hour%3600 != 0 {
			return r, fmt.Errorf("%w: batch %+v", errBadRecord, b)
		}
	}
	for _, g := range r.Ranges {
		if g.Tenant == "" || g.Topic == "" || g.Partition < 0 || g.End <= 0 || g.Bytes < 0 || g.Messages < 0 || g.Hour%3600 != 0 {
			return r, fmt.Errorf("%w: range %+v", errBadRecord, g)
		}
	}
	return r, nil
}

// SourceRetention is how long the ledger remembers applied sources and
// batches: longer than a usage partition keeps its records (14 days), so
// no record it forgets can be shipped again.
const SourceRetention = 15 * 24 * time.Hour

// Prune forgets the sources and batches applied before cutoff (now -
// SourceRetention in production), and the produce ranges of hours before
// it that a later range of their partition supersedes, and returns how
// many rows it deleted.
func (l *Ledger) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	n, err := pruneRanges(ctx, l.DB, cutoff)
	if err != nil {
		return n, err
	}
	for _, table := range []string{"usage_sources", "usage_batches"} {
		tag, err := l.DB.Exec(ctx, `DELETE FROM `+table+` WHERE applied_at < $1`, cutoff)
		if err != nil {
			return n, fmt.Errorf("prune %s: %w", table, err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}
