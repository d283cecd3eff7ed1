"""Several assignments as one multi-output kernel (engine.multi): the values sequential
assignments give, one kernel when they fuse, and the fallbacks."""

from __future__ import annotations

import numpy as np
from conftest import assert_close

import axesarray as ax
from axesarray import engine
from axesarray.engine import executor

K = ax.Axis("K", 1000)


def _pairs(*assignments):
    return [(dst._node, value._node) for dst, value in assignments]


def test_a_later_output_reads_an_earlier_one_after_its_store():
    rng = np.random.default_rng(0)
    g, v0, p0 = (rng.standard_normal(K.length) for _ in range(3))
    v, p, gt = ax.tensor(v0.copy(), (K,)), ax.tensor(p0.copy(), (K,)), ax.tensor(g, (K,))
    before = executor.PLAN_STATS["misses"]
    engine.assign_many(_pairs((v, v * 0.9 + gt), (p, p - v * 0.1)))  # p reads the new v
    assert executor.PLAN_STATS["misses"] == before  # no per-assignment plans: one kernel
    assert_close(v, v0 * 0.9 + g)
    assert_close(p, p0 - (v0 * 0.9 + g) * 0.1)
    plan = engine.explain_many(_pairs((v, v * 0.9 + gt), (p, p - v * 0.1)))
    assert len(plan.kernels) == 1 and plan.kernels[0].writes == "2 destinations"


def test_an_earlier_output_reads_a_later_one_before_its_store():
    a0, b0 = np.arange(K.length, dtype=np.float64), np.ones(K.length)
    a, b = ax.tensor(a0.copy(), (K,)), ax.tensor(b0.copy(), (K,))
    engine.assign_many(_pairs((a, a + b), (b, a * 2)))  # a reads old b; b reads new a
    assert_close(a, a0 + b0)
    assert_close(b, (a0 + b0) * 2)


def test_reads_at_another_index_run_one_by_one():
    """A destination read shifted (or through another view of its memory) cannot share
    the loop: the assignments run in order, as separate kernels."""
    a0 = np.arange(K.length, dtype=np.float64)
    a, c = ax.tensor(a0.copy(), (K,)), ax.zeros((K,))
    shifted = a.isel(K=slice(None, None, -1))  # a reversed: other indices of a's memory
    pairs = _pairs((a, a + 1), (c, shifted * 1))
    engine.assign_many(pairs)
    assert_close(a, a0 + 1)
    assert_close(c, (a0 + 1)[::-1])
    assert len(engine.explain_many(pairs).kernels) == 2


def test_different_shapes_run_one_by_one():
    x, y = ax.zeros((K,)), ax.zeros((ax.Axis("M", 3),))
    engine.assign_many(_pairs((x, x + 1), (y, y + 2)))
    assert_close(x, np.ones(K.length))
    assert_close(y, np.full(3, 2.0))
