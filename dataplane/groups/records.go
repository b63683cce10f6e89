package groups

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The records of an offsets partition. Every key and value starts with a
// big-endian uint16 version; strings are a uint16 length and UTF-8 bytes,
// byte arrays an int32 length (-1 = null) and the bytes, integers big
// endian. A record with a null value is a tombstone: the key's offset or
// group is deleted.
//
//	key v0:            version=0 | kind uint8 | tenant id | group | (kind offset:) topic id, partition int32
//	offset value v0:   version=0 | offset int64 | leader epoch int32 | metadata | commit time (unix ms) int64
//	group value v0:    version=0 | protocol type | protocol | generation int32 | leader | member count int32 |
//	                   members: id | instance id | client id | client host | session ms int32 |
//	                            rebalance ms int32 | metadata bytes | assignment bytes
//	import value v0:   version=0 | digest | import time (unix ms) int64   (kind import: group is empty)
//
// A decoder refuses versions it does not know, trailing bytes, and
// anything out of range: a new version must be rolled out to every broker
// of a cell before any writes it.
const (
	keyVersion         = 0
	offsetValueVersion = 0
	groupValueVersion  = 0
	importValueVersion = 0

	kindOffset byte = 1
	kindGroup  byte = 2
	// kindImport marks a moving tenant's offsets import as done in this
	// partition (move.go); one per tenant, its group name empty.
	kindImport byte = 3
)

// recordKey identifies what a record sets or deletes.
type recordKey struct {
	kind   byte
	tenant string
	group  string
	tp     TopicPartition // kindOffset only
}

// groupRecord is the persisted state of a group: its generation and its
// members with their assignments, written when a generation's assignment
// is complete (Stable) or when the group becomes empty.
type groupRecord struct {
	protocolType, protocol string
	generation             int32
	leader                 string
	members                []memberRecord
}

type memberRecord struct {
	id, instanceID, clientID, clientHost string
	session, rebalance                   time.Duration
	metadata, assignment                 []byte
}

var errBadRecord = errors.New("malformed offsets record")

type enc struct{ b []byte }

func (e *enc) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *enc) i32(v int32)  { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *enc) i64(v int64)  { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *enc) str(s string) {
	if len(s) > math.MaxUint16 {
		s = s[:math.MaxUint16] // callers bound their strings well below
	}
	e.u16(uint16(len(s)))
	e.b = append(e.b, s...)
}
func (e *enc) bytes(v []byte) {
	if v == nil {
		e.i32(-1)
		return
	}
	e.i32(int32(len(v)))
	e.b = append(e.b, v...)
}

func encodeKey(k recordKey) []byte {
	e := &enc{}
	e.u16(keyVersion)
	e.b = append(e.b, k.kind)
	e.str(k.tenant)
	e.str(k.group)
	if k.kind == kindOffset {
		e.str(k.tp.TopicID)
		e.i32(k.tp.Partition)
	}
	return e.b
}

func encodeOffset(c Committed) []byte {
	e := &enc{}
	e.u16(offsetValueVersion)
	e.i64(c.Offset)
	e.i32(c.LeaderEpoch)
	e.str(c.Metadata)
	e.i64(c.CommittedAt.UnixMilli())
	return e.b
}

