#!/usr/bin/env bash
# Installs tessel's build dependencies (Debian packages) when missing, then configures and
# builds into ./build (or $TESSEL_BUILD_DIR), the Python extension module included (its
# package assembled in build/python/tessel). Safe to run again: it only does what is needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSEL_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"

# The Python package's build and test tools (nanobind, pytest; python/requirements-dev.txt)
# from PyPI, in a venv inside the build that also sees Debian's numpy and matplotlib.
venv="$build/venv"
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$build"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check \
       -r "$root/python/requirements-dev.txt" >&2; then
  echo "setup: could not install python/requirements-dev.txt from PyPI into $venv" >&2
  exit 1
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTESSEL_PYTHON=ON -DPython_EXECUTABLE="$venv/bin/python" ${TESSEL_CMAKE_ARGS:-} >&2
ninja -C "$build" -j "$(nproc)" >&2
