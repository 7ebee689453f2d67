#!/usr/bin/env bash
# Runs each fuzz target (tests/fuzz: wire, scram, bson, config) under libFuzzer
# with ASan+UBSan for DURATION, one after the other.
#
#   scripts/fuzz.sh [--merge] DURATION [target...]     DURATION: 45 | 30s | 10m | 1h
#
# Builds only the fuzz targets, with clang, in build/fuzz (the fuzz preset).
# Each target starts from a scratch copy of its seed corpus, tests/fuzz/corpus/
# <target>, in build/fuzz/corpus/<target>; with --merge, the inputs of the
# scratch corpus that add coverage are merged back into tests/fuzz/corpus/
# <target> afterwards (commit them). Crashes, leaks, timeouts and sanitizer
# reports are saved as build/fuzz/artifacts/<target>-*; each target's log is
# build/fuzz/logs/<target>.log. Exits non-zero when any target failed.
#
# Replay a crash: build/fuzz/tests/fuzz/<target>_fuzz build/fuzz/artifacts/<file>
# Environment: HALO_BUILD_JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    echo "usage: scripts/fuzz.sh [--merge] DURATION [target...]   (DURATION: 45, 30s, 10m, 1h)" >&2
    exit 2
}

merge=0
args=()
for a in "$@"; do
    case "$a" in
        --merge) merge=1 ;;
        -h | --help) usage ;;
        -*) echo "fuzz.sh: unknown option $a" >&2; usage ;;
        *) args+=("$a") ;;
    esac
done
[ "${#args[@]}" -ge 1 ] || usage
duration="${args[0]}"
if [[ "$duration" =~ ^([0-9]+)(s|m|h)?$ ]]; then
    case "${BASH_REMATCH[2]}" in
        h) seconds=$((BASH_REMATCH[1] * 3600)) ;;
        m) seconds=$((BASH_REMATCH[1] * 60)) ;;
        *) seconds=$((BASH_REMATCH[1])) ;;
    esac
else
    echo "fuzz.sh: bad duration '$duration'" >&2
    usage
fi
[ "$seconds" -ge 1 ] || usage

all=()
for f in tests/fuzz/*_fuzz.cpp; do
    t="$(basename "$f" _fuzz.cpp)"
    all+=("$t")
done
targets=("${args[@]:1}")
[ "${#targets[@]}" -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
    if [ ! -f "tests/fuzz/${t}_fuzz.cpp" ] || [ ! -d "tests/fuzz/corpus/$t" ]; then
        echo "fuzz.sh: no target '$t' (known: ${all[*]})" >&2
        exit 2
    fi
done

if ! command -v clang++ >/dev/null; then
    echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs it)" >&2
    exit 2
fi

start=$(date +%s)
out=build/fuzz
cmake --preset fuzz >/dev/null
build_targets=()
for t in "${targets[@]}"; do build_targets+=("${t}_fuzz"); done
cmake --build "$out" --target "${build_targets[@]}" -j "${HALO_BUILD_JOBS:-$(nproc)}" >"$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log"; echo "fuzz.sh: build failed ($out/build.log)" >&2; exit 1; }
built=$(date +%s)
echo "fuzz: built ${build_targets[*]} in $((built - start))s; ${seconds}s per target"

mkdir -p "$out/artifacts" "$out/logs"
# Not the caller's sanitizer options (scripts/test.sh turns leak detection off
# for the servers): the targets are checked for leaks too, and the first report
# ends the run (UBSan is built not to recover).
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

failed=0
summary=()
for t in "${targets[@]}"; do
    bin="$out/tests/fuzz/${t}_fuzz"
    scratch="$out/corpus/$t"
    log="$out/logs/$t.log"
    rm -rf "$scratch"
    mkdir -p "$scratch"
    cp -R "tests/fuzz/corpus/$t/." "$scratch/"
    dict=()
    [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
    # -close_fd_mask=2: the target's own stderr is closed (libbson warns there
    # for some inputs, thousands of times a second); libFuzzer and the
    # sanitizers still report to the log, a broken property to stdout.
    # -rss_limit_mb: ASan's quarantine and allocator caches take config_fuzz's
    # RSS past 1 GB in 5 minutes (about 60 MB, flat, without the quarantine).
    rc=0
    "$bin" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
        -close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" \
        "${dict[@]}" "$scratch" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    files=$(find "$scratch" -type f | wc -l)
    bytes=$(du -sb "$scratch" | cut -f1)
    if [ "$rc" -eq 0 ]; then
        result=ok
        if [ "$merge" = 1 ]; then
            before=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
            "$bin" -merge=1 -max_len=4096 -close_fd_mask=2 "tests/fuzz/corpus/$t" "$scratch" \
                >"$out/logs/$t.merge.log" 2>&1 ||
                { result="merge failed ($out/logs/$t.merge.log)"; failed=1; }
            after=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
            [ "$result" = ok ] && result="ok, merged $((after - before)) new inputs"
        fi
    else
        failed=1
        artifact=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" | tail -1)
        reason=$(grep -m1 -o 'ERROR: [A-Za-z]*: [^ ]*.*\|property violated: .*\|runtime error: .*' "$log" || true)
        result="FAILED (exit $rc) ${reason:-see $log}${artifact:+; input: $artifact}"
    fi
    line=$(printf '%-7s %12s execs  corpus %5s files %8s bytes  %s' "$t" "${execs:-?}" "$files" \
        "$bytes" "$result")
    echo "fuzz: $line"
    summary+=("$line")
done

echo "fuzz: summary (${seconds}s per target, $(($(date +%s) - start))s in all, logs in $out/logs):"
for line in "${summary[@]}"; do echo "  $line"; done
exit "$failed"
