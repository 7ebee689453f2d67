#!/usr/bin/env bash
# Soak test of the tiered system: archive store, fast store and the proxy with its
# workers, each on a free port, a short horizon, and a steady rate-limited mix of
# inserts, updates, deletes and reads through the proxy for N minutes. Every minute
# it prints throughput, p99 latency, each process's RSS, open descriptors and
# threads, and the fast tier's size; at the end it fails (exit 1) when memory,
# descriptors or threads grew without bound (docs/OPERATIONS.md, Soak).
#
#   scripts/soak.sh --minutes N [--rate OPS] [--horizon 2m] [--warmup M] [--out FILE] ...
#
# HALOCLINE_BIN: the binary (default build/release/src/cli/halocline; a soak is
# meant for a release build, a sanitizer build only for a short smoke run).
# The options are tests/js/soak/soak.js's (--help lists them). The per-reading
# samples go to build/soak/soak-<time>.json and .csv unless --out says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

for a in "$@"; do
    if [ "$a" = -h ] || [ "$a" = --help ]; then
        exec node tests/js/soak/soak.js --help
    fi
done

export HALOCLINE_BIN="${HALOCLINE_BIN:-$root/build/release/src/cli/halocline}"
if [ ! -x "$HALOCLINE_BIN" ]; then
    echo "soak.sh: no halocline binary at $HALOCLINE_BIN (cmake --build --preset release, or set HALOCLINE_BIN)" >&2
    exit 2
fi
if [ ! -d tests/js/node_modules/mongodb ]; then
    (cd tests/js && npm ci --ignore-scripts --no-audit --no-fund)
fi

run_dir="$(mktemp -d "${TMPDIR:-/tmp}/halocline-soak-XXXXXX")"
pids_file="$run_dir/pids"
node_pid=""

# Whatever happens (Ctrl-C, a kill, an error), nothing is left running: the runner
# stops its processes itself; any it could not (it was killed) are killed here.
cleanup() {
    trap - EXIT INT TERM
    if [ -n "$node_pid" ] && kill -0 "$node_pid" 2>/dev/null; then
        kill -TERM "$node_pid" 2>/dev/null || true
        wait "$node_pid" 2>/dev/null || true
    fi
    if [ -f "$pids_file" ]; then
        while read -r name value; do
            if [ "$name" = dir ]; then
                case "$value" in */halocline-tiered-*) rm -rf "$value" ;; esac
            elif [ -r "/proc/$value/cmdline" ] && tr '\0' ' ' <"/proc/$value/cmdline" | grep -q halocline; then
                echo "soak.sh: killing the leftover $name process $value" >&2
                kill -KILL "$value" 2>/dev/null || true
            fi
        done <"$pids_file"
    fi
    rm -rf "$run_dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

node tests/js/soak/soak.js --pids "$pids_file" "$@" &
node_pid=$!
rc=0
wait "$node_pid" || rc=$?
node_pid=""
exit "$rc"
