#!/usr/bin/env bash
# Installs the Terraform CLI the provider's acceptance tests drive
# (terraform/provider): v1.5.7, built from source into .cache/bin. It does
# nothing when that exact version is already there, so `make tools` stays cheap.
set -euo pipefail

want=1.5.7
. "$(dirname "${BASH_SOURCE[0]}")/../goinstall.sh"

have() { [ -x "$bin/terraform" ] && [ "$(CHECKPOINT_DISABLE=1 "$bin/terraform" version 2>/dev/null | head -n1)" = "Terraform v$want" ]; }
go_install "terraform v$want" "about 2 minutes" "github.com/hashicorp/terraform@v$want"
