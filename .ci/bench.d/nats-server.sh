#!/usr/bin/env bash
# Installs the NATS server that `make bench` compares Sluice with
# (cmd/compare): v2.15.2, built from source into .cache/bin (Debian's
# package is the old 2.9, without the JetStream settings the comparison uses).
# It does nothing when that exact version is already there. Only `make bench`
# runs this script; `make test` does not need NATS.
set -euo pipefail

want=2.15.2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$root/.cache/bin/nats-server"

if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "nats-server: v$want" ]; then
	exit 0
fi

echo "installing nats-server v$want into $root/.cache/bin (about 2 minutes)" >&2
mkdir -p "$root/.cache/bin"
GOBIN="$root/.cache/bin" go install "github.com/nats-io/nats-server/v2@v$want"
