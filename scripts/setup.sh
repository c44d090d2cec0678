#!/usr/bin/env bash
# Installs tessel's build dependencies (Debian packages) when missing, then configures and
# builds into ./build (or $TESSEL_BUILD_DIR). Safe to run again: it only does what is needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSEL_BUILD_DIR:-$root/build}

pkgs=(build-essential cmake ninja-build python3 llvm-14-dev llvm-14-tools libeigen3-dev
      liblapacke-dev libopenblas-dev nlohmann-json3-dev doctest-dev libcli11-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${TESSEL_CMAKE_ARGS:-} >&2
ninja -C "$build" -j "$(nproc)" >&2
