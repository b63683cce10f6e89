package migrations_test

import (
	"context"
	"io/fs"
	"regexp"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/controlplane/pgtest"
	"github.com/sluicehq/sluice/migrations"
)

// pgtest.Pool applies every migration to an empty database; applying them a
// second time must be a no-op.
func TestUpFromEmptyThenNoop(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()

	applied, err := migrations.Up(ctx, pool)
	if err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if len(applied) != 0 {
		t.Fatalf("second Up applied %v, want nothing", applied)
	}
	for _, table := range []string{"tenants", "users", "memberships", "api_keys", "acls", "quotas",
		"pools", "cells", "brokers", "topics", "partitions", "audit_log", "sessions"} {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Errorf("table %s: %v", table, err)
		}
	}
	var version int64
	if err := pool.QueryRow(ctx, "SELECT max(version_id) FROM goose_db_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if want := int64(len(files(t))); version != want {
		t.Fatalf("schema version %d, want %d (one per file)", version, want)
	}
}

var migrationName = regexp.MustCompile(`^(\d{5})_[a-z0-9_]+\.sql$`)

// Files are numbered densely from 1 so that an append is always the next number.
func TestFilesNumberedDensely(t *testing.T) {
	for i, name := range files(t) {
		m := migrationName.FindStringSubmatch(name)
		if m == nil {
			t.Fatalf("%s: want NNNNN_snake_case.sql", name)
		}
		if n, _ := strconv.Atoi(m[1]); n != i+1 {
			t.Fatalf("%s: want number %05d", name, i+1)
		}
	}
}

func files(t *testing.T) []string {
	t.Helper()
	entries, err := fs.ReadDir(migrations.FS(), ".")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	if len(out) == 0 {
		t.Fatal("no migration files embedded")
	}
	return out
}
