"""The per-call straight paths give what the general paths give.

Remembered node keys (``expr_ops``) against ``Map``'s own interning; the one-kernel
runners of ``engine.executor`` (a fresh result, and an assignment with its alias test)
against numpy, on their second and later calls, with views, dtype promotion, 0-size,
read-only and unaligned storage, aliasing, and the same errors as a first call.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.dag import build as expr_ops
from axesarray.dag.nodes import Const, Map, walk
from axesarray.engine import alias, direct, executor

AX_I = ax.Axis("I", 7)


@pytest.fixture(autouse=True)
def _fused():
    with ax.set_options(engine="numba", tiered=False), direct.disabled():  # the kernels
        yield


def _tensor(values, dtype="float32", axis=AX_I):
    return ax.tensor(np.asarray(values, dtype=dtype), (axis,))


# --- remembered keys --------------------------------------------------------------------


def _expressions(a, b, i):
    """Operators through map2, map1 and map_scalar, with shared params and casts."""
    return [
        a + b,
        a * a,  # shared leaf: the key records it
        (a + 1) + 1,  # the same shared Const twice
        1 / (1 + ax.exp(-(a + b))),
        2 - a,
        a - 2,
        a * 0.0,
        a * -0.0,
        a + float("nan"),
        a + True,
        a + 1,
        a + 1.0,
        -(a + b) * (a + b),
        i + a,  # int8 + float32: a cast below the Map
        i * 3,
        (i < 300) | (a > b),  # an int out of int8's range folds
    ]


def test_remembered_keys_equal_interned_keys():
    """Built twice (the second time from the memo), every Map has the key and the params
    Map() computes from its children: equal keys always mean equal structure."""
    a, b = _tensor(np.arange(7)), _tensor(np.ones(7))
    i = _tensor(np.arange(7), "int8")
    first = _expressions(a, b, i)
    second = _expressions(a, b, i)
    for e1, e2 in zip(first, second, strict=True):
        assert e1._node.key == e2._node.key
        for node in walk(e2._node):
            if type(node) is Map:
                again = Map(node.op, node.children, node.dtype)
                assert again.key == node.key
                assert len(again.params) == len(node.params)
                assert all(p is q for p, q in zip(again.params, node.params, strict=True))


def test_remembered_keys_tell_signed_zeros_and_scalar_types_apart():
    """1, 1.0 and True are equal as dict keys; -0.0 equals 0.0: the memo keeps them apart
    where numpy does (the result dtype, the sign of zero)."""
    a = _tensor(np.arange(7))
    i = _tensor(np.arange(7), "int8")
    for _ in range(2):
        assert (a * 0.0)._node.key != (a * -0.0)._node.key
        assert np.signbit((a * -0.0).numpy()).all() and not np.signbit((a * 0.0).numpy()).any()
        for v in (1, 1.0, True):
            expected = np.arange(7, dtype=np.int8) * v
            assert (i * v).dtype == expected.dtype
            assert_close((i * v).numpy(), expected)


def test_remembered_keys_see_params_shared_across_children():
    """``x + y`` and ``x + x`` over the same leaf structure: only the identity of the
    params differs, and so do the keys (and the values)."""
    x, y = _tensor(np.arange(7)), _tensor(np.arange(7) * 10)
    assert x._node.key == y._node.key
    disjoint, shared = x + y, x + x
    disjoint2 = x + y
    assert disjoint._node.key == disjoint2._node.key != shared._node.key
    assert shared._node.params == (x._node,)
    assert_close(shared.numpy(), 2 * np.arange(7, dtype=np.float32))
    assert_close((x + y).numpy(), 11 * np.arange(7, dtype=np.float32))


def test_scalar_memo_gives_the_shared_const_where_it_already_is():
    a = _tensor(np.arange(7))
    for _ in range(2):
        e = 1 / (1 + a)
        node = e._node
        c = node.children[0]
        assert type(c) is Const and c in node.params
        assert node.params == (c, a._node)  # each param once, first appearance first
        assert_close(e.numpy(), 1 / (1 + np.arange(7, dtype=np.float32)))


def test_memo_is_bounded():
    a = _tensor(np.arange(7))
    for v in range(expr_ops._MEMO_MAX + 10):
        a + v
    assert len(expr_ops._BUILT) <= expr_ops._MEMO_MAX


# --- the fresh-result runner ---------------------------------------------------------------


def _runs(fn, expected, times=3):
    """``fn()`` gives ``expected`` on the first call (general path) and later ones."""
    for _ in range(times):
        assert_close(fn(), expected)


def test_fresh_runner_is_used_and_agrees():
    an, bn = np.arange(7, dtype=np.float32), np.linspace(-1, 1, 7).astype(np.float32)
    a, b = _tensor(an), _tensor(bn)
    _runs(lambda: (a + b).eval().numpy(), an + bn)
    plan, cached = executor.schedule_for((a + b)._node, None)
    assert cached and plan.fast is not None
    _runs(lambda: (1 / (1 + ax.exp(-(a + b)))).eval().numpy(), 1 / (1 + np.exp(-(an + bn))))


@pytest.mark.parametrize("n", [0, 1, 5])
def test_fresh_runner_sizes(n):
    L = ax.Axis("L", n)
    an = np.arange(n, dtype=np.float32)
    a, b = _tensor(an, axis=L), _tensor(an * 2, axis=L)
    _runs(lambda: (a + b).eval().numpy(), 3 * an)


def test_fresh_runner_views_and_promotion():
    base = np.arange(14, dtype=np.float32)
    a = ax.tensor(base[::2], (AX_I,))  # strided view of the user's array
    r = ax.tensor(base[::-2], (AX_I,))  # negative stride
    i = _tensor(np.arange(7), "int8")
    _runs(lambda: (a + r).eval().numpy(), base[::2] + base[::-2])
    _runs(lambda: (i + a).eval().numpy(), np.arange(7, dtype=np.int8) + base[::2])
    assert (i + a).eval().dtype == np.float32
    m = ax.tensor(np.arange(12.0).reshape(3, 4), "N C")
    _runs(lambda: (m.transpose("C N") * 2).eval().numpy(), np.arange(12.0).reshape(3, 4).T * 2)


def test_storage_flags_are_part_of_the_key():
    """A read-only or unaligned array is typed differently by numba: its own plan, so a
    cached plan never calls machine code typed for other storage."""
    plain = np.arange(7, dtype=np.float32)
    readonly = plain.copy()
    readonly.flags.writeable = False
    raw = np.zeros(7 * 4 + 1, np.uint8)[1:]
    unaligned = raw.view(np.float32)
    unaligned[:] = plain * 3
    assert not unaligned.flags.aligned
    keys = set()
    for arr in (plain, readonly, unaligned, plain):
        t = ax.tensor(arr, (AX_I,))
        keys.add(t._node.key)
        _runs(lambda t=t, arr=arr: (t + t).eval().numpy(), arr + arr)
    assert len(keys) == 3


def test_fresh_runner_follows_serial_threshold():
    an = np.arange(7, dtype=np.float32)
    a = _tensor(an)
    _runs(lambda: (a * 3).eval().numpy(), an * 3)
    with ax.set_options(serial_threshold=0):  # the parallel variant now
        _runs(lambda: (a * 3).eval().numpy(), an * 3)
        assert executor.schedule_for((a * 3)._node, None)[0].fast.threshold == 0
    _runs(lambda: (a * 3).eval().numpy(), an * 3)


def test_fresh_runner_errors_match_the_first_call():
    a = _tensor(np.arange(7))
    b = ax.tensor(np.arange(5, dtype=np.float32), "J")
    (a + a).eval()
    (a + a).eval()
    for _ in range(2):
        with pytest.raises(ax.AxesError, match=r"^add: axis 'I' has length 7 in the left"):
            (a + b.rename(J="I")).eval()


# --- the assignment runner -------------------------------------------------------------------


def test_assign_runner_agrees_and_is_used():
    an, bn = np.arange(7, dtype=np.float32), np.ones(7, np.float32)
    a, b = _tensor(an), _tensor(bn)
    out = _tensor(np.zeros(7))

    def run():
        out[...] = 1 / (1 + ax.exp(-(a + b)))
        return out.numpy().copy()

    _runs(run, 1 / (1 + np.exp(-(an + bn))))
    plan, _ = executor.schedule_for((1 / (1 + ax.exp(-(a + b))))._node, out._node)
    assert plan.fast is not None


def test_assign_runner_in_place_and_aliased():
    """In place through the same view is safe; a reversed view of the destination goes
    through a temporary: every call gives numpy's answer (as if computed first)."""
    arr = np.arange(7, dtype=np.float32)
    x = ax.tensor(arr, (AX_I,))
    expected = np.arange(7, dtype=np.float32)
    for _ in range(3):
        x[...] = x * 2 + 1
        expected = expected * 2 + 1
        assert_close(arr, expected)
    rev = ax.tensor(arr[::-1], (AX_I,))  # another array object over the same memory
    for _ in range(3):
        expected = expected[::-1] + 1
        x[...] = rev + 1
        assert_close(arr, expected)
    other = ax.tensor(arr[:], (AX_I,))  # another object, the same view: in place is safe
    for _ in range(3):
        expected = expected - 1
        x[...] = other - 1
        assert_close(arr, expected)


