"""tessel.trg: the library's TRG from Python, against the seed values, Onsager and the CLI."""
import json
import math
import os
import pathlib
import subprocess

import numpy as np
import pytest

import tessel

# The seed configuration (χ = 16, 20 steps): lnZ/N at β = 0.3 to 1e-13.
SEED_LNZ_03 = 0.790559063800966


def test_one_beta_value_and_gradient():
    r = tessel.trg(0.3, grad=True, steps=20)
    assert isinstance(r, dict)
    assert abs(r["lnZ_per_site"] - SEED_LNZ_03) < 1e-13
    exact = tessel.onsager(0.3)
    assert r["exact_lnZ_per_site"] == exact["lnZ_per_site"]
    assert r["exact_dlnZ_dbeta"] == exact["dlnZ_dbeta"]
    # the truncation error at χ = 16 (docs/cli.md): 7e-9 in lnZ/N, 4e-7 in the derivative
    assert abs(r["lnZ_per_site"] - exact["lnZ_per_site"]) < 1e-8
    assert abs(r["dlnZ_dbeta"] - exact["dlnZ_dbeta"]) < 1e-6
    assert r["energy_per_site"] == -r["dlnZ_dbeta"]
    assert r["d2lnZ_dbeta2"] is None and r["specific_heat"] is None
    assert r["chi"] == 16 and r["steps"] == 20 and r["sites"] == 2.0 ** 20
    assert r["lattice"] == "periodic"
    assert r["svd"] == "truncated" and r["svd_topk"]["calls"] > 0
    assert r["rank"] == 0 and r["mpi_ranks"] == 1
    # repeat = 0: one run of the highest order gives lnZ/N and the derivative
    assert r["timing_ms"]["compile"] > 0 and r["timing_ms"]["value_and_grad"]["first"] > 0
    assert r["timing_ms"]["value"] is None
    assert r["timing_ms"]["value_and_grad"]["median"] is None


def test_the_default_is_the_infinite_lattice():
    # steps="auto": coarse-grain until lnZ/N and d/dbeta stop changing, then the fixed
    # point's remaining steps in closed form. Against long finite tori (their 2^N sites
    # differ from the infinite lattice by far less than rounding at beta = 0.3, 2^-N ln 2
    # in lnZ/N at beta = 0.6, which the limit drops).
    for beta in (0.3, 0.6):
        inf = tessel.trg(beta, grad=True, chi=8)
        torus = tessel.trg(beta, grad=True, chi=8, steps=50)
        assert inf["lattice"] == "infinite" and inf["sites"] is None and inf["steps_converged"]
        assert 20 <= inf["steps"] <= 80 and len(inf["ranks"]) == inf["steps"]
        offset = np.log(2) / 2 ** 50 if beta > tessel.ISING_BETA_C else 0.0
        assert abs(inf["lnZ_per_site"] - (torus["lnZ_per_site"] - offset)) < 4e-16 * inf["lnZ_per_site"]
        assert abs(inf["dlnZ_dbeta"] - torus["dlnZ_dbeta"]) < 1e-13 * inf["dlnZ_dbeta"]
    # Deep in the ordered phase the torus keeps its two ground states' ln 2 / N.
    cold = tessel.trg(5.0)
    assert cold["lnZ_per_site"] == pytest.approx(10.0, rel=1e-15)
    assert tessel.trg(5.0, steps=20)["lnZ_per_site"] - cold["lnZ_per_site"] == pytest.approx(
        np.log(2) / 2 ** 20, rel=1e-6)


def test_derivative_agrees_with_a_finite_difference_of_the_value():
    h = 1e-4
    lo, mid, hi = tessel.trg([0.4 - h, 0.4, 0.4 + h], chi=8, steps=12, grad=True)
    fd = (hi["lnZ_per_site"] - lo["lnZ_per_site"]) / (2 * h)
    assert abs(mid["dlnZ_dbeta"] - fd) < 1e-7 * abs(fd)


