#!/usr/bin/env bash
# setup-peers.sh — install the real peer tools netmeter's test suite runs against.
#
# Target: a Debian 12 (bookworm) x86_64 machine, run as root, reaching only
# Debian's package mirrors. Idempotent: a second run only re-checks things.
#
# What it provides (all under $NETMETER_PEERS_DIR, default /opt/netmeter-peers):
#   bin/iperf3-3.12   -> /usr/bin/iperf3   (bookworm package, installed system-wide)
#   bin/iperf-2.1.8   -> /usr/bin/iperf    (bookworm package, installed system-wide)
#   bin/iperf3-3.18   wrapper running trixie's iperf3 from root/ with trixie's own ld.so and libs
#   bin/iperf-2.2.1   wrapper running trixie's iperf  from root/ likewise
#   bin/iperf3-3.22   wrapper running sid's iperf3 from root-sid/ with sid's own ld.so and libs
#                     (named for 3.22; if sid has moved past 3.22 the wrapper runs what sid
#                     has and the run says so)
#   peers.env         KEY=VALUE lines (no quotes, no comments) that tests read:
#                       NETMETER_PEERS_DIR, NETMETER_IPERF3_312, NETMETER_IPERF3_318,
#                       NETMETER_IPERF3_322,
#                       NETMETER_IPERF2_218, NETMETER_IPERF2_221, NETMETER_NETPERF,
#                       NETMETER_NETSERVER  (a value is empty when that peer is unavailable)
#
# The trixie binaries are fetched WITHOUT touching the system's apt state: a
# private APT_CONFIG (which skips /etc/apt/apt.conf{,.d} entirely, so none of
# the system's hooks run) with its own sources list, Dir::State, Dir::Cache and
# an empty dpkg status file. Nothing from trixie is ever installed with dpkg -i;
# the .debs are only unpacked with `dpkg -x` into $DIR/root. Sid's iperf3 gets
# the same treatment in a tree of its own (apt-sid/, debs-sid/, root-sid/), so
# its newer libc never mixes with trixie's.
#
# Usage: scripts/setup-peers.sh [--selftest]
#   --selftest  also run short loopback-only (127.0.0.1) interop checks:
#               iperf3 3.18 server <- iperf3 3.12 client, and
#               iperf 2.2.1 server <- iperf 2.1.8 client.
#
# Environment:
#   NETMETER_PEERS_DIR      install directory (default /opt/netmeter-peers)
#   NETMETER_DEBIAN_MIRROR  Debian mirror URI (default: taken from
#                           /etc/apt/sources.list.d/debian.sources, else
#                           http://deb.debian.org/debian)
#   NETMETER_APT_LOCK_TIMEOUT  seconds to wait for the system dpkg/apt locks (default 300)

set -euo pipefail

SELFTEST=0
for arg in "$@"; do
    case "$arg" in
        --selftest) SELFTEST=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "setup-peers: unknown argument: $arg" >&2; exit 2 ;;
    esac
done

DIR="${NETMETER_PEERS_DIR:-/opt/netmeter-peers}"
LOCK_TIMEOUT="${NETMETER_APT_LOCK_TIMEOUT:-300}"
ARCH_TRIPLET=x86_64-linux-gnu
SYS_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
NONFREE_SOURCES=/etc/apt/sources.list.d/netmeter-nonfree.sources

# Trixie versions we expect (upstream part; the Debian revision may move with
# stable point releases, e.g. 3.18-2+deb13u2).
WANT_IPERF3_NEW=3.18
WANT_IPERF2_NEW=2.2.1
WANT_IPERF3_OLD=3.12
WANT_IPERF2_OLD=2.1.8
# Sid: the newest iperf3 (3.22 when this was written). A newer sid version is
# accepted (and reported); an older one is refused.
WANT_IPERF3_SID=3.22

log()  { printf 'setup-peers: %s\n' "$*" >&2; }
warn() { printf 'setup-peers: WARNING: %s\n' "$*" >&2; }
die()  { printf 'setup-peers: ERROR: %s\n' "$*" >&2; exit 1; }

