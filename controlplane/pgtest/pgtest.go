// Package pgtest gives tests their own database on the machine's real
// PostgreSQL server, migrated and dropped again when the test ends. Only
// tests import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/migrations"
)

// AdminURL is the server tests create their databases on:
// $SLUICE_TEST_DATABASE_URL, or the local server with trust authentication.
func AdminURL() string {
	if u := os.Getenv("SLUICE_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// New creates an empty database for this test, applies the migrations, and
// returns its URL. The database is dropped in t.Cleanup.
func New(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("connect to the test PostgreSQL at %s (start it, or set SLUICE_TEST_DATABASE_URL): %v", AdminURL(), err)
	}
	defer admin.Close(context.Background())

	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "sluice_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, AdminURL())
		if err != nil {
			t.Errorf("drop test database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})

	u, err := url.Parse(AdminURL())
	if err != nil {
		t.Fatalf("parse %s: %v", AdminURL(), err)
	}
	u.Path = "/" + name
	dbURL := u.String()

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	defer pool.Close()
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatalf("migrate test database: %v", err)
	}
	return dbURL
}

// Pool is New plus a pool on the new database, closed in t.Cleanup.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := New(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
