#!/usr/bin/env bash
# Bounded fuzzing of the program readers (issue 8). Installs clang-14 and its libFuzzer
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
pkgs=(build-essential cmake ninja-build python3 llvm-14-dev llvm-14-tools libeigen3-dev
      liblapacke-dev libopenblas-dev nlohmann-json3-dev doctest-dev libcli11-dev
      clang-14 libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "fuzz: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 -DTESSEL_FUZZ=ON -DTESSEL_FUZZ_SECONDS="$secs" >&2
ninja -C "$build" -j 2 fuzz_ir_text fuzz_ir_json tessel_fuzz_seeds >&2
ctest --test-dir "$build" -L fuzz --output-on-failure
