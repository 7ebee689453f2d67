#!/usr/bin/env bash
# Brings up Halocline on its embedded default and prints the connection string.
# (Until the proxy lands this starts one embedded store.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
DATA="${HALO_DATA:-$PWD/data}"
PORT="${HALO_PORT:-27017}"
mkdir -p "$DATA/store"
echo "Halocline store: mongodb://127.0.0.1:${PORT}/  (Ctrl-C to stop; data in $DATA)"
exec ./build/release/src/cli/halocline store --dbpath "$DATA/store" --port "$PORT"
