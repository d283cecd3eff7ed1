"""The direct path (``engine.direct``): one elementwise op on plain leaves, by numpy's ufunc.

It must give what the kernels give (values bit for bit, dtype, result layout and key), over
shapes, dtypes, views and sizes 0 and 1, and be taken exactly where it says (counted by
``direct.STATS``, not timed).
"""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import DTYPES, axes, numpy_tensors

import axesarray as ax
from axesarray import engine
from axesarray.engine import direct, executor, reference

OPS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "lt": operator.lt,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
    "maximum": ax.maximum,  # not a direct op: the kernels, whatever the operands
}


@pytest.fixture(autouse=True)
def _kernels():
    with ax.set_options(engine="numba", tiered=False):
        yield


def _both(fn):
    """(result with the direct path, result from the kernels, whether direct answered)."""
    before = direct.STATS["direct"]
    fast = fn().eval()
    taken = direct.STATS["direct"] > before
    with direct.disabled():
        general = fn().eval()
    return fast, general, taken


def _same(fast: ax.Tensor, general: ax.Tensor) -> None:
    f, g = fast.node, general.node
    assert fast.axes == general.axes
    assert f.dtype == g.dtype
    assert f.view == g.view and f.key == g.key  # the same layout, the same leaf structure
    np.testing.assert_array_equal(fast.numpy(), general.numpy())  # NaNs equal, bits of values
    if f.dtype.kind == "f":
        assert np.array_equal(np.signbit(fast.numpy()), np.signbit(general.numpy()))


@settings(max_examples=40, deadline=None)
@given(
    st.data(),
    axes(max_rank=3, max_len=4),
    st.sampled_from(DTYPES),
    st.sampled_from(sorted(OPS)),
    st.sampled_from(["tensor", "int", "float"]),
    st.booleans(),
)
def test_direct_results_equal_the_kernels(data, shape_axes, dtype, op, other, copied):
    """Any operands (views included; ``copied``: C-contiguous copies, which the direct path
    takes): where it answers it gives the kernels' values, dtype and layout; elsewhere the
    kernels answer."""

    def operand():
        t, arr, _ = data.draw(numpy_tensors(shape_axes, dtype))
        return (ax.tensor(arr.copy(), tuple(shape_axes)), arr) if copied else (t, arr)

    a, an = operand()
    if other == "tensor":
        b, bn = operand()
    else:
        b = bn = data.draw(st.integers(-3, 3)) if other == "int" else 0.5
    fn = OPS[op]
    try:
        with np.errstate(all="ignore"):
            expected = (np.maximum if op == "maximum" else fn)(an, bn)
    except (TypeError, OverflowError):
        return  # numpy refuses these operands (bool - bool, an int out of range): so do we
    try:
        fast, general, _ = _both(lambda: fn(a, b))
    except (TypeError, OverflowError):
        return
    _same(fast, general)
    assert_close(fast, np.asarray(expected))


@pytest.mark.parametrize("n", [0, 1, 37])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "int64"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "lt", "eq"])
def test_the_direct_path_is_taken_on_plain_leaves(op, dtype, n):
    rng = np.random.default_rng(n)
    an = rng.integers(-5, 6, n).astype(dtype)
    bn = rng.integers(1, 6, n).astype(dtype)
    a, b = ax.tensor(an, "N"), ax.tensor(bn, "N")
    fast, general, taken = _both(lambda: OPS[op](a, b))
    assert taken
    _same(fast, general)
    assert_close(fast, OPS[op](an, bn))
    _, _, taken = _both(lambda: OPS[op](a, 2))  # a leaf and a constant
    assert taken


@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint16", "int64", "float32", "float64"])
def test_negation_wraps_as_the_kernels_do(dtype):
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else np.finfo(dtype)
    x = ax.tensor(np.array([0, 1, info.max, info.min], dtype), "N")
    fast, general, taken = _both(lambda: -x)
    assert taken
    _same(fast, general)
    with np.errstate(all="ignore"):
        assert_close(fast, -np.array([0, 1, info.max, info.min], dtype))


def test_negation_and_division_of_floats_are_direct():
    x = ax.tensor(np.array([1.5, -0.0, 3.0], "float32"), "N")
    for fn in (operator.neg, lambda t: t / x, lambda t: 1 / t):
        fast, general, taken = _both(lambda fn=fn: fn(x))
        assert taken
        _same(fast, general)


@pytest.mark.parametrize(
    "case",
    [
        "transposed",
        "strided",
        "prefix",
        "float16",
        "bool",
        "int division",
        "maximum",
        "exp",
        "two ops",
        "cast",
    ],
)
def test_the_direct_path_is_not_taken(case):
    """Views other than a whole C-contiguous storage, dtypes whose kernels differ from numpy's
    loops, ops outside the table, and more than one op go to the kernels."""
    m = np.arange(12.0, dtype="float32").reshape(3, 4)
    x, y = ax.tensor(m, "I J"), ax.tensor(m + 1, "I J")
    v = ax.tensor(np.arange(8.0), "N")
    build = {
        "transposed": lambda: x.transpose("J", "I") + y.transpose("J", "I"),
        "strided": lambda: v[{"N": slice(None, None, 2)}] + 1,
        "prefix": lambda: v[{"N": slice(0, 4)}] * 2,  # a whole-looking view of a longer storage
        "float16": lambda: ax.tensor(m.astype("float16"), "I J") + 1,
        "bool": lambda: ax.tensor(m > 3, "I J") == ax.tensor(m > 5, "I J"),
        "int division": lambda: ax.tensor(m.astype("int32"), "I J") / 2,
        "maximum": lambda: ax.maximum(x, y),
        "exp": lambda: ax.exp(x),
        "two ops": lambda: x * y + 1,
        "cast": lambda: x + ax.tensor(m.astype("float64"), "I J"),
    }[case]
    fast, general, taken = _both(build)
    assert not taken
    _same(fast, general)


