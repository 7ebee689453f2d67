#!/usr/bin/env bash
# Brings up Halocline on its embedded default and prints the connection string.
# Until the tiering proxy lands this is one embedded store, a single-member
# replica set (so change streams, retryable writes and transactions work).
# Ctrl-C stops it cleanly; running it again resumes with all data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
DATA="${HALO_DATA:-$PWD/data}"
PORT="${HALO_PORT:-27017}"
mkdir -p "$DATA/store"
LOG="$DATA/store.log"
./build/release/src/cli/halocline store --dbpath "$DATA/store" --port "$PORT" --replSet rs0 >"$LOG" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID' INT TERM
for _ in $(seq 1 300); do
  if grep -q '"Waiting for connections"' "$LOG"; then break; fi
  if ! kill -0 $PID 2>/dev/null; then cat "$LOG"; exit 1; fi
  sleep 0.1
done
PORT=$(grep -o '"Waiting for connections","attr":{"port":[0-9]*' "$LOG" | grep -o '[0-9]*$')
echo "Halocline store (replica set rs0) is up; data in $DATA, log in $LOG"
echo "mongodb://127.0.0.1:${PORT}/?replicaSet=rs0"
wait $PID
