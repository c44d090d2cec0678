#!/usr/bin/env bash
# Runs every test of tessel: builds (installing dependencies if needed), then ctest runs the
# doctest unit tests and the lit + FileCheck golden tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSEL_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
export OPENBLAS_NUM_THREADS=1
ctest --test-dir "$build" --output-on-failure "$@"
