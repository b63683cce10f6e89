#!/usr/bin/env bash
# Installs promtool, which runs the alert rules' unit tests
# (runbooks/alerts_test.go: `promtool test rules`): built from
# github.com/prometheus/prometheus v0.316.0 into .cache/bin. It does nothing
# when that exact version is already there, so `make tools` stays cheap.
#
# Built with -tags remove_all_sd: the rule tests need no service discovery,
# and leaving out the cloud SDKs (Azure, AWS, GCE, ...) that the plugins
# pull in cuts the build from well over a quarter of an hour on a loaded
# 2-core machine to a few minutes (figures in the issue 20 report and
# docs/architecture.md).
set -euo pipefail

want=0.316.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$root/.cache/bin/promtool"

if [ -x "$bin" ] && "$bin" --version 2>/dev/null | head -n1 | grep -q "version $want"; then
	exit 0
fi

echo "installing promtool v$want into $root/.cache/bin" >&2
mkdir -p "$root/.cache/bin"
GOBIN="$root/.cache/bin" GOFLAGS=-mod=mod go install -tags remove_all_sd \
	-ldflags "-X github.com/prometheus/common/version.Version=$want" \
	"github.com/prometheus/prometheus/cmd/promtool@v$want"
