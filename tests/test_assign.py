"""Assignment: broadcasting into the destination, numpy's aliasing rule, failures leave no trace."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given
from hypothesis import strategies as st
from strategies import axes, numpy_tensors

import axesarray as ax

N, C, H = ax.Axis("N", 2), ax.Axis("C", 6), ax.Axis("H", 3)


def t_(arr, names):
    return ax.tensor(np.asarray(arr), names)


# --- broadcasting into the destination ----------------------------------------------------------


def test_value_broadcasts_into_destination(engine):
    """A value with a subset of the destination's axes, in any order, broadcasts by name."""
    out = ax.zeros((N, C, H))
    v = np.arange(18.0).reshape(3, 6)
    out[...] = t_(v, "H C")
    assert_close(out, np.broadcast_to(v.T, (2, 6, 3)))
    out[...] = 7
    assert_close(out, np.full((2, 6, 3), 7.0))
    ax.assign(out, t_(np.arange(2.0), "N") * 2)
    assert_close(out, np.broadcast_to(np.arange(2.0)[:, None, None] * 2, (2, 6, 3)))


def test_slice_assignment_of_expression(engine):
    """``out[{"C": slice(0, 4)}] = e[{"C": slice(0, 4)}]`` writes only that slice."""
    a = np.arange(12.0).reshape(2, 6)
    x = t_(a, "N C")
    e = ax.exp(x) * 2
    out = ax.zeros((N, C))
    out[{"C": slice(0, 4)}] = e[{"C": slice(0, 4)}]
    expected = np.zeros((2, 6))
    expected[:, :4] = np.exp(a[:, :4]) * 2
    assert_close(out, expected)
    out[{"C": slice(None, None, -2), "N": 1}] = -1.0
    expected[1, ::-2] = -1.0
    assert_close(out, expected)


def test_assign_into_strided_numpy_destination(engine):
    """Writing into a transposed, reversed numpy view lands where numpy would put it."""
    buf = np.zeros((6, 4))
    dst = buf[::-2, 1:].T  # shape (3, 3), negative and transposed strides
    out = t_(dst, "H W")
    src = np.arange(9.0).reshape(3, 3)
    out[...] = t_(src, "H W") + 0.5
    expected = np.zeros((6, 4))
    expected[::-2, 1:].T[...] = src + 0.5
    np.testing.assert_array_equal(buf, expected)


@pytest.mark.parametrize(
    "value_dtype, dst_dtype",
    [
        ("int64", "float32"),
        ("float64", "float32"),
        ("bool", "int8"),
        ("int64", "int8"),
        ("uint8", "int16"),
    ],
)
def test_same_kind_casts_are_allowed(engine, value_dtype, dst_dtype):
    """Casts numpy's copyto allows (same_kind) are done with numpy's conversion."""
    v = (np.arange(6) * 100 - 200).astype(value_dtype)
    out = ax.zeros((C,), dst_dtype)
    out[...] = t_(v, "C")
    expected = np.zeros(6, dst_dtype)
    np.copyto(expected, v, casting="same_kind")
    assert_close(out, expected)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_assign_sizes_zero_and_one(engine, n):
    """Assignments work for empty and single-element destinations."""
    out = ax.zeros((ax.Axis("N", n), ax.Axis("C", 1)))
    out[...] = t_(np.arange(n, dtype=float), "N") + 1
    assert_close(out, (np.arange(n, dtype=float) + 1).reshape(n, 1))


@given(numpy_tensors(dtype="float64"), st.data())
def test_random_broadcast_assignment(tdata, data):
    """A value over any subset of the axes, in any order, assigns like numpy's broadcasting."""
    with ax.set_options(engine=data.draw(st.sampled_from(["numpy", "numba"]))):
        t, arr, _ = tdata
        names = list(t.names)
        sub = data.draw(st.lists(st.sampled_from(names), unique=True)) if names else []
        shape = [t.axes[n].length for n in sub]
        v = np.random.default_rng(0).random(shape)
        t[...] = t_(v, sub) * 3
        order = [sub.index(n) for n in names if n in sub]
        expand = tuple(slice(None) if n in sub else None for n in names)
        expected = np.broadcast_to((v * 3).transpose(order)[expand], arr.shape)
        np.testing.assert_array_equal(arr, expected)


# --- aliasing -----------------------------------------------------------------------------


