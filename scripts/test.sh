#!/usr/bin/env bash
# The whole test suite, on a fresh machine, in two stages (CI runs it: .ci/run).
#
# Stage 1, unprivileged and fast: formatting, clippy -D warnings, cargo doc -D warnings,
# cargo-deny's licence and duplicate checks (when cargo-deny is installed), a build at
# Cargo.toml's rust-version (when that toolchain is installed), then plain `cargo test`:
# the quick tier of every test target (unit tests, the simulator tests, the quick
# integration tests), exactly what a developer's `cargo test` runs. As root it runs with
# every capability dropped (setpriv): the kernel then refuses it what only root may do
# (network namespaces, nftables, real-time priority, privileged socket options), so a
# quick test that needs root fails here instead of passing by accident. Nothing is
# installed before it: a failure there costs no package download.
#
# Stage 2, root and the peers: installs the real peers (iperf3 3.12, 3.18 and 3.22,
# iperf 2, netperf, nftables), Chromium and the packaging tools, builds the release
# binary and the .deb, then runs the full tier: the tests stage 1 listed as ignored
# (`#[cfg_attr(not(feature = "full-tests"), ignore = "full tier: ...")]`, see
# tests/integration/main.rs), one integration module at a time, from the same test
# build (nothing is compiled twice and nothing runs twice), then the deploy files, the
# fuzz targets and the benchmark's smoke run.
#
#   scripts/test.sh           both stages (needs root and Debian's package mirror)
#   scripts/test.sh --quick   stage 1 only (any user, no peers)
set -euo pipefail
cd "$(dirname "$0")/.."

quick_only=0
[ "${1:-}" = "--quick" ] && quick_only=1

if ! command -v cargo >/dev/null 2>&1; then
  echo "test.sh: cargo not found; install Rust (https://rustup.rs) first" >&2
  exit 1
fi
echo "test.sh: $(cargo --version), $(rustc --version)"

stage_start=$(date +%s)
stage() { echo "test.sh: $* ($(( $(date +%s) - stage_start )) s so far)"; }

# ---------------------------------------------------------------------------------
# Stage 1: unprivileged

# Root runs stage 1 without capabilities; anyone else runs it as they are.
unprivileged() {
  if [ "$(id -u)" = 0 ]; then
    setpriv --bounding-set=-all --inh-caps=-all --no-new-privs -- "$@"
  else
    "$@"
  fi
}

stage "stage 1: unprivileged (fmt, clippy, doc, deny, quick tier)"
unprivileged cargo fmt --all -- --check
unprivileged cargo clippy --locked --features full-tests --all-targets -- -D warnings
# No broken intra-doc links.
unprivileged env RUSTDOCFLAGS="-D warnings" cargo doc --locked --features full-tests --no-deps

# Line counts written into file headers ("Length: about N lines") go stale with the
# first edit; none is kept.
if grep -rnE "Length: about [0-9,]+ lines" src tests scripts; then
  echo "test.sh: a file header states its length; remove it (it goes stale)" >&2
  exit 1
fi

# Licences and duplicate versions (deny.toml), where cargo-deny is installed. This
# script does not install it: compiling it took ~7 minutes on a 2-CPU machine, more than
# the rest of this stage.
if cargo deny --version >/dev/null 2>&1; then
  cargo fetch --locked  # every platform's crates, which --offline reads (no advisories)
  unprivileged cargo deny --offline check licenses bans
else
  echo "test.sh: cargo-deny not installed, licence and duplicate checks skipped" \
    "(cargo install --locked cargo-deny)"
fi

# The oldest Rust Cargo.toml declares. rustup cannot download a toolchain on netmeter's
# machines, so this runs only where one of that version is installed already;
# meanwhile clippy's incompatible_msrv lint (above) flags standard-library APIs newer
# than it.
msrv=$(sed -n 's/^rust-version *= *"\([^"]*\)".*/\1/p' Cargo.toml)
if [ -n "$msrv" ] && rustup run "$msrv" rustc --version >/dev/null 2>&1; then
  CARGO_TARGET_DIR=target/msrv unprivileged cargo "+$msrv" check --locked --all-targets
