#!/usr/bin/env bash
# kcat (librdkafka's command-line client): the Kafka listener's tests produce
# and consume with it. Installs the Debian package if it is missing.
set -euo pipefail
if command -v kcat >/dev/null 2>&1; then
	exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y kcat || { $SUDO apt-get update && $SUDO apt-get install -y kcat; }
command -v kcat >/dev/null