def test_alias_transposed_square(engine):
    """``x[...] = x.T + 1`` on a square tensor reads the old values (numpy's rule)."""
    a = np.arange(16.0).reshape(4, 4)
    x = t_(a, "A B")
    expected = a.T + 1
    x[...] = x.rename(A="B", B="A") + 1  # swapping names transposes the data
    np.testing.assert_array_equal(a, expected)
    y = t_(b := np.arange(9).reshape(3, 3), "A B")
    y[...] = y.transpose("B A").rename(A="B", B="A") * 2
    np.testing.assert_array_equal(b, (np.arange(9).reshape(3, 3).T) * 2)


@pytest.mark.parametrize("shift", [1, -1, 2, -2])
def test_alias_shifted_slices(engine, shift):
    """Shifted overlapping slices, in both directions, give numpy's result."""
    a = np.arange(10.0)
    b = a.copy()
    x = t_(a, "N")
    if shift > 0:
        x[{"N": slice(shift, None)}] = x[{"N": slice(None, -shift)}] * 2 + 1
        b[shift:] = b[:-shift] * 2 + 1
    else:
        x[{"N": slice(None, shift)}] = x[{"N": slice(-shift, None)}] * 2 + 1
        b[:shift] = b[-shift:] * 2 + 1
    np.testing.assert_array_equal(a, b)


def test_alias_reversed_and_reduced(engine):
    """Reversed and reduced reads of the destination go through a temporary."""
    a = np.arange(12.0).reshape(3, 4)
    b = a.copy()
    x = t_(a, "N C")
    x[...] = x[{"C": slice(None, None, -1)}] + x
    b[...] = b[:, ::-1] + b
    np.testing.assert_array_equal(a, b)
    x[...] = x - x.sum("C")
    b[...] = b - b.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(a, b)
    x[...] = x.max("N") * 0.5 + x
    b[...] = b.max(axis=0) * 0.5 + b
    np.testing.assert_array_equal(a, b)


def test_alias_dot_into_operand(engine):
    """``x[...] = dot(x, x)`` (square) uses the old x throughout."""
    a = np.arange(9.0).reshape(3, 3) / 3
    b = a.copy()
    x = t_(a, "I K")
    x[...] = ax.dot(x, x.rename(I="K", K="J"), over="K").rename(J="K")
    b[...] = b @ b
    assert_close(a, b)


def test_alias_pad_and_concat(engine):
    """Complex views of the destination (pad, concat) read the old values."""
    a = np.arange(6.0)
    b = a.copy()
    x = t_(a, "N")
    x[...] = ax.pad(x, N=(1, 0))[{"N": slice(0, 6)}] + x
    b[...] = np.pad(b, (1, 0))[:6] + b
    np.testing.assert_array_equal(a, b)
    x[...] = ax.concat([x[{"N": slice(3, None)}], x[{"N": slice(0, 3)}]], "N")
    b[...] = np.concatenate([b[3:], b[:3]])
    np.testing.assert_array_equal(a, b)