[[ "$(id -u)" == 0 ]] || die "must run as root"
[[ "$(dpkg --print-architecture)" == amd64 ]] || die "only amd64 (x86_64) is supported"
case "$DIR" in
    /*) ;;
    *) die "NETMETER_PEERS_DIR must be an absolute path (got '$DIR')" ;;
esac
case "$DIR" in
    *[[:space:]]*) die "NETMETER_PEERS_DIR must not contain whitespace (peers.env is unquoted)" ;;
esac

mkdir -p "$DIR"
# One run at a time per peers dir.
exec 9>"$DIR/.setup.lock"
flock -w 600 9 || die "another setup-peers.sh holds $DIR/.setup.lock"

export DEBIAN_FRONTEND=noninteractive

# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

# sys_apt: a system apt-get that waits for the dpkg/apt locks.
# shellcheck source=lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"

pkg_installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

has_candidate() {
    local c
    c="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')"
    [[ -n "$c" && "$c" != "(none)" ]]
}

# "iperf 3.18 (cJSON 1.7.15)" -> 3.18
iperf3_version() {
    "$1" --version 2>&1 | sed -n '1s/^iperf \([0-9][0-9.]*\).*/\1/p' || true
}
# "iperf version 2.2.1 (22 Oct 2024) pthreads" on stderr -> 2.2.1
iperf2_version() {
    { "$1" -v 2>&1 || true; } | sed -n 's/^iperf version \([0-9][0-9.]*\).*/\1/p' | head -1
}
# "Netperf version 2.7.0" -> 2.7.0
netperf_version() {
    { "$1" -V 2>&1 || true; } | sed -n 's/^Netperf version \([0-9][0-9.]*\).*/\1/p' | head -1
}

