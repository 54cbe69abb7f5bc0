#!/usr/bin/env bash
# The Python package (python/, docs/python.md): build it from this checkout into a fresh
# virtual environment and run its pytest tests over loopback. scripts/test.sh runs it in
# its second stage, after the release build, whose binary the tests start as their
# server and whose compiled dependencies the package's release build reuses (same target
# directory, same profile).
#
#   scripts/test-python.sh        (NETMETER_BIN=PATH: the server binary the tests start)
#
# maturin, pytest and matplotlib come from PyPI into target/python-venv, which is made anew each run.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/python-venv
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# matplotlib (with the Agg backend) runs the docs' scenario CDF example as a test.
"$venv/bin/python" -m pip install --quiet "maturin>=1.5,<2" pytest matplotlib

# --no-build-isolation: the maturin just installed builds it (no second download); pip
# finds it on PATH. The dev profile in the main target directory: the dependencies
# compiled for the main crate's tests are reused, and only netmeter's library and the
# extension are compiled (a release build would optimise netmeter once more, minutes on
# a 2-CPU machine, for tests that move little data).
export PATH="$PWD/$venv/bin:$PATH"
export CARGO_TARGET_DIR="$PWD/target"
export MATURIN_PEP517_ARGS="--profile dev"
"$venv/bin/python" -m pip install --quiet --no-build-isolation ./python

if [ -z "${NETMETER_BIN:-}" ] && [ -x target/release/netmeter ]; then
  export NETMETER_BIN="$PWD/target/release/netmeter"
fi
# Each test bounds itself (its -t, deadlines that only bound a failure); this bounds a
# wedged run as a whole. Run from python/tests so the import is the installed package.
cd python/tests
timeout 600 "../../$venv/bin/python" -m pytest -q -p no:cacheprovider .
