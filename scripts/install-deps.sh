#!/usr/bin/env bash
# Installs everything Halocline needs to build and test on Debian 12 (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PKGS=(
  build-essential cmake ninja-build pkg-config ccache clang clang-format clang-tidy
  libbson-dev libmongoc-dev libwiredtiger-dev wiredtiger
  libasio-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev
  libpcre2-dev libicu-dev libssl-dev openssl libsnappy-dev libzstd-dev zlib1g-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev libgoogle-perftools-dev
  python3-pymongo python3-snappy python3-zstandard
  openjdk-17-jdk-headless libmongodb-java
  chromium
)
missing=()
command -v node >/dev/null || missing+=(nodejs npm)
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
