"""The normalize kernel: ``f(E, reduce(E))`` with ``E`` stored once in the result (softmax
written by hand, ``e / e.sum(K)``), against numpy over random shapes, axes, views and
destinations (aliasing included), and the plans it claims: one kernel (the max a first
sweep of it), one exp."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, ax_softmax, np_softmax, special_rows
from hypothesis import given
from hypothesis import strategies as st

import axesarray as ax
from axesarray.engine import cost
from axesarray.engine.executor import schedule_for
from axesarray.kernels.ir import kernel_nodes

NAMES = "ABC"


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


def _swept(plan) -> list:
    """The reductions computed in a normalize kernel's first sweep."""
    return [n for s in plan.steps for n in kernel_nodes(s.tree) if n.kind == "swept"]


def _in_place(plan) -> bool:
    """Whether every input leaf of the one kernel is read where the output is written
    (``x[...] = f(x)`` then runs in place, no temporary: ``engine.alias``)."""
    (step,) = plan.steps
    leaves = [lf for lf in step.leaves() if lf.src[0] == "param"]
    return bool(leaves) and all(id(lf) in step.same_index for lf in leaves)


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
    expected = np_softmax(a, axis)
    x = ax.tensor(a, names)
    name = names[axis]
    if dst == "fresh":
        assert_close(ax_softmax(x, name).eval(), expected)
    elif dst == "assign":
        out = ax.tensor(np.full(shape, 7, dtype), names)
        out[...] = ax_softmax(x, name)
        assert_close(out, expected)
    else:  # x[...] = e / e.sum(K): E is read, then written, at each index in turn
        x[...] = ax_softmax(x, name)
        assert_close(a, expected)


def _np_layer_norm(a, k):
    c = a - a.mean(k, keepdims=True, dtype=np.float64).astype(a.dtype)
    return c / np.sqrt((c * c).mean(k, keepdims=True, dtype=np.float64).astype(a.dtype) + 1e-3)


def _np_log_softmax(a, k):
    with np.errstate(all="ignore"):
        m = a.max(k, keepdims=True)
        return a - (m + np.log(np.exp(a - m).sum(k, keepdims=True)))


# ``f(x, reduce(x))`` with ``x`` an input: E is the input itself, stored in the result.
# name -> (the expression, numpy's value, the stored reduction)
_LEAF_ROOTS = {
    "x - x.max": (lambda x, n: x - x.max(n), lambda a, k: a - a.max(k, keepdims=True), "max"),
    "x / x.sum": (
        lambda x, n: x / x.sum(n),
        lambda a, k: (a / a.astype(np.float64).sum(k, keepdims=True)).astype(a.dtype),
        "sum",
    ),
    "x * x.min + x": (
        lambda x, n: x * x.min(n) + x,
        lambda a, k: a * a.min(k, keepdims=True) + a,
        "min",
    ),
    "x - x.mean": (lambda x, n: x - x.mean(n), lambda a, k: a - a.mean(k, keepdims=True), "sum"),
    "layer norm": (
        lambda x, n: (x - x.mean(n)) / ax.sqrt(((x - x.mean(n)) * (x - x.mean(n))).mean(n) + 1e-3),
        lambda a, k: _np_layer_norm(a, k),
        "sum",
    ),
    "log_softmax by hand": (
        lambda x, n: (x - x.max(n)) - ax.log(ax.exp(x - x.max(n)).sum(n)),
        _np_log_softmax,
        "logsumexp",
    ),
    "ax.log_softmax": (
        lambda x, n: ax.log_softmax(x, n),
        _np_log_softmax,
        "logsumexp_guarded",
    ),
}


