"""Softmax, log-softmax, logsumexp and batch norm written the usual way are planned as
few passes over the data as possible (issue: multi-output reductions), with numpy's
values, including rows of -inf, NaN and +inf and empty axes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, ax_softmax, np_softmax, special_rows
from hypothesis import given
from hypothesis import strategies as st

import axesarray as ax

K = ax.Axis("K", 37)


def _log_softmax(x, name):
    d = x - x.max(name)
    return d - ax.log(ax.exp(d).sum(name))


def _logsumexp(x, name):
    m = x.max(name)
    return m + ax.log(ax.exp(x - m).sum(name))


@pytest.fixture(params=["float32", "float64"])
def data(request):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((5, K.length)) * 30).astype(request.param)
    a[1] = -np.inf  # a row of -inf: softmax nan (numpy's), logsumexp -inf
    a[2, 3] = np.nan
    a[3, 4] = np.inf
    return a


def test_softmax_is_one_kernel(engine, data):
    x = ax.tensor(data, ("R", K))
    with np.errstate(all="ignore"):
        expected = np_softmax(data, 1)
    assert_close(ax_softmax(x, "K"), expected)
    if engine == "numba":
        plan = ax.explain(ax_softmax(x, "K"))
        # one normalize kernel: the max its first sweep, exp stored once, summed, divided
        # (its own file, tests/test_normalize.py)
        assert [k.kind for k in plan.kernels] == ["reduction"]
        assert plan.temporary_bytes == 0  # no temporary: the max stays per row


def test_log_softmax_and_logsumexp(engine, data):
    x = ax.tensor(data, ("R", K))
    with np.errstate(all="ignore"):
        d = data - data.max(1, keepdims=True)
        expected_ls = d - np.log(np.exp(d).sum(1, keepdims=True))
        m = data.max(1)
        expected_lse = m + np.log(np.exp(data - m[:, None]).sum(1))
    assert_close(_log_softmax(x, "K"), expected_ls)
    assert_close(_logsumexp(x, "K"), expected_lse)
    if engine == "numba":
        # (x - logsumexp(x): a normalize kernel storing x, tests/test_normalize.py)
        assert len(ax.explain(_log_softmax(x, "K")).kernels) == 1
        assert len(ax.explain(_logsumexp(x, "K")).kernels) == 1


@pytest.mark.parametrize("n", [1, 3, 250_001])
def test_full_logsumexp_in_parallel_chunks(n):
    """A full reduction big enough to run in parallel chunks combines (max, sum) pairs;
    a chunk of -inf entries adds nothing."""
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(np.float32) * 20
    a[: n // 2] = -np.inf  # whole chunks of -inf when it runs in chunks
    a[-1] = 1.0
    x = ax.tensor(a, "L")
    a64 = a.astype(np.float64)
    expected = np.log(np.exp(a64 - a64.max()).sum()) + a64.max()
    assert_close(_logsumexp(x, "L"), np.float32(expected))
    all_minus_inf = ax.tensor(np.full(n, -np.inf, np.float32), "L")
    assert_close(_logsumexp(all_minus_inf, "L"), np.float32(np.nan))  # the formula's nan


def test_batch_norm_is_three_passes_without_a_full_temporary(engine):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 3, 5, 6)).astype(np.float32)
    g, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    x = ax.tensor(a, "N C H W")
    gt, bt = ax.tensor(g, "C"), ax.tensor(b, "C")
    r = ("N", "H", "W")
    d = x - x.mean(r)
    e = d / ax.sqrt((d * d).mean(r) + 1e-5) * gt + bt
    m = a.mean((0, 2, 3), keepdims=True)
    dd = a - m
    expected = dd / np.sqrt((dd * dd).mean((0, 2, 3), keepdims=True) + np.float32(1e-5))
    expected = expected * g[:, None, None] + b[:, None, None]
    out = ax.empty(x.axes, "float32")
    out[...] = e
    assert_close(out, expected)
    if engine == "numba":
        # a channel's values fit in cache: one normalize kernel, its sweeps the mean, the
        # variance (d * d stored in the result as scratch) and the normalized values
        plan = ax.explain(e, out)
        assert [k.kind for k in plan.kernels] == ["reduction"]
        assert plan.temporary_bytes == 0
        # past the cache (a channel of 2x200x200 float32, 320 KB) the three kernels, no
        # full-size temporary: mean and scale per channel only
        big = ax.tensor(np.zeros((2, 3, 200, 200), np.float32), "N C H W")
        d = big - big.mean(r)
        plan = ax.explain(d / ax.sqrt((d * d).mean(r) + 1e-5) * gt + bt)
        assert [k.kind for k in plan.kernels] == ["reduction", "reduction", "elementwise"]
        assert plan.temporary_bytes == 2 * 3 * 4


@pytest.mark.parametrize("width", [1, 7, 600])
def test_softmax_over_an_outer_axis_rows_first(engine, data, width):
    """Softmax and logsumexp over C of an NCHW tensor (the reduced dim outer, rows of
    outputs contiguous): the rows-first logsumexp, with numpy's special values."""
    rng = np.random.default_rng(width)
    a = (rng.standard_normal((2, 6, 3, width)) * 30).astype(data.dtype)
    a[0, :, 0, 0] = -np.inf
    a[1, 2, 1, 0] = np.nan
    a[1, 4, 2, -1] = np.inf
    x = ax.tensor(a, "N C H W")
    with np.errstate(all="ignore"):
        expected = np_softmax(a, 1)
        m = a.max(1)
        expected_lse = m + np.log(np.exp(a - m[:, None]).sum(1))
    assert_close(ax_softmax(x, "C"), expected)
    assert_close(_logsumexp(x, "C"), expected_lse)
    if engine == "numba":
        assert len(ax.explain(ax_softmax(x, "C")).kernels) == 1
        assert len(ax.explain(_logsumexp(x, "C")).kernels) == 1


