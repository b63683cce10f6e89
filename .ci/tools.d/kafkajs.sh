#!/usr/bin/env bash
# Installs kafkajs, the pure-JavaScript Kafka client, which
# tenantd/kafkajs_test.go points at a real `tenantd dev`: a third client
# implementation beside franz-go and librdkafka (kcat). Node.js and npm
# come from Debian when missing; kafkajs (no dependencies of its own) from
# the npm registry into .cache/kafkajs. Does nothing when that exact
# version is already there.
set -euo pipefail

want=2.2.4
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$root/.cache/kafkajs"
pkg="$dir/node_modules/kafkajs/package.json"

if command -v node >/dev/null 2>&1 && [ "$(node -p "require('$pkg').version" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "tools: installing nodejs and npm (Debian packages)"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -qq nodejs npm >/dev/null 2>&1 || {
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq nodejs npm >/dev/null
  }
fi
echo "tools: installing kafkajs $want into .cache/kafkajs"
mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --no-save --silent "kafkajs@$want"
[ "$(node -p "require('$pkg').version")" = "$want" ] || { echo "tools: kafkajs $want did not install" >&2; exit 1; }
