"""The normalize kernel: ``f(E, reduce(E))`` with ``E`` stored once in the result (softmax
written by hand, ``e / e.sum(K)``), against numpy over random shapes, axes, views and
destinations (aliasing included), and the plans it claims: two kernels, one exp."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given
from hypothesis import strategies as st

import axesarray as ax
from axesarray.engine import cost
from axesarray.engine.executor import schedule_for
from axesarray.kernels.ir import kernel_nodes

NAMES = "ABC"


def _np_softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _softmax(x, name):
    e = ax.exp(x - x.max(name))
    return e / e.sum(name)


def _plan(expr, out=None):
    plan, _ = schedule_for(expr.node, None if out is None else out.node)
    return plan


def _stored(plan) -> list:
    """The normalize kernels' reductions of a schedule."""
    return [
        n
        for s in plan.steps
        for n in kernel_nodes(s.tree)
        if n.kind == "reduce" and getattr(n, "stores", False)
    ]


def _exps(plan) -> int:
    return sum(n.kind == "map" and n.op == "exp" for s in plan.steps for n in kernel_nodes(s.tree))


@st.composite
def cases(draw):
    ndim = draw(st.integers(1, 3))
    axis = draw(st.integers(0, ndim - 1))
    # any length, 0 included, except along the reduced dim (numpy's max of nothing raises)
    shape = [draw(st.sampled_from([0, 1, 2, 3, 5, 17])) for _ in range(ndim)]
    shape[axis] = draw(st.sampled_from([1, 2, 3, 5, 33]))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    view = draw(st.sampled_from(["plain", "transposed", "strided"]))
    dst = draw(st.sampled_from(["fresh", "assign", "alias"]))
    return tuple(shape), axis, dtype, view, dst, draw(st.integers(0, 2**16))


def _input(shape, dtype, view, seed):
    rng = np.random.default_rng(seed)
    if view == "transposed":  # the same values read through reversed strides
        return np.ascontiguousarray((rng.standard_normal(shape[::-1]) * 4).astype(dtype)).T
    if view == "strided":  # every other element of a bigger array along the first dim
        big = (rng.standard_normal((2 * shape[0],) + shape[1:]) * 4).astype(dtype)
        return big[::2]
    return (rng.standard_normal(shape) * 4).astype(dtype)


@given(case=cases())
def test_softmax_by_hand_matches_numpy(case):
    shape, axis, dtype, view, dst, seed = case
    a = _input(shape, dtype, view, seed)
    names = tuple(NAMES[: len(shape)])
    expected = _np_softmax(a, axis)
    x = ax.tensor(a, names)
    name = names[axis]
    if dst == "fresh":
        assert_close(_softmax(x, name).eval(), expected)
    elif dst == "assign":
        out = ax.tensor(np.full(shape, 7, dtype), names)
        out[...] = _softmax(x, name)
        assert_close(out, expected)
    else:  # x[...] = e / e.sum(K): E is read, then written, at each index in turn
        x[...] = _softmax(x, name)
        assert_close(a, expected)


@pytest.mark.parametrize(
    "shape, names, over",
    [((2, 6, 3, 70), "N C H W", "C"), ((3, 5, 700), "N C K", "K"), ((40,), "K", "K")],
)
def test_two_kernels_one_exp(shape, names, over):
    """The max, then one kernel that computes exp once per element, stores it, sums it and
    divides: rows-first (C strided), rows-last (K contiguous), and a 1-D softmax."""
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    x = ax.tensor(a, names)
    out = ax.tensor(np.empty_like(a), names)
    expr = _softmax(x, over)
    axis = names.split().index(over)
    for target in (out, None):
        plan = _plan(expr, target)
        assert len(plan.steps) == 2 and _exps(plan) == 1 and len(_stored(plan)) == 1
    info = ax.explain(expr, out)
    assert [k.kind for k in info.kernels] == ["reduction", "reduction"]
    kept = [n for n in names.split() if n != over]
    assert over in info.kernels[1].loops[-1][1]  # named after the dims: reduced ones last
    assert not kept or kept[0] in info.kernels[1].loops[0][1]
    out[...] = expr
    assert_close(out, _np_softmax(a, axis))
    assert_close(expr.eval(), _np_softmax(a, axis))


def test_special_values_are_numpys():
    """Rows of -inf (nan), a NaN, +inf: the user's formula, so numpy's values."""
    a = (np.random.default_rng(3).standard_normal((5, 4, 9)) * 30).astype(np.float32)
    a[1, :, 2] = -np.inf
    a[2, 1, 3] = np.nan
    a[3, 2, 4] = np.inf
    x = ax.tensor(a, "N C W")
    with np.errstate(all="ignore"):
        for axis, name in ((1, "C"), (2, "W")):
            assert_close(_softmax(x, name).eval(), _np_softmax(a, axis))


