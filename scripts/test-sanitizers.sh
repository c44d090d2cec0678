#!/usr/bin/env bash
# Sanitizer runs, each in its own build directory via CMakePresets.json:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer): the unit tests,
#         the lit golden tests and the hostile-input suite (ctest: unit, lit, reliability);
#         its test preset sets TESSEL_SKIP_SLOW_TESTS=1, which skips the one-minute HOTRG
#         chi = 32 accuracy case (the chi = 16 case runs the same code);
#   tsan  ThreadSanitizer: the engine's threaded tests (ctest label "engine").
# Usage: scripts/test-sanitizers.sh [asan] [tsan]   (default: both)
# Builds with -j2 (the machine is shared); setup.sh installs the packages first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
which=("$@")
[ ${#which[@]} -gt 0 ] || which=(asan tsan)
TESSEL_BUILD_DIR=${TESSEL_BUILD_DIR:-$root/build} "$root/scripts/setup.sh" >/dev/null
export OPENBLAS_NUM_THREADS=1
for s in "${which[@]}"; do
  case "$s" in
    asan)
      cmake --preset asan >&2
      cmake --build --preset asan >&2
      ctest --preset asan
      ;;
    tsan)
      cmake --preset tsan >&2
      cmake --build --preset tsan >&2
      ctest --preset tsan
      ;;
    *) echo "test-sanitizers: unknown sanitizer '$s' (asan, tsan)" >&2; exit 1 ;;
  esac
done
