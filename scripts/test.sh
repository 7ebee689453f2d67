#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds under ASan+UBSan, runs
# unit tests, real-driver integration tests and the conformance runner.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET="${HALO_PRESET:-asan-ubsan}"
bash scripts/install-deps.sh
if [ -f tests/js/package-lock.json ] && { [ ! -d tests/js/node_modules ] || [ tests/js/package-lock.json -nt tests/js/node_modules ]; }; then
  (cd tests/js && npm ci --ignore-scripts --no-audit --no-fund)
fi
cmake --preset "$PRESET" >/dev/null
cmake --build --preset "$PRESET" -j "$(nproc)"
export HALOCLINE_BIN="$PWD/build/$PRESET/src/cli/halocline"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --preset "$PRESET" -j "$(nproc)"

# Each fuzz target (wire, SCRAM, BSON, configs) under libFuzzer with ASan+UBSan
# for a short bounded time, from its seed corpus (clang, build/fuzz; about two
# minutes with the build). A crash fails the suite; the input is kept in
# build/fuzz/artifacts. Longer runs: scripts/fuzz.sh 10m (docs/OPERATIONS.md).
if [ "${HALO_SKIP_FUZZ:-0}" != "1" ]; then
  bash scripts/fuzz.sh "${HALO_FUZZ_TIME:-20s}"
fi

# The concurrent paths again under ThreadSanitizer: the store built with TSan
# serves many clients writing, tailing change streams and running transactions.
# Any race in Halocline code aborts the server and fails these tests.
# (tests/tsan.supp only silences the uninstrumented WiredTiger library.)
if [ "${HALO_SKIP_TSAN:-0}" != "1" ]; then
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan --target halocline -j "$(nproc)"
  (cd tests/js && HALOCLINE_BIN="$OLDPWD/build/tsan/src/cli/halocline" \
    TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$OLDPWD/tests/tsan.supp" \
    node --test --test-timeout=900000 store/concurrency.test.js store/transactions.test.js \
      store/changestream.test.js store/durability.test.js)
fi