def test_big_results_go_to_the_parallel_kernels(monkeypatch):
    """Where the kernels would run on threads (from ``serial_threshold`` elements, where
    threads are estimated to pay) the direct path steps aside; below the estimate it
    answers (one core either way)."""
    from axesarray.engine import cost

    monkeypatch.setattr(direct, "num_threads", lambda load=True: 2)  # a machine with one core too
    big = ax.tensor(np.ones(1 << 22, np.float32), "N")  # 48 MiB moved: threads pay
    assert direct._threads_pay((big + big).node, 1 << 22, np.dtype(np.float32))
    assert not direct._threads_pay((big + big).node, 1 << 17, np.dtype(np.float32))
    a = ax.tensor(np.arange(64.0), "N")
    fast, general, taken = _both(lambda: a + a)
    assert taken
    with ax.set_options(serial_threshold=64):
        fast, general, taken = _both(lambda: a + a)  # threads do not pay for 1.5 KiB
        assert taken
        _same(fast, general)
        direct_runners = dict(engine.DIRECT)
        engine.DIRECT.clear()
        monkeypatch.setattr(cost, "LAUNCH_SECONDS", -1.0)  # threads always pay
        try:
            fast, general, taken = _both(lambda: a + a)
        finally:
            engine.DIRECT.clear()
            engine.DIRECT.update(direct_runners)
    assert not taken
    _same(fast, general)


def test_the_prefix_view_shares_its_key_and_still_gets_the_general_path():
    """A view over the first elements of a longer storage has the key of a whole storage of
    that size: the per-call size check sends it to the general path."""
    whole = ax.tensor(np.arange(4.0), "N")
    prefix = ax.tensor(np.arange(8.0), "N")[{"N": slice(0, 4)}]
    assert prefix.node.key == whole.node.key
    assert_close((whole + 1).eval(), np.arange(4.0) + 1)
    before = direct.STATS["direct"]
    assert_close((prefix + 1).eval(), np.arange(4.0) + 1)
    assert direct.STATS["direct"] == before


def test_floating_point_errors_are_silent_as_in_the_kernels():
    """numpy warns on overflow (or raises under ``np.errstate``); a kernel does neither, and
    neither does the direct path."""
    big = ax.tensor(np.array([3e38, -3e38, np.inf], "float32"), "N")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            before = direct.STATS["direct"]
            got = (big + big).eval().numpy()
            zero = (big / 0.0).eval().numpy()
            assert direct.STATS["direct"] == before + 2
    np.testing.assert_array_equal(got, [np.inf, -np.inf, np.inf])
    np.testing.assert_array_equal(zero, [np.inf, -np.inf, np.inf])
    assert np.geterr()["over"] == "warn"  # numpy's own state is left as it was


def test_results_are_fresh_writeable_storage():
    a = ax.tensor(np.arange(3.0), "N")
    r = (a + 0.0).eval()
    assert r.is_lvalue and r.node.writeable
    r[...] = 7.0
    assert_close(a, np.arange(3.0))  # no alias of the operand


def test_reading_an_unbound_placeholder_is_still_refused():
    """The refusal comes before the direct path: a placeholder's storage is plain."""
    x = ax.placeholder((ax.Axis("K", 3),), "float64", name="x")
    msg = r"evaluate: placeholder 'x' has no value outside a call of its function \(K=3\)"
    with pytest.raises(ValueError, match=msg):
        (x + x).eval()


def test_the_kernel_runner_of_eval_follows_the_options():
    """``Tensor.eval`` calls a ready one-kernel plan's runner itself (``engine.DIRECT``); it
    steps aside when the engine or the serial threshold changes, or a placeholder is
    unbound."""
    x = ax.tensor(np.linspace(-1, 1, 9).astype("float32"), "N")
    expected = np.tanh(np.linspace(-1, 1, 9).astype("float32") * 2) + 1
    for _ in range(3):
        assert_close((ax.tanh(x * 2) + 1).eval(), expected)
    assert engine.DIRECT.get((ax.tanh(x * 2) + 1).node.key) is not None
    hits = executor.PLAN_STATS["hits"]
    assert_close((ax.tanh(x * 2) + 1).eval(), expected)
    assert executor.PLAN_STATS["hits"] == hits + 1  # counted as a plan-cache hit
    calls = []
    real = reference.assign

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    reference.assign, saved = spy, reference.assign
    try:
        with ax.set_options(engine="numpy"):
            assert_close((ax.tanh(x * 2) + 1).eval(), expected)
    finally:
        reference.assign = saved
    assert calls  # the reference engine answered
    with ax.set_options(serial_threshold=1):
        assert_close((ax.tanh(x * 2) + 1).eval(), expected)
    p = ax.placeholder((x.axes[0],), "float32", name="p")
    assert (ax.tanh(p * 2) + 1).node.key == (ax.tanh(x * 2) + 1).node.key  # the same runner
    msg = r"evaluate: placeholder 'p' has no value outside a call of its function"
    with pytest.raises(ValueError, match=msg):
        (ax.tanh(p * 2) + 1).eval()


def test_a_live_placeholder_elsewhere_leaves_the_direct_path_on():
    """An unbound placeholder anywhere in the process (an ``ax.function`` kept around) does
    not turn the direct path off for expressions that do not read it."""
    p = ax.placeholder((ax.Axis("K", 3),), "float64", name="p")
    x = ax.tensor(np.arange(3.0), "K")
    _, _, taken = _both(lambda: x + 1.0)
    assert taken
    with pytest.raises(ValueError, match="placeholder 'p' has no value"):
        (p + 1.0).eval()