def test_overlap_test_agrees_with_overlaps():
    arr = np.arange(20, dtype=np.float32)
    x = ax.tensor(arr[:7], (AX_I,))
    cases = [
        ax.tensor(arr[:7], (AX_I,)),  # the same view: safe in place
        ax.tensor(arr[1:8], (AX_I,)),  # shifted by one: overlaps
        ax.tensor(arr[7:14], (AX_I,)),  # the same array, disjoint memory
        ax.tensor(arr[6::-1], (AX_I,)),  # reversed: overlaps
        _tensor(np.zeros(7)),  # other storage
    ]
    for src in cases:
        for e in (src + 1, src + x):
            plan, _ = executor.schedule_for(e._node, x._node)
            step = plan.steps[0]
            fast = alias.overlap_test(step)
            assert fast(e._node.params, x._node) == alias.overlaps(step, e._node.params, x._node)


def test_assign_runner_errors_leave_the_destination_unchanged():
    k = _tensor(np.arange(7), "int32")
    out = _tensor(np.zeros(7), "int32")
    for _ in range(2):
        out[...] = k + k
    before = out.numpy().copy()
    with pytest.raises(TypeError, match=r"^assign: cannot cast float64 to int32"):
        out[...] = k + _tensor(np.ones(7))
    with pytest.raises(ax.AxesError, match=r"^assign: axis 'I' has length 7 .* and 5"):
        out[...] = ax.tensor(np.ones(5, np.int32), "I")
    assert_close(out.numpy(), before)


