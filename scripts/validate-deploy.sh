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

# What the schemas cannot say (issue 20): the NetworkPolicy selects the DaemonSet's pods
# and admits exactly their ports, the metrics port only from a named source; liveness
# is not the metrics endpoint (a stalled scrape must not restart the pod); the
# DaemonSet limits the connection rate as the unit does; the audit files fit their
# volume. PyYAML comes with kubernetes-validate.
"$venv/bin/python" - deploy/kubernetes/server-daemonset.yaml \
  deploy/kubernetes/server-networkpolicy.yaml deploy/systemd/netmeter.service <<'PY'
import re, sys, yaml

ds_file, np_file, unit_file = sys.argv[1:4]
fail = []
docs = [d for f in (ds_file, np_file) for d in yaml.safe_load_all(open(f)) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
np = next(d for d in docs if d["kind"] == "NetworkPolicy")
pod = ds["spec"]["template"]
c = pod["spec"]["containers"][0]
ports = {p["name"]: (p["containerPort"], p.get("protocol", "TCP")) for p in c["ports"]}
labels = pod["metadata"]["labels"]

sel = np["spec"]["podSelector"].get("matchLabels", {})
if not sel or any(labels.get(k) != v for k, v in sel.items()):
    fail.append(f"the NetworkPolicy's podSelector {sel} does not select the DaemonSet's pods {labels}")
if np["spec"].get("policyTypes") != ["Ingress"]:
    fail.append("the NetworkPolicy should restrict Ingress only")
admitted = {}
for rule in np["spec"].get("ingress", []):
    if not rule.get("from"):
        fail.append(f"an ingress rule admits every source: {rule}")
    for p in rule.get("ports", []):
        admitted[(p["port"], p.get("protocol", "TCP"))] = rule
if set(admitted) != set(ports.values()):
    fail.append(f"the NetworkPolicy admits ports {sorted(admitted)}, the pods have {sorted(ports.values())}")
metrics = ports.get("metrics")
if metrics in admitted:
    rule = admitted[metrics]
    if any(admitted.get(t) is rule for t in (ports.get("test-tcp"), ports.get("test-udp"))):
        fail.append("the metrics port shares an ingress rule with the test ports")

live = c.get("livenessProbe", {})
http = live.get("httpGet")
if not live:
    fail.append("the DaemonSet has no livenessProbe")
elif http and http.get("port") in ("metrics", metrics and metrics[0]) and http.get("path", "/") in ("/", "/metrics"):
    fail.append("liveness is a scrape of /metrics, which a stalled scrape can fail")

def flag(args, name):
    return args[args.index(name) + 1] if name in args else None

args = [str(a) for a in c["args"]]
unit = open(unit_file).read().replace("\\\n", " ")
exec_args = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1).split()
for f in ("--max-conn-rate",):
    if flag(args, f) is None or flag(args, f) != flag(exec_args, f):
        fail.append(f"{f}: DaemonSet {flag(args, f)!r}, systemd unit {flag(exec_args, f)!r}")

def mib(q):
    m = re.fullmatch(r"(\d+)([KMG]?)i?", str(q))
    return int(m.group(1)) * {"": 1 / 2**20, "K": 1 / 1024, "M": 1, "G": 1024}[m.group(2)]

audit_vol = next((v for v in pod["spec"]["volumes"] if v["name"] == "audit"), None)
if "--audit-log" in args and audit_vol:
    size = flag(args, "--audit-log-max-size") or "64M"
    keep = int(flag(args, "--audit-log-keep") or 3)
    limit = audit_vol.get("emptyDir", {}).get("sizeLimit")
    if limit is None or mib(size) * (keep + 1) > mib(limit):
        fail.append(f"audit files up to {keep + 1} x {size} do not fit the volume's sizeLimit {limit}")

for f in fail:
    print(f"validate-deploy.sh: {f}", file=sys.stderr)
sys.exit(1 if fail else 0)
PY
echo "validate-deploy.sh: NetworkPolicy, probes, rate limit and audit volume consistent"

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