def test_sweep_with_second_order():
    betas = np.array([0.3, 0.5])
    rs = tessel.trg(betas, chi=8, steps=12, second=True, repeat=2)
    assert [r["beta"] for r in rs] == [0.3, 0.5]
    for r in rs:
        assert r["svd"] == "truncated"  # second order through svd_topk (forward over reverse)
        assert r["specific_heat"] == pytest.approx(r["beta"] ** 2 * r["d2lnZ_dbeta2"], rel=1e-15)
        assert abs(r["specific_heat"] - r["exact_specific_heat"]) < 0.05
        assert r["timing_ms"]["second"]["n"] == 2
    at_bc = tessel.trg(tessel.ISING_BETA_C, chi=4, steps=6)
    # At beta_c the energy is finite (u = -sqrt 2); only d2 and c diverge.
    assert at_bc["exact_dlnZ_dbeta"] == pytest.approx(2 ** 0.5, rel=1e-15)
    assert at_bc["exact_d2lnZ_dbeta2"] is None and at_bc["exact_lnZ_per_site"] > 0
    ons = tessel.onsager(tessel.ISING_BETA_C)
    assert ons["energy_per_site"] == pytest.approx(-(2 ** 0.5), rel=1e-15)
    assert ons["specific_heat"] is None


def test_modes_and_options_agree():
    staged = tessel.trg(0.4, chi=8, steps=10, grad=True)
    whole = tessel.trg(0.4, chi=8, steps=10, grad=True, mode="whole", checkpoint="recompute",
                       svd="full", width=2, order="optimal")
    assert abs(whole["lnZ_per_site"] - staged["lnZ_per_site"]) < 1e-13
    assert abs(whole["dlnZ_dbeta"] - staged["dlnZ_dbeta"]) < 1e-10 * abs(staged["dlnZ_dbeta"])
    auto = tessel.trg(0.4, chi=8, steps=10, ranks="auto")
    # The value sweep derives the schedule; the structural one held: nothing extra ran.
    assert auto["ranks"] == staged["ranks"] and auto["ranks_probe_ms"] == 0
    given = tessel.trg(0.4, chi=8, steps=10, ranks=staged["ranks"])
    assert given["lnZ_per_site"] == staged["lnZ_per_site"]


@pytest.mark.parametrize("kwargs,match", [
    (dict(beta=0.0), "beta must be finite and > 0"),
    (dict(beta=float("nan")), "beta must be finite and > 0"),
    (dict(beta=0.3, mode="fast"), "unknown mode 'fast'.*staged, whole"),
    (dict(beta=0.3, svd="lanczos"), "unknown method 'lanczos'"),
    (dict(beta=0.3, checkpoint="never"), "never"),
    (dict(beta=0.3, chi=1), "chi"),
    (dict(beta=0.3, ranks="sometimes"), "^trg: ranks: 'sometimes' is not a rank"),
    (dict(beta=0.3, ranks="16x0"), "^trg: ranks: '16x0' repeats a rank 0 times"),
    (dict(beta=0.3, ranks=16), "ranks must be a list of ints, a string like"),
    (dict(beta=0.3, ranks=b"2,4"), "ranks must be a list of ints, a string like"),
    (dict(beta=0.3, ranks="Auto"), "is not a rank .* \\(or 'auto' / None"),
    (dict(beta=0.3, steps=2, ranks=[2, 99]), "rank 99 of step 2"),
    (dict(beta=0.3, steps=3, ranks=[2, 4]), "2 entries"),
    (dict(beta=0.3, steps="forever"), "steps must be"),
    (dict(beta=0.3, steps="auto", ranks=[2, 4]), "ranks gives the number of steps"),
    (dict(beta=0.3, repeat=-1), "repeat"),
    (dict(beta=0.3, checkpoint="never"), "^checkpoint: unknown checkpoint policy 'never'"),
    (dict(beta=0.3, second=True, second_mode="sideways"),
     "^second_mode: expected forward-over-reverse or reverse-over-reverse, got 'sideways'"),
])
def test_bad_options_raise_errors_naming_them(kwargs, match):
    with pytest.raises(tessel.Error, match=match):
        tessel.trg(**kwargs)


def test_the_fields_are_those_of_the_command_line(source_dir):
    cli = pathlib.Path(os.environ.get("TESSEL_CLI", source_dir / "build" / "tools" / "tessel"))
    if not cli.exists():
        pytest.skip(f"no tessel binary at {cli}")
    line = subprocess.run([str(cli), "trg", "--beta", "0.35", "--chi", "6", "--steps", "8", "--grad",
                           "--repeat", "0", "--json"], check=True, capture_output=True, text=True).stdout
    from_cli = json.loads(line)
    from_py = tessel.trg(0.35, chi=6, steps=8, grad=True)
    assert sorted(from_py) == sorted(from_cli)
    assert sorted(from_py["timing_ms"]) == sorted(from_cli["timing_ms"])
    assert sorted(from_py["memory"]) == sorted(from_cli["memory"])
    for key in ("lnZ_per_site", "dlnZ_dbeta", "exact_lnZ_per_site", "ranks", "passes", "svd"):
        assert from_py[key] == from_cli[key], key


