#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs the real peers (iperf3 3.12,
# 3.18 and 3.22, iperf 2, netperf, nftables) and Chromium it needs, then checks formatting, lints
# and runs every test, the full tier included (`--features full-tests`: the tests that
# need root or the peers; plain `cargo test` lists those as ignored, see
# tests/integration/main.rs). Needs root (network namespaces, nftables) and Debian's
# package mirror.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "test.sh: cargo not found; install Rust (https://rustup.rs) first" >&2
  exit 1
fi

./scripts/setup-peers.sh
./scripts/setup-chromium.sh  # headless Chromium renders the HTML report (integration module plots)
./scripts/setup-package-tools.sh  # dpkg-dev, man-db, zsh, fish: the .deb and its tests
export NETMETER_PEERS_ENV="${NETMETER_PEERS_DIR:-/opt/netmeter-peers}/peers.env"

full=(--locked --features full-tests)
cargo fmt --all -- --check
cargo clippy "${full[@]}" --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc "${full[@]}" --no-deps  # no broken intra-doc links
cargo build --locked --release
./scripts/build-deb.sh --binary target/release/netmeter  # target/debian/netmeter_*.deb
cargo test "${full[@]}" --lib --bins
cargo test "${full[@]}" --doc
# The integration tests, one module (tests/integration/main.rs) at a time, as when each
# was a binary of its own: a module's tests only ever run beside each other (the accuracy
# modules measure rates and delays, the interop and end-to-end ones count every byte, and
# none of them was written with another module's load beside it). A filter matches any
# part of a name, so `--skip _$m::` keeps `accuracy::` from also running
# `latency_accuracy::`.
for m in $(sed -n 's/^mod \([a-z0-9_]*\);$/\1/p' tests/integration/main.rs); do
  [ "$m" = support ] && continue
  echo "test.sh: integration module $m"
  cargo test "${full[@]}" --test integration -- "$m::" --skip "_$m::"
done

./scripts/validate-deploy.sh  # deploy/: systemd unit and Kubernetes manifests, offline
./scripts/fuzz.sh 10  # every fuzz target for 10 s from its seeds (docs/fuzzing.md)
python3 -m unittest discover -s bench -p 'test_*.py'  # the benchmark's parsers
python3 bench/run.py --smoke  # ~10 s benchmark smoke run; the full run is docs/benchmarks.md's command

# A short smoke run of the main job, through cargo as the README shows it.
cargo run --locked --release -- --loopback -t 1 >/dev/null
echo "test.sh: all tests passed"
