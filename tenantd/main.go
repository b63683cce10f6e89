// Command tenantd is the one Sluice binary. Its roles are subcommands:
//
//	tenantd dev           control plane on a local Postgres, for a laptop
//	tenantd controlplane  the control plane's HTTP API
//	tenantd broker        one broker of a cell
//	tenantd billing       the billing worker: ledger pruning, Stripe reporting
//	tenantd migrate       apply the control plane's schema migrations
//	tenantd admin ...     operator commands over the API
//	tenantd certs ...     make the Raft transport's CA and broker certificates
//
// main only parses flags, loads config and calls run; wiring of subsystems
// lives in this package and nowhere else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: tenantd <command> [flags]

commands:
  dev           run the control plane on a local Postgres (starting one if needed)
  controlplane  serve the control plane API
  broker        run one broker of a cell
  billing       run the billing worker (prunes the usage ledger, reports it to Stripe)
  migrate       apply schema migrations and exit
  admin         operator commands over the API (tenantd admin help)
  certs         make a cell's Raft CA and broker certificates (tenantd certs)

Run "tenantd <command> -h" for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "dev", "controlplane", "migrate", "broker", "billing":
		var cfg Config
		cfg, err = loadConfig(cmd, args, os.Getenv)
		if err == nil {
			err = run(ctx, cmd, cfg)
		}
	case "admin":
		err = admin(ctx, args, os.Stdout, os.Getenv)
	case "certs":
		err = certs(args, os.Stdout)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		err = fmt.Errorf("unknown command %q\n\n%s", cmd, usage)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the flags were printed
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "tenantd:", err)
		os.Exit(1)
	}
}