def test_the_same_request_gives_the_same_run_as_the_command_line(source_dir):
    # One normalisation for both front ends (frontend/TrgJob.h): h = -0 is h = 0,
    # susceptibility implies second implies grad, and --second-mode is second_mode.
    cli = pathlib.Path(os.environ.get("TESSEL_CLI", source_dir / "build" / "tools" / "tessel"))
    if not cli.exists():
        pytest.skip(f"no tessel binary at {cli}")
    line = subprocess.run([str(cli), "trg", "--beta", "0.3", "--chi", "6", "--steps", "6", "--field=-0",
                           "--susceptibility", "--second-mode", "reverse-over-reverse", "--repeat", "0",
                           "--json"], check=True, capture_output=True, text=True).stdout
    from_cli = json.loads(line)
    from_py = tessel.trg(0.3, chi=6, steps=6, field=-0.0, susceptibility=True,
                         second_mode="reverse-over-reverse")
    assert math.copysign(1.0, from_py["field"]) == 1.0 and from_py["field"] == from_cli["field"] == 0
    for key in ("lnZ_per_site", "dlnZ_dbeta", "d2lnZ_dbeta2", "d2lnZ_dh2", "susceptibility", "svd"):
        assert from_py[key] == from_cli[key], key
    # Forward over reverse (the default) gives the same second derivative to rounding.
    fwd = tessel.trg(0.3, chi=6, steps=6, second=True)
    assert abs(fwd["d2lnZ_dbeta2"] - from_py["d2lnZ_dbeta2"]) <= 1e-10 * abs(from_py["d2lnZ_dbeta2"])


def test_onsager_errors():
    with pytest.raises(tessel.Error, match="beta must be finite"):
        tessel.onsager(-1.0)


@pytest.mark.parametrize("kwargs,match", [
    (dict(beta=0.3, steps=10 ** 6), r"^steps must be <= 1023"),
    (dict(beta=0.3, chi=1), r"^chi must be an integer >= 2"),
    (dict(beta=0.3, mode="fast"), r"^mode: unknown mode"),
    (dict(beta=0.3, chi=2.5), "chi must be an integer, got 2.5"),
    (dict(beta="0.3"), "beta must be a number"),
    (dict(beta=[]), "beta must be a number"),
    (dict(beta=-0.3), r"got -0\.3 \(allowed: beta > 0, e\.g\. 0\.3\)$"),
    (dict(beta=0.3, order=None), "order must be a string"),
])
def test_errors_use_python_names(kwargs, match):
    with pytest.raises(tessel.Error, match=match):
        tessel.trg(**kwargs)


def test_prepare_checks_its_options():
    p = tessel.trace(lambda x: x * 2.0, (3,))
    with pytest.raises(tessel.Error, match="unknown order 'nope'"):
        tessel.prepare(p, order="nope")
    with pytest.raises(tessel.Error, match="expected a tessel.Program"):
        tessel.prepare("program")


def test_field_magnetization_and_susceptibility():
    # A field: the schedule is derived from the spectrum (ranks="auto" by default), and the
    # magnetization m = (1/β) ∂(lnZ/N)/∂h matches a central difference of lnZ/N in h.
    h, d = 0.05, 1e-3
    r = tessel.trg(0.35, field=h, susceptibility=True, chi=8, steps=10, ranks=[2, 4, 4] + [8] * 7)
    assert r["model"] == "ising" and r["field"] == h and r["exact_lnZ_per_site"] is None
    assert r["magnetization"] == pytest.approx(r["dlnZ_dh"] / 0.35, rel=1e-15)
    assert r["susceptibility"] == pytest.approx(r["d2lnZ_dh2"] / 0.35, rel=1e-15)
    lnz = [tessel.trg(0.35, field=h + k * d, chi=8, steps=10, ranks=[2, 4, 4] + [8] * 7)["lnZ_per_site"]
           for k in (-2, -1, 1, 2)]
    fd = (lnz[0] - 8 * lnz[1] + 8 * lnz[2] - lnz[3]) / (12 * d)
    assert r["dlnZ_dh"] == pytest.approx(fd, rel=1e-7)
    assert r["d2lnZ_dh2"] > 0 and r["d2lnZ_dbeta_dh"] > 0
    auto = tessel.trg(0.35, field=h, chi=8, steps=10)
    assert auto["ranks_probe_ms"] is not None


