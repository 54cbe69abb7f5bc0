#!/usr/bin/env bash
# Where the CPU goes: perf profiles (software cpu-clock sampling; this VM has no hardware
# counters) of netmeter and its peer on the same workload, on 127.0.0.1 only.
#   bench/profile.sh [SECONDS]     (needs perf; run after `cargo build --release`)
# Prints, per workload and tool, the share of samples in the kernel vs the tool's own code
# and the top symbols. The summary of a run is in bench/analysis.md.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-3}
NM=target/release/netmeter
# shellcheck disable=SC1090
source "${NETMETER_PEERS_ENV:-/opt/netmeter-peers/peers.env}"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
command -v perf >/dev/null || { echo "profile.sh: perf is not installed" >&2; exit 1; }
[ -x "$NM" ] || { echo "profile.sh: build first (cargo build --release)" >&2; exit 1; }

port=$((20000 + RANDOM % 20000))
show() { # $1 = perf data, $2 = title
  echo "== $2"
  perf report -i "$1" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9.]+%' | head -4 || true
  perf report -i "$1" --no-children --sort sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9.]+%' | head -6 || true
}
# $1 title, $2 server cpu, $3 client cpu, $4.. client argv (server started by the caller)
profile_client() {
  local title=$1 data=$OUT/$RANDOM.data; shift
  perf record -q -e cpu-clock -F 4999 -g -o "$data" -- "$@" >/dev/null 2>&1 || true
  show "$data" "$title"
}
server() { # start a one-test server pinned to CPU $1; sets SPID
  local cpu=$1; shift
  taskset -c "$cpu" "$@" >/dev/null 2>&1 & SPID=$!
  sleep 0.4
}
endserver() { kill "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; port=$((port + 1)); }

# 1. TCP one stream: the sender with default flags and with --skip-rx-copy (then the sender
#    is the busy side), and the receiver (-R: the profiled client receives), against the
#    newest iperf3 installed.
I3=${NETMETER_IPERF3_322:-$NETMETER_IPERF3_318}
for flags in "" "--skip-rx-copy" "-R"; do
  for tool in netmeter iperf3; do
    bin=$NM; [ $tool = iperf3 ] && bin=$I3
    server 1 "$bin" -s -1 -p $port
    # shellcheck disable=SC2086
    profile_client "TCP 1 stream, $tool client, flags '${flags:-default}'" taskset -c 0 "$bin" -c 127.0.0.1 -p $port -t "$T" $flags
    endserver
  done
done
# netmeter -Z on loopback: where the zero-copy send's time goes.
server 1 "$NM" -s -1 -p $port
profile_client "TCP 1 stream, netmeter client -Z --skip-rx-copy" taskset -c 0 "$NM" -c 127.0.0.1 -p $port -t "$T" -Z --skip-rx-copy
endserver
# 2. Request/response, 1 byte, client and server on different cores.
server 1 "$NM" -s -1 -p $port
profile_client "RR 1 byte, netmeter --bounceback client, cpu0/cpu1" taskset -c 0 "$NM" -c 127.0.0.1 -p $port -t "$T" --bounceback --bounceback-request 1
endserver
server 1 "$NETMETER_NETSERVER" -D -f -4 -L 127.0.0.1 -p $port
profile_client "RR 1 byte, netperf TCP_RR client, cpu0/cpu1" taskset -c 0 "$NETMETER_NETPERF" -H 127.0.0.1 -p $port -t TCP_RR -l "$T" -- -r 1,1
endserver
