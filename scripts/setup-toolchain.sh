#!/usr/bin/env bash
# Makes the toolchain pinned in rust-toolchain.toml available without a download.
# netmeter's machines reach no rustup server: rustup there has the pinned version only
# as its `stable` toolchain, and refuses to run cargo in this checkout until a toolchain
# of the pinned name exists. When `stable` is that very version, the pinned name is
# made a link to it (the layout rustup itself uses for an installed toolchain); when
# it is another version, this says which to pin and fails. Idempotent, offline, fast.
set -euo pipefail
cd "$(dirname "$0")/.."

want=$(sed -n 's/^channel *= *"\([^"]*\)".*/\1/p' rust-toolchain.toml)
[ -n "$want" ] || { echo "setup-toolchain.sh: no channel in rust-toolchain.toml" >&2; exit 1; }
if ! command -v rustup >/dev/null 2>&1; then
  # No rustup: a plain cargo ignores rust-toolchain.toml; say what it runs.
  echo "setup-toolchain.sh: no rustup; using $(cargo --version) as installed"
  exit 0
fi
if rustup run "$want" rustc --version >/dev/null 2>&1; then
  exit 0
fi
host=$(rustc +stable -vV | sed -n 's/^host: //p')
have=$(rustc +stable --version | awk '{print $2}')
if [ "$have" != "$want" ]; then
  echo "setup-toolchain.sh: rust-toolchain.toml pins $want, but this machine's stable is" \
    "$have and rustup cannot download here; pin $have (channel = \"$have\")" >&2
  exit 1
fi
home="${RUSTUP_HOME:-$HOME/.rustup}"
sysroot=$(rustc +stable --print sysroot)
ln -sfn "$sysroot" "$home/toolchains/$want-$host"
rustup run "$want" rustc --version >/dev/null
echo "setup-toolchain.sh: $want is this machine's stable toolchain; linked as $want-$host"
