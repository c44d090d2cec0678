#!/usr/bin/env bash
# Installs the Debian packages tessel builds and tests with (OpenMPI for `tessel trg` sweeps,
# numpy and matplotlib for scripts/plot_sweep.py and the Python package's tests, Python's
# headers and venv for building that package, and any extra packages named on the
# command line) when they are missing; does nothing when all are installed.
# Used by setup.sh (the build) and fuzz.sh (which adds clang-14 and its libFuzzer runtime).
# Usage: scripts/install-deps.sh [EXTRA_PACKAGE ...]
set -euo pipefail
pkgs=(build-essential cmake ninja-build python3 llvm-14-dev llvm-14-tools
      liblapacke-dev libopenblas-dev nlohmann-json3-dev doctest-dev libcli11-dev
      libopenmpi-dev openmpi-bin libsleef-dev libeigen3-dev python3-numpy python3-matplotlib
      python3-dev python3-venv "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
