"""Parallel CPU kernels run ranges of their outer loop on threads (kernels/threads.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.engine import executor
from axesarray.engine.dispatch import source_for
from axesarray.kernels.threads import run_parts


@pytest.mark.parametrize("count", [0, 1, 2, 7, 1000])
def test_run_parts_covers_each_index_once(count):
    seen, lock = [], threading.Lock()

    def part(lo, hi, out):
        with lock:
            out.extend(range(lo, hi))

    run_parts(part, count, (seen,))
    assert sorted(seen) == list(range(count))


def test_a_failing_part_raises_in_the_caller():
    def part(lo, hi):
        raise ZeroDivisionError("boom")

    with pytest.raises(ZeroDivisionError, match="boom"):
        run_parts(part, 100, ())


def _lse(xn):
    m = xn.max().astype(np.float64)
    return np.float32(m + np.log(np.exp(xn.astype(np.float64) - m).sum()))


def _source(e, kind):
    plan, _ = executor.schedule_for(e._node, None)
    assert len(plan.steps) == 1
    return source_for(plan.steps[0], plan.device, kind)[0]


def test_a_parallel_kernel_is_compiled_serial_over_a_range():
    a = ax.zeros((ax.Axis("R", 300), ax.Axis("K", 5)), "float32")
    src = _source(a.sum("K"), "parallel")
    assert "def part(jlo, jhi, " in src and "parallel=False" in src
    assert "run_parts(part, n0, " in src and "prange(" not in src.split("def part", 1)[1]
    # a full reduction: ranges of chunks, then a last call combining them in order
    full = _source(a.sum(), "parallel")
    assert "def part(jlo, jhi, parts, " in full and "parallel=False" in full
    assert "part(-1, -1, *args)" in full


def test_a_parallel_full_reduction_agrees_with_numpy_and_is_deterministic():
    xn = np.random.default_rng(1).standard_normal(100_003).astype(np.float32)
    x = ax.tensor(xn, "R")
    with ax.set_options(serial_threshold=0):
        runs = [x.sum().numpy().tobytes() for _ in range(3)]
        assert runs[0] == runs[1] == runs[2]
        assert_close(x.sum(), np.float32(xn.sum(dtype=np.float64)))
        assert_close(x.argmax("R"), np.argmax(xn))
        assert_close(ax.logsumexp(x, "R"), _lse(xn))


def test_parallel_kernels_agree_with_numpy():
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((600, 257)).astype(np.float32)
    x = ax.tensor(xn, "R K")
    with ax.set_options(serial_threshold=0):  # the parallel variants, on small data
        assert_close(ax.tanh(x * 2 + 1), np.tanh(xn * 2 + 1))
        assert_close(x.sum("K"), xn.sum(1))
        assert_close(x.max("R"), xn.max(0))
