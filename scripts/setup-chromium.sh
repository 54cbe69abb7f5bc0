#!/usr/bin/env bash
# setup-chromium.sh — install Debian's headless-capable `chromium`, which the HTML report
# tests (tests/integration/plots.rs) use to render `netmeter report` output and check
# the screenshot and the DOM. Idempotent: when chromium is installed it only says so.
# Needs root and Debian's package mirror (as scripts/setup-peers.sh).
#
# Environment:
#   NETMETER_APT_LOCK_TIMEOUT  seconds to wait for the system dpkg/apt locks (default 300)
set -euo pipefail

LOCK_TIMEOUT="${NETMETER_APT_LOCK_TIMEOUT:-300}"
log() { echo "setup-chromium: $*" >&2; }

if [[ "$(dpkg-query -W -f='${Status}' chromium 2>/dev/null || true)" == "install ok installed" ]] \
    && command -v chromium >/dev/null 2>&1; then
    log "chromium already installed ($(chromium --version 2>/dev/null || echo '?'))"
    exit 0
fi

# sys_apt: a system apt-get that waits for the dpkg/apt locks.
# shellcheck source=lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"

candidate="$(apt-cache policy chromium 2>/dev/null | awk '/Candidate:/ {print $2; exit}')"
if [[ -z "$candidate" || "$candidate" == "(none)" ]]; then
    log "apt-get update (system)"
    sys_apt update
fi
log "installing chromium"
export DEBIAN_FRONTEND=noninteractive
sys_apt install -y --no-install-recommends chromium
log "installed $(chromium --version 2>/dev/null || echo chromium)"
