#!/usr/bin/env bash
# Brings up Halocline on its embedded default: an archive store and a fast store
# (each a one-member replica set), the tiering proxy with its workers and a demo
# policy (shop.orders, age field `date`, horizon 30 days), all under one data
# directory; prints the connection string. Ctrl-C stops everything cleanly;
# running it again resumes with all data.
#   HALO_DATA (default ./data), HALO_PORT (proxy port, default 27017),
#   HALO_HORIZON (default 30d), HALO_AGE_FIELD (default date)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
exec ./build/release/src/cli/halocline up --dbpath "${HALO_DATA:-$PWD/data}" \
  --port "${HALO_PORT:-27017}" --horizon "${HALO_HORIZON:-30d}" \
  --age-field "${HALO_AGE_FIELD:-date}"
