#!/usr/bin/env bash
# The Python package as a user installs it: `pip install .` of this clone into a fresh venv
# (scikit-build-core builds the C++ libraries and the extension module; nanobind, numpy and
# scikit-build-core come from PyPI), then the TRG example from outside the source tree, which
# must print the seed value lnZ/N = 0.790559063800966(7) at beta = 0.3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv "$work/v"
"$work/v/bin/pip" install -q --disable-pip-version-check "$root"
cd "$work"
out=$("$work/v/bin/python" "$root/examples/trg_ising.py")
echo "$out"
grep -Eq "lnZ/N +0\.79055906380096[67] " <<<"$out" || {
  echo "test-pip-install: the installed package did not print the seed value of lnZ/N" >&2
  exit 1
}
echo "test-pip-install: ok"
