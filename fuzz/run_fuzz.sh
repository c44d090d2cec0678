#!/usr/bin/env bash
# Bounded libFuzzer run of one target (used by ctest, label "fuzz"; see fuzz/README.md).
#   run_fuzz.sh TARGET KIND SECONDS WORKDIR SEEDTOOL SRCROOT
# KIND is text or json. Seeds: the golden test files (tests/lit/**/*.tir, their JSON
# forms, tests/**/*.json) plus fuzz/regressions/KIND (every input the fuzzer ever
# broke; libFuzzer runs all seeds before mutating). Fails (non-zero exit) on any
# crash, abort (contract violation, see fuzz/FuzzCommon.h), sanitizer report, leak,
# timeout (> 10 s per input) or out-of-memory (> 2 GB); the reproducer is written to
# WORKDIR/artifacts/ and printed.
set -euo pipefail
target=$1 kind=$2 secs=$3 work=$4 seedtool=$5 src=$6
rm -rf "$work/seeds" "$work/corpus"
mkdir -p "$work/seeds" "$work/corpus" "$work/artifacts"
mapfile -t golden < <(find "$src/tests" \( -name '*.tir' -o -name '*.json' \) -not -path '*/build*' | sort)
"$seedtool" "$work/seeds" "${golden[@]}"
dict=()
[ "$kind" = text ] && dict=(-dict="$src/fuzz/tir.dict")
regress="$src/fuzz/regressions/$kind"
mkdir -p "$work/empty"
[ -d "$regress" ] || regress="$work/empty"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec "$target" "${dict[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -max_len=8192 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  "$work/corpus" "$work/seeds/$kind" "$regress"