func encodeGroup(g groupRecord) []byte {
	e := &enc{}
	e.u16(groupValueVersion)
	e.str(g.protocolType)
	e.str(g.protocol)
	e.i32(g.generation)
	e.str(g.leader)
	e.i32(int32(len(g.members)))
	for _, m := range g.members {
		e.str(m.id)
		e.str(m.instanceID)
		e.str(m.clientID)
		e.str(m.clientHost)
		e.i32(int32(min(m.session.Milliseconds(), math.MaxInt32)))
		e.i32(int32(min(m.rebalance.Milliseconds(), math.MaxInt32)))
		e.bytes(m.metadata)
		e.bytes(m.assignment)
	}
	return e.b
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("%w: need %d bytes, %d left", errBadRecord, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u8() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *dec) u16() uint16 {
	if v := d.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (d *dec) i32() int32 {
	if v := d.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (d *dec) i64() int64 {
	if v := d.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (d *dec) str() string { return string(d.take(int(d.u16()))) }

func (d *dec) bytes() []byte {
	n := d.i32()
	if d.err != nil || n == -1 {
		return nil
	}
	if n < -1 {
		d.err = fmt.Errorf("%w: byte array length %d", errBadRecord, n)
		return nil
	}
	v := d.take(int(n))
	if d.err != nil {
		return nil
	}
	out := make([]byte, len(v))
	copy(out, v)
	return out
}

func (d *dec) version(what string, want uint16) {
	if v := d.u16(); d.err == nil && v != want {
		d.err = fmt.Errorf("%w: %s version %d, this broker reads only %d", errBadRecord, what, v, want)
	}
}

func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", errBadRecord, len(d.b))
	}
	return d.err
}

func decodeKey(b []byte) (recordKey, error) {
	d := &dec{b: b}
	d.version("key", keyVersion)
	k := recordKey{kind: d.u8()}
	k.tenant = d.str()
	k.group = d.str()
	switch {
	case d.err != nil:
	case k.kind == kindOffset:
		k.tp.TopicID = d.str()
		k.tp.Partition = d.i32()
		if d.err == nil && k.tp.Partition < 0 {
			d.err = fmt.Errorf("%w: partition %d", errBadRecord, k.tp.Partition)
		}
	case k.kind == kindImport:
		if k.group != "" {
			d.err = fmt.Errorf("%w: an import marker names a group", errBadRecord)
		}
	case k.kind != kindGroup:
		d.err = fmt.Errorf("%w: record kind %d", errBadRecord, k.kind)
	}
	if err := d.done(); err != nil {
		return recordKey{}, err
	}
	return k, nil
}

func decodeOffset(b []byte) (Committed, error) {
	d := &dec{b: b}
	d.version("offset value", offsetValueVersion)
	c := Committed{Offset: d.i64(), LeaderEpoch: d.i32(), Metadata: d.str()}
	ms := d.i64()
	if err := d.done(); err != nil {
		return Committed{}, err
	}
	c.CommittedAt = time.UnixMilli(ms)
	return c, nil
}

// maxMembers bounds a decoded group's member count before anything is
// allocated for it.
const maxMembers = 1 << 16

func decodeGroup(b []byte) (groupRecord, error) {
	d := &dec{b: b}
	d.version("group value", groupValueVersion)
	g := groupRecord{protocolType: d.str(), protocol: d.str(), generation: d.i32(), leader: d.str()}
	n := d.i32()
	if d.err == nil && (n < 0 || n > maxMembers || int(n)*22 > len(d.b)) {
		d.err = fmt.Errorf("%w: member count %d", errBadRecord, n)
	}
	if d.err == nil && g.generation < 0 {
		d.err = fmt.Errorf("%w: generation %d", errBadRecord, g.generation)
	}
	for i := int32(0); d.err == nil && i < n; i++ {
		m := memberRecord{id: d.str(), instanceID: d.str(), clientID: d.str(), clientHost: d.str()}
		s, r := d.i32(), d.i32()
		if d.err == nil && (s <= 0 || r <= 0 || m.id == "") {
			d.err = fmt.Errorf("%w: member %d: id %q, timeouts %d/%d ms", errBadRecord, i, m.id, s, r)
		}
		m.session, m.rebalance = time.Duration(s)*time.Millisecond, time.Duration(r)*time.Millisecond
		m.metadata, m.assignment = d.bytes(), d.bytes()
		g.members = append(g.members, m)
	}
	if err := d.done(); err != nil {
		return groupRecord{}, err
	}
	return g, nil
}

// importMark is the value of an import marker: the digest of the entries
// the import committed in this partition, and when.
type importMark struct {
	digest string
	at     time.Time
}

func encodeImport(m importMark) []byte {
	e := &enc{}
	e.u16(importValueVersion)
	e.str(m.digest)
	e.i64(m.at.UnixMilli())
	return e.b
}

func decodeImport(b []byte) (importMark, error) {
	d := &dec{b: b}
	d.version("import value", importValueVersion)
	m := importMark{digest: d.str()}
	ms := d.i64()
	if err := d.done(); err != nil {
		return importMark{}, err
	}
	m.at = time.UnixMilli(ms)
	return m, nil
}