@given(case=cases(), root=st.sampled_from(sorted(_LEAF_ROOTS)))
def test_an_input_and_its_reduction_in_one_kernel(case, root):
    """``x - x.max(K)``, ``x / x.sum(K)``, a log-softmax (``x - logsumexp(x)``): a
    normalize kernel whose E is the input itself (stored in the result while reduced, read
    back for the root): x comes from memory once. numpy's values over drawn shapes, views
    and destinations, in place included."""
    shape, axis, dtype, view, dst, seed = case
    a = _input(shape, dtype, view, seed)
    if root == "x / x.sum":  # rows far from a zero sum (a ratio to a sum near 0 is noise)
        a = np.abs(a) + 1
    names = tuple(NAMES[: len(shape)])
    build, np_fn, op = _LEAF_ROOTS[root]
    expected = np_fn(a, axis)
    x = ax.tensor(a, names)
    name = names[axis]
    if dst == "fresh":
        assert_close(build(x, name).eval(), expected)
        if shape[axis] > 1:  # (a reduction over one value is simplified away first)
            assert [r.op for r in _stored(_plan(build(x, name)))] == [op]
    elif dst == "assign":
        out = ax.tensor(np.full(shape, 7, dtype), names)
        out[...] = build(x, name)
        assert_close(out, expected)
    else:  # x[...] = x - x.max(K): each element of x is read (E) before it is written
        x[...] = build(x, name)
        assert_close(a, expected)


@pytest.mark.parametrize("root", ["x - x.max", "x / x.sum", "ax.log_softmax"])
@pytest.mark.parametrize("how", ["transposed", "rows shifted", "shifted along K", "reversed"])
def test_an_input_stored_in_the_result_it_overlaps(root, how):
    """``x[...] = f(v)`` for a view ``v`` of ``x`` read at other indices than written (E is
    ``v`` itself): the result is numpy's, as if ``f(v)`` were computed before the write."""
    build, np_fn, _ = _LEAF_ROOTS[root]
    rng = np.random.default_rng(len(how))
    a = (rng.standard_normal((6, 6) if how == "transposed" else (5, 9)) + 3).astype(np.float32)
    b = a.copy()
    x = ax.tensor(a, "A K")
    if how == "transposed":
        x[...] = build(x.rename(A="K", K="A"), "K")
        want = np_fn(b.T, 1)
    elif how == "rows shifted":
        x.isel(A=slice(1, None))[...] = build(x.isel(A=slice(None, -1)), "K")
        want = b.copy()
        want[1:] = np_fn(b[:-1], 1)
    elif how == "shifted along K":
        x.isel(K=slice(1, None))[...] = build(x.isel(K=slice(None, -1)), "K")
        want = b.copy()
        want[:, 1:] = np_fn(b[:, :-1], 1)
    else:
        x[...] = build(x.isel(K=slice(None, None, -1)), "K")
        want = np_fn(b[:, ::-1], 1)
    assert_close(a, want)


def test_a_layer_norm_is_one_kernel_its_reductions_swept():
    """A layer norm: the variance's ``xc * xc`` is stored in the result as scratch (the
    root reads ``xc``, not its square: the sweep saves reading x again), the mean its
    first sweep (a reduction with an epilogue, the division by the count), then the
    normalized values: one kernel, x from memory once. ``x - x.mean(K)`` alone is one
    kernel too (E is x)."""
    a = np.random.default_rng(8).standard_normal((6, 40)).astype(np.float32)
    x = ax.tensor(a, "N D")
    mu = x.mean("D")
    xc = x - mu
    ln = xc / ax.sqrt((xc * xc).mean("D") + 1e-5)
    plan = ax.explain(ln)
    assert [k.kind for k in plan.kernels] == ["reduction"] and plan.temporary_bytes == 0
    assert [r.op for r in _stored(_plan(ln))] == ["sum"] and len(_swept(_plan(ln))) == 1
    c = a - a.mean(1, keepdims=True)
    assert_close(ln.eval(), c / np.sqrt((c * c).mean(1, keepdims=True) + 1e-5))
    assert [r.op for r in _stored(_plan(x - x.mean("D")))] == ["sum"]
    assert len(ax.explain(x - x.mean("D")).kernels) == 1


def test_another_reduction_read_at_the_roots_index_is_a_temporary():
    """``z.sum(K) + (x - x.max(M))``: the root reads a reduction at its own index beside the
    one its normalize kernel stores; the kernel has one reduction, so the other is
    computed into a temporary first (it was fused as a second one, and planning failed)."""
    rng = np.random.default_rng(10)
    xn, zn = rng.standard_normal((3, 5)), rng.standard_normal((3, 5, 4))
    x, z = ax.tensor(xn, "N M"), ax.tensor(zn, "N M K")
    want = zn.sum(2) + xn - xn.max(1, keepdims=True)
    for e in (z.sum("K") + (x - x.max("M")), (x - x.max("M")) + z.sum("K")):
        assert_close(e.eval(), want)
        assert [r.op for r in _stored(_plan(e))] == ["max"] and len(_plan(e).steps) == 2


