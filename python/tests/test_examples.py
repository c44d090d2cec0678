"""The examples of examples/: run as a user runs them."""
import os
import subprocess
import sys

import pytest

SEED_LNZ_03 = 0.790559063800966


def run_example(source_dir, name, *args, tmp_path=None):
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([sys.executable, str(source_dir / "examples" / name), *args],
                          check=True, capture_output=True, text=True, env=env, cwd=tmp_path).stdout


def test_trg_written_in_python_reproduces_tessel_trg(source_dir):
    import runpy
    ex = runpy.run_path(str(source_dir / "examples" / "trg_ising.py"), run_name="trg_ising")
    import tessel
    mine = ex["run"](beta=0.3, chi=16, steps=20)
    lib = tessel.trg(0.3, grad=True)
    # staged: the classes 2->2, 2->4, 4->4, 4->16 are calls, the sixteen 16->16 steps a loop
    assert mine["op_counts"]["call"] == 4 and mine["op_counts"]["scan"] == 1
    assert abs(mine["lnZ_per_site"] - SEED_LNZ_03) < 1e-13
    assert abs(mine["lnZ_per_site"] - lib["lnZ_per_site"]) < 1e-13
    assert abs(mine["dlnZ_dbeta"] - lib["dlnZ_dbeta"]) < 1e-10 * abs(lib["dlnZ_dbeta"])
    # in the ordered phase too, at a smaller size
    mine = ex["run"](beta=0.6, chi=8, steps=12, width=2)
    lib = tessel.trg(0.6, chi=8, steps=12, grad=True)
    assert abs(mine["lnZ_per_site"] - lib["lnZ_per_site"]) < 1e-13
    assert abs(mine["dlnZ_dbeta"] - lib["dlnZ_dbeta"]) < 1e-10 * abs(lib["dlnZ_dbeta"])


def test_trg_example_prints_the_seed_value(source_dir):
    out = run_example(source_dir, "trg_ising.py", "--chi", "16", "--steps", "20")
    assert "lnZ/N" in out and f"{SEED_LNZ_03:.15f}"[:15] in out


def test_sweep_plot_example(source_dir, tmp_path):
    pytest.importorskip("matplotlib")
    out = run_example(source_dir, "ising_sweep_plot.py", "--betas", "0.3:0.5:3", "--chi", "8",
                      "--steps", "10", "--out", str(tmp_path / "sweep.svg"))
    svg = (tmp_path / "sweep.svg").read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    rows = [line.split() for line in out.splitlines()[1:4]]
    assert [float(r[0]) for r in rows] == [0.3, 0.4, 0.5]
    for beta, u, u_exact, c, c_exact in ([float(x) for x in r] for r in rows):
        assert abs(u - u_exact) < 1e-3 and abs(c - c_exact) < 0.1
    assert "wrote" in out.splitlines()[-1]


def test_hotrg_example_against_onsager_and_finite_differences(source_dir):
    # HOTRG (examples/hotrg_ising.py, written with numpy spellings on traced Tensors): at
    # chi = 8, 16 steps lnZ/N is Onsager's to the truncation error (~3e-6 at beta = 0.4,
    # 1.3e-5 at T_c; Xie et al. and the independent numpy HOTRG quote the same
    # size), and the AD derivative is a 5-point finite difference of the same program.
    import runpy
    import numpy as np
    import tessel
    ex = runpy.run_path(str(source_dir / "examples" / "hotrg_ising.py"), run_name="hotrg")
    beta = 0.4
    r = ex["run"](beta=beta, chi=8, steps=16)
    exact = tessel.onsager(beta)
    assert abs(r["lnZ_per_site"] - exact["lnZ_per_site"]) < 5e-6 * exact["lnZ_per_site"]
    assert abs(r["dlnZ_dbeta"] - exact["dlnZ_dbeta"]) < 2e-4 * exact["dlnZ_dbeta"]
    program = tessel.trace(ex["make_lnz"](8, 16), (), names=["beta"])
    # Staged: one function per tensor shape of the step (2,2,2,2 … 8,8,8,8: five), called
    # per growing step, and one loop (whose body calls the 8 -> 8 one) over the other twelve.
    text = str(program)
    assert text.count(" = scan @") == 1 and "length = 12" in text
    assert text.count("program @hotrg_step") == 5
    plan, eng = tessel.prepare(program), tessel.Engine(1)
    f = lambda b: float(eng.run(plan, {"beta": b})["lnz"])
    h = 1e-4
    fd = (f(beta - 2 * h) - 8 * f(beta - h) + 8 * f(beta + h) - f(beta + 2 * h)) / (12 * h)
    assert abs(fd - r["dlnZ_dbeta"]) < 1e-8 * abs(fd)
    # The algorithm itself (initial tensor, step, lnZ) stays about 40 lines.
    src = (source_dir / "examples" / "hotrg_ising.py").read_text().splitlines()
    body = src[src.index(next(l for l in src if l.startswith("def initial_tensor"))):
               src.index(next(l for l in src if l.startswith("def run(")))]
    assert len([l for l in body if l.strip()]) <= 40


def test_ising_chain_example_matches_the_exact_values(source_dir):
    out = run_example(source_dir, "ising_chain.py", "--steps", "3000", "--beta", "0.7")
    rows = [line for line in out.splitlines() if "exact" in line]
    assert len(rows) == 3
    for row in rows:
        # "rel. error 1.2e-15"
        assert float(row.split("rel. error")[1].split()[0]) < 1e-10, row
