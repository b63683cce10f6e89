#!/usr/bin/env bash
# Installs the helm CLI the chart tests drive (deploy/helm/chart_test.go):
# v3.22.0, built from its Go module into .cache/bin. `helm template` needs
# no cluster. It does nothing when that exact version is already there, so
# `make tools` stays cheap.
set -euo pipefail

want=3.22.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$root/.cache/bin/helm"

if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -Eq "^\s+mod\s+helm.sh/helm/v3\s+v$want(\s|$)"; then
	exit 0
fi

echo "installing helm v$want into $root/.cache/bin (about 12 minutes on a loaded 2-core machine)" >&2
mkdir -p "$root/.cache/bin"
GOBIN="$root/.cache/bin" GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@v$want"
