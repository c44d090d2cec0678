"""Runs `tessel trg --json` for the benchmark scripts (bench/scaling.py, bench/accuracy.py).

run(tessel, args) runs `tessel trg ARGS --json --no-progress` with one BLAS and OpenMP
thread (the width the benchmarks report) and returns the first β's JSON record;
median_ms(record, key) is that record's steady median for `key` ("value",
"value_and_grad", "second"), or its first run when it has no steady runs.
"""
from __future__ import annotations

import json
import os
import subprocess


def run(tessel: str, args: list[str]) -> dict:
    cmd = [tessel, "trg", *args, "--json", "--no-progress"]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[0])


def median_ms(rec: dict, key: str) -> float | None:
    t = (rec.get("timing_ms") or {}).get(key) or {}
    return t.get("median") if t.get("median") is not None else t.get("first")
