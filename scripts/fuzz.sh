#!/usr/bin/env bash
# Bounded fuzzing, TESSEL_FUZZ_SECONDS (60 by default) per fuzzer; see fuzz/README.md.
#
# 1. The program readers: installs clang-14 and its libFuzzer runtime when missing,
#    configures build-fuzz (clang++, -DTESSEL_FUZZ=ON: ASan + UBSan + coverage), builds
#    only the fuzz targets, and runs each with the golden test files (tests/**/*.tir,
#    their JSON forms) and fuzz/regressions/{text,json} as seed corpus. Fails on any
#    crash, contract violation, sanitizer report, leak, hang (> 10 s per input) or OOM;
#    the reproducer is left in build-fuzz/fuzz/run-{text,json}/artifacts/.
# 2. The whole compiler, differentially: tessel_difffuzz from the release build (built by
#    setup.sh if needed) runs random programs through random pass pipelines and compares
#    the engine at widths 1, 2, 4, the reference evaluator, the passes and finite
#    differences. Seeds start at TESSEL_DIFFFUZZ_SEED (default: derived from the commit
#    checked out, so that a run of one commit checks the same programs wherever it runs
#    and every commit checks others; the clock outside a git checkout; printed). Fails on
#    any disagreement; the minimised case is left in build/difffuzz-failures/.
#
# Both run even when the first fails; the exit status is non-zero if either failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSEL_FUZZ_BUILD_DIR:-$root/build-fuzz}
release=${TESSEL_BUILD_DIR:-$root/build}
secs=${TESSEL_FUZZ_SECONDS:-60}
status=0

# setup.sh's packages (the ir library needs LLVM ADT, nlohmann-json, ...) plus clang.
"$root/scripts/install-deps.sh" clang-14 libclang-rt-14-dev

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 -DTESSEL_FUZZ=ON -DTESSEL_FUZZ_SECONDS="$secs" >&2
ninja -C "$build" -j 2 fuzz_ir_text fuzz_ir_json tessel_fuzz_seeds >&2
ctest --test-dir "$build" -L fuzz --output-on-failure || status=1

TESSEL_BUILD_DIR=$release "$root/scripts/setup.sh"
commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || true)
if [[ $commit =~ ^[0-9a-f]{40}$ ]]; then default_seed=$((16#${commit:0:7})); else default_seed=$(date +%s); fi
OPENBLAS_NUM_THREADS=1 "$release/fuzz/diff/tessel_difffuzz" --seconds "$secs" \
  --seed "${TESSEL_DIFFFUZZ_SEED:-$default_seed}" --out "$release/difffuzz-failures" || status=1
exit $status