@pytest.mark.parametrize("k", [0, 1, 4095, 4097, 9000])
def test_sums_of_transcendental_values_in_buffered_blocks(engine, k):
    """``exp(x).sum(K)`` of float32 computes its values into a 4096-value buffer, block by
    block, then adds them in float64; float64 values, and logsumexp's float64 terms, are
    added in the loop that computes them (``kernels.cpu._buffer_pays``)."""
    rng = np.random.default_rng(k)
    a = rng.standard_normal((3, k)).astype(np.float32)
    x = ax.tensor(a, "R K")
    assert_close(ax.exp(x).sum("K"), np.exp(a.astype(np.float64)).sum(1).astype(np.float32))
    assert_close(ax.log1p(x * x).sum(), np.float32(np.log1p(a.astype(np.float64) ** 2).sum()))
    x64 = ax.tensor(a.astype(np.float64), "R K")
    assert_close(ax.exp(x64).sum("K"), np.exp(a.astype(np.float64)).sum(1))
    if k:  # (a max over no values is an error)
        m = a.max(1, keepdims=True)
        assert_close(_logsumexp(x, "K"), (m + np.log(np.exp(a - m).sum(1, keepdims=True)))[:, 0])
    if engine == "numba" and k == 4097:
        assert "rowbuf" in _serial_source(ax.exp(x).sum("K"))
        assert "rowbuf" not in _serial_source(ax.exp(x64).sum("K"))
        assert "rowbuf" not in _serial_source(_logsumexp(x, "K"))


def _serial_source(e):
    from axesarray.engine import executor
    from axesarray.engine.dispatch import source_for

    plan, _ = executor.schedule_for(e.node, None)
    (step,) = plan.steps
    return source_for(step, plan.device, "serial")[0]


# --- ax.softmax, ax.log_softmax, ax.logsumexp: the guarded shift in one reduction ----------


