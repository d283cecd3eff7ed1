"""Lazy expressions against numpy: random trees, dtype promotion, reductions, laziness.

Every test that computes runs under both engines (the ``engine`` fixture): the numpy
reference engine and the fused numba engine (which falls back to the reference until it
lands). Random trees keep the number of distinct structures moderate: each one is a
numba compile under the fused engine.
"""

from __future__ import annotations

import itertools
import operator
import warnings

import numpy as np
import pytest
from conftest import TOL, assert_close
from hypothesis import example, given, settings
from hypothesis import strategies as st
from strategies import DTYPES, Input, ProgramSpec, Source, build, programs, shadow_eval

import axesarray as ax

N, C, H, W = ax.Axis("N", 2), ax.Axis("C", 3), ax.Axis("H", 4), ax.Axis("W", 5)
E0 = ax.Axis("E", 0)


def t_(arr, names):
    return ax.tensor(np.asarray(arr), names)


# --- random expression trees ----------------------------------------------------------------


@given(prog=programs())
@example(  # mean of float16 must accumulate like numpy's (in float32), not overflow
    prog=ProgramSpec(
        (Input(("N",), (5,), "float16", 4, Source.contiguous((5,))),),
        ("reduce", "mean", None, ("binary", "mul", ("leaf", 0), ("scalar", 30000), "r")),
    )
)
def test_programs_match_numpy(engine, prog):
    """A random expression tree gives numpy's names, dtype and values."""
    arrays = prog.arrays()
    expected = shadow_eval(prog, arrays)
    result = build(prog, prog.tensors(arrays))
    assert list(result.names) == expected.names
    assert result.dtype == expected.dtype
    assert_close(result, expected.arr, scale=expected.mag)


