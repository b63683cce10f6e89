package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	devDatabase    = "sluice_dev"
	privatePGPort  = 54329
	systemPGServer = "127.0.0.1:5432"
)

// devPostgres finds or starts the Postgres for dev mode and returns the URL
// of its sluice_dev database, plus a function that stops what it started.
func devPostgres(ctx context.Context, cfg Config, log *slog.Logger) (string, func(), error) {
	noop := func() {}
	if cfg.DatabaseURL != "" {
		return cfg.DatabaseURL, noop, nil
	}
	if !cfg.PrivatePostgres && answers(systemPGServer) {
		admin := "postgres://postgres@" + systemPGServer + "/postgres?sslmode=disable"
		u, err := ensureDatabase(ctx, admin, devDatabase)
		if err != nil {
			return "", noop, fmt.Errorf("use the Postgres on %s (set DATABASE_URL to use another): %w", systemPGServer, err)
		}
		log.Info("using the local Postgres", "addr", systemPGServer, "database", devDatabase)
		return u, noop, nil
	}
	return startPrivatePostgres(ctx, cfg.DataDir, log)
}

func answers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// ensureDatabase creates db on the server of adminURL if it is missing and
// returns its URL.
func ensureDatabase(ctx context.Context, adminURL, db string) (string, error) {
	c, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer c.Close(context.Background())
	var exists bool
	if err := c.QueryRow(ctx, `SELECT true FROM pg_database WHERE datname = $1`, db).Scan(&exists); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("look up database %s: %w", db, err)
	}
	if !exists {
		if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", db, err)
		}
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + db
	return u.String(), nil
}

// pgBinDir finds the directory of initdb and pg_ctl: on PATH, or in
// Debian's /usr/lib/postgresql/<version>/bin (the newest).
func pgBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no Postgres is configured, none answers on 127.0.0.1:5432, and PostgreSQL's programs (initdb, pg_ctl) are not installed; install them with `sudo apt-get install -y postgresql`, or set DATABASE_URL")
}

// startPrivatePostgres runs a Postgres cluster of its own under dataDir/pg on
// 127.0.0.1:54329, initialising it on first use.
func startPrivatePostgres(ctx context.Context, dataDir string, log *slog.Logger) (string, func(), error) {
	noop := func() {}
	bin, err := pgBinDir()
	if err != nil {
		return "", noop, err
	}
	dir, err := filepath.Abs(filepath.Join(dataDir, "pg"))
	if err != nil {
		return "", noop, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", noop, fmt.Errorf("create %s: %w", dir, err)
	}
	// Postgres refuses to run as root; as root, run it as the postgres user.
	var asUser []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", noop, errors.New("running as root, and there is no postgres user to run a private Postgres as; run as a normal user or set DATABASE_URL")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := chownAll(dir, uid, gid); err != nil {
			return "", noop, err
		}
		// The postgres user must be able to reach its directory.
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			return "", noop, err
		}
		asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	pg := func(name string, args ...string) *exec.Cmd {
		full := append(append(slices.Clone(asUser), filepath.Join(bin, name)), args...)
		return exec.CommandContext(ctx, full[0], full[1:]...)
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		log.Info("initialising a private Postgres", "dir", dir)
		if out, err := pg("initdb", "-D", dir, "-U", "sluice", "-A", "trust", "--no-sync").CombinedOutput(); err != nil {
			return "", noop, fmt.Errorf("initdb: %w: %s", err, out)
		}
	}
	if pg("pg_ctl", "-D", dir, "status").Run() != nil {
		log.Info("starting the private Postgres", "port", privatePGPort)
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", privatePGPort, dir)
		if out, err := pg("pg_ctl", "-D", dir, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o", opts, "start").CombinedOutput(); err != nil {
			return "", noop, fmt.Errorf("start private Postgres (log in %s): %w: %s", filepath.Join(dir, "server.log"), err, out)
		}
	}
	stop := func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		full := append(slices.Clone(asUser), filepath.Join(bin, "pg_ctl"), "-D", dir, "-m", "fast", "-w", "stop")
		if out, err := exec.CommandContext(stopCtx, full[0], full[1:]...).CombinedOutput(); err != nil {
			log.Warn("stop private Postgres", "err", err, "output", string(out))
		}
	}
	admin := fmt.Sprintf("postgres://sluice@127.0.0.1:%d/postgres?sslmode=disable", privatePGPort)
	u, err := ensureDatabase(ctx, admin, devDatabase)
	if err != nil {
		stop()
		return "", noop, err
	}
	return u, stop, nil
}

func chownAll(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
