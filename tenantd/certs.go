package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/dataplane/peercert"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

const certsUsage = `usage: tenantd certs <ca|node> [flags]

  ca    make a cell's CA: -cell <id> -dir <dir> writes dir/ca.pem and dir/ca-key.pem
  node  issue a broker's Raft transport certificate with the CA in -dir:
        -node-id <n> (the broker's node id in the cell state) [-host a,b]
        writes dir/node-<n>.pem and dir/node-<n>-key.pem

Give a broker -peer-ca-file dir/ca.pem, -peer-cert-file and -peer-key-file;
keep ca-key.pem off the brokers.
`

// certs makes the Raft transport's certificates for operators.
func certs(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(certsUsage)
	}
	fs := flag.NewFlagSet("tenantd certs "+args[0], flag.ContinueOnError)
	dir := fs.String("dir", ".", "directory of the CA files (and of the node files written)")
	cell := fs.String("cell", "", "ca: the cell's id")
	node := fs.Int("node-id", 0, "node: the broker's node id")
	hosts := fs.String("host", "", "node: comma-separated IP addresses or DNS names to add to the certificate (informational: peers check the node id)")
	valid := fs.Duration("valid", peercert.DefaultValidity, "how long the certificate is valid")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	caCert, caKey := filepath.Join(*dir, "ca.pem"), filepath.Join(*dir, "ca-key.pem")
	switch args[0] {
	case "ca":
		if *cell == "" {
			return errors.New("certs ca: -cell is required")
		}
		ca, err := peercert.NewCA(*cell, *valid)
		if err != nil {
			return err
		}
		if err := ca.WriteFiles(caCert, caKey); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s and %s (cell %s, valid until %s)\n", caCert, caKey, *cell, ca.Cert.NotAfter.Format(time.DateOnly))
		return nil
	case "node":
		if *node <= 0 {
			return errors.New("certs node: -node-id is required")
		}
		ca, err := peercert.LoadCA(caCert, caKey)
		if err != nil {
			return err
		}
		id := string(replicas.ServerID(*node))
		var hs []string
		if *hosts != "" {
			hs = strings.Split(*hosts, ",")
		}
		kp, err := ca.Issue(id, hs, *valid)
		if err != nil {
			return err
		}
		cert, key := filepath.Join(*dir, "node-"+strconv.Itoa(*node)+".pem"), filepath.Join(*dir, "node-"+strconv.Itoa(*node)+"-key.pem")
		if err := kp.WriteFiles(cert, key); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s and %s (%s)\n", cert, key, peercert.NodeURI(ca.CellID, id))
		return nil
	}
	return fmt.Errorf("certs: unknown command %q\n\n%s", args[0], certsUsage)
}