def test_assign_runner_zero_size():
    L = ax.Axis("L", 0)
    a = _tensor([], axis=L)
    out = _tensor([], axis=L)
    for _ in range(3):
        out[...] = a * 2 + a
        assert out.numpy().shape == (0,)


def test_setitem_ellipsis_checks_like_assign():
    a = _tensor(np.arange(7))
    with pytest.raises(TypeError, match=r"^assign: the destination must be an l-tensor"):
        (a + 1)[...] = a
    ro = np.zeros(7, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"^assign: the destination is read-only"):
        ax.tensor(ro, (AX_I,))[...] = a
    assert not ro.any()


def test_assignment_table_is_used_and_steps_aside():
    """``out[...] = e`` of a ready plan calls its runner from ``engine.ASSIGNS`` (plan-cache
    hits counted, numpy's values); it steps aside for another engine, another
    ``serial_threshold``, and while a placeholder is unbound (the general path raises its
    error, though an expression over a placeholder has a plain one's key)."""
    from axesarray import engine

    an, bn = np.arange(7, dtype=np.float32), np.ones(7, np.float32)
    a, b = _tensor(an), _tensor(bn)
    out = _tensor(np.zeros(7))
    want = 1 / (1 + np.exp(-(an + bn)))
    for _ in range(3):
        out[...] = 1 / (1 + ax.exp(-(a + b)))
    e = 1 / (1 + ax.exp(-(a + b)))
    run = engine.ASSIGNS.get((e.node.key, out.node.key))
    assert run is not None and run.fast is not None
    hits = executor.PLAN_STATS["hits"]
    out[...] = 0.0
    ax.assign(out, e)
    assert executor.PLAN_STATS["hits"] > hits
    assert_close(out.numpy(), want)
    for options in ({"engine": "numpy"}, {"serial_threshold": 3}):
        with ax.set_options(**options):
            for _ in range(3):
                out[...] = 0.0
                out[...] = 1 / (1 + ax.exp(-(a + b)))
                assert_close(out.numpy(), want)
    p = ax.placeholder((AX_I,), "float32")
    for _ in range(2):
        with pytest.raises(ValueError, match=r"^assign: placeholder .* has no value outside"):
            out[...] = 1 / (1 + ax.exp(-(p + b)))
        out[...] = 1 / (1 + ax.exp(-(a + b)))
        assert_close(out.numpy(), want)