def test_other_roots_and_reductions():
    """Any elementwise root over E and its broadcast reduction: more ops above, other
    inputs read at the output's index, a max instead of a sum, an integer E."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 6, 33)).astype(np.float32)
    b = rng.standard_normal((4, 6, 33)).astype(np.float32)
    x, y = ax.tensor(a, "N C K"), ax.tensor(b, "N C K")
    e = ax.exp(x - x.max("C"))
    en = np.exp(a - a.max(1, keepdims=True))
    r = (e / e.sum("C")) * 2 - y
    assert_close(r.eval(), (en / en.sum(1, keepdims=True)) * 2 - b)
    assert _stored(_plan(r))
    r = e / e.max("K")
    assert_close(r.eval(), en / en.max(2, keepdims=True))
    assert _stored(_plan(r))
    i = rng.integers(-50, 50, (4, 6, 33)).astype(np.int64)
    xi = ax.tensor(i, "N C K")
    ei = xi * 3 + 1
    r = ei - ei.sum("K")
    assert_close(r.eval(), (i * 3 + 1) - (i * 3 + 1).sum(2, keepdims=True))


def test_in_place_reads_only_what_it_has_not_written():
    """``x[...] = softmax(x) + x`` reads ``x`` again after E overwrote it: the kernel runs
    into a temporary (the alias rule); a transposed read of ``x`` too."""
    a = np.random.default_rng(5).standard_normal((6, 6)).astype(np.float32)
    b = a.copy()
    x = ax.tensor(a, "A B")
    x[...] = _softmax(x, "B") + x
    assert_close(a, _np_softmax(b, 1) + b)
    b = a.copy()
    y = x.rename(A="B", B="A")  # a.T, as "A B"
    x[...] = _softmax(y, "B")
    assert_close(a, _np_softmax(b.T, 1))


def test_destinations_that_cannot_hold_e_keep_the_logsumexp_plan():
    """A float64 destination of a float32 softmax, and a blocked one: the rewrite to
    ``exp(x - logsumexp(x))`` (no normalize kernel), numpy's values."""
    a = np.random.default_rng(6).standard_normal((2, 8, 3, 5)).astype(np.float32)
    x = ax.tensor(a, "N C H W")
    expr = _softmax(x, "C")
    wide = ax.tensor(np.empty(a.shape), "N C H W")
    assert not _stored(_plan(expr, wide))
    wide[...] = expr
    assert_close(wide.numpy().astype(np.float32), _np_softmax(a, 1))  # float32 values
    blocked = ax.tensor(np.zeros_like(a), "N C H W").to_layout("NCHW4")
    assert not _stored(_plan(expr, blocked))
    blocked[...] = expr
    assert_close(blocked.numpy(), _np_softmax(a, 1))


def test_cost_model_decides():
    """Storing E pays when its computation and reads cost more than a store and a load in
    cache; with the reduced extent past the cache, the store and load are at memory cost."""
    assert cost.worth_storing(7, 8, 4, 32)  # exp(x - m): work and two reads saved
    assert not cost.worth_storing(0.5, 0, 4, 32)
    small, big = 4, cost.STORE_CACHE_BYTES  # elements of the reduced extent
    assert cost.worth_storing(3, 0, 4, small) and not cost.worth_storing(3, 0, 4, big)
    # a leaf E (the x of x - x.max) is never a candidate: only computed values are stored
    a = np.ones((3, 4), np.float32)
    x = ax.tensor(a, "N K")
    assert not _stored(_plan(x / x.sum("K")))
    assert_close((x / x.sum("K")).eval(), a / a.sum(1, keepdims=True))


@pytest.mark.skipif(not ax.Device("cuda").available(), reason="no CUDA device and no simulator")
def test_cuda_keeps_its_plan():
    """The CUDA templates have no normalize kernel: the plan there is today's (three
    kernels, exp computed twice), with numpy's values."""
    a = np.random.default_rng(7).standard_normal((2, 3, 4)).astype(np.float32)
    x = ax.tensor(a, "N C W").to("cuda")
    with ax.set_options(engine="numba"):
        expr = _softmax(x, "C")
        assert not _stored(_plan(expr))
        assert_close(expr.eval().to("cpu"), _np_softmax(a, 1))


def test_ax_softmax_as_a_result_is_a_normalize_kernel():
    """``ax.softmax`` (the max replaced by 0 where it is not finite) as a result: the same
    kernel, its formula's values, special rows included; inside a bigger expression (a
    sum of it) the ``logsumexp_guarded`` rewrite stays."""
    a = (np.random.default_rng(8).standard_normal((6, 37)) * 30).astype(np.float32)
    a[1] = -np.inf
    a[2, 3] = np.nan
    a[3, 4] = np.inf
    m = a.max(1, keepdims=True)
    with np.errstate(all="ignore"):
        e = np.exp(a - np.where(np.isfinite(m), m, 0))
        expected = e / e.sum(1, keepdims=True)
    x = ax.tensor(a, "N K")
    p = ax.softmax(x, "K")
    plan = _plan(p)
    assert len(plan.steps) == 2 and _exps(plan) == 1 and _stored(plan)
    assert_close(p, expected)
    total = ax.softmax(x, "K").sum("N")
    assert not _stored(_plan(total))
    with np.errstate(all="ignore"):
        assert_close(total, expected.sum(0))
