package main

import "testing"

// TestPoolConfigRaisesTheDefaultMaximum: without pool_max_conns in the
// URL the pool may open minPoolConns connections (pgx alone gives a
// 2-core machine 4); a URL that sets it is obeyed, also below that.
func TestPoolConfigRaisesTheDefaultMaximum(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want int32
	}{
		{"postgres://postgres@127.0.0.1:5432/sluice?sslmode=disable", minPoolConns},
		{"postgres://postgres@127.0.0.1:5432/sluice?sslmode=disable&pool_max_conns=3", 3},
		{"postgres://postgres@127.0.0.1:5432/sluice?pool_max_conns=40", 40},
	} {
		cfg, err := poolConfig(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if cfg.MaxConns != tc.want {
			t.Errorf("%s: max conns %d, want %d", tc.url, cfg.MaxConns, tc.want)
		}
	}
	if _, err := poolConfig("postgres://host:notaport/db"); err == nil {
		t.Error("a malformed URL parsed")
	}
}
