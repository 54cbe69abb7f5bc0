#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs the real peers (iperf3 3.12,
# 3.18 and 3.22, iperf 2, nftables) it needs, then checks formatting, lints and runs every test.
# Needs root (network namespaces, nftables) and Debian's package mirror.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "test.sh: cargo not found; install Rust (https://rustup.rs) first" >&2
  exit 1
fi

./scripts/setup-peers.sh
export NETMETER_PEERS_ENV="${NETMETER_PEERS_DIR:-/opt/netmeter-peers}/peers.env"

cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
cargo build --locked --release
cargo test --locked
python3 bench/run.py --smoke  # ~10 s benchmark smoke run; the full run is docs/benchmarks.md's command

# A short smoke run of the main job, through cargo as the README shows it.
cargo run --locked --release -- --loopback -t 1 >/dev/null
echo "test.sh: all tests passed"