# Parse /etc/apt/sources.list.d/debian.sources (deb822) for the stanza that
# carries suite "bookworm": print "URI<TAB>SIGNED-BY-PATH" (first URI).
read_debian_sources() {
    local f=/etc/apt/sources.list.d/debian.sources
    [[ -r $f ]] || return 1
    awk '
        function flush() {
            if (has_bookworm && uri != "" && !done) { print uri "\t" sb; done = 1 }
            uri = ""; sb = ""; has_bookworm = 0
        }
        /^[[:space:]]*#/ { next }
        /^[[:space:]]*$/ { flush(); next }
        /^URIs:/        { uri = $2 }
        /^Suites:/      { for (i = 2; i <= NF; i++) if ($i == "bookworm") has_bookworm = 1 }
        /^Signed-By:/   { if ($2 ~ /^\//) sb = $2 }
        END             { flush() }
    ' "$f"
}

MIRROR="${NETMETER_DEBIAN_MIRROR:-}"
MIRROR_KEYRING=""
if src="$(read_debian_sources)" && [[ -n "$src" ]]; then
    [[ -n "$MIRROR" ]] || MIRROR="${src%%$'\t'*}"
    MIRROR_KEYRING="${src#*$'\t'}"
fi
[[ -n "$MIRROR" ]] || MIRROR=http://deb.debian.org/debian
MIRROR="${MIRROR%/}"
[[ -n "$MIRROR_KEYRING" && -r "$MIRROR_KEYRING" ]] || MIRROR_KEYRING="$SYS_KEYRING"

# ---------------------------------------------------------------------------
# 1. bookworm packages (system-wide)
# ---------------------------------------------------------------------------

# ethtool: the emulated-link test bed (tests/integration/support/netbed.rs) turns off its veths'
# segmentation/receive offloads with it, so packets on the bed are single datagrams.
# curl (HTTP/2 through nghttp2) and openssl: the judges of netmeter rpm-server's tests
# (tests/integration/rpm_server.rs).
BASE_PKGS=(iperf3 iperf nftables iproute2 ethtool curl openssl)
missing=()
for p in "${BASE_PKGS[@]}"; do pkg_installed "$p" || missing+=("$p"); done
if ((${#missing[@]})); then
    need_update=0
    for p in "${missing[@]}"; do has_candidate "$p" || need_update=1; done
    if ((need_update)); then
        log "apt-get update (system)"
        sys_apt update
    fi
    log "installing: ${missing[*]}"
    sys_apt install -y --no-install-recommends "${missing[@]}"
else
    log "bookworm packages already installed: ${BASE_PKGS[*]}"
fi

# netperf lives in bookworm's non-free component. Best effort only.
install_netperf() {
    pkg_installed netperf && return 0
    local want
    want="$(cat <<EOF
# Added by netmeter scripts/setup-peers.sh: bookworm non-free, for netperf only.
Types: deb
URIs: $MIRROR
Suites: bookworm
Components: non-free
Signed-By: $MIRROR_KEYRING
EOF
)"
    if [[ ! -f $NONFREE_SOURCES ]] || [[ "$(cat "$NONFREE_SOURCES")" != "$want" ]]; then
        log "writing $NONFREE_SOURCES"
        printf '%s\n' "$want" >"$NONFREE_SOURCES"
    fi
    if ! has_candidate netperf; then
        # Refresh only the non-free source; List-Cleanup=0 keeps every other
        # list file of the system exactly as it is.
        log "apt-get update (bookworm non-free only)"
        sys_apt update \
            -o Dir::Etc::SourceList="$NONFREE_SOURCES" \
            -o Dir::Etc::SourceParts=/dev/null \
            -o APT::Get::List-Cleanup=0 || return 1
    fi
    sys_apt install -y --no-install-recommends netperf
}
if ! install_netperf; then
    warn "could not install netperf from bookworm non-free; netperf peer tests will be skipped"
fi

# ---------------------------------------------------------------------------
# 2. trixie iperf3 3.18 / iperf 2.2.1 into $DIR/root (private apt, no install)
# ---------------------------------------------------------------------------

BIN="$DIR/bin"
mkdir -p "$BIN"

# Point the private-apt helpers below at one suite's own trees. Trixie keeps the
# original names (root/, apt/, debs/); other suites get a -SUITE suffix.
use_suite() { # suite
    SUITE=$1
    local sfx=""
    [[ $SUITE == trixie ]] || sfx="-$SUITE"
    ROOT="$DIR/root$sfx"
    APTDIR="$DIR/apt$sfx"
    DEBS="$DIR/debs$sfx"
    LIBPATH="$ROOT/usr/lib/$ARCH_TRIPLET:$ROOT/lib/$ARCH_TRIPLET"
    LDSO="$ROOT/usr/lib/$ARCH_TRIPLET/ld-linux-x86-64.so.2"
}
use_suite trixie

write_wrapper() { # name, binary path inside root
    local name=$1 rel=$2 tmp
    tmp="$(mktemp "$BIN/.$name.XXXXXX")"
    cat >"$tmp" <<EOF
#!/bin/sh
# Generated by netmeter scripts/setup-peers.sh: run Debian $SUITE's ${rel##*/}
# with $SUITE's own dynamic loader and libraries (unpacked, not installed).
exec "$LDSO" --library-path "$LIBPATH" "$ROOT$rel" "\$@"
EOF
    chmod 0755 "$tmp"
    mv -f "$tmp" "$BIN/$name"
}

trixie_ok() {
    [[ -x $BIN/iperf3-$WANT_IPERF3_NEW && -x $BIN/iperf-$WANT_IPERF2_NEW ]] || return 1
    [[ "$(iperf3_version "$BIN/iperf3-$WANT_IPERF3_NEW")" == "$WANT_IPERF3_NEW" ]] || return 1
    [[ "$(iperf2_version "$BIN/iperf-$WANT_IPERF2_NEW")" == "$WANT_IPERF2_NEW" ]] || return 1
}

priv_apt_setup() {
    mkdir -p "$APTDIR/apt.conf.d" "$APTDIR/preferences.d" \
        "$APTDIR/state/lists/partial" "$APTDIR/cache/archives/partial" "$DEBS"
    : >"$APTDIR/state/status"   # empty dpkg status: nothing is "installed" here
    # Keyring: trixie's InRelease is signed by the Debian archive automatic keys
    # of 12/bookworm AND 13/trixie (plus the 13 stable release key), because the
    # archive signs with the current and previous automatic keys. So bookworm's
    # own debian-archive-keyring verifies it — fully, no trusted=yes. (Checked
    # with gpgv: "Good signature from Debian Archive Automatic Signing Key
    # (12/bookworm)".) If a future trixie Release stops carrying a key this
    # keyring knows, the update fails; we then upgrade debian-archive-keyring
    # through the system's own (verified) bookworm sources and retry, and
    # otherwise stop. We never fall back to trusted=yes. Sid's InRelease is
    # signed the same way (current and previous automatic keys).
    printf 'deb [arch=amd64 signed-by=%s] %s %s main\n' "$SYS_KEYRING" "$MIRROR" "$SUITE" \
        >"$APTDIR/sources.list"
    {
        echo "// Private apt config for netmeter peers; the system's apt.conf{,.d} is NOT read."
        echo "Dir::Etc::Main \"/dev/null\";"
        echo "Dir::Etc::Parts \"$APTDIR/apt.conf.d\";"
        echo "Dir::Etc::Preferences \"/dev/null\";"
        echo "Dir::Etc::PreferencesParts \"$APTDIR/preferences.d\";"
        echo "Dir::Etc::SourceList \"$APTDIR/sources.list\";"
        echo "Dir::Etc::SourceParts \"/dev/null\";"
        echo "Dir::State \"$APTDIR/state\";"
        echo "Dir::State::status \"$APTDIR/state/status\";"
        echo "Dir::Cache \"$APTDIR/cache\";"
        echo "Dir::Log \"$APTDIR/log\";"
        echo "APT::Architecture \"amd64\";"
        echo "APT::Architectures { \"amd64\"; };"
        echo "Acquire::Languages \"none\";"
        echo "Acquire::GzipIndexes \"true\";"
        echo "Dir::Cache::pkgcache \"\";"
        echo "Dir::Cache::srcpkgcache \"\";"
        echo "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled \"false\";"
        # Sid's Release carries a Valid-Until a week ahead (stable's has none);
        # the mirror reached from here can be a snapshot older than that. Its
        # signature is still checked with the system keyring: only the
        # freshness window is not. (Checked with gpgv on 2026-11-22: "Good
        # signature from ... (12/bookworm)" and "(13/trixie)" on sid's InRelease.)
        [[ $SUITE == sid ]] && echo "Acquire::Check-Valid-Until \"false\";"
        # Keep any proxy the system's apt uses (that is all we inherit).
        local k v
        for k in Acquire::http::Proxy Acquire::https::Proxy; do
            v="$(apt-config dump "$k" 2>/dev/null | sed -n "s/^$k \"\(.*\)\";$/\1/p" | head -1)"
            [[ -n "$v" ]] && echo "$k \"$v\";"
        done
        true
    } >"$APTDIR/apt.conf"
    # Let apt's _apt sandbox user write the downloads (avoids the unsandboxed-root warning).
    if id _apt >/dev/null 2>&1; then
        chown -R _apt:root "$APTDIR/state/lists" "$APTDIR/cache/archives" "$DEBS"
    fi
}

priv_apt() { APT_CONFIG="$APTDIR/apt.conf" apt-get -q "$@"; }

priv_apt_update() {
    local out rc=0
    out="$(priv_apt update 2>&1)" || rc=$?
    # apt-get update exits 0 on some signature problems; treat warnings as failure too.
    if [[ $rc -ne 0 ]] || grep -qE '^(W|E): .*(NO_PUBKEY|not signed|signature|InRelease)' <<<"$out"; then
        printf '%s\n' "$out" >&2
        return 1
    fi
}

# Download .debs for the given trixie packages into $DEBS (apt checks their
# hashes against the signed Release/Packages files).
priv_download() {
    (cd "$DEBS" && APT_CONFIG="$APTDIR/apt.conf" apt-get -q download "$@" >&2)
}

extract_all() { # into a fresh staging tree, then swap in
    local stage="$ROOT.new" d
    rm -rf "$stage"
    mkdir -p "$stage"
    for d in "$DEBS"/*.deb; do dpkg -x "$d" "$stage"; done
    rm -rf "$ROOT.old"
    [[ -d $ROOT ]] && mv "$ROOT" "$ROOT.old"
    mv "$stage" "$ROOT"
    rm -rf "$ROOT.old"
}

# ldd-style check: every library the binaries load must come from $ROOT (never
# silently from bookworm's /lib). Prints the sonames that don't.
foreign_libs() { # binaries inside $ROOT (default: iperf3 and iperf)
    local b bins=("$@")
    ((${#bins[@]})) || bins=(/usr/bin/iperf3 /usr/bin/iperf)
    for b in "${bins[@]/#/$ROOT}"; do
        "$LDSO" --library-path "$LIBPATH" --list "$b" 2>&1 || true
    done | awk -v root="$ROOT/" '
        / => not found/        { print $1; next }
        / => \// && index($3, root) != 1 { print $1 }
    ' | sort -u
}

# Map a missing soname to a trixie package: ask dpkg which bookworm package
# owns it, then try that name and its t64-renamed variant in trixie.
pkg_for_soname() {
    local so=$1 owner
    owner="$(dpkg -S "*/$so" 2>/dev/null | head -1 | cut -d: -f1)" || true
    [[ -n "$owner" ]] || return 1
    local c
    for c in "$owner" "${owner}t64"; do
        if APT_CONFIG="$APTDIR/apt.conf" apt-cache show "$c" >/dev/null 2>&1; then
            echo "$c"; return 0
        fi
    done
    return 1
}

# Private apt update of $SUITE's lists, verified with the system keyring.
priv_update_verified() {
    priv_apt_setup
    log "apt-get update (private $SUITE lists in $APTDIR)"
    if ! priv_apt_update; then
        warn "$SUITE Release did not verify with $SYS_KEYRING; upgrading debian-archive-keyring from bookworm (verified) and retrying"
        sys_apt install -y --no-install-recommends --only-upgrade debian-archive-keyring || true
        priv_apt_update || die "cannot verify $SUITE's Release file; refusing to use trusted=yes"
    fi
}

priv_candidate() { # package
    APT_CONFIG="$APTDIR/apt.conf" apt-cache policy "$1" | awk '/Candidate:/ {print $2}'
}

# Fetch any library the given binaries still resolve outside $ROOT, a few rounds.
close_libs() { # binaries inside $ROOT
    local round missing so pkg extra
    for round in 1 2 3; do
        missing="$(foreign_libs "$@")"
        [[ -z "$missing" ]] && break
        extra=()
        for so in $missing; do
            pkg="$(pkg_for_soname "$so")" || die "no $SUITE package found for $so"
            extra+=("$pkg")
        done
        log "ldd check (round $round): also fetching ${extra[*]}"
        priv_download "${extra[@]}"
        extract_all
    done
    missing="$(foreign_libs "$@")"
    [[ -z "$missing" ]] || die "libraries still resolved outside $ROOT: $missing"
}

fetch_trixie() {
    use_suite trixie
    priv_update_verified
    local v3 v2
    v3="$(priv_candidate iperf3)"
    v2="$(priv_candidate iperf)"
    [[ "$v3" == "$WANT_IPERF3_NEW"-* ]] || die "trixie iperf3 candidate is '$v3', expected $WANT_IPERF3_NEW-*"
    [[ "$v2" == "$WANT_IPERF2_NEW"* ]] || die "trixie iperf candidate is '$v2', expected $WANT_IPERF2_NEW*"
    log "trixie candidates: iperf3 $v3, iperf $v2"

    rm -f "$DEBS"/*.deb
    # Runtime closure of iperf3/libiperf0/iperf in trixie (from their Depends),
    # minus maintainer-script-only deps (debconf, adduser, init-system-helpers).
    priv_download iperf3 libiperf0 iperf libc6 libssl3t64 libsctp1 \
        libgcc-s1 libstdc++6 libzstd1 zlib1g
    extract_all
    close_libs /usr/bin/iperf3 /usr/bin/iperf

    write_wrapper "iperf3-$WANT_IPERF3_NEW" /usr/bin/iperf3
    write_wrapper "iperf-$WANT_IPERF2_NEW" /usr/bin/iperf
}

if trixie_ok; then
    log "trixie peers already present and working; skipping download"
else
    fetch_trixie
    trixie_ok || die "trixie wrappers do not report the expected versions"
fi

# ---------------------------------------------------------------------------
# 2b. sid iperf3 (3.22 or newer) into $DIR/root-sid, the same way
# ---------------------------------------------------------------------------

IPERF3_SID="$BIN/iperf3-$WANT_IPERF3_SID"
# The version sid had when the wrapper was made (it may be newer than 3.22).
IPERF3_SID_STAMP="$DIR/root-sid.version"

version_ge() { # a b: a >= b (dotted numbers)
    [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" == "$2" ]]
}

sid_ok() {
    [[ -x $IPERF3_SID && -r $IPERF3_SID_STAMP ]] || return 1
    local got
    got="$(iperf3_version "$IPERF3_SID")"
    [[ -n $got && "$got" == "$(cat "$IPERF3_SID_STAMP")" ]] && version_ge "$got" "$WANT_IPERF3_SID"
}

fetch_sid() {
    use_suite sid
    priv_update_verified
    local v3 up
    v3="$(priv_candidate iperf3)"
    up="${v3#*:}"; up="${up%%-*}"; up="${up%%+*}"
    [[ -n $up && $up != "(none)" ]] || die "sid has no iperf3 candidate"
    version_ge "$up" "$WANT_IPERF3_SID" || die "sid iperf3 candidate is '$v3', expected $WANT_IPERF3_SID or newer"
    [[ $up == "$WANT_IPERF3_SID" ]] || warn "sid has iperf3 $up, not $WANT_IPERF3_SID; using it as bin/iperf3-$WANT_IPERF3_SID"
    log "sid candidate: iperf3 $v3"

    rm -f "$DEBS"/*.deb
    # iperf3 + libiperf0 and their runtime closure (close_libs adds what the
    # loader still finds outside root-sid/).
    priv_download iperf3 libiperf0 libc6 libssl3t64 libsctp1
    extract_all
    close_libs /usr/bin/iperf3

    write_wrapper "iperf3-$WANT_IPERF3_SID" /usr/bin/iperf3
    iperf3_version "$IPERF3_SID" >"$IPERF3_SID_STAMP"
    use_suite trixie
}

if sid_ok; then
    log "sid iperf3 $(cat "$IPERF3_SID_STAMP") already present and working; skipping download"
else
    fetch_sid
    sid_ok || die "sid iperf3 wrapper does not report a version >= $WANT_IPERF3_SID"
fi

# ---------------------------------------------------------------------------
# 3. bookworm symlinks
# ---------------------------------------------------------------------------

link_if_version() { # name, target, want, version-fn
    local name=$1 target=$2 want=$3 fn=$4 got
    if [[ ! -x $target ]]; then
        warn "$target missing; $name not available"
        rm -f "$BIN/$name"
        return 1
    fi
    got="$($fn "$target")"
    if [[ "$got" != "$want" ]]; then
        warn "$target is version '$got', not $want; $name not created"
        rm -f "$BIN/$name"
        return 1
    fi
    ln -sfn "$target" "$BIN/$name"
}
IPERF3_312=""; IPERF2_218=""
link_if_version "iperf3-$WANT_IPERF3_OLD" /usr/bin/iperf3 "$WANT_IPERF3_OLD" iperf3_version \
    && IPERF3_312="$BIN/iperf3-$WANT_IPERF3_OLD" || true
link_if_version "iperf-$WANT_IPERF2_OLD" /usr/bin/iperf "$WANT_IPERF2_OLD" iperf2_version \
    && IPERF2_218="$BIN/iperf-$WANT_IPERF2_OLD" || true

NETPERF=""; NETSERVER=""
if [[ -x /usr/bin/netperf ]]; then NETPERF=/usr/bin/netperf; fi
if [[ -x /usr/bin/netserver ]]; then NETSERVER=/usr/bin/netserver; fi

# ---------------------------------------------------------------------------
# 4. summary + 5. peers.env
# ---------------------------------------------------------------------------

summary() { # label, path, version
    if [[ -n $2 ]]; then
        printf '  %-14s %-8s %s\n' "$1" "$3" "$2"
    else
        printf '  %-14s %-8s %s\n' "$1" "-" "(unavailable)"
    fi
}
echo "netmeter peers ($DIR):"
summary iperf3-3.12 "$IPERF3_312" "$([[ -n $IPERF3_312 ]] && iperf3_version "$IPERF3_312")"
summary iperf3-3.18 "$BIN/iperf3-3.18" "$(iperf3_version "$BIN/iperf3-3.18")"
summary iperf3-3.22 "$IPERF3_SID" "$(iperf3_version "$IPERF3_SID")"
summary iperf-2.1.8 "$IPERF2_218" "$([[ -n $IPERF2_218 ]] && iperf2_version "$IPERF2_218")"
summary iperf-2.2.1 "$BIN/iperf-2.2.1" "$(iperf2_version "$BIN/iperf-2.2.1")"
summary netperf "$NETPERF" "$([[ -n $NETPERF ]] && netperf_version "$NETPERF")"

tmp="$(mktemp "$DIR/.peers.env.XXXXXX")"
cat >"$tmp" <<EOF
NETMETER_PEERS_DIR=$DIR
NETMETER_IPERF3_312=$IPERF3_312
NETMETER_IPERF3_318=$BIN/iperf3-$WANT_IPERF3_NEW
NETMETER_IPERF3_322=$IPERF3_SID
NETMETER_IPERF2_218=$IPERF2_218
NETMETER_IPERF2_221=$BIN/iperf-$WANT_IPERF2_NEW
NETMETER_NETPERF=$NETPERF
NETMETER_NETSERVER=$NETSERVER
EOF
chmod 0644 "$tmp"
mv -f "$tmp" "$DIR/peers.env"
log "wrote $DIR/peers.env"

# ---------------------------------------------------------------------------
# --selftest: loopback-only interop checks
# ---------------------------------------------------------------------------

SERVER_PID=""
cleanup_server() {
    # Only ever the PID we started ourselves.
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}
trap cleanup_server EXIT

port_busy() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

wait_listen() { # port, pid
    local i
    for i in $(seq 1 50); do
        port_busy "$1" && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# loopback_pair label port oneshot "server cmd..." -- "client cmd..."
# oneshot=1: the server exits by itself after one test (iperf3 -1), so give it
# a moment to do so; otherwise it is stopped right after the client finishes.
loopback_pair() {
    local label=$1 port=$2 oneshot=$3; shift 3
    local server=() client=()
    while [[ $# -gt 0 && $1 != -- ]]; do server+=("$1"); shift; done
    shift
    client=("$@")
    if port_busy "$port"; then
        echo "selftest $label: FAIL (127.0.0.1:$port already in use)"
        return 1
    fi
    local slog clog rc=0
    slog="$(mktemp)"; clog="$(mktemp)"
    "${server[@]}" >"$slog" 2>&1 &
    SERVER_PID=$!
    if ! wait_listen "$port" "$SERVER_PID"; then
        echo "selftest $label: FAIL (server did not listen)"; cat "$slog" >&2
        cleanup_server; rm -f "$slog" "$clog"; return 1
    fi
    timeout 20 "${client[@]}" >"$clog" 2>&1 || rc=$?
    # Give a one-shot server a moment to exit by itself, then stop our PID.
    local i
    if ((oneshot)); then
        for i in $(seq 1 30); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    fi
    cleanup_server
    if [[ $rc -ne 0 ]]; then
        echo "selftest $label: FAIL (client exit $rc)"; cat "$clog" "$slog" >&2
        rm -f "$slog" "$clog"; return 1
    fi
    local line
    line="$(grep -E 'receiver|sec .*bits/sec' "$clog" | tail -1 | tr -s ' ')"
    echo "selftest $label: OK ($line)"
    rm -f "$slog" "$clog"
}

if ((SELFTEST)); then
    fail=0
    [[ -n $IPERF3_312 ]] || die "selftest needs iperf3 3.12"
    loopback_pair "iperf3 3.18 server <- 3.12 client" 5999 1 \
        "$BIN/iperf3-3.18" -s -1 -p 5999 -B 127.0.0.1 -- \
        "$IPERF3_312" -c 127.0.0.1 -p 5999 -t 1 || fail=1
    if [[ -n $IPERF2_218 ]]; then
        loopback_pair "iperf 2.2.1 server <- 2.1.8 client" 5998 0 \
            "$BIN/iperf-2.2.1" -s -B 127.0.0.1 -p 5998 -- \
            "$IPERF2_218" -c 127.0.0.1 -p 5998 -t 1 || fail=1
    fi
    ((fail == 0)) || die "selftest failed"
fi
