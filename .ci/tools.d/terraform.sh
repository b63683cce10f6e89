#!/usr/bin/env bash
# Installs the Terraform CLI the provider's acceptance tests drive
# (terraform/provider): v1.5.7, built from source into .cache/bin. It does
# nothing when that exact version is already there, so `make tools` stays cheap.
set -euo pipefail

want=1.5.7
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$root/.cache/bin/terraform"

if [ -x "$bin" ] && [ "$(CHECKPOINT_DISABLE=1 "$bin" version 2>/dev/null | head -n1)" = "Terraform v$want" ]; then
	exit 0
fi

echo "installing terraform v$want into $root/.cache/bin (about 2 minutes)" >&2
mkdir -p "$root/.cache/bin"
GOBIN="$root/.cache/bin" go install "github.com/hashicorp/terraform@v$want"
