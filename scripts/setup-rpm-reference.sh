#!/usr/bin/env bash
# setup-rpm-reference.sh — lay out the responsiveness reference server that `netmeter rpm`
# is tested against: Debian's nginx (extracted from its package, so no service is
# installed or started), a self-signed certificate, the small and large objects, and the
# nginx configuration template written after Apple's reference configuration
# (github.com/network-quality/server, nginx/; see scripts/rpm-reference/nginx.conf.in).
# tests/integration/support/rpm_reference.rs reads the env file this writes and starts
# nginx on a free loopback port under a temporary prefix. Idempotent.
# Needs Debian's package mirror (apt-get download), openssl; root only to write under /opt.
#
# Environment:
#   NETMETER_RPM_REF_DIR  where to lay it out (default /opt/netmeter-rpm-reference)
set -euo pipefail

DIR="${NETMETER_RPM_REF_DIR:-/opt/netmeter-rpm-reference}"
HERE="$(cd "$(dirname "$0")" && pwd)"
log() { echo "setup-rpm-reference: $*" >&2; }
die() { echo "setup-rpm-reference: ERROR: $*" >&2; exit 1; }

command -v openssl >/dev/null || die "openssl is needed (apt-get install openssl)"
mkdir -p "$DIR/certs" "$DIR/root/files"

nginx="$DIR/nginx/usr/sbin/nginx"
if [[ ! -x "$nginx" ]]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    log "downloading Debian's nginx package"
    (cd "$tmp" && apt-get download nginx >/dev/null 2>&1) \
        || { apt-get update >/dev/null 2>&1 && (cd "$tmp" && apt-get download nginx >/dev/null); } \
        || die "apt-get download nginx failed"
    dpkg-deb -x "$tmp"/nginx_*.deb "$DIR/nginx"
fi
"$nginx" -V 2>&1 | grep -q -- --with-http_v2_module || die "$nginx lacks HTTP/2"

if [[ ! -s "$DIR/certs/key.pem" ]]; then
    log "making a self-signed certificate for localhost, 127.0.0.1 and ::1"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$DIR/certs/key.pem" -out "$DIR/certs/cert.pem" -days 3650 \
        -subj "/CN=localhost" \
        -addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" 2>/dev/null
fi

# The small object: 1 byte, as the draft and the reference have it.
printf 'x' >"$DIR/root/files/small"
# The large object: 8 GiB, sparse (zeros, no disk blocks), at least the draft's 8 GB.
truncate -s 8G "$DIR/root/files/large"

cp "$HERE/rpm-reference/nginx.conf.in" "$DIR/nginx.conf.in"
cat >"$DIR/rpm-reference.env" <<ENV
NGINX=$nginx
CERTS=$DIR/certs
ROOT=$DIR/root
TEMPLATE=$DIR/nginx.conf.in
ENV
log "ready: $DIR/rpm-reference.env ($("$nginx" -v 2>&1))"
