#!/usr/bin/env bash
# Runs every real-client integration suite against `halocline store`:
#   1. the unified-format conformance runner (its exit status = baseline regressions only):
#      against the store, then through the proxy (conformance/baseline-proxy.json)
#   2. node:test files: store/ (Node driver + raw wire), clients/ (mongosh, pymongo,
#      libmongoc), tiering/ (the proxy in front of a fast and an archive store: differential,
#      crash faults, routing, cold start, real clients), conformance/ (matcher unit tests)
# Prints node's test summary, then one closing line per part. Exits non-zero if either
# part failed.
#
# Env: HALOCLINE_BIN (server binary), CONFORMANCE_DIR, MONGOC_SMOKE_BIN,
#      CONFORMANCE_ARGS (e.g. "--only-baseline" or "--verbose").
set -uo pipefail
cd "$(dirname "$0")"

if [ ! -d node_modules/mongodb ] || [ ! -d node_modules/mongosh ]; then
  npm ci --ignore-scripts --no-audit --no-fund || exit 1
fi

tap="$(mktemp -t halocline-tap.XXXXXX)"
conf_out="$(mktemp -t halocline-conf.XXXXXX)"
trap 'rm -f "$tap" "$conf_out"' EXIT

echo "== conformance (unified test format): CRUD on a standalone store =="
# shellcheck disable=SC2086
node conformance/runner.js ${CONFORMANCE_ARGS:-} crud/ | tee "$conf_out"
conformance_status=${PIPESTATUS[0]}
echo "== conformance: change streams, transactions, sessions, retryable writes on a single-member replica set =="
# shellcheck disable=SC2086
node conformance/runner.js ${CONFORMANCE_ARGS:-} --replSet rs0 change-streams/ transactions/ sessions/ retryable-writes/ | tee -a "$conf_out"
[ "${PIPESTATUS[0]}" -ne 0 ] && conformance_status=1
echo "== conformance: the same suites through the tiering proxy (every collection they name tiered) =="
# shellcheck disable=SC2086
node conformance/runner.js ${CONFORMANCE_ARGS:-} --proxy --baseline conformance/baseline-proxy.json \
  crud/ change-streams/ transactions/ sessions/ retryable-writes/ | tee -a "$conf_out"
[ "${PIPESTATUS[0]}" -ne 0 ] && conformance_status=1

echo
echo "== node:test integration suites =="
node --test --test-timeout=900000 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tap" \
  store/*.test.js clients/*.test.js tiering/*.test.js conformance/*.test.js
node_status=$?

count() { grep -E "^# $1 [0-9]+" "$tap" | tail -1 | awk '{print $3}'; }
pass=$(count pass)
fail=$(count fail)
cancelled=$(count cancelled)
skipped=$(count skipped)

echo
echo "== summary =="
if [ "$conformance_status" -ne 0 ]; then
  echo "conformance runner: FAILED (exit $conformance_status: baseline regression or runner error)"
else
  echo "conformance runner: baseline OK"
fi
grep -E '^conformance: ([0-9]+ passed|SKIPPED)' "$conf_out"
echo "integration: ${pass:-0} passed, $(( ${fail:-0} + ${cancelled:-0} )) failed, ${skipped:-0} skipped"

if [ "$conformance_status" -ne 0 ] || [ "$node_status" -ne 0 ]; then
  exit 1
fi
