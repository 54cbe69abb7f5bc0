#!/usr/bin/env bash
# Offline checks of deploy/ (no cluster, no systemd as PID 1, no network but the first
# install): the systemd unit with `systemd-analyze verify` and its exposure score, the
# Kubernetes manifests against the API schemas that kubernetes-validate bundles.
# Installs kubernetes-validate (pinned) into a venv under NETMETER_PEERS_DIR once; later
# runs take a few seconds. scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

KV_VERSION=1.37.0
# Oldest and newest Kubernetes versions the manifests must validate against.
K8S_VERSIONS=(1.28.0 1.37.0)
# `systemd-analyze security` exposure (0 = locked down, 10 = none): the unit scores 1.4.
MAX_EXPOSURE=2.0

venv="${NETMETER_PEERS_DIR:-/opt/netmeter-peers}/kubernetes-validate-$KV_VERSION"
if [ ! -e "$venv/.complete" ]; then
  echo "validate-deploy.sh: installing kubernetes-validate $KV_VERSION into $venv"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  timeout 600 "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KV_VERSION"
  touch "$venv/.complete"
fi

for v in "${K8S_VERSIONS[@]}"; do
  "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" deploy/kubernetes/*.yaml
done
echo "validate-deploy.sh: deploy/kubernetes/*.yaml valid for Kubernetes ${K8S_VERSIONS[*]}"

unit=deploy/systemd/netmeter.service
if command -v systemd-analyze >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # verify insists that ExecStart's program exists here: point it at one that does.
  bin=$(command -v true)
  [ -x target/release/netmeter ] && bin="$PWD/target/release/netmeter"
  sed "s#/usr/bin/netmeter#$bin#" "$unit" >"$tmp/netmeter.service"
  # Unknown or misspelt settings are only warnings to verify: any output fails here.
  out=$(systemd-analyze verify --man=no "$tmp/netmeter.service" 2>&1) || {
    echo "$out" >&2
    exit 1
  }
  if [ -n "$out" ]; then
    echo "validate-deploy.sh: systemd-analyze verify $unit:" >&2
    echo "$out" >&2
    exit 1
  fi
  score=$(systemd-analyze security --offline=true "$tmp/netmeter.service" 2>&1 |
    sed -n 's/.*Overall exposure level for netmeter.service: \([0-9.]*\).*/\1/p')
  if [ -z "$score" ] || ! awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s <= m) }'; then
    echo "validate-deploy.sh: $unit exposure '${score:-?}' is above $MAX_EXPOSURE" >&2
    exit 1
  fi
  echo "validate-deploy.sh: $unit verified (exposure $score)"
else
  echo "validate-deploy.sh: systemd-analyze not installed; $unit not verified"
fi
