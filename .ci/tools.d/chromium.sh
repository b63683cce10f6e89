#!/usr/bin/env bash
# Chromium for the console's browser tests (chromedp drives it headless).
# Idempotent: does nothing when a chromium is already on PATH.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi

echo "tools: installing chromium (Debian package)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
command -v chromium >/dev/null 2>&1 || { echo "tools: chromium did not install" >&2; exit 1; }