else
  echo "test.sh: no Rust $msrv toolchain installed, the rust-version build is skipped"
fi

# The quick tier: plain `cargo test`, every test target (new ones included, with no
# list to keep here).
quick_start=$(date +%s)
unprivileged cargo test --locked --no-run
run_start=$(date +%s)
unprivileged cargo test --locked
quick_s=$(( $(date +%s) - run_start ))
stage "quick tier passed: tests ran $quick_s s (build $(( run_start - quick_start )) s)"
# Its budget (issue 21): a developer's `cargo test` finishes its tests within 90 s on a
# 2-CPU machine. Over it is said, not failed: a busy host can stretch any run.
if [ "$quick_s" -gt 90 ]; then
  echo "test.sh: warning: the quick tier's tests took $quick_s s, over their 90 s budget;" \
    "move the slowest to the full tier (tests/integration/main.rs)"
fi

if [ "$quick_only" = 1 ]; then
  echo "test.sh: quick stage passed"
  exit 0
fi

# ---------------------------------------------------------------------------------
# Stage 2: root and the peers

stage "stage 2: root and the peers"
./scripts/setup-peers.sh
./scripts/setup-rpm-reference.sh  # nginx as the responsiveness reference server (integration module rpm)
./scripts/setup-chromium.sh  # headless Chromium renders the HTML report (integration module plots)
./scripts/setup-package-tools.sh  # dpkg-dev, man-db, zsh, fish: the .deb and its tests
export NETMETER_PEERS_ENV="${NETMETER_PEERS_DIR:-/opt/netmeter-peers}/peers.env"

cargo build --locked --release
./scripts/build-deb.sh --binary target/release/netmeter  # target/debian/netmeter_*.deb

# The full tier: the tests stage 1 skipped as ignored, from stage 1's test build (an
# ignored test runs with --ignored; the `full-tests` feature only un-ignores them for a
# developer's `cargo test --features full-tests`). A test named `measure_*` is a
# measurement run by hand, not a check. The integration tests run one module
# (tests/integration/main.rs) at a time, as when each was a binary of its own: a
# module's tests only ever run beside each other (the accuracy modules measure rates
# and delays, the interop and end-to-end ones count every byte, and none of them was
# written with another module's load beside it). A filter matches any part of a name,
# so `--skip _$m::` keeps `accuracy::` from also running `latency_accuracy::`.
full=(--ignored --skip ::measure_)
for m in $(sed -n 's/^mod \([a-z0-9_]*\);$/\1/p' tests/integration/main.rs); do
  [ "$m" = support ] && continue
  stage "full tier: integration module $m"
  cargo test --locked --test integration -- "${full[@]}" "$m::" --skip "_$m::"
done
# Every other target's full-tier tests (the unit tests, other files under tests/).
stage "full tier: the other test targets"
cargo test --locked --lib --bins -- "${full[@]}"
for t in tests/*.rs tests/*/main.rs; do
  [ -e "$t" ] || continue
  name=$(basename "$t" .rs)
  [ "$name" = main ] && name=$(basename "$(dirname "$t")")
  [ "$name" = integration ] && continue
  cargo test --locked --test "$name" -- "${full[@]}"
done

stage "deploy files, fuzz targets, benchmark smoke run"
./scripts/validate-deploy.sh  # deploy/: systemd unit and Kubernetes manifests, offline
./scripts/fuzz.sh 10  # every fuzz target for 10 s from its seeds (docs/fuzzing.md)
python3 -m unittest discover -s bench -p 'test_*.py'  # the benchmark's parsers
python3 bench/run.py --smoke  # ~10 s benchmark smoke run; the full run is docs/benchmarks.md's command
./scripts/test-python.sh  # the Python package (python/): built into a fresh venv, its pytest tests

# A short smoke run of the main job, through cargo as the README shows it.
cargo run --locked --release -- --loopback -t 1 >/dev/null
stage "all tests passed"