def test_odd_field_derivatives_at_zero_field_are_rounding_or_refused():
    # At h = 0, d/dh and d2/dbeta dh are 0 by the spin-flip symmetry; near T_c the critical
    # flow grows the odd sector's rounding each step (HOTRG, chi = 10: |d2/dbeta dh| 1.1e-4 at
    # 16 steps). Below 1e-10 of the beta derivative they are reported, above it refused.
    bc = 0.44068679350977147
    short = tessel.trg(bc, chi=10, algorithm="hotrg", second=True, svd="full", steps=8)
    assert abs(short["dlnZ_dh"]) <= 1e-12 * abs(short["dlnZ_dbeta"])
    assert abs(short["d2lnZ_dbeta_dh"]) <= 1e-11 * abs(short["d2lnZ_dbeta2"])
    assert short["refused"] is None
    # With repeat = 1 the first derivatives come from their own value+grad runs: the
    # refusal of d/dh is theirs, and the report says it once.
    deep = tessel.trg(bc, chi=10, algorithm="hotrg", second=True, svd="full", steps=18, repeat=1)
    assert deep["dlnZ_dh"] is None and deep["d2lnZ_dbeta_dh"] is None and deep["magnetization"] is None
    assert deep["refused"].startswith("d/dh refused: 0 by the spin-flip symmetry at h = 0; AD gives ")
    assert deep["refused"].count("d/dh refused") == 1
    assert "d2/dbeta dh refused: 0 by the spin-flip symmetry" in deep["refused"]
    assert deep["d2lnZ_dbeta2"] > 0  # the beta row stays (a positive specific heat)


def test_potts_q2_is_ising_at_half_beta():
    p = tessel.trg(0.8, model="potts", q=2, grad=True, chi=8, steps=12)
    i = tessel.trg(0.4, grad=True, chi=8, steps=12)
    assert p["model"] == "potts" and p["q"] == 2 and p["field"] is None
    assert abs(p["lnZ_per_site"] - (i["lnZ_per_site"] + 0.8)) < 1e-13
    assert p["dlnZ_dbeta"] == pytest.approx(i["dlnZ_dbeta"] / 2 + 1, rel=1e-12)
    # the exact values: Onsager's at β/2, plus β
    assert p["exact_lnZ_per_site"] == pytest.approx(tessel.onsager(0.4)["lnZ_per_site"] + 0.8, rel=1e-15)
    assert p["magnetization"] is None


def test_ranks_take_the_reports_words():
    # The report's schedule ("16x3" = 16 three times) passed back as a string runs the
    # same steps as the list.
    words = tessel.trg(0.4, chi=8, ranks="2,4,4,8x3")
    listed = tessel.trg(0.4, chi=8, ranks=[2, 4, 4, 8, 8, 8])
    assert words["ranks"] == [2, 4, 4, 8, 8, 8] and words["steps"] == 6
    assert words["lnZ_per_site"] == listed["lnZ_per_site"]
    assert tessel.trg(0.4, chi=8, steps=6, ranks=" auto ")["ranks"] == tessel.trg(0.4, chi=8, steps=6)["ranks"]


def test_a_given_schedule_that_splits_a_multiplet_is_named():
    # Potts q = 3, chi = 24, beta = 0.98: step 5's cut at 24 falls inside an exact pair
    # (s23 = s24); the derived schedule keeps 23 there, a given one is run and named.
    given = tessel.trg(0.98, model="potts", q=3, chi=24, ranks=[3, 9, 9, 24, 24, 24])
    [split] = given["multiplet_splits"]
    assert (split["step"], split["D"], split["D_prime"], split["matrices"]) == (5, 24, 24, "Ma and Mb")
    assert split["kept"] - split["cut"] <= 1e-14 * split["kept"]
    assert split["kept"] == pytest.approx(1.44204484368455e-2, abs=1e-12)
    derived = tessel.trg(0.98, model="potts", q=3, chi=24, steps=6)
    assert derived["ranks"] == [3, 9, 9, 24, 23, 24] and derived["multiplet_splits"] == []


