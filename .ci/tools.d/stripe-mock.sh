#!/usr/bin/env bash
# Installs stripe-mock, the Stripe API double the billing tests send meter
# events to (billing/stripe_test.go): v0.203.0, the first that serves
# /v1/billing/meters and /v1/billing/meter_events, built from source into
# .cache/bin. It does nothing when that exact version is already there, so
# `make tools` stays cheap.
set -euo pipefail

want=0.203.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$root/.cache/bin/stripe-mock"
stamp="$root/.cache/bin/stripe-mock.version"

if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	exit 0
fi

echo "installing stripe-mock v$want into $root/.cache/bin (under a minute)" >&2
mkdir -p "$root/.cache/bin"
GOBIN="$root/.cache/bin" go install "github.com/stripe/stripe-mock@v$want"
echo "$want" >"$stamp"
