#!/usr/bin/env python3
"""tessel's benchmark harness: tessel against numpy, JAX, PyTorch and the LAPACK floor, side by
side in one run (method: docs/benchmarking.md).

    bench/run.sh [--quick] [--widths 1,2] [--rounds 3] [--repeat 10] [--only trg,micro,compile,load,profile,memory,prepare]

Phases (every timed program is a separate process; within one round the contenders run one
after another, A B C … A B C …, so slow drifts of the machine's load hit every contender):

  0. setup      pick and snapshot the tessel binary, check which peers import, dump the 32
                256×256 SVD inputs of the β = 0.4 TRG (tessel's `trg --dump-svd-inputs` if it
                exists, else the numpy peer's), write the .tir programs and .npy inputs.
  1. check      lnZ/N at β = 0.3 and 0.4 of every TRG contender against the reference values
                (to 1e-12) and d lnZ/dβ against tessel's: a contender that fails has its times
                shown but never used in a ratio.
  2. trg        β = 0.4, χ = 16, 20 steps: tessel (store, recompute), JAX, PyTorch, numpy (value
                only), and the SVD floor (the same 32 gesdd calls through tessel's engine and
                through numpy), at every width.
  3. micro      grad of Σ sin(x)·x² (n = 1000): tessel run of the grad program vs
                jax.jit(jax.grad(f)); svd and svdvals of one 256×256 matrix (tessel, numpy, JAX,
                PyTorch); `tessel bench svd` (engine vs direct LAPACKE).
  4. compile    JAX AOT trace+lower and XLA compile of value_and_grad vs tessel compile+prepare
                of all staged programs (value and grad), from `tessel trg --json`.
  5. load       tessel TRG value at width 1 and 2, idle and while two time-bounded busy loops
                started and stopped by this harness occupy both cores.
  6. profile    `tessel trg --grad --profile`: where tessel's time goes, op by op.
  7. memory     `tessel trg --chi 24 --grad --json` per residual policy: the planned peak bytes
                against the measured peak resident set size.
  8. prepare    `tessel bench prepare`: prepare() on n-op chain gradients and whole-program TRG
                derivatives.

Rows: first run (median over the rounds' processes), steady min (over all runs), median and p90
(median over rounds of each process's median / p90), max (over all runs), width, BLAS + threads
as each contender reports it, load average before the first and after the last process. Ratios
are taken within this run and say whether they use the min or the median.

Writes bench/out/results.jsonl (every raw record), bench/out/summary.json, BENCHMARKS.md at the
repository root and, when matplotlib imports, bench/benchmarks.svg.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = os.path.join(HERE, "peers")
VENV_PY = os.path.join(HERE, ".venv", "bin", "python")

REF_LNZ = {0.3: 0.790559063800966, 0.4: 0.879363060306851}   # tests/data/README.md (χ=16, 20 steps)
LNZ_TOL = 1e-12
DLNZ_TOL = 1e-9      # |d lnZ/dβ(peer) − d lnZ/dβ(tessel)|: a flag, not a gate (FD agreement ~1e-10)
BETA, CHI, STEPS = 0.4, 16, 20


# ----------------------------------------------------------------------------------------------
# Small utilities

class Harness:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        os.makedirs(self.out, exist_ok=True)
        mode = "a" if args.rerender else "w"
        self.logf = open(os.path.join(self.out, "run.log"), mode)
        self.raw = None if args.rerender else open(os.path.join(self.out, "results.jsonl"), "w")
        self.rows: list[dict] = []          # one per (contender, workload, width, round)
        self.notes: list[str] = []          # skips and environment notes, shown in BENCHMARKS.md
        self.checks: dict[str, dict] = {}   # contender -> correctness results
        self.invalid: set[str] = set()      # contenders whose numbers failed the check
        self.tessel: str | None = None
        self.tessel_caps: dict[str, bool] = {}
        self.peers: dict[str, str] = {}     # importable peer -> version
        self.extra: dict = {}               # profile text, load test, tessel bench svd text
        self.last_cpu_per_wall: float | None = None   # of the last process run()
        self.last_cpu_total_ms: float | None = None

    def log(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        self.logf.write(line + "\n")
        self.logf.flush()

    def note(self, msg: str) -> None:
        self.log("NOTE: " + msg)
        if msg not in self.notes:
            self.notes.append(msg)

    def run(self, cmd: list[str], env: dict | None = None, timeout: float | None = None,
            what: str = "") -> tuple[int, str, str]:
        timeout = timeout or self.args.timeout
        shown = " ".join("<inline script>" if "\n" in c else shell_quote(c) for c in cmd)
        self.log(f"$ {shown}" + (f"   # {what}" if what else ""))
        ru0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        self.last_cpu_per_wall = None
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
            ru1, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - t0
            cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
            self.last_cpu_per_wall = cpu / wall if wall > 0 else None
            self.last_cpu_total_ms = cpu * 1e3
        except subprocess.TimeoutExpired:
            self.note(f"timed out after {timeout:.0f} s: {' '.join(cmd[:4])} …")
            return 124, "", "timeout"
        except OSError as e:
            return 127, "", str(e)
        if p.returncode != 0:
            self.log(f"  exit {p.returncode}: {p.stderr.strip()[-600:]}")
        return p.returncode, p.stdout, p.stderr

    def add_row(self, row: dict) -> None:
        self.rows.append(row)
        self.raw.write(json.dumps(row) + "\n")
        self.raw.flush()
        s = row
        self.log(f"  {s['workload']:<24} {s['contender']:<18} w{s['width']} r{s['round']}: "
                 f"first {fmt(s['first'])}  min {fmt(s['min'])}  median {fmt(s['median'])}  "
                 f"max {fmt(s['max'])} ms (n={s['n']})")


def shell_quote(s: str) -> str:
    return s if re.fullmatch(r"[\w@%+=:,./{}-]+", s) else "'" + s.replace("'", "'\\''") + "'"


def fmt(x, digits=None) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if digits is not None:
        return f"{x:.{digits}f}"
    ax = abs(x)
    if ax >= 100:
        return f"{x:.1f}"
    if ax >= 10:
        return f"{x:.2f}"
    if ax >= 1:
        return f"{x:.3f}"
    return f"{x:.4f}"


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def thread_env(width: int, peer: str) -> dict:
    """The environment of one contender's process at `width` threads."""
    env = dict(os.environ)
    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(width)
    if width == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    else:
        env["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={width}"
    env["JAX_PLATFORMS"] = "cpu"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some processors for old OpenBLAS builds) slow
    # a current numpy/scipy OpenBLAS: unset both together, for these peers' commands only.
    if peer in ("numpy", "jax") and ("OPENBLAS_CORETYPE" in env or "OPENBLAS_L2_SIZE" in env):
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    return env


