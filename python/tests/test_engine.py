"""prepare, Plan and Engine: stages, widths, inputs, errors, threads."""
import threading

import numpy as np
import pytest

import tessel
from tessel import ops

from conftest import run


def svd_program(n=48):
    def f(a):
        u, s, vt = ops.svd(a)
        return {"s": s, "y": ops.einsum("ij,jk->ik", u, vt) @ a}
    return tessel.trace(f, (n, n))


def test_plan_properties():
    plan = tessel.prepare(svd_program())
    assert plan.num_instructions > 0
    assert plan.peak_live_bytes > 0 and plan.arena_bytes >= 0
    assert plan.prepare_ms > 0
    assert "einsum op" in plan.note
    assert "gemm" in str(plan) and "svd" in str(plan)
    assert plan.to_json().lstrip().startswith("{")
    assert [i.name for i in plan.inputs] == ["a"] and [o.name for o in plan.outputs] == ["s", "y"]
    assert "einsum" not in plan.program.op_counts
    with pytest.raises(tessel.Error, match="einsum"):
        tessel.prepare(svd_program(), order="none")


def test_results_are_bitwise_identical_for_every_width():
    a = np.random.default_rng(1).standard_normal((48, 48))
    plan = tessel.prepare(svd_program())
    ref = tessel.Engine(1).run(plan, {"a": a})
    for w in (2, 3, 4):
        e = tessel.Engine(width=w)
        assert e.width == w
        out = e.run(plan, {"a": a})
        for k in ref:
            assert np.array_equal(out[k], ref[k]), (k, w)
    np.testing.assert_allclose(ref["s"], np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    assert e.resident_bytes >= plan.arena_bytes


def test_inputs_are_checked_and_converted():
    p = tessel.trace(lambda x, y: {"z": x * y}, (2, 3), (2, 3))
    plan = tessel.prepare(p)
    e = tessel.Engine()
    x = np.arange(6.0).reshape(2, 3)
    # sequence in input order; int, float32 and non-contiguous arrays are converted
    np.testing.assert_array_equal(e.run(plan, [x, x])["z"], x * x)
    np.testing.assert_array_equal(e.run(plan, {"x": x.astype(np.float32), "y": np.arange(6).reshape(2, 3)})["z"], x * x)
    strided = np.arange(12.0).reshape(2, 6)[:, ::2]
    np.testing.assert_array_equal(e.run(plan, {"x": strided, "y": np.asfortranarray(x)})["z"], strided * x)
    assert e.last_run_ms >= 0
    with pytest.raises(tessel.Error, match="missing input 'y'"):
        e.run(plan, {"x": x})
    with pytest.raises(tessel.Error, match="unknown input 'w'"):
        e.run(plan, {"x": x, "y": x, "w": x})
    with pytest.raises(tessel.Error, match="input.*y"):
        e.run(plan, {"x": x, "y": np.ones((3, 2))})
    with pytest.raises(tessel.Error, match="expected real numbers"):
        e.run(plan, {"x": x, "y": x + 1j})
    with pytest.raises(tessel.Error, match="2 input"):
        e.run(plan, [x])
    with pytest.raises(tessel.Error, match="dict"):
        e.run(plan, "x")
    with pytest.raises(tessel.Error, match="width"):
        tessel.Engine(0)


def test_check_nan_names_the_first_op_and_the_engine_stays_usable():
    def f(x):
        return ops.sum(ops.sqrt(x - 1.0) * 2.0)
    p = tessel.trace(f, (3,))
    plan = tessel.prepare(p, check_nan=True)
    e = tessel.Engine()
    with pytest.raises(tessel.Error) as err:
        e.run(plan, {"x": np.array([2.0, 0.5, 3.0])})
    msg = str(err.value)
    assert "--check-nan" in msg and "sqrt" in msg and "NaN at [1]" in msg
    assert "test_engine.py:" in msg  # the op's location is the Python line
    assert float(e.run(plan, {"x": np.array([2.0, 2.0, 5.0])})["out0"]) == pytest.approx(8.0)
    # svd of NaN fails in the kernel: an Error naming the op
    with pytest.raises(tessel.Error, match="svd"):
        run(svd_program(4), {"a": np.full((4, 4), np.nan)})


def test_profile_report():
    plan = tessel.prepare(svd_program())
    e = tessel.Engine(1)
    e.set_profiling(True)
    e.run(plan, {"a": np.eye(48)})
    assert "gemm" in e.profile_report(plan)


def test_two_threads_run_two_engines_at_once():
    plan = tessel.prepare(svd_program(96))
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((96, 96)) for _ in range(2)]
    expect = [tessel.Engine(1).run(plan, {"a": a}) for a in inputs]
    results = [None, None]
    shared = tessel.Engine(2)

    def work(i):
        own = tessel.Engine(1)
        for _ in range(5):
            results[i] = (own.run(plan, {"a": inputs[i]}), shared.run(plan, {"a": inputs[i]}))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        for out in results[i]:
            for k in expect[i]:
                assert np.array_equal(out[k], expect[i][k])


def test_profile_report_while_another_thread_runs():
    plans = [tessel.prepare(tessel.trace(lambda x, k=k: ops.sum(x * float(k)), (64,))) for k in range(12)]
    e = tessel.Engine(1)
    e.set_profiling(True)
    x = np.ones(64)
    stop = threading.Event()
    errors = []

    def runner():
        try:
            i = 0
            while not stop.is_set():
                assert float(e.run(plans[i % len(plans)], [x])["out0"]) == 64.0 * (i % len(plans))
                i += 1
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    t = threading.Thread(target=runner)
    t.start()
    try:
        for _ in range(300):
            e.profile_report(plans[0])
            assert e.resident_bytes >= 0
    finally:
        stop.set()
        t.join()
    assert not errors


def test_prepare_takes_the_command_lines_path(source_dir, tmp_path):
    # tessel.prepare lowers einsums and runs fold,cse,dce before prepare, as `tessel
    # prepare` and `tessel run` do: docs/cli.md's sum(sin(x)·x²) gradient gives the same
    # plan from both (it skipped the clean-up: 9 fused ops against 7 once).
    import os
    import pathlib
    import subprocess
    cli = pathlib.Path(os.environ.get("TESSEL_CLI", source_dir / "build" / "tools" / "tessel"))
    if not cli.exists():
        pytest.skip(f"no tessel binary at {cli}")
    g = tessel.grad(tessel.trace(lambda x: ops.sum(ops.sin(x) * x * x), (1000,)), keep_outputs=False)
    (tmp_path / "g.tir").write_text(str(g))
    listing = subprocess.run([str(cli), "prepare", str(tmp_path / "g.tir")], check=True,
                             capture_output=True, text=True).stdout
    from_cli = [l for l in listing.splitlines() if not l.startswith("prepared in")]
    assert str(tessel.prepare(g)).splitlines() == from_cli
    # passes="" prepares the program exactly as given: the multiplications by a broadcast
    # 1 that the grad transform leaves are still there (10 fused ops against 8).
    assert "| 8 ops fused [" in str(tessel.prepare(g))
    assert "| 10 ops fused [" in str(tessel.prepare(g, passes=""))
