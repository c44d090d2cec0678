#!/usr/bin/env bash
# One command for tessel's benchmarks: installs the Python peers into bench/.venv if they are
# missing (bench/install-peers.sh; each peer optional), then runs bench/run.py, which measures
# tessel against numpy, JAX, PyTorch and the LAPACK floor side by side and writes BENCHMARKS.md.
#   bench/run.sh [--quick] [--tessel PATH] [--widths 1,2] [--rounds 3] ...   (bench/run.sh --help)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="$here/.venv/bin/python"
if [ ! -x "$py" ] || ! "$py" -c "import numpy, threadpoolctl" >/dev/null 2>&1; then
  "$here/install-peers.sh"
fi
[ -x "$py" ] || py=python3   # no venv at all: run.py still runs tessel's side (stdlib only)
exec "$py" "$here/run.py" "$@"
