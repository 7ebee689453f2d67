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