def _np_guarded(a, axis):
    """numpy's values of ``ax.softmax``, ``log_softmax``, ``logsumexp`` (nn/functional.py):
    the shift is the max where it is finite, else 0."""
    with np.errstate(all="ignore"):
        m = a.max(axis, keepdims=True)
        shift = np.where(np.isfinite(m), m, 0).astype(a.dtype)
        e = np.exp(a - shift)
        s = e.sum(axis, keepdims=True)
        lse = shift + np.log(s)
        return e / s, a - lse, np.squeeze(lse, axis)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ax_softmax_and_friends_are_one_reduction_with_their_special_values(engine, dtype):
    """``ax.softmax`` is 1 kernel (was 3), ``log_softmax`` 1, ``logsumexp`` 1, through the
    ``logsumexp_guarded`` reduction (``ax.softmax`` as a result of its own: a normalize
    kernel whose first sweep is the max, tests/test_normalize.py); every row of +-inf and
    NaN keeps its value."""
    a = special_rows(dtype, K.length)
    x = ax.tensor(a, ("R", K))
    p, ls, lse = _np_guarded(a, 1)
    assert_close(ax.softmax(x, "K"), p)
    assert_close(ax.log_softmax(x, "K"), ls)
    assert_close(ax.logsumexp(x, "K"), lse)
    if engine == "numba":
        plan = ax.explain(ax.softmax(x, "K"))
        assert [k.kind for k in plan.kernels] == ["reduction"]
        assert plan.temporary_bytes == 0  # the max stays per row in the kernel
        assert len(ax.explain(ax.log_softmax(x, "K")).kernels) == 1
        assert len(ax.explain(ax.logsumexp(x, "K")).kernels) == 1
    # over an outer axis (rows-first) and over everything (parallel chunks)
    t = ax.tensor(np.ascontiguousarray(a.T), (K, "R"))
    assert_close(ax.softmax(t, "K"), p.T)
    assert_close(ax.logsumexp(t, "K"), lse)
    if engine == "numba":
        assert len(ax.explain(ax.softmax(t, "K")).kernels) == 1


@pytest.mark.parametrize("fill", [-np.inf, np.inf, np.nan, 1.0])
def test_ax_logsumexp_over_parallel_chunks_keeps_its_special_values(fill):
    n = 250_001
    a = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    a[: n // 2] = -np.inf
    a[-1] = fill
    if fill == -np.inf:
        a[:] = fill  # every chunk -inf: -inf (the formula written by hand gives nan)
    x = ax.tensor(a, "L")
    with ax.set_options(tiered=False):
        assert_close(ax.logsumexp(x, "L"), _np_guarded(a.astype(np.float64), 0)[2].astype(a.dtype))


@given(
    st.sampled_from(["float32", "float64"]),
    st.lists(
        st.lists(
            st.one_of(
                st.floats(-1e3, 1e3, width=32),
                st.sampled_from([np.inf, -np.inf, np.nan]),
            ),
            min_size=3,
            max_size=3,
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_ax_softmax_matches_numpy_on_drawn_rows(dtype, rows):
    a = np.array(rows, dtype)
    x = ax.tensor(a, "R K")
    p, ls, lse = _np_guarded(a, 1)
    with ax.set_options(tiered=False):
        assert_close(ax.softmax(x, "K"), p)
        assert_close(ax.log_softmax(x, "K"), ls)
        assert_close(ax.logsumexp(x, "K"), lse)


@given(data=st.data())
def test_replayed_normalizing_functions_match_numpy_on_drawn_views(data):
    """``ax.softmax``, ``log_softmax`` and ``logsumexp`` over drawn axes (lengths 1-4),
    strided and flipped views and one or more normalized axes: a second input of the same
    structure (other values) is replayed from the first one's recipe and gives numpy's
    values and a fresh build's key."""
    from strategies import axes, make_array, random_values, sources

    from axesarray.nn import functional

    a = data.draw(axes(min_rank=1, max_rank=3, min_len=1, max_len=4))
    dtype = data.draw(st.sampled_from(["float32", "float64"]))
    src = data.draw(sources(a.shape))
    over = data.draw(st.lists(st.sampled_from(a.names), min_size=1, unique=True))
    dims = tuple(a.names.index(n) for n in over)
    fn = data.draw(st.sampled_from(["softmax", "log_softmax", "logsumexp"]))
    f = getattr(ax, fn)
    first, _ = make_array(src, random_values(dtype, 1, False))
    second, _ = make_array(src, random_values(dtype, 2, False))
    f(ax.tensor(first, a), tuple(over))  # records the recipe
    x = ax.tensor(second, a)
    parts = functional._parts
    functional._parts = None  # a build would call it
    try:
        got = f(x, tuple(over))  # replayed
    finally:
        functional._parts = parts
    p, ls, lse = _np_guarded(second.astype(np.float64), dims)
    want = {"softmax": p, "log_softmax": ls, "logsumexp": lse}[fn]
    assert_close(got, want.astype(dtype))
    saved = dict(functional._RECIPES)
    functional._RECIPES.clear()
    try:
        assert f(x, tuple(over)).node.key == got.node.key
    finally:
        functional._RECIPES.update(saved)
