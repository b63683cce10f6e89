#!/usr/bin/env bash
# Installs the helm CLI the chart tests drive (deploy/helm/chart_test.go):
# v3.22.0, built from its Go module into .cache/bin. `helm template` needs
# no cluster. It does nothing when that exact version is already there, so
# `make tools` stays cheap.
set -euo pipefail

want=3.22.0
. "$(dirname "${BASH_SOURCE[0]}")/../goinstall.sh"

have() { [ -x "$bin/helm" ] && go version -m "$bin/helm" 2>/dev/null | grep -Eq "^\s+mod\s+helm.sh/helm/v3\s+v$want(\s|$)"; }
GOFLAGS=-mod=mod go_install "helm v$want" "about 12 minutes on a loaded 2-core machine" "helm.sh/helm/v3/cmd/helm@v$want"
