package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// The fleet's operator commands: create pools, cells, brokers and cell
// keys (listing them lives in admin.go). Each checks its input before it
// calls the control plane, so bad input changes nothing and says what is
// wrong; the control plane checks again.

// fleetUsage is admin's usage lines for the fleet commands.
const fleetUsage = `  pools create POOL_ID -kind shared|dedicated [-description TEXT]
  cells create CELL_ID -pool POOL_ID
  cells key CELL_ID                  make a cell key; prints id:secret once (the brokers' -cell-key)
  brokers create BROKER_ID -cell CELL_ID -node-id N [-kafka-addr H:P] [-http-addr H:P] [-raft-addr H:P]
  brokers update BROKER_ID [-kafka-addr H:P] [-http-addr H:P] [-raft-addr H:P] [-status active|draining|offline]
`

// fleetIDRE is the control plane's rule for pool, cell and broker ids.
var fleetIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// adminFleet runs a fleet command; handled is false for any other command.
func adminFleet(ctx context.Context, c *client.Client, p printer, out io.Writer, rest []string) (handled bool, err error) {
	switch rest[0] + " " + rest[1] {
	case "pools create":
		return true, poolCreate(ctx, c, p, out, rest)
	case "cells create":
		return true, cellCreate(ctx, c, p, out, rest)
	case "cells key":
		return true, cellKey(ctx, c, p, rest)
	case "brokers create":
		return true, brokerCreate(ctx, c, p, out, rest)
	case "brokers update":
		return true, brokerUpdate(ctx, c, p, out, rest)
	}
	return false, nil
}

func fleetID(rest []string, name, kind string) (string, error) {
	id, err := arg(rest, 2, name)
	if err != nil {
		return "", err
	}
	if !fleetIDRE.MatchString(id) {
		return "", fmt.Errorf("admin: %s id %q: 1 to 63 lowercase letters, digits and hyphens, starting with a letter or digit", kind, id)
	}
	return id, nil
}

func parseSub(name string, out io.Writer, args []string, define func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	define(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("admin: %s: %w", name, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("admin: %s: unexpected arguments %s", name, strings.Join(fs.Args(), " "))
	}
	return nil
}

func poolCreate(ctx context.Context, c *client.Client, p printer, out io.Writer, rest []string) error {
	id, err := fleetID(rest, "POOL_ID", "pool")
	if err != nil {
		return err
	}
	req := api.CreatePoolRequest{ID: id}
	if err := parseSub("pools create", out, rest[3:], func(fs *flag.FlagSet) {
		fs.StringVar(&req.Kind, "kind", "", "shared (many tenants) or dedicated (one tenant)")
		fs.StringVar(&req.Description, "description", "", "what the pool is for")
	}); err != nil {
		return err
	}
	if req.Kind != "shared" && req.Kind != "dedicated" {
		return fmt.Errorf("admin: pools create: -kind %q: want shared or dedicated", req.Kind)
	}
	pool, err := c.AdminCreatePool(ctx, req)
	if err != nil {
		return err
	}
	return p.value(pool)
}

func cellCreate(ctx context.Context, c *client.Client, p printer, out io.Writer, rest []string) error {
	id, err := fleetID(rest, "CELL_ID", "cell")
	if err != nil {
		return err
	}
	req := api.CreateCellRequest{ID: id}
	if err := parseSub("cells create", out, rest[3:], func(fs *flag.FlagSet) {
		fs.StringVar(&req.PoolID, "pool", "", "the pool the cell belongs to")
	}); err != nil {
		return err
	}
	if req.PoolID == "" {
		return errors.New("admin: cells create: -pool is required")
	}
	cell, err := c.AdminCreateCell(ctx, req)
	if err != nil {
		return err
	}
	return p.value(cell)
}

// cellKey makes a cell key and prints it once: as id:secret in a table,
// the whole key with -o json.
func cellKey(ctx context.Context, c *client.Client, p printer, rest []string) error {
	id, err := fleetID(rest, "CELL_ID", "cell")
	if err != nil {
		return err
	}
	if len(rest) > 3 {
		return fmt.Errorf("admin: cells key: unexpected arguments %s", strings.Join(rest[3:], " "))
	}
	k, err := c.AdminCreateCellKey(ctx, id)
	if err != nil {
		return err
	}
	if p.json {
		return p.value(k)
	}
	_, err = fmt.Fprintf(p.w, "%s:%s\n", k.ID, k.Secret)
	return err
}

// addrFlags defines the broker address flags, checking each is host:port.
type addrFlags struct{ kafka, http, raft string }

func (a *addrFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&a.kafka, "kafka-addr", "", "Kafka address clients are told (host:port)")
	fs.StringVar(&a.http, "http-addr", "", "HTTP data API address (host:port)")
	fs.StringVar(&a.raft, "raft-addr", "", "Raft transport address peers dial (host:port)")
}