@pytest.mark.parametrize("kwargs, match", [
    (dict(model="potts"), "needs q"),
    (dict(model="potts", q=1), "q"),
    (dict(model="potts", q=3, field=0.1), "has no field"),
    (dict(model="clock", q=3), "unknown model"),
    (dict(q=3), "ising model has q = 2"),
    (dict(field="x"), "field must be a number"),
    (dict(field=10**400), "field must be finite"),
    (dict(model="potts", q=2**70), "out of range"),
    (dict(model="potts", q=21), "q in \\[2, 20\\]"),
    (dict(susceptibility="yes"), "True or False"),
])
def test_model_options_raise_errors(kwargs, match):
    with pytest.raises(tessel.Error, match=match):
        tessel.trg(0.4, chi=4, steps=2, **kwargs)


def test_progress_callback_and_interrupt():
    # The callback sees every step of every sweep, in order, with the sweep's length.
    calls = []
    tessel.trg(0.4, chi=4, steps=6, grad=True,
               progress=lambda *a: calls.append(a))
    phases = [c[1] for c in calls]
    assert phases[:6] == ["value"] * 6 and [c[2] for c in calls[:6]] == list(range(1, 7))
    assert "value+grad: forward" in phases and "value+grad: backward" in phases
    assert all(c[0] == 0.4 and 1 <= c[2] <= c[3] for c in calls)
    # steps="auto": the value sweep's length is a bound.
    auto = []
    tessel.trg(0.4, chi=4, progress=lambda *a: auto.append(a))
    assert auto and all(a[4] for a in auto if a[1] == "value")
    # An exception from the callback (as Ctrl-C raises KeyboardInterrupt) ends the call.
    def stop(*a):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        tessel.trg(0.4, chi=4, steps=6, progress=stop)
    with pytest.raises(tessel.Error, match="progress must be"):
        tessel.trg(0.4, progress=3)


def test_ctrl_c_interrupts_a_long_call():
    # A real SIGINT during 10^6 repeats (hours of work): the call ends with
    # KeyboardInterrupt at the next step instead of finishing the sweep first.
    import signal
    import threading
    timer = threading.Timer(0.5, lambda: signal.raise_signal(signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        tessel.trg(0.4, chi=4, steps=6, repeat=10 ** 6)
    timer.cancel()


def test_concurrent_trg_calls_report_their_own_svd_topk_counters():
    # The counters are kept per plan (each call compiles its own), so two calls running
    # at once in two threads (the GIL is released while they run) each report exactly
    # what the same call reports alone; process-wide deltas mixed them.
    import threading
    jobs = {"a": dict(beta=0.4, chi=8, steps=8, grad=True), "b": dict(beta=0.6, chi=8, steps=10)}
    alone = {k: tessel.trg(**kw)["svd_topk"] for k, kw in jobs.items()}
    assert alone["a"]["calls"] > 0 and alone["b"]["calls"] > 0 and alone["a"] != alone["b"]
    got = {}

    def run(k):
        for _ in range(3):
            got.setdefault(k, []).append(tessel.trg(**jobs[k])["svd_topk"])

    threads = [threading.Thread(target=run, args=(k,)) for k in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in jobs:
        assert got[k] == [alone[k]] * 3, k


def test_a_failed_beta_does_not_stop_the_sweep():
    # beta = 800 with the structural schedule keeps an exact zero singular value at step 2
    # (as tessel trg --beta 0.3,800,0.5 in tests/lit/trg/trg-errors.test): the sweep goes
    # on, and the error at its end names that beta and holds the others' reports.
    kw = dict(chi=8, steps=6, ranks=[2, 4, 4, 8, 8, 8], repeat=0)
    with pytest.raises(tessel.Error, match=r"1 of 3 beta values failed") as info:
        tessel.trg([0.3, 800.0, 0.5], **kw)
    message = str(info.value)
    assert "beta = 800.0: trg: step 2 (2->4, beta = 800): the smallest kept singular value" in message
    assert "--ranks" not in message and "ranks" in message  # Python's names
    reports = info.value.reports
    assert reports[1] is None
    for i, beta in ((0, 0.3), (2, 0.5)):
        alone = tessel.trg(beta, **kw)
        assert reports[i]["beta"] == beta
        assert reports[i]["lnZ_per_site"] == alone["lnZ_per_site"]  # bitwise: same programs
    # One beta: its own error, as every tessel.Error (no "error: " prefix).
    with pytest.raises(tessel.Error, match=r"^trg: step 2 \(2->4, beta = 800\)") as one:
        tessel.trg(800.0, **kw)
    assert one.value.reports == [None]