def test_inplace_operators(engine):
    """``x += 1`` and friends write in place through views, with broadcasting by name."""
    a = np.arange(6.0).reshape(2, 3)
    b = a.copy()
    x = t_(a, "N C")
    x += 1
    x *= t_(np.array([1.0, 2.0, 3.0]), "C")
    v = x[{"C": 1}]
    v -= 100
    x[{"N": 0}] /= 2
    b += 1
    b *= [1.0, 2.0, 3.0]
    b[:, 1] -= 100
    b[0] /= 2
    np.testing.assert_array_equal(a, b)
    i = t_(ai := np.arange(4, dtype=np.int8), "N")
    i //= 2
    i **= 2
    np.testing.assert_array_equal(ai, (np.arange(4, dtype=np.int8) // 2) ** 2)


def test_inplace_on_rtensor_rebinds():
    """``e += 1`` on an r-tensor builds a new expression (nothing to write into)."""
    x = t_(np.arange(3.0), "N")
    e = x * 2
    before = e
    e += 1
    assert e is not before and not e.is_lvalue
    assert_close(e, np.arange(3.0) * 2 + 1)


@given(numpy_tensors(dtype="int64"), st.data())
def test_random_aliasing(tdata, data):
    """Reversed, transposed (renamed) and shifted reads of the destination: numpy's result."""
    engine = data.draw(st.sampled_from(["numpy", "numba"]))
    t, arr, _ = tdata
    names = list(t.names)
    # Swap names among axes of equal length: the data is read transposed.
    mapping = {}
    for n in data.draw(st.permutations(names)):
        if n in mapping.values() or n in mapping:
            continue
        mates = [
            m for m in names if m not in mapping and m != n and t.axes[m].length == t.axes[n].length
        ]
        if mates and data.draw(st.booleans()):
            m = data.draw(st.sampled_from(mates))
            mapping[n], mapping[m] = m, n
    rev = data.draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    src = t[{n: slice(None, None, -1) for n in rev}].rename(mapping)
    src_np = arr[tuple(slice(None, None, -1) if n in rev else slice(None) for n in names)]
    renamed = [mapping.get(n, n) for n in names]
    src_np = src_np.transpose([renamed.index(n) for n in names])
    dst, read, read_np = t, src, src_np
    ix = [slice(None)] * len(names)
    long_axes = [n for n in names if t.axes[n].length >= 2]
    if long_axes and data.draw(st.booleans()):
        n = data.draw(st.sampled_from(long_axes))
        a_sl, b_sl = (slice(1, None), slice(None, -1))
        if data.draw(st.booleans()):
            a_sl, b_sl = b_sl, a_sl
        dst, read = t[{n: a_sl}], src[{n: b_sl}]
        ix[names.index(n)] = b_sl
        read_np = src_np[tuple(ix)]
        ix[names.index(n)] = a_sl
    expected = arr.copy()
    expected[tuple(ix)] = read_np * 2 + arr[tuple(ix)]  # numpy evaluates fully first
    with ax.set_options(engine=engine):
        dst[...] = read * 2 + dst
    np.testing.assert_array_equal(arr, expected)


# --- a failed assignment leaves no trace ------------------------------------------------------


def _failing_cases():
    x_axes = (N, H)
    return {
        "extra axis": lambda out: ax.assign(out, ax.ones((N, H, ax.Axis("K", 2)))),
        "wrong length": lambda out: ax.assign(out, ax.ones((ax.Axis("H", 4),))),
        "renamed axis": lambda out: ax.assign(out, ax.ones(x_axes).rename(H="W")),
        "length via view": lambda out: ax.assign(out, ax.ones(x_axes)[{"H": slice(0, 2)}]),
        "numpy array": lambda out: ax.assign(out, np.ones((2, 3))),
        "bad value type": lambda out: ax.assign(out, "seven"),
    }


@pytest.mark.parametrize("case", sorted(_failing_cases()))
def test_failed_assignment_leaves_destination_unchanged(engine, case):
    """Every check runs before the first write: the destination is byte-for-byte unchanged."""
    a = np.arange(6.0).reshape(2, 3)
    out = t_(a, "N H")
    before = a.tobytes()
    with pytest.raises((ax.AxesError, TypeError, OverflowError)):
        _failing_cases()[case](out)
    assert a.tobytes() == before


def test_failed_int_assignment_unchanged(engine):
    """Wrong-dtype and out-of-range writes into an int destination change nothing."""
    a = np.arange(6, dtype=np.uint8).reshape(2, 3)
    out = t_(a, "N H")
    before = a.tobytes()
    with pytest.raises(TypeError, match="same_kind"):
        out[...] = ax.ones((N, H)) * 2.5
    with pytest.raises(OverflowError, match="300"):
        out[...] = 300
    with pytest.raises(OverflowError):
        out[...] = out + 300
    with pytest.raises(TypeError, match="same_kind"):
        out[...] = 1.5
    assert a.tobytes() == before


def test_failed_assignment_read_only_unchanged(engine):
    """A read-only destination (broadcast view or read-only array) is never written."""
    a = np.arange(3.0)
    b = ax.tensor(a, "C").broadcast_to((N, ax.Axis("C", 3)))
    with pytest.raises(ValueError, match="read-only"):
        b[...] = 0.0
    ro = np.arange(3.0)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        t_(ro, "C")[...] = 5.0
    np.testing.assert_array_equal(a, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(ro, [0.0, 1.0, 2.0])


def test_assign_to_rtensor_refused():
    """An r-tensor has no storage to write into."""
    x = t_(np.arange(3.0), "N")
    with pytest.raises(TypeError, match="the destination must be an l-tensor"):
        (x + 1)[...] = 0.0
    with pytest.raises(TypeError, match="the destination must be an l-tensor"):
        ax.assign(np.zeros(3), x)


@given(axes(min_rank=1, max_rank=3))
def test_failed_assignment_random_axes(a):
    """Assigning a value with a foreign axis fails and leaves random destinations unchanged."""
    out = ax.tensor(np.random.default_rng(0).random(a.shape), a)
    before = out.numpy().tobytes()
    with pytest.raises(
        ax.AxesError, match="assign: the value has axes the destination lacks: 'foreign'"
    ):
        out[...] = ax.ones((ax.Axis("foreign", 1),))
    assert out.numpy().tobytes() == before


def _in_place_variants():
    """The in-place variants the plans' straight runners made: {alias: ready}."""
    from axesarray.engine import executor

    found = {}
    for plan in executor._PLANS.values():
        if callable(plan.fast) and hasattr(plan.fast, "__globals__"):
            inplace = plan.fast.__globals__.get("inplace")
            for alias, (kernel, _) in getattr(inplace, "variants", {}).items():
                found[alias] = kernel.ready
    return found


@pytest.mark.parametrize("n", [1000, 300_000])  # the serial and the parallel variant
def test_an_assignment_into_its_own_operand_runs_the_in_place_variant(n):
    """``m[...] = b * m + g`` (and ``+=``): the kernel reads ``m`` through the destination
    (one argument: two over the same memory fail LLVM's run-time overlap check and run the
    scalar loop, 4x slower), a variant compiled once per set of aliased operands; values
    as numpy's, call after call, and an assignment into another array runs the general
    kernel as before."""
    from axesarray.engine import executor
    from axesarray.engine.binder import lowered

    rng = np.random.default_rng(61)
    mn, gn = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    want = mn.copy()
    m, g = ax.tensor(mn.copy(), "I"), ax.tensor(gn, "I")
    other = ax.zeros(m.axes, "float32")
    with ax.set_options(tiered=False):
        for _ in range(4):  # the general path, then the straight runner
            m[...] = 0.9 * m + 0.1 * g
            want = np.float32(0.9) * want + np.float32(0.1) * gn
            assert_close(m.numpy(), want)
        plan = executor.schedule_for((0.9 * m + 0.1 * g).node, m.node)[0]
        inplace = plan.fast.__globals__["inplace"]
        ((alias, (kernel, _)),) = inplace.variants.items()
        assert kernel.ready and len(alias) == 1
        (step,) = plan.steps
        # the variant reads m through the destination: one array argument fewer
        assert len(lowered(step, alias).operands) == len(lowered(step).operands) - 1
        other[...] = 0.9 * m + 0.1 * g  # another destination: the general kernel
        assert_close(other.numpy(), np.float32(0.9) * want + np.float32(0.1) * gn)
        assert list(inplace.variants) == [alias]
        m += 1
        assert_close(m.numpy(), want + 1)


def test_the_in_place_variant_compiles_behind_the_tier(monkeypatch):
    """With ``tiered`` (the default) the in-place variant compiles on the compile thread
    while the general kernel answers; once compiled, it runs."""
    from axesarray.engine import tiers

    rng = np.random.default_rng(62)
    xn = rng.standard_normal(777).astype(np.float32)
    want = xn.copy()
    x = ax.tensor(xn.copy(), "I")
    with ax.set_options(tiered=False):
        (x * 3 - 1).eval()  # the kernels compiled first (another destination)
    y = ax.zeros(x.axes, "float32")
    with ax.set_options(tiered=False):
        y[...] = x * 3 - 1
        y[...] = x * 3 - 1
    for _ in range(3):
        x[...] = x * 3 - 1
        want = want * np.float32(3) - np.float32(1)
        assert_close(x.numpy(), want)
    done = tiers.background_done()
    if done is not None:
        done.result()
    x[...] = x * 3 - 1
    want = want * np.float32(3) - np.float32(1)
    assert_close(x.numpy(), want)
    assert True in _in_place_variants().values()


def test_in_place_assignments_reading_the_destination_otherwise_stay_numpys():
    """Assignments into an operand that also read it another way (a row max, reversed)
    give numpy's values call after call (the in-place variant only when every read of
    the destination is at its own index; otherwise the general path, via a temporary)."""
    rng = np.random.default_rng(64)
    xn = rng.standard_normal((6, 40)).astype(np.float32)
    want = xn.copy()
    x = ax.tensor(xn.copy(), "N K")
    with ax.set_options(tiered=False):
        for _ in range(4):
            x[...] = x - x.max("K")
            want = want - want.max(1, keepdims=True)
            assert_close(x.numpy(), want)
            x[...] = x + x.isel({"K": slice(None, None, -1)}) * 0.5
            want = want + want[:, ::-1] * np.float32(0.5)
            assert_close(x.numpy(), want)