@settings(max_examples=max(10, settings.default.max_examples // 2))
@given(prog=programs(), data=st.data())
def test_programs_assign_into_any_layout(engine, prog, data):
    """Assigning a tree into a transposed destination writes numpy's values there."""
    arrays = prog.arrays()
    expected = shadow_eval(prog, arrays)
    result = build(prog, prog.tensors(arrays))
    order = data.draw(st.permutations(result.names))
    out = ax.empty(ax.Axes(result.axes[n] for n in order), dtype=result.dtype).transpose(
        result.names
    )
    out[...] = result
    assert_close(out, expected.arr, scale=expected.mag)
    assert_close(result.eval(), expected.arr, scale=expected.mag)


# --- dtype promotion (no evaluation needed) ----------------------------------------------------

BINARY_OPS = {
    "add": (operator.add, np.add),
    "sub": (operator.sub, np.subtract),
    "mul": (operator.mul, np.multiply),
    "truediv": (operator.truediv, np.true_divide),
    "floordiv": (operator.floordiv, np.floor_divide),
    "mod": (operator.mod, np.remainder),
    "pow": (operator.pow, np.power),
    "and": (operator.and_, np.bitwise_and),
    "maximum": (ax.maximum, np.maximum),
    "lt": (operator.lt, np.less),
    "eq": (operator.eq, np.equal),
}


def _numpy_outcome(fn, *args):
    """numpy's result dtype, or the exception type it raises."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(fn(*args)).dtype
    except (TypeError, OverflowError) as e:
        return TypeError if isinstance(e, TypeError) else OverflowError


def _our_outcome(fn, *args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args).dtype
    except (TypeError, OverflowError) as e:
        return TypeError if isinstance(e, TypeError) else OverflowError


@pytest.mark.parametrize("op", sorted(BINARY_OPS))
def test_promotion_table_matches_numpy(op):
    """For every pair of supported dtypes, the result dtype (or TypeError) is numpy's."""
    ours, theirs = BINARY_OPS[op]
    mismatches = []
    for a in DTYPES:
        for b in DTYPES:
            x, y = ax.zeros((N,), a), ax.zeros((C,), b)
            got = _our_outcome(ours, x, y)
            want = _numpy_outcome(theirs, np.zeros(1, a), np.zeros(1, b))
            if got != want:
                mismatches.append(f"{a} {op} {b}: {got} != numpy's {want}")
    assert not mismatches, "\n".join(mismatches)


WEAK = [0, 2, -1, 300, 2**40, 2**64, 2.0, -0.5, 1e40, True]


@pytest.mark.parametrize("op", ["add", "mul", "truediv", "maximum", "lt", "eq"])
def test_weak_scalars_follow_nep50(op):
    """Python scalars are weak (NEP 50): dtype, OverflowError and values as numpy's."""
    ours, theirs = BINARY_OPS[op]
    mismatches = []
    # Promotion happens while the expression is built, whatever the engine; the reference
    # engine computes the values here (the fused engine's turn is the test below).
    ax.set_options(engine="numpy")
    for dt in DTYPES:
        for s in WEAK:
            for left in (False, True):
                args_np = (s, np.zeros(3, dt)) if left else (np.zeros(3, dt), s)
                x = ax.zeros((C,), dt)
                args = (s, x) if left else (x, s)
                want = _numpy_outcome(theirs, *args_np)
                got = _our_outcome(ours, *args)
                if got != want:
                    mismatches.append(
                        f"{'s op x' if left else 'x op s'} {dt}, {s!r}: {got} != {want}"
                    )
                elif isinstance(want, np.dtype):
                    with np.errstate(all="ignore"), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        expected = np.asarray(theirs(*args_np))
                        actual = ours(*args).numpy()
                    if not np.array_equal(actual, expected, equal_nan=True):
                        mismatches.append(f"values {dt} {s!r}: {actual} != {expected}")
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("dt", DTYPES)
def test_weak_scalar_values(engine, dt):
    """Weak scalars of every kind reach the kernel with numpy's value in numpy's dtype."""
    a = np.arange(3).astype(dt)
    x = t_(a, "N")
    for s in (0, 2, True, 2.0, -0.5, 1e40, 2**40):
        for op, args_np, args in [(operator.add, (a, s), (x, s)), (operator.mul, (s, a), (s, x))]:
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    want = np.asarray(op(*args_np))
            except (OverflowError, TypeError):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert_close(op(*args), want, err_msg=f"{dt} with {s!r}")


def test_nep50_examples():
    """The DESIGN's examples: float32 * 2.0 stays float32; int / int is float64."""
    x = ax.ones((N,), "float32")
    assert (x * 2.0).dtype == np.float32
    assert (2.0 * x).dtype == np.float32
    i = ax.ones((N,), "int32")
    assert (i / i).dtype == np.float64
    assert (i / 2).dtype == np.float64
    assert (ax.ones((N,), "int8") + 1).dtype == np.int8
    assert (ax.ones((N,), "float16") + np.float32(1)).dtype == np.float32
    with pytest.raises(OverflowError, match="300"):
        ax.ones((N,), "uint8") + 300


def test_out_of_range_int_comparisons_are_exact():
    """numpy compares any Python int exactly with an integer array, even out of range."""
    x = ax.tensor(np.array([0, 5, 255], np.uint8), "N")
    np.testing.assert_array_equal((x < 300).numpy(), [True, True, True])
    np.testing.assert_array_equal((x == -1).numpy(), [False, False, False])
    np.testing.assert_array_equal((x != -1).numpy(), [True, True, True])
    np.testing.assert_array_equal((x > -1).numpy(), [True, True, True])
    np.testing.assert_array_equal((x >= 2**70).numpy(), [False, False, False])


def test_where_out_of_range_scalar_raises():
    """``where`` rejects a Python int its dtype cannot hold, like the ufuncs (numpy wraps)."""
    x = ax.tensor(np.array([1, 2], np.uint8), "N")
    with pytest.raises(OverflowError, match="-2"):
        ax.where(x > 1, x, -2)


def test_astype_and_round():
    """astype has numpy's (unsafe) semantics; round is half to even."""
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.675], np.float32)
    x = t_(a, "N")
    assert_close(x.round(), np.round(a))
    assert_close(ax.round(x, 2), np.round(a, 2))
    assert_close(x.astype("int8"), a.astype(np.int8))
    assert_close(t_(np.arange(5), "N").round(), np.arange(5))
    with pytest.raises(TypeError, match="not supported"):
        x.astype("complex64")


# --- elementwise functions -------------------------------------------------------------------

