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

# Wait for the apt/dpkg locks rather than fail when another install runs.
apt_retry() {
    local deadline=$((SECONDS + LOCK_TIMEOUT)) out rc
    while :; do
        rc=0
        out="$(apt-get -o DPkg::Lock::Timeout="$LOCK_TIMEOUT" "$@" 2>&1)" || rc=$?
        if [[ $rc -ne 0 ]] && grep -qE 'Could not get lock|Unable to lock' <<<"$out" \
            && (( SECONDS < deadline )); then
            log "apt lock busy, waiting..."
            sleep 5
            continue
        fi
        [[ $rc -ne 0 ]] && printf '%s\n' "$out" >&2
        return "$rc"
    done
}

candidate="$(apt-cache policy chromium 2>/dev/null | awk '/Candidate:/ {print $2; exit}')"
if [[ -z "$candidate" || "$candidate" == "(none)" ]]; then
    log "apt-get update (system)"
    apt_retry update
fi
log "installing chromium"
export DEBIAN_FRONTEND=noninteractive
apt_retry install -y --no-install-recommends chromium
log "installed $(chromium --version 2>/dev/null || echo chromium)"