def test_a_reduction_another_kernel_stores_anyway_is_not_stored_again(monkeypatch):
    """A mean read by the root and by a full sum (another kernel, which stores it in a
    temporary): a normalize kernel storing x for ``x - mean`` would compute the mean a
    second time and save nothing, so the pass that planned one plans again without it
    (``Normalize.wasted_stores``) and the root reads the temporary."""
    from axesarray.engine.normalize import Normalize

    found = []
    wasted = Normalize.wasted_stores
    monkeypatch.setattr(Normalize, "wasted_stores", lambda b: found.append(wasted(b)) or found[-1])
    a = np.random.default_rng(9).standard_normal((6, 40)).astype(np.float32)
    x = ax.tensor(a, "N D")
    e = x - x.mean("D") + x.mean("D").sum()
    assert not _stored(_plan(e))
    assert found[0] and not found[-1]  # one pass found a wasted store, the next none
    m = a.mean(1, keepdims=True)
    assert_close(e.eval(), a - m + m.sum())


@pytest.mark.parametrize(
    "shape, names, over",
    [((2, 6, 3, 70), "N C H W", "C"), ((3, 5, 700), "N C K", "K"), ((40,), "K", "K")],
)
def test_one_kernel_one_exp(shape, names, over):
    """One kernel: a first sweep computes the max, a second computes exp once per element,
    stores it and sums it, a third divides: rows-first (C strided), rows-last (K
    contiguous), and a 1-D softmax; into a destination, a fresh result and in place."""
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    x = ax.tensor(a, names)
    out = ax.tensor(np.empty_like(a), names)
    expr = ax_softmax(x, over)
    axis = names.split().index(over)
    for target in (out, None, x):
        plan = _plan(expr, target)
        assert len(plan.steps) == 1 and _exps(plan) == 1 and len(_stored(plan)) == 1
        assert [n.op for n in _swept(plan)] == ["max"]
        assert len(plan.temps) == (target is None)  # the fresh result only
    assert _in_place(_plan(expr, x))
    info = ax.explain(expr, out)
    assert [k.kind for k in info.kernels] == ["reduction"]
    kept = [n for n in names.split() if n != over]
    assert over in info.kernels[0].loops[-1][1]  # named after the dims: reduced ones last
    assert not kept or kept[0] in info.kernels[0].loops[0][1]
    expected = np_softmax(a, axis)
    out[...] = expr
    assert_close(out, expected)
    assert_close(expr.eval(), expected)
    x[...] = expr  # in place: each block's x read (sweep 1) before E is written over it
    assert_close(a, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("over", ["N", "C", "W"])
def test_swept_max_in_place_with_special_values(over, dtype):
    """``x[...] = softmax(x)`` over each dim (rows-first and rows-last) with rows of -inf,
    a NaN and +inf, by hand and ``ax.softmax`` (the guarded max): one kernel, no
    temporary, numpy's values."""
    a = (np.random.default_rng(9).standard_normal((5, 6, 9)) * 30).astype(dtype)
    a[1, :, 2] = -np.inf
    a[:, 1, 3] = -np.inf
    a[2, 1, 3] = np.nan
    a[3, 2, 4] = np.inf
    axis = "NCW".index(over)
    m = a.max(axis, keepdims=True)
    with np.errstate(all="ignore"):
        by_hand = np_softmax(a, axis)
        e = np.exp(a - np.where(np.isfinite(m), m, 0))
        guarded = e / e.sum(axis, keepdims=True)
    for make, expected in ((ax_softmax, by_hand), (ax.softmax, guarded)):
        b = a.copy()
        x = ax.tensor(b, "N C W")
        plan = _plan(make(x, over), x)
        assert len(plan.steps) == 1 and _swept(plan) and not plan.temps and _in_place(plan)
        with np.errstate(all="ignore"):
            x[...] = make(x, over)
        assert_close(b, expected)


def test_swept_reduction_read_by_the_root_too():
    """The root reads the max as well (``softmax + max``): the third sweep takes it from
    the first's per-output value, never from x (which E overwrote in place)."""
    a = np.random.default_rng(10).standard_normal((3, 7, 20)).astype(np.float32)
    expected = np_softmax(a, 1) + a.max(1, keepdims=True)
    x = ax.tensor(a, "N C K")
    expr = ax_softmax(x, "C") + x.max("C")
    assert len(_swept(_plan(expr, x))) == 1
    x[...] = expr
    assert_close(a, expected)
    # a max the root reads but E does not: a kernel of its own (x's max is swept)
    b = np.random.default_rng(12).standard_normal((3, 7, 20)).astype(np.float32)
    x, y = ax.tensor(b, "N C K"), ax.tensor(b[::-1].copy(), "N C K")
    expr = y.max("C") + ax_softmax(x, "C")
    plan = _plan(expr)
    assert len(plan.steps) == 2 and len(_swept(plan)) == 1
    assert_close(expr.eval(), b[::-1].max(1, keepdims=True) + np_softmax(b, 1))


def test_reductions_that_are_not_swept():
    """A max over other dims than the sum's, and a max stored for another reader too,
    stay kernels of their own; numpy's values."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((4, 6, 33)).astype(np.float32)
    x = ax.tensor(a, "N C K")
    e = ax.exp(x - x.max("K"))
    en = np.exp(a - a.max(2, keepdims=True))
    r = e / e.sum("C")
    plan = _plan(r)
    assert _stored(plan) and not _swept(plan) and len(plan.steps) == 2
    assert_close(r.eval(), en / en.sum(1, keepdims=True))
    # x - max(x) read by the normalize kernel and the max read by a second reduction
    total = ax_softmax(x, "C") * x.max("C").sum("K")
    expected = np_softmax(a, 1) * a.max(1, keepdims=True).sum(2, keepdims=True)
    assert_close(total.eval(), expected)


def test_special_values_are_numpys():
    """Rows of -inf (nan), a NaN, +inf: the user's formula, so numpy's values."""
    a = (np.random.default_rng(3).standard_normal((5, 4, 9)) * 30).astype(np.float32)
    a[1, :, 2] = -np.inf
    a[2, 1, 3] = np.nan
    a[3, 2, 4] = np.inf
    x = ax.tensor(a, "N C W")
    with np.errstate(all="ignore"):
        for axis, name in ((1, "C"), (2, "W")):
            assert len(_swept(_plan(ax_softmax(x, name)))) == 1
            assert_close(ax_softmax(x, name).eval(), np_softmax(a, axis))


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
    x[...] = ax_softmax(x, "B") + x
    assert_close(a, np_softmax(b, 1) + b)
    b = a.copy()
    y = x.rename(A="B", B="A")  # a.T, as "A B"
    x[...] = ax_softmax(y, "B")
    assert_close(a, np_softmax(b.T, 1))


def test_destinations_that_cannot_hold_e_keep_the_logsumexp_plan():
    """A float64 destination of a float32 softmax, and a blocked one: the rewrite to
    ``exp(x - logsumexp(x))`` (no normalize kernel), numpy's values."""
    a = np.random.default_rng(6).standard_normal((2, 8, 3, 5)).astype(np.float32)
    x = ax.tensor(a, "N C H W")
    expr = ax_softmax(x, "C")
    wide = ax.tensor(np.empty(a.shape), "N C H W")
    assert not _stored(_plan(expr, wide))
    wide[...] = expr
    assert_close(wide.numpy().astype(np.float32), np_softmax(a, 1))  # float32 values
    blocked = ax.tensor(np.zeros_like(a), "N C H W").to_layout("NCHW4")
    assert not _stored(_plan(expr, blocked))
    blocked[...] = expr
    assert_close(blocked.numpy(), np_softmax(a, 1))


def test_cost_model_decides():
    """Storing E pays when its computation and reads cost more than a store and a load in
    cache; with the reduced extent past the cache, the store and load are at memory cost."""
    assert cost.worth_storing(7, 8, 4, 32)  # exp(x - m): work and two reads saved
    assert not cost.worth_storing(0.5, 0, 4, 32)
    small, big = 4, cost.STORE_CACHE_BYTES  # elements of the reduced extent
    assert cost.worth_storing(3, 0, 4, small) and not cost.worth_storing(3, 0, 4, big)
    # a leaf E (the x of x / x.sum(K)): no work saved, but x read from memory once, not
    # twice (the reduction's kernel and the root's), while a row fits in cache
    assert cost.worth_storing(0, 4, 4, small) and not cost.worth_storing(0, 4, 4, big)
    a = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    x = ax.tensor(a, "N K")
    assert [r.op for r in _stored(_plan(x / x.sum("K")))] == ["sum"]
    assert_close((x / x.sum("K")).eval(), a / a.sum(1, keepdims=True))
    long = ax.tensor(np.ones((2, big), np.float32), "N K")  # rows past the cache: 2 kernels
    assert not _stored(_plan(long - long.max("K")))


def test_cost_model_sweeps_a_reduction_whose_inputs_stay_in_cache():
    """A first sweep saves reading the max's inputs from memory (and its temporary) and
    reads them again in cache: worth it while one output's extent fits, and past the
    cache (memory reads on both sides) for the temporary it saves."""
    assert cost.worth_sweeping(4, 4, 32)
    assert cost.worth_sweeping(8, 8, 1)
    rows = cost.STORE_CACHE_BYTES // 4
    assert cost.worth_sweeping(4, 4, rows)  # fits exactly
    assert cost.worth_sweeping(4, 4, 4 * rows)


@pytest.mark.skipif(not ax.Device("cuda").available(), reason="no CUDA device and no simulator")
def test_cuda_keeps_its_plan():
    """The CUDA templates have no normalize kernel: the plan there is today's (three
    kernels, exp computed twice), with numpy's values."""
    a = np.random.default_rng(7).standard_normal((2, 3, 4)).astype(np.float32)
    x = ax.tensor(a, "N C W").to("cuda")
    with ax.set_options(engine="numba"):
        expr = ax_softmax(x, "C")
        assert not _stored(_plan(expr))
        assert_close(expr.eval().to("cpu"), np_softmax(a, 1))


def test_ax_softmax_as_a_result_is_a_normalize_kernel():
    """``ax.softmax`` (the max replaced by 0 where it is not finite) as a result: the same
    kernel, its formula's values, special rows included; inside a bigger expression (a
    sum of it) the ``logsumexp_guarded`` rewrite stays."""
    a = special_rows("float32", 37)
    m = a.max(1, keepdims=True)
    with np.errstate(all="ignore"):
        e = np.exp(a - np.where(np.isfinite(m), m, 0))
        expected = e / e.sum(1, keepdims=True)
    x = ax.tensor(a, "N K")
    p = ax.softmax(x, "K")
    plan = _plan(p)
    assert len(plan.steps) == 1 and _exps(plan) == 1 and _stored(plan) and _swept(plan)
    assert_close(p, expected)
    # the sum over rows, of the rows whose softmax is a number (one NaN row would make
    # every column NaN, and the comparison of NaN with NaN would check nothing)
    finite = np.isfinite(expected).all(1)
    assert 2 <= finite.sum() < len(a)
    total = ax.softmax(ax.tensor(a[finite], "N K"), "K").sum("N")
    assert not _stored(_plan(total))
    want = expected[finite].sum(0)
    assert np.isfinite(want).all()
    assert_close(total, want)


@pytest.mark.parametrize("over, axis", [("C", 1), ("K", 2)])
def test_other_swept_reductions_and_dtypes(over, axis):
    """Any reduction E reads over the same dims is swept: a float16 max, an integer min,
    a float sum; numpy's values, one kernel."""
    rng = np.random.default_rng(13)
    h = rng.standard_normal((4, 6, 33)).astype(np.float16)
    x = ax.tensor(h, "N C K")
    r = ax_softmax(x, over)
    assert len(_plan(r).steps) == 1 and _swept(_plan(r))
    assert_close(r.eval(), np_softmax(h, axis))
    i = rng.integers(-50, 50, (4, 6, 33)).astype(np.int64)
    xi = ax.tensor(i, "N C K")
    ei = (xi - xi.min(over)) * 3 + 1
    r = ei - ei.sum(over)
    assert [n.op for n in _swept(_plan(r))] == ["min"] and len(_plan(r).steps) == 1
    en = (i - i.min(axis, keepdims=True)) * 3 + 1
    assert_close(r.eval(), en - en.sum(axis, keepdims=True))
    a = (np.abs(rng.standard_normal((4, 6, 33))) + 1).astype(np.float32)
    x = ax.tensor(a, "N C K")
    e = ax.exp(x / x.sum(over))
    r = e / e.sum(over)
    assert [n.op for n in _swept(_plan(r))] == ["sum"] and len(_plan(r).steps) == 1
    en = np.exp(a / a.sum(axis, keepdims=True))
    assert_close(r.eval(), en / en.sum(axis, keepdims=True))


# ``f(x, g, epilogue(reduce(g)))`` built from parts: the normalize kernel's candidates
_G = {
    "x": lambda x: x,
    "x * x": lambda x: x * x,
    "exp": lambda x: ax.exp(x * 0.1),
    "abs": abs,
    "2x + 1": lambda x: x * 2 + 1,
}
_EPILOGUE = {
    "none": lambda r: r,
    "/ 3": lambda r: r / 3.0,
    "sqrt": lambda r: ax.sqrt(abs(r) + 1.0),
    "+ c": lambda r: r + 0.5,
}
_F = {
    "x - r": lambda x, g, r: x - r,
    "x / r": lambda x, g, r: x / (abs(r) + 1.0),
    "g - r": lambda x, g, r: g - r,
    "(x - r) * g": lambda x, g, r: (x - r) * g,
    "r * x + x": lambda x, g, r: r * x + x,
}


@given(
    case=cases(),
    parts=st.tuples(
        st.sampled_from(sorted(_G)),
        st.sampled_from(["sum", "max", "min", "mean", "logsumexp"]),
        st.sampled_from(sorted(_EPILOGUE)),
        st.sampled_from(sorted(_F)),
    ),
)
def test_roots_over_a_reduction_of_their_own_values(case, parts):
    """``f(x, g(x), epilogue(reduce(g(x))))`` from drawn parts (g an input or computed,
    five reductions, epilogues of constants, roots reading g or not): numpy's engine's
    values over drawn shapes, views and destinations, in place included, whatever the plan
    (a normalize kernel storing g, as scratch or read back, or kernels of their own)."""
    shape, axis, dtype, view, dst, seed = case
    g_name, op, ep, f_name = parts
    a = _input(shape, dtype, view, seed)
    names = tuple(NAMES[: len(shape)])
    name = names[axis]

    def build(x):
        g = _G[g_name](x)
        r = ax.logsumexp(g, name) if op == "logsumexp" else getattr(g, op)(name)
        return _F[f_name](x, g, _EPILOGUE[ep](r))

    with ax.set_options(engine="numpy"):
        expected = build(ax.tensor(a.copy(), names)).numpy()
    x = ax.tensor(a, names)
    if dst == "fresh":
        got = build(x).eval()
    elif dst == "assign":
        got = ax.tensor(np.full(shape, 7, dtype), names)
        got[...] = build(x)
    else:
        x[...] = build(x)
        got = a
    assert_close(got, expected)


def test_rows_first_parts_of_the_root_computed_once_per_output():
    """A layer norm over C of NCHW (rows-first: the reduced dim strided): the mean's
    division and ``sqrt(var + eps)`` are computed once per output into arrays, not at
    every element of the sweeps; numpy's values."""
    from axesarray.engine.dispatch import source_for

    a = np.random.default_rng(11).standard_normal((2, 6, 3, 40)).astype(np.float32)
    x = ax.tensor(a, "N C H W")
    xc = x - x.mean("C")
    e = xc / ax.sqrt((xc * xc).mean("C") + 1e-5)
    c = a - a.mean(1, keepdims=True)
    assert_close(e.eval(), c / np.sqrt((c * c).mean(1, keepdims=True) + 1e-5))
    plan = _plan(e)
    (step,) = plan.steps
    source = source_for(step, plan.device, "serial")[0]
    last_sweep = source.split("for i2 in range(n2):")[-1]
    assert "sqrt" in source and "sqrt" not in last_sweep and " / c" not in last_sweep