FUNCS = {
    "exp": (ax.exp, np.exp),
    "log": (ax.log, np.log),
    "log1p": (ax.log1p, np.log1p),
    "expm1": (ax.expm1, np.expm1),
    "sqrt": (ax.sqrt, np.sqrt),
    "abs": (ax.abs, np.abs),
    "sin": (ax.sin, np.sin),
    "cos": (ax.cos, np.cos),
    "tanh": (ax.tanh, np.tanh),
    "sigmoid": (ax.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
    "relu": (ax.relu, lambda a: np.maximum(a, 0)),
    "floor": (ax.floor, np.floor),
    "ceil": (ax.ceil, np.ceil),
    "round": (ax.round, np.round),
    "square": (ax.square, np.square),
    "sign": (ax.sign, np.sign),
    "isnan": (ax.isnan, np.isnan),
    "isinf": (ax.isinf, np.isinf),
    "isfinite": (ax.isfinite, np.isfinite),
    "logical_not": (ax.logical_not, np.logical_not),
    "neg": (operator.neg, np.negative),
}
FLOAT_DTYPES = ["float16", "float32", "float64"]
SPECIAL = [
    0.0,
    -0.0,
    0.5,
    1.5,
    2.5,
    -2.5,
    1e-8,
    -1e-8,
    3.0,
    -7.25,
    80.0,
    -80.0,
    np.inf,
    -np.inf,
    np.nan,
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("fn", sorted(FUNCS))
def test_functions_on_special_values(engine, fn, dtype):
    """Each elementwise function matches numpy on special values (inf, nan, -0, halves)."""
    ours, theirs = FUNCS[fn]
    a = np.array(SPECIAL, dtype=dtype)
    with np.errstate(all="ignore"):
        expected = theirs(a)
    assert_close(ours(t_(a, "N")), expected)


@pytest.mark.parametrize("op", ["add", "mul", "truediv", "floordiv", "mod", "pow", "maximum"])
def test_float_binary_special_values(engine, op):
    """Division by zero, nan propagation and infinities as numpy (all pairs of specials)."""
    ours, theirs = BINARY_OPS[op]
    vals = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan], np.float64)
    a, b = np.meshgrid(vals, vals, indexing="ij")
    with np.errstate(all="ignore"):
        expected = theirs(a, b)
    assert_close(ours(t_(a, "N C"), t_(b, "N C")), expected)


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8"])
@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_integer_division_by_zero(engine, op, dtype):
    """Integer division and remainder by zero give 0, as numpy (which only warns)."""
    ours, theirs = BINARY_OPS[op]
    a = np.array([7, 0, 3, 100], dtype)
    b = np.array([0, 0, 2, 7], dtype)
    with np.errstate(all="ignore"):
        expected = theirs(a, b)
    assert_close(ours(t_(a, "N"), t_(b, "N")), expected)


