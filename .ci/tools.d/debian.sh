#!/usr/bin/env bash
# The Debian packages the tests drive: kcat (librdkafka's client, for the
# Kafka listener), chromium (the console's browser tests, headless), and
# curl and jq (the README tour, run as written). Installs only what is
# missing; idempotent.
set -euo pipefail

missing=()
for p in kcat chromium curl jq; do
  command -v "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "tools: installing ${missing[*]} (Debian packages)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || {
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
}
for p in "${missing[@]}"; do
  command -v "$p" >/dev/null 2>&1 || { echo "tools: $p did not install" >&2; exit 1; }
done