func (a *addrFlags) check(cmd string) error {
	for _, f := range []struct{ name, v string }{{"kafka-addr", a.kafka}, {"http-addr", a.http}, {"raft-addr", a.raft}} {
		if f.v == "" {
			continue
		}
		if h, port, err := net.SplitHostPort(f.v); err != nil || h == "" || port == "" {
			return fmt.Errorf("admin: %s: -%s %q is not host:port", cmd, f.name, f.v)
		}
	}
	return nil
}

func brokerCreate(ctx context.Context, c *client.Client, p printer, out io.Writer, rest []string) error {
	id, err := fleetID(rest, "BROKER_ID", "broker")
	if err != nil {
		return err
	}
	req := api.CreateBrokerRequest{ID: id}
	var a addrFlags
	if err := parseSub("brokers create", out, rest[3:], func(fs *flag.FlagSet) {
		fs.StringVar(&req.CellID, "cell", "", "the broker's cell")
		fs.IntVar(&req.NodeID, "node-id", 0, "the broker's node id in its cell (1 to 1048576; the Raft certificate's)")
		a.define(fs)
	}); err != nil {
		return err
	}
	if req.CellID == "" {
		return errors.New("admin: brokers create: -cell is required")
	}
	if req.NodeID < 1 || req.NodeID > 1<<20 {
		return fmt.Errorf("admin: brokers create: -node-id %d: want 1 to 1048576", req.NodeID)
	}
	if err := a.check("brokers create"); err != nil {
		return err
	}
	req.KafkaAddr, req.HTTPAddr, req.RaftAddr = a.kafka, a.http, a.raft
	b, err := c.AdminCreateBroker(ctx, req)
	if err != nil {
		return err
	}
	return p.value(b)
}

func brokerUpdate(ctx context.Context, c *client.Client, p printer, out io.Writer, rest []string) error {
	id, err := fleetID(rest, "BROKER_ID", "broker")
	if err != nil {
		return err
	}
	var a addrFlags
	var status string
	set := map[string]bool{}
	fs := flag.NewFlagSet("brokers update", flag.ContinueOnError)
	fs.SetOutput(out)
	a.define(fs)
	fs.StringVar(&status, "status", "", "active, draining or offline")
	if err := fs.Parse(rest[3:]); err != nil {
		return fmt.Errorf("admin: brokers update: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("admin: brokers update: unexpected arguments %s", strings.Join(fs.Args(), " "))
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if len(set) == 0 {
		return errors.New("admin: brokers update: give at least one of -kafka-addr, -http-addr, -raft-addr, -status")
	}
	if err := a.check("brokers update"); err != nil {
		return err
	}
	if set["status"] && status != "active" && status != "draining" && status != "offline" {
		return fmt.Errorf("admin: brokers update: -status %q: want active, draining or offline", status)
	}
	var req api.UpdateBrokerRequest
	for name, dst := range map[string]**string{"kafka-addr": &req.KafkaAddr, "http-addr": &req.HTTPAddr, "raft-addr": &req.RaftAddr, "status": &req.Status} {
		if set[name] {
			v := map[string]string{"kafka-addr": a.kafka, "http-addr": a.http, "raft-addr": a.raft, "status": status}[name]
			*dst = &v
		}
	}
	b, err := c.AdminUpdateBroker(ctx, id, req)
	if err != nil {
		return err
	}
	return p.value(b)
}
