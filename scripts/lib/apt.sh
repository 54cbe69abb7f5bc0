# shellcheck shell=bash
# sys_apt ARGS...: run a system apt-get command, waiting for the dpkg/apt locks instead
# of failing (another install may be running). DPkg::Lock::Timeout covers the dpkg
# frontend lock; the retry loop covers the lists/archives locks that `apt-get update`
# takes. Sourced by the setup scripts, which define `log` and LOCK_TIMEOUT first.
sys_apt() {
    local deadline=$((SECONDS + LOCK_TIMEOUT)) out rc
    while :; do
        rc=0
        out="$(apt-get -o DPkg::Lock::Timeout="$LOCK_TIMEOUT" "$@" 2>&1)" || rc=$?
        if [[ $rc -ne 0 ]] && grep -qE 'Could not get lock|Unable to lock' <<<"$out" \
            && (( SECONDS < deadline )); then
            log "apt lock busy, waiting..."
            sleep 5
            continue
        fi
        printf '%s\n' "$out" | tr '\r' '\n' \
            | grep -vE '^\(?(Reading|Building)|^\(Reading database' >&2 || true
        return "$rc"
    done
}
