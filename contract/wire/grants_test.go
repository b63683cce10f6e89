package wire

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/contract/testkit"
)

func TestMirrorGrantsDecode(t *testing.T) {
	caB, caC, leaf := testkit.SelfSignedPEM(t, "grant test", true), testkit.SelfSignedPEM(t, "grant test", true), testkit.SelfSignedPEM(t, "grant test", false)
	g := func(cell, tenant, ca string, topics ...string) MirrorGrant {
		return MirrorGrant{Cell: cell, TenantID: tenant, Topics: topics, PeerCA: ca}
	}
	for _, tc := range []struct {
		name   string
		grants []MirrorGrant
		want   error
	}{
		{"none", nil, nil},
		{"two cells, two tenants", []MirrorGrant{g("b", "t1", caB, "x", "y"), g("b", "t2", caB, "z"), g("c", "t1", caC, "x")}, nil},
		{"empty cell id", []MirrorGrant{g("", "t1", caB, "x")}, ErrGrantNoCell},
		{"empty tenant id", []MirrorGrant{g("b", "", caB, "x")}, ErrGrantNoTenant},
		{"no topics", []MirrorGrant{g("b", "t1", caB)}, ErrGrantNoTopics},
		{"repeated topic", []MirrorGrant{g("b", "t1", caB, "x", "x")}, ErrGrantBadTopic},
		{"empty topic", []MirrorGrant{g("b", "t1", caB, "")}, ErrGrantBadTopic},
		{"bad pem", []MirrorGrant{g("b", "t1", "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", "x")}, ErrGrantBadCA},
		{"no pem", []MirrorGrant{g("b", "t1", "hello", "x")}, ErrGrantBadCA},
		{"pem then junk", []MirrorGrant{g("b", "t1", caB+"junk", "x")}, ErrGrantBadCA},
		{"not a ca", []MirrorGrant{g("b", "t1", leaf, "x")}, ErrGrantBadCA},
		{"key block", []MirrorGrant{g("b", "t1", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "x")}, ErrGrantBadCA},
		{"duplicate", []MirrorGrant{g("b", "t1", caB, "x"), g("b", "t1", caB, "y")}, ErrGrantDuplicate},
		{"two CAs for a cell", []MirrorGrant{g("b", "t1", caB, "x"), g("b", "t2", caC, "y")}, ErrGrantCAConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(CellState{Cell: "a", MirrorGrants: tc.grants})
			if err != nil {
				t.Fatal(err)
			}
			var st CellState
			err = json.Unmarshal(b, &st)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("decode: %v, want %v", err, tc.want)
			}
			if err == nil && len(st.MirrorGrants) != len(tc.grants) {
				t.Fatalf("decoded %d grants, want %d", len(st.MirrorGrants), len(tc.grants))
			}
		})
	}
}

// FuzzMirrorGrants: decoding arbitrary JSON as grants never panics; what
// decodes validates and survives a round trip unchanged.
func FuzzMirrorGrants(f *testing.F) {
	ca := testkit.SelfSignedPEM(f, "grant test", true)
	b, _ := json.Marshal(MirrorGrants{{Cell: "b", TenantID: "t", Topics: []string{"x"}, PeerCA: ca}})
	f.Add(b)
	f.Add([]byte(`[{"cell":"","tenant_id":"t","topics":["x"],"peer_ca":""}]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var gs MirrorGrants
		if err := json.Unmarshal(data, &gs); err != nil {
			return
		}
		if err := gs.Validate(); err != nil {
			t.Fatalf("decoded grants fail validation: %v", err)
		}
		again, err := json.Marshal(gs)
		if err != nil {
			t.Fatal(err)
		}
		var gs2 MirrorGrants
		if err := json.Unmarshal(again, &gs2); err != nil || len(gs2) != len(gs) {
			t.Fatalf("round trip: %v, %d grants for %d", err, len(gs2), len(gs))
		}
	})
}
