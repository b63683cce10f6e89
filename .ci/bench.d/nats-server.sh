#!/usr/bin/env bash
# Installs the NATS server that `make bench` compares Sluice with
# (cmd/compare): v2.15.2, built from source into .cache/bin (Debian's
# package is the old 2.9, without the JetStream settings the comparison uses).
# It does nothing when that exact version is already there. Only `make bench`
# runs this script; `make test` does not need NATS.
set -euo pipefail

want=2.15.2
. "$(dirname "${BASH_SOURCE[0]}")/../goinstall.sh"

have() { [ -x "$bin/nats-server" ] && [ "$("$bin/nats-server" --version 2>/dev/null)" = "nats-server: v$want" ]; }
go_install "nats-server v$want" "about 2 minutes" "github.com/nats-io/nats-server/v2@v$want"