def test_integer_semantics(engine):
    """Floor division and remainder round toward -inf for negatives; ints wrap on overflow."""
    a = np.array([-7, 7, -7, 7, -128, 127], np.int8)
    b = np.array([2, -2, -2, 2, -1, 1], np.int8)
    x, y = t_(a, "N"), t_(b, "N")
    with np.errstate(all="ignore"):
        assert_close(x // y, a // b)
        assert_close(x % y, a % b)
        assert_close(x + 100, a + 100)
        assert_close(x * y, a * b)
        assert_close(-x, -a)
        assert_close(abs(x), np.abs(a))


def test_clip_where_maximum(engine):
    """clip, where (non-bool condition) and NaN-propagating maximum/minimum as numpy."""
    a = np.array([-2.0, 0.5, np.nan, 9.0])
    b = np.array([0.0, 1.0, 1.0, np.nan])
    x, y = t_(a, "N"), t_(b, "N")
    assert_close(ax.clip(x, 0, 1), np.clip(a, 0, 1))
    assert_close(x.clip(hi=1), np.minimum(a, 1))
    assert_close(ax.maximum(x, y), np.maximum(a, b))
    assert_close(ax.minimum(x, y), np.minimum(a, b))
    c = t_(np.array([0, 3, -1, 0]), "N")
    assert_close(ax.where(c, x, y), np.where([0, 3, -1, 0], a, b))
    assert_close(ax.where(x > 0, x, 0.0), np.where(a > 0, a, 0.0))


def test_numpy_ufuncs_on_tensors_are_lazy():
    """``np.exp(t)`` returns a lazy Tensor (``__array_ufunc__``), not an array."""
    x = t_(np.arange(3.0), "N")
    y = np.exp(x)
    assert isinstance(y, ax.Tensor) and not y.is_lvalue
    assert_close(y, np.exp(np.arange(3.0)))
    assert isinstance(np.add(x, 1), ax.Tensor)


# --- reductions ----------------------------------------------------------------------------

REDUCTIONS = ["sum", "prod", "mean", "max", "min", "any", "all"]


def engine_cases(*axes_of_cases, every=3):
    """(engine, *case) params: every case under the reference engine, every ``every``-th
    under the fused one, which compiles a kernel per structure and dtype. The rotation
    still reaches each value of each parameter when ``every`` is coprime with the product
    of the counts of all parameters but the first."""
    cases = list(itertools.product(*axes_of_cases))
    return [pytest.param("numpy", *c) for c in cases] + [
        pytest.param("numba", *c) for i, c in enumerate(cases) if i % every == 0
    ]


@pytest.mark.parametrize(
    "engine, op, dtype",
    engine_cases(REDUCTIONS, ["bool", "int8", "uint16", "int64", "float16", "float32", "float64"]),
)
def test_reductions_match_numpy(engine, op, dtype):
    """Each reduction, over one, several and all axes, gives numpy's dtype and values."""
    ax.set_options(engine=engine)  # the autouse fixture restores the options
    rng = np.random.default_rng(0)
    a = (rng.integers(-3, 4, (2, 3, 4)) if dtype != "bool" else rng.random((2, 3, 4)) < 0.5).astype(
        dtype
    )
    x = t_(a, "N C H").transpose("H N C")  # reduce a transposed view
    ref = getattr(np, op)
    with np.errstate(all="ignore"):
        assert_close(getattr(x, op)("C"), ref(a, axis=1).T, scale=12)
        assert_close(getattr(x, op)(("H", "N")), ref(a, axis=(0, 2)), scale=12)
        assert_close(getattr(x, op)(), ref(a), scale=24)


@pytest.mark.parametrize(
    "engine, op, dtype, names",
    engine_cases(
        ["sum", "prod", "mean", "any", "all"], ["int32", "float64", "bool"], ["N E", "E N"], every=5
    ),
)
def test_reductions_over_empty_axes(engine, op, dtype, names):
    """Reducing a size-0 axis gives the identity (sum 0, prod 1, mean nan) as numpy."""
    ax.set_options(engine=engine)
    a = np.zeros((3, 0) if names == "N E" else (0, 3), dtype)
    e, n = names.split().index("E"), names.split().index("N")
    x = t_(a, names)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_close(getattr(x, op)("E"), getattr(np, op)(a, axis=e))
        assert_close(getattr(x, op)(), getattr(np, op)(a))
        assert_close(getattr(x, op)("N"), getattr(np, op)(a, axis=n))  # kept axis empty
        assert_close(getattr(x * 2, op)("E"), getattr(np, op)(a * 2, axis=e))


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_reductions_without_identity_refuse_empty(op):
    """max/min/argmax/argmin of an empty axis raise (numpy raises ValueError too)."""
    x = ax.zeros((N, E0))
    with pytest.raises(
        ax.AxesError,
        match=rf"^{op}: cannot reduce over an empty axis, which has no identity \(E=0\)\. Use sum",
    ):
        getattr(x, op)("E")
    assert getattr(x, op)("N").shape == (0,)  # a kept empty axis is fine


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions_take_first_of_ties(engine, op):
    """argmax/argmin return the first index of ties, and of NaN, as numpy."""
    a = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, np.nan, 5.0, np.nan], [4.0, 4.0, 4.0, 4.0]])
    x = t_(a, "N C")
    assert_close(getattr(x, op)("C"), getattr(np, op)(a, axis=1))
    assert_close(getattr(x, op)("N"), getattr(np, op)(a, axis=0))
    b = np.array([5, 1, 5, 1], np.uint8)
    assert_close(getattr(t_(b, "N"), op)(), getattr(np, op)(b))


