#!/usr/bin/env bash
# Bounded fuzzing of the program readers. Installs clang-14 and its libFuzzer
# runtime when missing, configures build-fuzz (clang++, -DTESSEL_FUZZ=ON: ASan + UBSan +
# coverage), builds only the fuzz targets, and runs each for TESSEL_FUZZ_SECONDS (60 by
# default) with the golden test files (tests/**/*.tir, their JSON forms) and
# fuzz/regressions/ as seed corpus. Exit status non-zero on any crash, contract
# violation, sanitizer report, leak, hang (> 10 s per input) or OOM; the reproducer is
# left in build-fuzz/fuzz/run-{text,json}/artifacts/ (add it to fuzz/regressions/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSEL_FUZZ_BUILD_DIR:-$root/build-fuzz}
secs=${TESSEL_FUZZ_SECONDS:-60}

# setup.sh's packages (the ir library needs LLVM ADT, nlohmann-json, ...) plus clang.
"$root/scripts/install-deps.sh" clang-14 libclang-rt-14-dev

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 -DTESSEL_FUZZ=ON -DTESSEL_FUZZ_SECONDS="$secs" >&2
ninja -C "$build" -j 2 fuzz_ir_text fuzz_ir_json tessel_fuzz_seeds >&2
ctest --test-dir "$build" -L fuzz --output-on-failure
