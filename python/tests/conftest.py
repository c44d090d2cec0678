"""Shared by the tests of the Python package (run by ctest as the test `python`, or
`PYTHONPATH=build/python build/venv/bin/python -m pytest python/tests`)."""
import os
import pathlib

import numpy as np
import pytest

import tessel
from tessel import ops

SOURCE_DIR = pathlib.Path(os.environ.get("TESSEL_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


@pytest.fixture
def source_dir():
    return SOURCE_DIR


def run(program, inputs, width=1, **prepare):
    """prepare + Engine(width).run."""
    return tessel.Engine(width).run(tessel.prepare(program, **prepare), inputs)


def central_difference(f, x, h=1e-6):
    """d f / d x by the 5-point stencil, componentwise (f: array -> float)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (-f(x + 2 * e) + 8 * f(x + e) - 8 * f(x - e) + f(x - 2 * e)) / (12 * h)
    return g
