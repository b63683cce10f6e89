#!/usr/bin/env bash
# Installs stripe-mock, the Stripe API double the billing tests send meter
# events to (billing/stripe_test.go): v0.203.0, the first that serves
# /v1/billing/meters and /v1/billing/meter_events, built from source into
# .cache/bin. It does nothing when that exact version is already there, so
# `make tools` stays cheap.
set -euo pipefail

want=0.203.0
. "$(dirname "${BASH_SOURCE[0]}")/../goinstall.sh"
stamp="$bin/stripe-mock.version"

have() { [ -x "$bin/stripe-mock" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; }
if have; then
	exit 0
fi
go_install "stripe-mock v$want" "under a minute" "github.com/stripe/stripe-mock@v$want"
echo "$want" >"$stamp"
