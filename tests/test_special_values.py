"""Every float elementwise op of the fused engine against numpy at the edges of the formats.

Inputs are the special values of each dtype (signed zeros, the smallest and largest
subnormals, the smallest normal, +-1, +-max, +-inf, nan, and a few halves for the rounding
ops), alone and in all pairs for binary ops. Arrays come in three sizes so that each
kernel variant runs: a few elements (serial loop), above ``serial_threshold`` (parallel,
vectorized) and above 8 MiB (the streaming variant, see ``engine/fused.py``).

Exact ops must reproduce numpy's bits (any NaN matches any NaN). The math functions
(exp, expm1, log, log1p, tanh, sigmoid, sin, cos, pow) are compared with the correctly
rounded result (computed in float64 for float32 and in long double for float64): the sign
bit, NaN and infinity exactly, finite values within 1 ulp (sigmoid 2, see mathlib.py); at
the special values, exactly wherever that result is 0, +-1, 0.5 or the input itself
(exp(0) == 1, tanh(x) == x for tiny x, sigmoid(max) == 1, ...).
sigmoid's reference is that exact value too: numpy's ``1 / (1 + exp(-x))`` overflows exp
and returns 0 where the result is a subnormal.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import axesarray as ax
from axesarray.core.ops import apply_map

FLOATS = [np.float32, np.float64]
STREAM_BYTES = 8 << 20  # outputs this big take the streaming variant (engine/fused.py)
# Above serial_threshold the parallel variant runs, whatever the cost estimate would pick
# for these sizes (dispatch.parallel_pays).
pytestmark = pytest.mark.usefixtures("parallel_kernels")

UNARY = {
    "exp": ax.exp,
    "expm1": ax.expm1,
    "log": ax.log,
    "log1p": ax.log1p,
    "sqrt": ax.sqrt,
    "sin": ax.sin,
    "cos": ax.cos,
    "tanh": ax.tanh,
    "sigmoid": ax.sigmoid,
    "abs": ax.abs,
    "square": ax.square,
    "sign": ax.sign,
    "floor": ax.floor,
    "ceil": ax.ceil,
    "rint": lambda t: t.round(),
    "neg": lambda t: -t,
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "pow": lambda a, b: a**b,
    "maximum": ax.maximum,
    "minimum": ax.minimum,
}
# Not correctly rounded by numpy either: compared with the exact result to 1 ulp.
NUMPY_BINARY = {"maximum": np.maximum, "minimum": np.minimum}
APPROX = {"exp", "expm1", "log", "log1p", "tanh", "sigmoid", "sin", "cos", "pow"}
ULP = {"sigmoid": 2}  # 1 / (1 + exp(-x)) rounds three times (kernels/mathlib.py); others 1
_WIDE = {np.float32: np.float64, np.float64: np.longdouble}


def specials(dtype) -> np.ndarray:
    fi = np.finfo(dtype)
    mags = [
        0.0,
        fi.smallest_subnormal,
        np.nextafter(fi.tiny, dtype(0)),  # largest subnormal
        fi.tiny,
        0.5,
        1.0,
        1.5,
        2.0,
        2.5,
        3.0,
        fi.max,
        np.inf,
    ]
    pos = np.array(mags, dtype)
    return np.concatenate([pos, -pos, np.array([np.nan], dtype)])


def _ordered(x: np.ndarray) -> np.ndarray:
    """Bits as integers in the order of the values (-0 and +0 both map to 0)."""
    ints = {4: np.int32, 8: np.int64}[x.dtype.itemsize]
    i = x.view(ints).astype(np.int64)
    sign_off = np.int64(np.iinfo(ints).max)
    return np.where(i < 0, -(i & sign_off), i)


def _sign_bits(x: np.ndarray) -> np.ndarray:
    return np.signbit(x)


def _sizes(n_specials: int, dtype) -> dict[str, int]:
    parallel = ax.get_option("serial_threshold") + 1
    stream = max(parallel, STREAM_BYTES // np.dtype(dtype).itemsize + 1)
    return {"serial": n_specials, "parallel": parallel, "stream": stream}


def _tile(x: np.ndarray, n: int) -> np.ndarray:
    return np.resize(x, max(n, x.size))


def reference(op: str, args: list, dtype, numpy_fn=None) -> np.ndarray:
    """numpy's result of ``op(*args)`` (``numpy_fn(*args)`` when given: numpy's operator
    with a Python scalar); for the math functions the correctly rounded one (module doc)."""
    fn = numpy_fn or (lambda *a: apply_map(op, list(a), a[0].dtype))
    if op not in APPROX:
        with np.errstate(all="ignore"):
            return np.asarray(fn(*args)).astype(dtype)
    wide = _WIDE[dtype]
    with np.errstate(all="ignore"):
        r = fn(*(a.astype(wide) if isinstance(a, np.ndarray) else a for a in args))
        return np.asarray(r).astype(dtype)


def check(op: str, args: list, got: np.ndarray, dtype, numpy_fn=None, edges=True) -> None:
    """Assert ``got`` is numpy's result for ``op(*args)`` by the rules of the module doc
    (``edges``: the args are special values, where results 0, +-1, 0.5, x are exact)."""
    ref = reference(op, args, dtype, numpy_fn)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    nan = np.isnan(ref)
    bad = np.isnan(got) != nan
    ok = ~nan
    bad[ok] |= _sign_bits(got[ok]) != _sign_bits(ref[ok])
    dist = np.abs(_ordered(got) - _ordered(ref))
    if op in APPROX:
        exact = np.isinf(ref)
        if edges:
            exact |= (ref == 0) | (np.abs(ref) == 1) | (ref == 0.5) | (ref == args[0])
        bad[ok] |= (dist[ok] > ULP.get(op, 1)) | ((dist[ok] > 0) & exact[ok])
    else:
        bad[ok] |= dist[ok] > 0
    if bad.any():
        i = np.flatnonzero(bad)[:8]
        rows = [
            f"{op}({', '.join(repr(np.broadcast_to(a, got.shape)[k]) for a in args)})"
            f" = {got[k]!r}, numpy {ref[k]!r}"
            for k in i
        ]
        raise AssertionError(
            f"{op} {np.dtype(dtype).name}: {bad.sum()} mismatches\n" + "\n".join(rows)
        )


def _eval_unary(op: str, x: np.ndarray) -> np.ndarray:
    return UNARY[op](ax.tensor(x, "N")).numpy()


def _eval_binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return BINARY[op](ax.tensor(a, "N"), ax.tensor(b, "N")).numpy()


@pytest.mark.parametrize("variant", ["serial", "parallel", "stream"])
@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_special_values(op, dtype, variant):
    s = specials(dtype)
    x = _tile(s, _sizes(s.size, dtype)[variant])
    with np.errstate(all="ignore"):
        got = _eval_unary(op, x)
    check(op, [x], got, dtype)


@pytest.mark.parametrize("variant", ["serial", "parallel", "stream"])
@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_special_values(op, dtype, variant):
    s = specials(dtype)
    a, b = (v.ravel() for v in np.meshgrid(s, s))
    n = _sizes(a.size, dtype)[variant]
    a, b = _tile(a, n), _tile(b, n)
    got = _eval_binary(op, a, b)
    check(op, [a, b], got, dtype)


CONSTANTS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -1.5, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("variant", ["serial", "parallel"])
@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_with_a_python_constant(op, dtype, variant):
    """A Python float on either side is a run-time scalar of the kernel: -0.0 must stay
    -0.0, nan stay nan. Exponents 2, 0.5, -1 become square, sqrt, 1/x, as in numpy, whose
    ``a ** 0.5`` is sqrt (-0.0 ** 0.5 == -0.0) where ``np.power`` of two arrays is pow."""
    s = specials(dtype)
    x = _tile(s, _sizes(s.size, dtype)[variant])
    numpy_fn = NUMPY_BINARY.get(op, BINARY[op])  # the operators work on arrays too
    for c in CONSTANTS:
        with np.errstate(all="ignore"):
            check(op, [x, c], BINARY[op](ax.tensor(x, "N"), c).numpy(), dtype, numpy_fn)
            check(op, [c, x], BINARY[op](c, ax.tensor(x, "N")).numpy(), dtype, numpy_fn)


PREDICATES = {
    "isnan": (ax.isnan, None),
    "isinf": (ax.isinf, None),
    "isfinite": (ax.isfinite, None),
    "eq": (None, lambda a, b: a == b),
    "ne": (None, lambda a, b: a != b),
    "lt": (None, lambda a, b: a < b),
    "le": (None, lambda a, b: a <= b),
    "gt": (None, lambda a, b: a > b),
    "ge": (None, lambda a, b: a >= b),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("op", sorted(PREDICATES))
def test_predicates_on_special_values(op, dtype):
    """-0.0 == 0.0, nan compares false (ne true), subnormals are finite and nonzero."""
    s = specials(dtype)
    a, b = (v.ravel() for v in np.meshgrid(s, s))
    unary, binary = PREDICATES[op]
    args = [a] if unary else [a, b]
    ta = [ax.tensor(v, "N") for v in args]
    got = (unary(*ta) if unary else binary(*ta)).numpy()
    np.testing.assert_array_equal(got, apply_map(op, args, np.dtype(bool)), strict=True)


def _subnormal_results(dtype) -> np.ndarray:
    """Arguments whose sigmoid, exp, expm1 or tanh' tail lands in the subnormal range, and
    around the overflow threshold."""
    fi = np.finfo(dtype)
    lo = np.log(float(fi.smallest_subnormal)) - 1.0
    hi = np.log(float(fi.tiny)) + 1.0
    top = np.log(float(fi.max))
    dense = np.linspace(lo, hi, 200_003)
    edge = np.linspace(top - 1.0, top + 1.0, 20_001)
    return np.concatenate([dense, edge, -edge]).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("op", ["exp", "expm1", "sigmoid", "tanh"])
def test_subnormal_and_overflow_ranges(op, dtype):
    """float32 sigmoid(x) for x in [-104, -87] is a subnormal, not 0 (issue 10); the same
    for exp and at float64, and the results around the overflow threshold."""
    x = _subnormal_results(dtype)
    for n in (x.size, 1000):  # vectorized parallel variant, then the serial one
        with np.errstate(all="ignore"):
            got = _eval_unary(op, x[:n])
        check(op, [x[:n]], got, dtype, edges=False)


@st.composite
def _arrays(draw, arity: int):
    """``arity`` arrays of one float dtype, with the same drawn length (0 included)."""
    dtype = draw(st.sampled_from(FLOATS))
    width = 32 if dtype == np.float32 else 64
    n = draw(st.integers(0, 40))
    values = st.lists(st.floats(width=width), min_size=n, max_size=n)
    return dtype, [np.array(draw(values), dtype) for _ in range(arity)]


@given(st.sampled_from(sorted(UNARY)), _arrays(1))
def test_unary_drawn_values(op, case):
    dtype, (x,) = case
    with np.errstate(all="ignore"):
        got = _eval_unary(op, x)
    check(op, [x], got, dtype, edges=False)


@given(st.sampled_from(sorted(BINARY)), _arrays(2))
def test_binary_drawn_values(op, case):
    dtype, (a, b) = case
    with np.errstate(all="ignore"):
        got = _eval_binary(op, a, b)
    check(op, [a, b], got, dtype, edges=False)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_keeps_x_on_ties_and_propagates_nan_as_numpy(dtype):
    """np.clip keeps x on a tie (clip(-0.0, 0, 1) is -0.0, where maximum gives 0.0), and
    a NaN in x or in a bound gives NaN."""
    values = np.array([-0.0, 0.0, -1.0, 2.0, np.nan, np.inf, -np.inf, 0.5], dtype)
    x = ax.tensor(values, "N")
    for lo, hi in [(0.0, 1.0), (-0.0, 0.0), (0.0, -0.0), (np.nan, 1.0), (0.0, np.nan)]:
        expected = np.clip(values, lo, hi)
        got = x.clip(lo, hi).numpy()
        assert got.dtype == expected.dtype
        same = (got == expected) & (np.signbit(got) == np.signbit(expected))
        assert (same | (np.isnan(got) & np.isnan(expected))).all(), (lo, hi, got, expected)
    bounds = ax.tensor(np.array([0.0, -0.0, np.nan, 1.0, 0.0, 0.0, 0.0, 0.0], dtype), "N")
    expected = np.clip(values, bounds.numpy(), 1.0)
    got = x.clip(bounds, 1.0).numpy()
    assert ((got == expected) | (np.isnan(got) & np.isnan(expected))).all()
    assert (np.signbit(got) == np.signbit(expected))[~np.isnan(expected)].all()
