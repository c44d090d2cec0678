#!/usr/bin/env bash
# Installs tessel's build dependencies (Debian packages) when missing, then configures and
# builds into ./build (or $TESSEL_BUILD_DIR). Safe to run again: it only does what is needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSEL_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${TESSEL_CMAKE_ARGS:-} >&2
ninja -C "$build" -j "$(nproc)" >&2