def test_mean_dtypes(engine):
    """mean: ints and bools give float64; float16 accumulates in float32 like numpy."""
    assert_close(t_(np.arange(4, dtype=np.int8), "N").mean(), np.mean(np.arange(4, dtype=np.int8)))
    assert_close(t_(np.array([True, False]), "N").mean(), np.mean([True, False]))
    big = np.full((4, 1000), 60000, np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_close(t_(big, "N C").mean("C"), np.mean(big, axis=1))
        assert_close(t_(big, "N C").mean(), np.mean(big))


def test_float32_sum_is_accurate(engine):
    """A float32 sum is at least as accurate as numpy's pairwise sum (DESIGN §3)."""
    rng = np.random.default_rng(1)
    a = rng.random(1_000_000, dtype=np.float32)
    exact = np.sum(a, dtype=np.float64)
    ours = float(t_(a, "N").sum())
    numpys = float(np.sum(a))
    assert abs(ours - exact) <= max(2 * abs(numpys - exact), 1e-6 * exact)


def test_fused_reduction_of_expression(engine):
    """sum((a - b)**2) over every axis and over one, with broadcasting by name."""
    rng = np.random.default_rng(2)
    a = rng.random((3, 4, 5))
    b = rng.random((5, 3))
    x, y = t_(a, "N H W"), t_(b, "W N")
    d = a - b.T[:, None, :]
    assert_close(((x - y) ** 2).sum(), np.sum(d**2), scale=60)
    assert_close(((x - y) ** 2).sum("H"), np.sum(d**2, axis=1), scale=4)
    assert_close(ax.exp(x - y).max(("N", "W")), np.exp(d).max(axis=(0, 2)))


# --- dot, pad, concat ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a_names, b_names, over",
    [
        ("M K", "K N", "K"),
        ("K M", "N K", "K"),
        ("B M K", "B K N", "K"),  # B is a batch axis
        ("M K L", "L N K", "K L"),
        ("K", "K", "K"),
        ("M K", "K", "K"),
        ("M E", "E N", "E"),  # contraction over an empty axis: zeros
        ("M K", "N K", ("K",)),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_dot_matches_einsum(engine, a_names, b_names, over, dtype):
    """dot contracts the named axes; shared others batch; result axes a's then b's new."""
    lengths = {"M": 2, "K": 3, "N": 4, "B": 2, "L": 5, "E": 0}
    rng = np.random.default_rng(3)
    an, bn = a_names.split(), b_names.split()
    a = rng.integers(-3, 4, [lengths[n] for n in an]).astype(dtype)
    b = rng.integers(-3, 4, [lengths[n] for n in bn]).astype(dtype)
    over_n = over.split() if isinstance(over, str) else list(over)
    out = [n for n in an if n not in over_n] + [n for n in bn if n not in over_n and n not in an]
    expected = np.einsum(
        a, [ord(c) - 65 for c in an], b, [ord(c) - 65 for c in bn], [ord(c) - 65 for c in out]
    )
    r = ax.dot(t_(a, a_names), t_(b, b_names), over=over)
    assert list(r.names) == out
    assert_close(r, expected.astype(dtype), scale=15)


def test_dot_of_transposed_and_mixed_dtypes(engine):
    """dot reads transposed views and promotes dtypes like matmul."""
    a = np.arange(6, dtype=np.int8).reshape(2, 3)
    b = np.linspace(0, 1, 12, dtype=np.float32).reshape(4, 3)
    r = ax.dot(t_(a.T, "K M"), t_(b, "N K"), over="K")
    assert_close(r, a.astype(np.float32) @ b.T)


def test_pad(engine):
    """pad named axes by (before, after) or an int, with a value; as np.pad."""
    a = np.arange(6.0).reshape(2, 3)
    x = t_(a, "N C")
    assert_close(ax.pad(x, C=(1, 2), value=-1.0), np.pad(a, ((0, 0), (1, 2)), constant_values=-1.0))
    assert_close(ax.pad(x, N=1, C=0), np.pad(a, ((1, 1), (0, 0))))
    assert_close(ax.pad(x.transpose("C N"), {"N": (0, 1)}), np.pad(a.T, ((0, 0), (0, 1))))
    e = t_(np.zeros((0, 3)), "N C")
    assert_close(ax.pad(e, N=(1, 1), value=2.0), np.full((2, 3), 2.0))
    i = t_(np.arange(3), "N")
    assert_close(ax.pad(i, N=1, value=2.5), np.pad(np.arange(3), 1, constant_values=2.5))


def test_concat(engine):
    """concat joins along a name; other axes match by name in any order; dtypes promote."""
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.arange(4, dtype=np.float32).reshape(2, 2) + 0.5
    c = np.zeros((0, 2), np.int8)
    r = ax.concat([t_(a, "N C"), t_(b.T, "C N"), t_(c, "C N")], "C")
    assert r.names == ("N", "C")
    assert_close(r, np.concatenate([a, b, c.T], axis=1).astype(np.result_type(a, b, c)))
    assert_close(ax.concat([t_(a, "N C")], "N"), a)


# --- physical order of results -----------------------------------------------------------------


def test_result_takes_dominant_input_memory_order(engine):
    """A broadcast against a transposed big operand keeps the big operand's memory order."""
    big = np.zeros((4, 3, 2))  # memory order H C N
    x = t_(big, "H C N").transpose("N C H")
    y = t_(np.arange(3.0), "C")
    r = (x + y).eval()
    assert r.names == ("N", "C", "H")
    assert r.strides == x.strides  # same memory order as the dominant input
    assert_close(r, (big + np.arange(3.0)[None, :, None]).transpose(2, 1, 0))


# --- laziness ---------------------------------------------------------------------------------


@pytest.fixture
def counter(monkeypatch, request):
    """Counts calls into the engine (evaluate and assign). The direct path is off: its
    runners are called by ``Tensor.eval`` itself (``tests/test_direct.py`` counts them)."""
    import axesarray.engine as eng

    off = eng.direct.disabled()
    off.__enter__()
    request.addfinalizer(lambda: off.__exit__(None, None, None))
    calls = []
    real_eval, real_assign = eng.evaluate, eng.assign
    monkeypatch.setattr(eng, "evaluate", lambda *a: calls.append("eval") or real_eval(*a))
    monkeypatch.setattr(eng, "assign", lambda *a: calls.append("assign") or real_assign(*a))
    return calls


def test_nothing_is_computed_until_needed(engine, counter):
    """Building expressions, views of them and reductions runs no engine call."""
    x = t_(np.arange(6.0).reshape(2, 3), "N C")
    e = ax.sigmoid(x * 2 - 1).sum("C") + ax.dot(x, x, over="N").max()
    e = ax.pad(ax.concat([e, e], "N"), N=1)[{"N": slice(None, None, -1)}]
    assert counter == []
    e.numpy()
    assert counter


@pytest.mark.parametrize(
    "trigger",
    [
        lambda e: e.eval(),
        lambda e: e.numpy(),
        lambda e: np.asarray(e),
        lambda e: repr(e),
        lambda e: float(e.sum()),
        lambda e: bool(e.sum() > 0),
        lambda e: ax.assign(ax.empty(e.axes), e),
    ],
    ids=["eval", "numpy", "array", "repr", "float", "bool", "assign"],
)
def test_evaluation_triggers(engine, counter, trigger):
    """eval, numpy, __array__, printing, float, bool and assign evaluate."""
    e = t_(np.arange(3.0), "N") + 1
    trigger(e)
    assert counter


def test_expression_reads_inputs_at_evaluation(engine):
    """An r-tensor is a live formula: mutating an input after building changes the result."""
    a = np.arange(6.0).reshape(2, 3)
    x = t_(a, "N C")
    e = (x * 2).sum("C")
    a[...] = 1.0
    assert_close(e, np.full(2, 6.0))
    a[0] = 10.0
    assert_close(e, np.array([60.0, 6.0]))
    v = ax.exp(x)[{"C": 0}]
    a[:, 0] = 0.0
    assert_close(v, np.ones(2))


def test_scalar_conversions(engine):
    """float/int/bool/item of a one-element tensor; several elements are ambiguous."""
    x = t_(np.array([[2.5]]), "N C")
    assert float(x) == 2.5 and int(x) == 2 and bool(x) and x.item() == 2.5
    assert float(t_(np.arange(4.0), "N").sum()) == 6.0
    with pytest.raises(ValueError, match="ambiguous"):
        bool(t_(np.arange(4.0), "N") > 1)
    with pytest.raises(ax.AxesError, match="only a tensor of one element"):
        float(t_(np.arange(4.0), "N"))


def test_tolerance_table_covers_float_dtypes():
    """The central table has an entry for every supported float dtype."""
    assert set(TOL) == {np.dtype(d) for d in FLOAT_DTYPES}
