#!/usr/bin/env bash
# setup-package-tools.sh — the system tools scripts/build-deb.sh and the package tests
# (tests/integration/package.rs) need: dpkg-dev (dpkg-shlibdeps computes Depends),
# man-db (man -l renders the generated pages), zsh and fish (the generated completions
# are loaded and asked for completions). dpkg-deb, apt-get and bash are part of every
# Debian system.
#
# Idempotent and fast when everything is there: it only calls apt-get for a tool that is
# missing. Needs root and Debian's package mirror in that case.
# Environment: NETMETER_APT_LOCK_TIMEOUT  seconds to wait for the dpkg/apt locks (default 300)

set -euo pipefail

LOCK_TIMEOUT="${NETMETER_APT_LOCK_TIMEOUT:-300}"
export DEBIAN_FRONTEND=noninteractive

# tool -> the Debian package that provides it
missing=()
command -v dpkg-shlibdeps >/dev/null 2>&1 || missing+=(dpkg-dev)
command -v man >/dev/null 2>&1 || missing+=(man-db)
command -v zsh >/dev/null 2>&1 || missing+=(zsh)
command -v fish >/dev/null 2>&1 || missing+=(fish)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "setup-package-tools: ${missing[*]} missing; run as root to install them" >&2
    exit 1
fi
echo "setup-package-tools: installing ${missing[*]}" >&2
log() { echo "setup-package-tools: $*" >&2; }
# shellcheck source=lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"
sys_apt -q update
sys_apt -q install -y --no-install-recommends "${missing[@]}"