def parse_jsonl(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def blas_of_peer(rec: dict) -> str:
    """'openblas 0.3.31 SkylakeX ×1 (numpy.libs)' for each library a Python peer loaded."""
    parts = []
    for d in rec.get("blas", []):
        if "note" in d:
            parts.append(d["note"])
            continue
        if d.get("user_api") == "openmp":
            parts.append(f"openmp ×{d.get('num_threads')}")
            continue
        where = os.path.basename(os.path.dirname(d.get("filepath", ""))) or "?"
        parts.append(f"{d.get('internal_api')} {d.get('version', '')} {d.get('architecture', '')} "
                     f"×{d.get('num_threads')} ({where})")
    v = rec.get("versions", {})
    if "torch_blas" in v:
        parts.insert(0, f"torch {v['torch_blas']}/{v['torch_lapack']} ×{v.get('torch_threads')}")
    return "; ".join(parts) or "?"


def peer_row(rec: dict, contender: str, width: int, rnd: int) -> dict:
    st = rec.get("stats", {})
    return {"workload": rec["workload"], "contender": contender, "width": width, "round": rnd,
            "first": rec.get("first_ms"), "min": st.get("min"), "median": st.get("median"),
            "p90": st.get("p90"), "max": st.get("max"), "n": st.get("n", 0),
            "blas": blas_of_peer(rec), "load_before": rec.get("loadavg", {}).get("before"),
            "load_after": rec.get("loadavg", {}).get("after"),
            "values": {k: rec[k] for k in ("lnZ_per_site", "dlnZ_dbeta", "beta",
                                           "max_abs_err_vs_closed_form", "simd") if k in rec},
            "env": rec.get("env", {}), "cpu_per_wall": rec.get("steady_cpu_per_wall"),
            "cpu_per_wall_scope": "steady",
            "cpu_median": (rec.get("cpu_stats") or {}).get("median"), "split": rec.get("split")}


_SUMMARY_RE = re.compile(r"min ([\d.]+) median ([\d.]+) p90 ([\d.]+) max ([\d.]+) ms \(N=(\d+)\)")


def parse_tessel_run(text: str) -> dict:
    """Parses `tessel run` text: prepare, run first, run steady, blas, load average."""
    r: dict = {}
    m = re.search(r"^prepare: ([\d.]+) ms", text, re.M)
    r["prepare"] = float(m.group(1)) if m else None
    m = re.search(r"^run first: ([\d.]+) ms", text, re.M)
    r["first"] = float(m.group(1)) if m else None
    m = re.search(r"^run steady: (.*)$", text, re.M)
    if m and (s := _SUMMARY_RE.search(m.group(1))):
        r.update(min=float(s.group(1)), median=float(s.group(2)), p90=float(s.group(3)),
                 max=float(s.group(4)), n=int(s.group(5)))
    m = re.search(r"^blas: (.*)$", text, re.M)
    r["blas"] = m.group(1).strip() if m else "?"
    m = re.search(r"^load average: before (.*), after (.*)$", text, re.M)
    r["load_before"], r["load_after"] = (m.group(1), m.group(2)) if m else (None, None)
    return r


# ----------------------------------------------------------------------------------------------
# Phase 0: setup

def find_tessel(h: Harness) -> None:
    cands = []
    if h.args.tessel:
        if not (os.path.isfile(h.args.tessel) and os.access(h.args.tessel, os.X_OK)):
            h.note(f"--tessel {h.args.tessel}: not an executable file: every tessel row is skipped")
            return
        cands.append(h.args.tessel)
    if os.environ.get("TESSEL"):
        cands.append(os.environ["TESSEL"])
    cands += [os.path.join(ROOT, d, "tools", "tessel") for d in ("build-bench", "build")]
    def release_build(d: str) -> bool:
        """Only Release builds without sanitizers are timed (an ASan binary is 2-3× slower)."""
        try:
            with open(os.path.join(ROOT, d, "CMakeCache.txt")) as f:
                cache = f.read()
        except OSError:
            return False
        bt = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", cache, re.M)
        return bool(bt and bt.group(1).strip() == "Release" and "-fsanitize" not in cache)

    cands = [c for c in cands if c == h.args.tessel or c == os.environ.get("TESSEL")
             or release_build(os.path.basename(os.path.dirname(os.path.dirname(c))))]
    others = []
    for d in os.listdir(ROOT):
        p = os.path.join(ROOT, d, "tools", "tessel")
        if d.startswith("build") and os.path.isfile(p) and p not in cands and release_build(d):
            others.append(p)
    others.sort(key=lambda p: os.path.getmtime(p), reverse=True)   # the newest build first
    cands += others
    for c in cands:
        if not (os.path.isfile(c) and os.access(c, os.X_OK) and os.path.getsize(c) > 0):
            continue
        try:
            top = subprocess.run([c, "--help"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        has_trg = bool(re.search(r"^\s+trg\s", top, re.M))
        if h.args.tessel or has_trg or c == cands[-1]:
            # Snapshot the binary: other engineers may relink their build directory mid-run.
            snap = os.path.join(h.out, "tessel")
            shutil.copy2(c, snap)
            h.tessel = snap
            h.extra["tessel_source"] = c
            break
    if not h.tessel:
        h.note("no tessel binary found (bench/run.sh --tessel PATH, $TESSEL, or build with "
               "scripts/setup.sh): every tessel row is skipped")
        return
    top = subprocess.run([h.tessel, "--help"], capture_output=True, text=True).stdout
    for sub in ("trg", "run", "bench", "opt"):
        h.tessel_caps[sub] = bool(re.search(rf"^\s+{sub}\s", top, re.M))
    if h.tessel_caps["trg"]:
        trg_help = subprocess.run([h.tessel, "trg", "--help"], capture_output=True, text=True).stdout
        h.tessel_caps["dump_svd_inputs"] = "--dump-svd-inputs" in trg_help
        h.tessel_caps["profile"] = "--profile" in trg_help
        h.tessel_caps["svd_method"] = "--svd " in trg_help
    ver = subprocess.run([h.tessel, "--version"], capture_output=True, text=True).stdout.strip()
    h.extra["tessel_version"] = ver
    h.log(f"tessel: {h.extra['tessel_source']} (snapshot {h.tessel}), {ver or 'no --version'}; "
          f"capabilities {h.tessel_caps}")
    for sub in ("trg", "run", "bench", "opt"):
        if not h.tessel_caps.get(sub):
            h.note(f"`tessel {sub}` is not in this tessel build: its rows are skipped")


def find_peers(h: Harness) -> None:
    if not os.path.exists(VENV_PY):
        h.note("bench/.venv is missing (run bench/install-peers.sh): every Python peer is skipped")
        return
    probe = ("import importlib, json\nout = {}\n"
             "for m in ('numpy', 'scipy', 'threadpoolctl', 'jax', 'jaxlib', 'torch', 'matplotlib'):\n"
             "    try:\n        out[m] = importlib.import_module(m).__version__\n"
             "    except Exception as e:\n        out[m] = None\nprint(json.dumps(out))\n")
    rc, so, _ = h.run([VENV_PY, "-c", probe], env=thread_env(1, "numpy"), what="which peers import")
    found = json.loads(so) if rc == 0 else {}
    for m, v in found.items():
        if v:
            h.peers[m] = v
        elif m in ("numpy", "jax", "torch", "threadpoolctl"):
            h.note(f"peer `{m}` is not installed in bench/.venv: its rows are skipped")
    h.log(f"peers: {h.peers}")


def prepare_inputs(h: Harness) -> None:
    """Writes the .tir programs and .npy inputs; dumps the 32 SVD inputs."""
    out = h.out
    h.extra["svd_dir"] = None
    if "numpy" in h.peers:
        code = ("import numpy as np, sys\n"
                "np.save(sys.argv[1], np.random.default_rng(0).uniform(-1.0, 1.0, size=1000))\n"
                "np.save(sys.argv[2], np.random.default_rng(42).uniform(-1.0, 1.0, size=(256, 256)))\n"
                "np.save(sys.argv[3], np.random.default_rng(0).uniform(-1.0, 1.0, size=1000000))\n")
        h.run([VENV_PY, "-c", code, os.path.join(out, "x1000.npy"), os.path.join(out, "m256.npy"),
               os.path.join(out, "x1000000.npy")], what="inputs of the micro-benchmarks")
    # The 32 256×256 SVD inputs of the β = 0.4 TRG.
    if h.tessel and h.tessel_caps.get("dump_svd_inputs"):
        d = os.path.join(out, "svd_inputs_tessel")
        shutil.rmtree(d, ignore_errors=True)
        rc, _, _ = h.run([h.tessel, "trg", "--beta", str(BETA), "--chi", str(CHI), "--steps",
                          str(STEPS), "--repeat", "0", "--no-progress", "--dump-svd-inputs", d],
                         env=thread_env(1, "tessel"), what="dump the SVD inputs")
        if rc == 0 and os.path.isdir(d):
            h.extra["svd_dir"], h.extra["svd_source"] = d, "tessel trg --dump-svd-inputs"
    if h.extra["svd_dir"] is None and "numpy" in h.peers:
        d = os.path.join(out, "svd_inputs_numpy")
        shutil.rmtree(d, ignore_errors=True)
        rc, _, _ = h.run([VENV_PY, os.path.join(PEERS, "trg_numpy.py"), "trg", "--beta", str(BETA),
                          "--chi", str(CHI), "--steps", str(STEPS), "--repeat", "0",
                          "--dump-svd-inputs", d], env=thread_env(1, "numpy"),
                         what="dump the SVD inputs (numpy TRG)")
        if rc == 0:
            h.extra["svd_dir"], h.extra["svd_source"] = d, "numpy peer (trg_numpy.py --dump-svd-inputs)"
            if h.tessel:
                h.note("`tessel trg --dump-svd-inputs` does not exist in this build: the SVD floor "
                       "uses the 32 matrices dumped by the numpy TRG for both tessel and numpy "
                       "(same algorithm, same β; the matrices agree with tessel's up to a scalar "
                       "per step (numpy's T/max|T| against the T tessel's SVDs factor), rounding "
                       "and the gauge of degenerate multiplets)")
    if h.extra["svd_dir"]:
        mats = sorted(f for f in os.listdir(h.extra["svd_dir"]) if f.endswith(".npy"))
        h.extra["svd_files"] = [os.path.join(h.extra["svd_dir"], f) for f in mats]
        n = 256
        sig = ", ".join(f"%A{i:02d}: f64[{n},{n}]" for i in range(len(mats)))
        lines = [f"// The {len(mats)} gesdd calls of the beta=0.4, chi=16 TRG (bench/run.py).",
                 f"program @svd_floor({sig}) {{"]
        rets = []
        for i in range(len(mats)):
            lines.append(f"  %U{i:02d}, %S{i:02d}, %V{i:02d} = svd %A{i:02d} {{eps = 1e-12}} : "
                         f"f64[{n},{n}], f64[{n}], f64[{n},{n}]")
            rets += [f"%U{i:02d}", f"%S{i:02d}", f"%V{i:02d}"]
        lines += ["  return " + ", ".join(rets), "}"]
        write(os.path.join(out, "svd_floor.tir"), "\n".join(lines) + "\n")
    write(os.path.join(out, "svd256.tir"),
          "program @svd256(%A: f64[256,256]) {\n"
          "  %U, %S, %Vt = svd %A {eps = 1e-12} : f64[256,256], f64[256], f64[256,256]\n"
          "  return %U, %S, %Vt\n}\n")
    write(os.path.join(out, "svdvals256.tir"),
          "program @svdvals256(%A: f64[256,256]) {\n"
          "  %U, %S, %Vt = svd %A {eps = 1e-12} : f64[256,256], f64[256], f64[256,256]\n"
          "  return %S\n}\n")
    # f(x) = sum(sin(x) * x^2) at n = 1000 (the seeds' micro-benchmark) and n = 10^6.
    for n, suffix in ((1000, ""), (1000000, "_1e6")):
        write(os.path.join(out, f"sin_x2{suffix}.tir"),
              f"// f(x) = sum(sin(x) * x^2), n = {n}\n"
              f"program @sin_x2(%x: f64[{n}]) {{\n"
              f"  %s = sin %x : f64[{n}]\n  %x2 = mul %x, %x : f64[{n}]\n"
              f"  %p = mul %s, %x2 : f64[{n}]\n  %y = reduce_sum %p {{axes = [0]}} : f64[]\n"
              "  return %y\n}\n")
        if h.tessel and h.tessel_caps.get("opt"):
            # jax.jit(jax.grad(f)) returns the gradient only: so does tessel's program.
            for passes in ("grad{wrt=x,keep-outputs=false},cse,dce", "grad{wrt=x,keep-outputs=false}"):
                rc, _, _ = h.run([h.tessel, "opt", os.path.join(out, f"sin_x2{suffix}.tir"), "--passes",
                                  passes, "-o", os.path.join(out, f"sin_x2{suffix}_grad.tir")],
                                 what="grad program")
                if rc == 0:
                    h.extra["grad_passes"] = passes
                    break


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


# ----------------------------------------------------------------------------------------------
# Contenders: each returns the rows of one process.

def tessel_trg(h: Harness, width: int, rnd: int, checkpoint: str, grad: bool = True,
               repeat: int | None = None, beta: float = BETA, tag: str | None = None,
               workload_prefix: str = "trg", order: str | None = None,
               svd: str | None = None) -> list[dict]:
    if not (h.tessel and h.tessel_caps.get("trg")):
        return []
    repeat = h.args.repeat if repeat is None else repeat
    cmd = [h.tessel, "trg", "--beta", str(beta), "--chi", str(CHI), "--steps", str(STEPS),
           "--checkpoint", checkpoint, "--width", str(width), "--repeat", str(repeat),
           "--json", "--no-progress"] + (["--grad"] if grad else [])
    if order or h.args.tessel_order:
        cmd += ["--order", order or h.args.tessel_order]
    if svd:
        cmd += ["--svd", svd]
    rc, so, _ = h.run(cmd, env=thread_env(width, "tessel"))
    recs = parse_jsonl(so)
    if rc != 0 or not recs:
        return []
    r = recs[0]
    if not order and not h.args.tessel_order and r.get("order"):
        h.extra.setdefault("tessel_default_order", r["order"])
    contender = tag or f"tessel {checkpoint}"
    rows = []
    tm = r.get("timing_ms", {})
    for key, wl in (("value", f"{workload_prefix}_value"),
                    ("value_and_grad", f"{workload_prefix}_value_and_grad")):
        t = tm.get(key)
        if not t:
            continue
        rows.append({"workload": wl, "contender": contender, "width": width, "round": rnd,
                     "first": t.get("first"), "min": t.get("min"), "median": t.get("median"),
                     "p90": t.get("p90"), "max": t.get("max"), "n": t.get("n", repeat),
                     "blas": r.get("blas", "?"),
                     "load_before": (r.get("loadavg") or {}).get("before"),
                     "load_after": (r.get("loadavg") or {}).get("after"),
                     "values": {"lnZ_per_site": r.get("lnZ_per_site"),
                                "dlnZ_dbeta": r.get("dlnZ_dbeta"), "beta": r.get("beta")},
                     "compile_ms": tm.get("compile"), "prepare_ms": tm.get("prepare"),
                     "compile_groups": r.get("compile_groups"), "ops": r.get("ops"),
                     "order": r.get("order"), "mode": r.get("mode"),
                     "cpu_per_wall": h.last_cpu_per_wall, "cpu_per_wall_scope": "process"})
    return rows


def py_peer(h: Harness, peer: str, script: str, args: list[str], width: int, rnd: int,
            contender: str | None = None) -> list[dict]:
    need = {"numpy": "numpy", "jax": "jax", "torch": "torch"}[peer]
    if need not in h.peers:
        return []
    cmd = [VENV_PY, os.path.join(PEERS, script)]
    if peer == "torch":
        cmd += ["--threads", str(width)]
    rc, so, _ = h.run(cmd + args, env=thread_env(width, peer))
    if rc != 0:
        return []
    return [peer_row(rec, contender or peer, width, rnd) for rec in parse_jsonl(so)]


def tessel_run(h: Harness, prog: str, inputs: list[str], width: int, rnd: int, workload: str,
               contender: str, repeat: int) -> list[dict]:
    if not (h.tessel and h.tessel_caps.get("run")) or not os.path.exists(prog):
        return []
    cmd = [h.tessel, "run", prog, "--width", str(width), "--repeat", str(repeat)]
    for i in inputs:
        cmd += ["--input", i]
    rc, so, _ = h.run(cmd, env=thread_env(width, "tessel"))
    if rc != 0:
        return []
    p = parse_tessel_run(so)
    if p.get("median") is None:
        return []
    return [{"workload": workload, "contender": contender, "width": width, "round": rnd,
             "first": p["first"], "min": p["min"], "median": p["median"], "p90": p["p90"],
             "max": p["max"], "n": p["n"], "blas": p["blas"], "load_before": p["load_before"],
             "load_after": p["load_after"], "prepare_ms": p["prepare"], "values": {},
             "cpu_per_wall": h.last_cpu_per_wall, "cpu_per_wall_scope": "process",
             # whole-process CPU time / (first + warm-up + steady runs): an upper bound on
             # the CPU time of one run (it also pays for start-up, .npy reads and prepare)
             "cpu_per_run_bound": (h.last_cpu_total_ms / (p["n"] + 2)
                                   if h.last_cpu_total_ms is not None else None)}]


# ----------------------------------------------------------------------------------------------
# Phase 1: correctness

def phase_check(h: Harness) -> None:
    h.log("== check: lnZ/N at beta = 0.3 and 0.4 against the reference, d lnZ/dbeta vs tessel")
    res: dict[str, dict] = {}
    if h.tessel and h.tessel_caps.get("trg"):
        rc, so, _ = h.run([h.tessel, "trg", "--beta", "0.3,0.4", "--chi", str(CHI), "--steps",
                           str(STEPS), "--grad", "--repeat", "0", "--json", "--no-progress"],
                          env=thread_env(1, "tessel"), what="check")
        for r in parse_jsonl(so):
            res.setdefault("tessel", {})[r["beta"]] = (r.get("lnZ_per_site"), r.get("dlnZ_dbeta"))
    for peer, script, extra in (("numpy", "trg_numpy.py", []),
                                ("jax", "trg_jax.py", ["--value-only"]),
                                ("torch", "trg_torch.py", [])):
        if peer not in h.peers:
            continue
        for beta in (0.3, 0.4):
            if peer == "jax" and beta == 0.4:
                continue   # JAX's β = 0.4 values come from its timed runs (a compile is ~1 min)
            args = ["trg", "--beta", str(beta), "--repeat", "0"] + extra
            if peer == "torch":
                args = ["--threads", "1"] + args
            rc, so, _ = h.run([VENV_PY, os.path.join(PEERS, script)] + args,
                              env=thread_env(1, peer), what="check")
            vals = {r["workload"]: r for r in parse_jsonl(so)}
            v = vals.get("trg_value", {}).get("lnZ_per_site")
            g = vals.get("trg_value_and_grad", {}).get("dlnZ_dbeta")
            res.setdefault(peer, {})[beta] = (v, g)
    h.checks = res


def finish_checks(h: Harness) -> None:
    """Adds β = 0.4 values from the timed rows, decides validity, compares d lnZ/dβ."""
    for row in h.rows:
        if not row["workload"].startswith("trg_value") or "gesdd" in row["contender"]:
            continue
        peer = row["contender"].split()[0]
        v = row["values"].get("lnZ_per_site")
        g = row["values"].get("dlnZ_dbeta")
        cur = h.checks.setdefault(peer, {}).get(0.4, (None, None))
        h.checks[peer][0.4] = (cur[0] if cur[0] is not None else v,
                               cur[1] if cur[1] is not None else g)
        if v is not None and abs(v - REF_LNZ[0.4]) > LNZ_TOL:
            h.invalid.add(row["contender"])
    t_g = h.checks.get("tessel", {}).get(0.4, (None, None))[1]
    for peer, per_beta in h.checks.items():
        ok = True
        for beta in (0.3, 0.4):
            v = per_beta.get(beta, (None, None))[0]
            if v is None or abs(v - REF_LNZ[beta]) > LNZ_TOL:
                ok = False
        if not ok:
            for row in h.rows:
                if (row["contender"].split()[0] == peer and "gesdd" not in row["contender"]
                        and row["workload"].startswith(("trg_", "load_", "compile_"))):
                    h.invalid.add(row["contender"])
            h.note(f"{peer}: lnZ/N does not match the reference to {LNZ_TOL:g} (or was not "
                   f"computed): its times are shown but not used in any ratio")
        g = per_beta.get(0.4, (None, None))[1]
        if peer != "tessel" and g is not None and t_g is not None and abs(g - t_g) > DLNZ_TOL:
            h.note(f"{peer}: d lnZ/dbeta = {g!r} differs from tessel's {t_g!r} by "
                   f"{abs(g - t_g):.2e} (> {DLNZ_TOL:g})")


# ----------------------------------------------------------------------------------------------
# Phases 2-5

def phase_trg(h: Harness) -> None:
    h.log("== trg: beta = 0.4, chi = 16, 20 steps; contenders alternated within each round")
    rep = lambda w: h.args.repeat if w == 1 else h.args.wide_repeat  # noqa: E731
    floor_inputs = [f"A{i:02d}={p}" for i, p in enumerate(h.extra.get("svd_files", []))]
    jobs = [
        ("tessel store", lambda w, r: tessel_trg(h, w, r, "store", repeat=rep(w))),
        ("jax", lambda w, r: py_peer(h, "jax", "trg_jax.py", ["trg", "--repeat", str(rep(w))], w, r)),
        ("floor tessel", lambda w, r: tessel_run(h, os.path.join(h.out, "svd_floor.tir"),
                                                 floor_inputs, w, r, f"svd_floor_{len(floor_inputs)}",
                                                 "tessel (engine gesdd)", rep(w))),
        ("numpy", lambda w, r: py_peer(h, "numpy", "trg_numpy.py", ["trg", "--repeat", str(rep(w))],
                                       w, r)),
        ("tessel recompute", lambda w, r: tessel_trg(h, w, r, "recompute", repeat=rep(w))),
        # The same binary with the full SVD (gesdd, then the slice): what truncation saves.
        ("tessel full", lambda w, r: tessel_trg(h, w, r, "store", repeat=rep(w), svd="full",
                                                tag="tessel store --svd full")
         if h.tessel_caps.get("svd_method") else []),
        # The best a numpy user who truncates would write: a randomized SVD (subspace
        # iteration, sketch 2k) with tessel's stopping rule, and scipy's svds (ARPACK).
        ("numpy randomized", lambda w, r: py_peer(h, "numpy", "trg_numpy.py",
                                                  ["trg", "--svd", "randomized", "--repeat", str(rep(w))],
                                                  w, r, "numpy randomized")),
        ("numpy svds", lambda w, r: py_peer(h, "numpy", "trg_numpy.py",
                                            ["trg", "--svd", "svds", "--repeat", str(rep(w))],
                                            w, r, "numpy svds")),
        # tessel with the peers' contraction order, unless that is already its default
        ("tessel extra order", lambda w, r: tessel_trg(
            h, w, r, "store", repeat=rep(w), order=h.args.tessel_extra_order,
            tag=f"tessel store {h.args.tessel_extra_order}")
         if h.args.tessel_extra_order
         and h.extra.get("tessel_default_order") != h.args.tessel_extra_order else []),
        ("torch", lambda w, r: py_peer(h, "torch", "trg_torch.py", ["trg", "--repeat", str(rep(w))],
                                       w, r)),
        ("split numpy", lambda w, r: py_peer(h, "numpy", "trg_numpy.py",
                                             ["split", "--dir", h.extra.get("svd_dir") or "",
                                              "--repeat", str(rep(w))], w, r)
         if h.extra.get("svd_dir") and w == 1 else []),
        ("floor numpy", lambda w, r: py_peer(h, "numpy", "trg_numpy.py",
                                             ["floor", "--dir", h.extra.get("svd_dir") or "",
                                              "--repeat", str(rep(w))], w, r, "numpy (gesdd)")
         if h.extra.get("svd_dir") else []),
    ]
    run_rounds(h, jobs)


def phase_micro(h: Harness) -> None:
    h.log("== micro: grad of sum(sin(x) x^2), n = 1000; svd and svdvals 256x256")
    x = os.path.join(h.out, "x1000.npy")
    x6 = os.path.join(h.out, "x1000000.npy")
    big_repeat = max(5, h.args.micro_repeat // 100)
    m = os.path.join(h.out, "m256.npy")
    gr = str(h.args.micro_repeat)
    sr = str(h.args.svd_repeat)
    jobs = [
        ("tessel grad", lambda w, r: tessel_run(h, os.path.join(h.out, "sin_x2_grad.tir"),
                                                [f"x={x}"], w, r, "grad_sin_x2_1000", "tessel",
                                                h.args.micro_repeat)
         if h.extra.get("grad_passes") and os.path.exists(x) else []),
        ("jax grad", lambda w, r: py_peer(h, "jax", "trg_jax.py",
                                          ["grad", "--x", x, "--repeat", gr], w, r)
         if os.path.exists(x) else []),
        ("numpy grad", lambda w, r: py_peer(h, "numpy", "trg_numpy.py",
                                            ["grad", "--x", x, "--repeat", gr], w, r)
         if os.path.exists(x) else []),
        # n = 10^6: memory-bound passes instead of call overhead (fewer repeats).
        ("tessel grad 1e6", lambda w, r: tessel_run(h, os.path.join(h.out, "sin_x2_1e6_grad.tir"),
                                                    [f"x={x6}"], w, r, "grad_sin_x2_1000000",
                                                    "tessel", big_repeat)
         if h.extra.get("grad_passes") and os.path.exists(x6) else []),
        ("jax grad 1e6", lambda w, r: py_peer(h, "jax", "trg_jax.py",
                                              ["grad", "--x", x6, "--repeat", str(big_repeat)], w, r)
         if os.path.exists(x6) else []),
        ("numpy grad 1e6", lambda w, r: py_peer(h, "numpy", "trg_numpy.py",
                                                ["grad", "--x", x6, "--repeat", str(big_repeat)], w, r)
         if os.path.exists(x6) else []),
        ("tessel svd", lambda w, r: tessel_run(h, os.path.join(h.out, "svd256.tir"), [f"A={m}"],
                                               w, r, "svd_256", "tessel", h.args.svd_repeat)
                                    + tessel_run(h, os.path.join(h.out, "svdvals256.tir"),
                                                 [f"A={m}"], w, r, "svdvals_256", "tessel",
                                                 h.args.svd_repeat) if os.path.exists(m) else []),
        ("numpy svd", lambda w, r: py_peer(h, "numpy", "trg_numpy.py",
                                           ["svd", "--matrix", m, "--repeat", sr], w, r)),
        ("jax svd", lambda w, r: py_peer(h, "jax", "trg_jax.py",
                                         ["svd", "--matrix", m, "--repeat", sr], w, r)),
        ("torch svd", lambda w, r: py_peer(h, "torch", "trg_torch.py",
                                           ["svd", "--matrix", m, "--repeat", sr], w, r)),
    ]
    run_rounds(h, jobs)
    # `tessel bench svd`: the engine's gesdd vs a direct LAPACKE call, alternated in-process.
    if h.tessel and h.tessel_caps.get("bench"):
        texts = []
        for w in h.args.widths:
            rc, so, _ = h.run([h.tessel, "bench", "svd", "--n", "256", "--repeat",
                               str(h.args.svd_repeat), "--width", str(w)],
                              env=thread_env(w, "tessel"))
            if rc == 0:
                texts.append(f"$ tessel bench svd --n 256 --repeat {h.args.svd_repeat} --width {w}\n"
                             + so.strip())
        h.extra["bench_svd"] = "\n\n".join(texts)


def phase_compile(h: Harness) -> None:
    h.log("== compile: JAX AOT lower + compile of value_and_grad vs tessel compile + prepare")
    jobs = [
        ("jax compile", lambda w, r: py_peer(h, "jax", "trg_jax.py",
                                             ["compile", "--repeat", str(h.args.compile_repeat)],
                                             w, r)),
    ]
    run_rounds(h, jobs, widths=[1])


def run_rounds(h: Harness, jobs, widths=None) -> None:
    """Round r runs every job at every width, one after the other. Widths > 1 run only in the
    first --wide-rounds rounds (on a loaded 2-core machine a multi-threaded BLAS can be 10-50×
    slower, see the seeds; their rows still say so)."""
    widths = widths or h.args.widths
    for rnd in range(h.args.rounds):
        for w in widths:
            if w > 1 and rnd >= h.args.wide_rounds:
                continue
            for name, job in jobs:
                if h.args.skip and any(s in name for s in h.args.skip):
                    continue
                rows = job(w, rnd)
                if not rows:
                    h.log(f"  ({name}, width {w}: no rows — skipped or failed, see above)")
                for row in rows:
                    h.add_row(row)


class BusyLoops:
    """Two time-bounded CPU burners (each exits by itself after `seconds`), started and stopped
    by the harness."""

    def __init__(self, h: Harness, n: int, seconds: float):
        self.h, self.procs = h, []
        code = ("import time\nend = time.monotonic() + float(__import__('sys').argv[1])\n"
                "x = 0\nwhile time.monotonic() < end:\n    x += 1\n")
        for _ in range(n):
            self.procs.append(subprocess.Popen([sys.executable, "-c", code, str(seconds)]))
        h.log(f"  started {n} busy loops (pids {[p.pid for p in self.procs]}, each bounded to "
              f"{seconds:.0f} s)")
        time.sleep(1.0)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.h.log(f"  stopped busy loops {[p.pid for p in self.procs]}")


def phase_load(h: Harness) -> None:
    h.log("== load: tessel TRG value, idle vs two busy loops, widths 1 and 2")
    if not (h.tessel and h.tessel_caps.get("trg")):
        h.note("load test skipped: no `tessel trg`")
        return
    rep = h.args.load_repeat
    for rnd in range(h.args.rounds):
        for w in h.args.widths:
            for row in tessel_trg(h, w, rnd, "store", grad=False, repeat=rep, tag="tessel idle",
                                  workload_prefix="load"):
                h.add_row(row)
        busy = BusyLoops(h, 2, h.args.busy_seconds)
        try:
            for w in h.args.widths:
                for row in tessel_trg(h, w, rnd, "store", grad=False, repeat=rep,
                                      tag="tessel loaded", workload_prefix="load"):
                    h.add_row(row)
        finally:
            busy.stop()


def phase_profile(h: Harness) -> None:
    if h.tessel and h.tessel_caps.get("profile"):
        rc, so, se = h.run([h.tessel, "trg", "--beta", str(BETA), "--chi", str(CHI), "--steps",
                            str(STEPS), "--grad", "--repeat", "3", "--width", "1", "--profile",
                            "--no-progress"], env=thread_env(1, "tessel"), what="profile")
        if rc == 0:
            h.extra["profile"] = (so + ("\n" + se if se.strip() else "")).strip()


def phase_memory(h: Harness) -> None:
    """Planned peak bytes (the plans' arenas + the tensors the driver passes between programs)
    against the measured peak RSS, per residual policy, at chi = 24 (tessel trg --json)."""
    if not (h.tessel and h.tessel_caps.get("trg")):
        return
    rows = []
    for policy in ("store", "recompute", "save-svd"):
        rc, so, se = h.run([h.tessel, "trg", "--beta", str(BETA), "--chi", "24", "--steps", str(STEPS),
                            "--grad", "--checkpoint", policy, "--repeat", "2", "--width", "1",
                            "--json", "--no-progress"], env=thread_env(1, "tessel"),
                           what=f"memory {policy}")
        if rc != 0 or not so.strip():
            continue
        j = json.loads(so.strip().splitlines()[0])
        mem = j.get("memory")
        if not mem:
            return  # a tessel without planned/measured memory
        for kind in ("value", "value_and_grad"):
            m = mem.get(kind) or {}
            rows.append({"policy": policy, "kind": kind, "planned": m.get("planned_peak_bytes"),
                         "measured": m.get("measured_peak_rss_bytes"),
                         "window": m.get("rss_window"), "base": mem.get("rss_before_runs_bytes"),
                         "median_ms": ((j.get("timing_ms") or {}).get(kind) or {}).get("median")})
    h.extra["memory"] = rows


def phase_prepare(h: Harness) -> None:
    """prepare() at scale: n-op chain gradients and whole-program TRG derivatives."""
    if not (h.tessel and h.tessel_caps.get("bench")):
        return
    rc, so, se = h.run([h.tessel, "bench", "prepare"], env=thread_env(1, "tessel"), what="prepare")
    if rc == 0 and so.strip():
        h.extra["bench_prepare"] = so.strip()


# ----------------------------------------------------------------------------------------------
# Aggregation and report

def aggregate(h: Harness) -> dict:
    """(workload, contender, width) -> aggregated stats over rounds."""
    groups: dict[tuple, list[dict]] = {}
    for r in h.rows:
        groups.setdefault((r["workload"], r["contender"], r["width"]), []).append(r)
    agg = {}
    for key, rs in groups.items():
        def med(k):
            xs = [r[k] for r in rs if r.get(k) is not None]
            return statistics.median(xs) if xs else None
        mins = [r["min"] for r in rs if r.get("min") is not None]
        maxs = [r["max"] for r in rs if r.get("max") is not None]
        agg[key] = {"first": med("first"), "min": min(mins) if mins else None, "median": med("median"),
                    "p90": med("p90"), "max": max(maxs) if maxs else None,
                    "n": sum(r.get("n") or 0 for r in rs), "procs": len(rs),
                    "cpu_per_wall": med("cpu_per_wall"),
                    "cpu_median": med("cpu_median"), "cpu_per_run_bound": med("cpu_per_run_bound"),
                    "cpu_scope": rs[0].get("cpu_per_wall_scope"),
                    "blas": rs[0].get("blas", "?"), "load_before": rs[0].get("load_before"),
                    "load_after": rs[-1].get("load_after"), "rows": rs,
                    "valid": key[1] not in h.invalid}
    return agg


def paired_ratio(agg, a, b, stat="median"):
    """A/B within each round where both ran (same round = measured side by side, minutes
    apart), then the median over those rounds. Returns (ratio, rounds) or (None, 0); None
    too when either contender failed the correctness check."""
    A, B = agg.get(a), agg.get(b)
    if not A or not B or not (A["valid"] and B["valid"]):
        return None, 0
    ra = {r["round"]: r for r in A["rows"]}
    rb = {r["round"]: r for r in B["rows"]}
    vals = [ra[k][stat] / rb[k][stat] for k in sorted(set(ra) & set(rb))
            if ra[k].get(stat) is not None and rb[k].get(stat)]
    return (statistics.median(vals), len(vals)) if vals else (None, 0)


def ratio(agg, a, b, stat="median"):
    return paired_ratio(agg, a, b, stat)[0]


def machine_info() -> dict:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / 1048576:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            txt = f.read()
        fl = re.search(r"^flags\s*:(.*)$", txt, re.M)
        if fl:
            have = set(fl.group(1).split())
            flags = " ".join(x for x in ("avx2", "fma", "avx512f") if x in have)
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "mem": mem, "flags": flags,
            "kernel": platform.release(), "python": platform.python_version(), "commit": commit,
            "openblas_env": {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
                             if k in os.environ}}


def write_report(h: Harness, agg: dict, t_start: float) -> None:
    from report import render   # bench/report.py: the Markdown and the plot
    mi = h.extra.get("machine") or machine_info()
    summary = {"machine": mi, "peers": h.peers, "tessel": h.extra.get("tessel_source"),
               "tessel_caps": h.tessel_caps, "notes": h.notes, "checks": {
                   k: {str(b): v for b, v in d.items()} for k, d in h.checks.items()},
               "invalid": sorted(h.invalid), "args": vars(h.args),
               "rows": [{**{"workload": k[0], "contender": k[1], "width": k[2]},
                         **{kk: vv for kk, vv in v.items() if kk != "rows"}} for k, v in agg.items()]}
    with open(os.path.join(h.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    md, plot_note = render(h, agg, mi, t_start)
    path = os.path.abspath(h.args.markdown)
    write(path, md)
    h.log(f"wrote {path}" + (f" and {plot_note}" if plot_note else ""))


def save_state(h: Harness) -> None:
    """Everything the report needs besides the rows (for --rerender)."""
    state = {"notes": h.notes, "checks": {k: {str(b): v for b, v in d.items()}
                                          for k, d in h.checks.items()},
             "invalid": sorted(h.invalid), "peers": h.peers, "tessel_caps": h.tessel_caps,
             "extra": h.extra, "machine": machine_info(), "args": {
                 k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(h.args).items()}}
    with open(os.path.join(h.out, "state.json"), "w") as f:
        json.dump(state, f, indent=1, default=str)


def load_state(h: Harness) -> None:
    with open(os.path.join(h.out, "state.json")) as f:
        st = json.load(f)
    h.notes, h.invalid, h.peers = st["notes"], set(st["invalid"]), st["peers"]
    h.tessel_caps, h.extra = st["tessel_caps"], st["extra"]
    h.checks = {k: {float(b): tuple(v) for b, v in d.items()} for k, d in st["checks"].items()}
    h.extra["machine"] = st.get("machine")
    for k in ("widths", "rounds", "repeat", "micro_repeat", "svd_repeat", "tessel_order",
              "wide_rounds", "wide_repeat", "load_repeat"):
        if k in st.get("args", {}):
            setattr(h.args, k, st["args"][k])
    with open(os.path.join(h.out, "results.jsonl")) as f:
        h.rows = [json.loads(line) for line in f if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tessel", help="tessel binary (default: $TESSEL, build-bench/, build/, then "
                                     "the newest build*/tools/tessel that has `trg`)")
    ap.add_argument("--tessel-order", default="",
                    help="--order for tessel trg (default: tessel's own default)")
    ap.add_argument("--tessel-extra-order", default="pairwise",
                    help="also time tessel store with this --order (the peers' order; '' = no)")
    ap.add_argument("--widths", default="1,2", help="thread counts / engine widths (default 1,2)")
    ap.add_argument("--rounds", type=int, default=3, help="A B A B rounds (default 3)")
    ap.add_argument("--repeat", type=int, default=10, help="steady TRG runs per process (default 10)")
    ap.add_argument("--wide-rounds", type=int, default=1,
                    help="rounds that also run widths > 1 (default 1)")
    ap.add_argument("--wide-repeat", type=int, default=3,
                    help="steady TRG runs per process at widths > 1 (default 3)")
    ap.add_argument("--micro-repeat", type=int, default=2000, help="grad micro-benchmark runs")
    ap.add_argument("--svd-repeat", type=int, default=30, help="svd/svdvals runs per process")
    ap.add_argument("--compile-repeat", type=int, default=3, help="JAX AOT compiles per process")
    ap.add_argument("--load-repeat", type=int, default=5, help="steady runs in the load test")
    ap.add_argument("--busy-seconds", type=float, default=300,
                    help="upper bound on each busy loop's life (they are stopped earlier)")
    ap.add_argument("--only", default="check,trg,micro,compile,load,profile,memory,prepare",
                    help="phases to run (comma-separated)")
    ap.add_argument("--skip", default="", help="skip contenders whose name contains one of these")
    ap.add_argument("--quick", action="store_true",
                    help="1 round, 3 TRG repeats, 300 micro repeats, 10 svd repeats; the report "
                         "goes to OUT/BENCHMARKS-quick.md unless --markdown is given")
    ap.add_argument("--timeout", type=float, default=1200, help="per-process timeout, s")
    ap.add_argument("--png", action="store_true", help="also write the plot as PNG")
    ap.add_argument("--rerender", action="store_true",
                    help="measure nothing: rewrite the report from --out's saved results")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--markdown", default=os.path.join(ROOT, "BENCHMARKS.md"))
    a = ap.parse_args()
    a.widths = [int(w) for w in a.widths.split(",") if w]
    a.only = set(a.only.split(","))
    a.skip = [s for s in a.skip.split(",") if s]
    if a.quick and a.markdown == os.path.join(ROOT, "BENCHMARKS.md"):
        # a smoke test must not overwrite the published table
        a.markdown = os.path.join(a.out, "BENCHMARKS-quick.md")
    if a.quick:
        a.rounds, a.repeat, a.micro_repeat, a.svd_repeat, a.compile_repeat, a.load_repeat = \
            1, 3, 300, 10, 1, 3
        a.wide_repeat = min(a.wide_repeat, 2)
    sys.path.insert(0, HERE)
    h = Harness(a)
    t0 = time.time()
    h.log(f"bench/run.py: widths {a.widths}, rounds {a.rounds}, load average {loadavg()}")
    if a.rerender:
        a.only = set()
    else:
        find_tessel(h)
        find_peers(h)
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if k in os.environ:
            h.note(f"{k}={os.environ[k]} is set in this environment: unset (both together) for "
                   f"the numpy and JAX peers' commands only; tessel and PyTorch keep it")
    if not a.rerender:
        prepare_inputs(h)
    if "check" in a.only:
        phase_check(h)
    if "trg" in a.only:
        phase_trg(h)
    if "micro" in a.only:
        phase_micro(h)
    if "compile" in a.only:
        phase_compile(h)
    if "load" in a.only:
        phase_load(h)
    if "profile" in a.only:
        phase_profile(h)
    if "memory" in a.only:
        phase_memory(h)
    if "prepare" in a.only:
        phase_prepare(h)
    if a.rerender:
        load_state(h)
        t0 = h.extra.get("t_start", t0)
    else:
        h.extra["t_start"] = t0
        h.extra["duration_min"] = (time.time() - t0) / 60
        finish_checks(h)
        save_state(h)
    agg = aggregate(h)
    write_report(h, agg, t0)
    h.log(f"done in {(time.time() - t0) / 60:.1f} min")


if __name__ == "__main__":
    main()
