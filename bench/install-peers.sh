#!/usr/bin/env bash
# Install the Python peers for tessel's benchmark harness into bench/.venv.
#
# Every peer is optional: one that cannot be installed is skipped with a message, and the
# harness (bench/run.py) then reports it as "not installed" instead of faking a number.
# Only PyPI is used (pip, by package name).
#
#   numpy, scipy, threadpoolctl   numpy TRG forward, the SVD floor (LAPACK gesdd), BLAS report
#   jax, jaxlib (CPU)             jit(value_and_grad) TRG with a custom_jvp SVD (x64 enabled)
#   torch (CPU)                   eager autograd TRG with a custom autograd.Function SVD
#   matplotlib                    the plot in BENCHMARKS.md (optional)
#   quimb                         its HOTRG on the Ising torus, bench/torus.py's peer (optional)
#
# PyTorch: PyPI's Linux x86_64 wheel depends on the nvidia-* CUDA runtime wheels (several GB).
# We first try the torch wheel alone (--no-deps + its small pure-Python deps) and check
# `import torch`; if that import needs the CUDA libraries, we install the full dependency set
# only when the disk has more than TESSEL_BENCH_TORCH_MIN_FREE_GB (default 20) GB free.
# TESSEL_BENCH_TORCH=skip skips PyTorch entirely.
#
# Usage: bench/install-peers.sh            (idempotent; re-running only fills in what is missing)
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
py="$venv/bin/python"
log="$here/out/install.log"
mkdir -p "$here/out"
: >"$log"

say() { echo "install-peers: $*"; }

if [ ! -x "$py" ]; then
  say "creating virtualenv $venv"
  python3 -m venv "$venv" || { say "python3 -m venv failed; no Python peers"; exit 1; }
fi
pip_install() { "$py" -m pip install --disable-pip-version-check -q "$@" >>"$log" 2>&1; }
has() { "$py" -c "import $1" >/dev/null 2>&1; }

installed=(); skipped=()
try_pkg() {  # try_pkg <import-name> <pip args...>
  local mod="$1"; shift
  if has "$mod"; then installed+=("$mod"); return 0; fi
  say "installing $*"
  if pip_install "$@" && has "$mod"; then installed+=("$mod"); return 0; fi
  say "SKIP $mod: pip install $* failed (see $log)"; skipped+=("$mod"); return 1
}

try_pkg numpy numpy
try_pkg scipy scipy
try_pkg threadpoolctl threadpoolctl
try_pkg jax "jax[cpu]" || true
try_pkg matplotlib matplotlib || true
try_pkg quimb quimb || true

free_gb() { df -Pk "$here" | awk 'NR==2 { print int($4 / 1048576) }'; }
if [ "${TESSEL_BENCH_TORCH:-auto}" = skip ]; then
  say "SKIP torch: TESSEL_BENCH_TORCH=skip"; skipped+=(torch)
elif has torch; then
  installed+=(torch)
else
  say "installing torch wheel alone (no CUDA runtime wheels)"
  pip_install --no-deps torch && pip_install filelock typing-extensions sympy networkx jinja2 fsspec
  if has torch; then
    installed+=(torch)
  else
    need="${TESSEL_BENCH_TORCH_MIN_FREE_GB:-20}"; have="$(free_gb)"
    if [ "$have" -ge "$need" ]; then
      say "torch needs its CUDA runtime wheels to import; ${have} GB free >= ${need} GB: installing full torch"
      if pip_install torch && has torch; then installed+=(torch)
      else say "SKIP torch: full install failed (see $log)"; skipped+=(torch); fi
    else
      say "SKIP torch: the PyPI wheel needs several GB of CUDA wheels; only ${have} GB free (< ${need})"
      skipped+=(torch)
    fi
  fi
fi

say "installed: ${installed[*]:-none}"
say "skipped:   ${skipped[*]:-none}"
"$py" - <<'PY' 2>/dev/null || true
import importlib
for m in ("numpy", "scipy", "threadpoolctl", "jax", "jaxlib", "torch", "matplotlib"):
    try:
        print(f"install-peers:   {m:14s} {importlib.import_module(m).__version__}")
    except Exception as e:
        print(f"install-peers:   {m:14s} not available ({type(e).__name__})")
PY
exit 0
