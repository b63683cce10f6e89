#!/usr/bin/env bash
# Installs promtool and the Prometheus server, built together from
# github.com/prometheus/prometheus v0.316.0 into .cache/bin:
# - promtool runs the alert rules' unit tests (runbooks/alerts_test.go:
#   `promtool check rules`, `promtool test rules`);
# - prometheus scrapes a running `tenantd dev` and evaluates the same rules
#   against its real metrics (runbooks/prometheus_test.go).
# It does nothing when that exact version of both is already there, so
# `make tools` stays cheap.
#
# Built with -tags remove_all_sd: neither test needs service discovery,
# and leaving out the cloud SDKs (Azure, AWS, GCE, ...) that the plugins
# pull in cuts the build from well over a quarter of an hour on a loaded
# 2-core machine to a few minutes (figures in docs/architecture.md).
set -euo pipefail

want=0.316.0
. "$(dirname "${BASH_SOURCE[0]}")/../goinstall.sh"

current() { [ -x "$bin/$1" ] && "$bin/$1" --version 2>/dev/null | head -n1 | grep -q "version $want"; }
have() { current promtool && current prometheus; }
GOFLAGS=-mod=mod go_install "promtool and prometheus v$want" "" -tags remove_all_sd \
	-ldflags "-X github.com/prometheus/common/version.Version=$want" \
	"github.com/prometheus/prometheus/cmd/promtool@v$want" \
	"github.com/prometheus/prometheus/cmd/prometheus@v$want"
