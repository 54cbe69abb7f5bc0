#!/usr/bin/env bash
# Bounded fuzz run of every cargo-fuzz target in fuzz/ (docs/fuzzing.md): builds them,
# then runs each for SECONDS (default 10) from its committed seed corpus. A crash, a
# panic, a hang (-timeout) or a memory blow-up (-rss_limit_mb) fails the run, and the
# input that did it is left in fuzz/artifacts/<target>/.
#
# Works without a nightly toolchain: cargo-fuzz needs nightly-only flags, which stable
# rustc accepts with RUSTC_BOOTSTRAP=1 (a fresh machine has only stable). Installs
# cargo-fuzz (pinned, --locked) when missing. The build goes to a target directory
# outside the checkout ($NETMETER_FUZZ_TARGET_DIR, default ~/.cache/netmeter-fuzz), so a
# machine that ran it once rebuilds only netmeter itself.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-10}"
shift || true
CARGO_FUZZ_VERSION=0.13.2

if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION"; then
  cargo install --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi

# The toolchain in use (rust-toolchain files, rustup default): stable unless told.
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${NETMETER_FUZZ_TARGET_DIR:-${HOME:-/tmp}/.cache/netmeter-fuzz}"
# -s none: no AddressSanitizer. The targets run safe Rust (the crate's only unsafe code,
# src/sock/, is not reached), where ASan finds nothing the Rust checks would not, at
# twice the build time and half the speed. Overflow checks and debug assertions stay on.
flags=(--fuzz-dir fuzz -s none --debug-assertions)

# cargo fuzz has no --locked: check fuzz/Cargo.lock is current first, as --locked would.
cargo metadata --locked --manifest-path fuzz/Cargo.toml --format-version 1 >/dev/null
cargo fuzz build "${flags[@]}"

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "$work/$t" "fuzz/artifacts/$t"
  echo "fuzz.sh: $t for ${secs}s"
  # New inputs go to the scratch corpus (first directory); the seeds stay as committed.
  status=0
  cargo fuzz run "${flags[@]}" "$t" "$work/$t" "fuzz/corpus/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 >"$work/$t.log" 2>&1 || status=$?
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$work/$t.log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$work/$t.log" >&2
    echo "fuzz.sh: $t failed; the input is in fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
echo "fuzz.sh: ${#targets[@]} targets ran ${secs}s each without a failure"
