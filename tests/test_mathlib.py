"""The vectorizable math library against the exact result: the error bounds of mathlib.py.

The error is the distance in ulp from the correctly rounded result (1: that result or a
neighbour), which is float64 numpy rounded to float32 for float32, long double numpy
(64-bit significand on x86) rounded to float64 for float64, over a dense grid of each
function's domain and hypothesis-drawn floats. The kernels compile with the fused engine's
flags (FMA contraction on). Special values (nan, +-inf, +-0, subnormals) through the
engine: tests/test_special_values.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba import njit

import axesarray as ax
from axesarray.engine import tiers
from axesarray.kernels import mathlib

rng = np.random.default_rng(1)
FLOATS = [np.float32, np.float64]
NAMES = ["exp", "expm1", "log", "log1p", "tanh", "sigmoid"]
# Max distance in ulp. sigmoid is 1 / (1 + exp(-x)) as numpy computes it (for speed): exp's
# error and the roundings of the sum and the division add up (2 on every float32 in
# [-128, 128]).
BOUND = {(name, dt): 1 for name in NAMES for dt in FLOATS}
BOUND["sigmoid", np.float32] = BOUND["sigmoid", np.float64] = 2
_WIDE = {np.float32: np.float64, np.float64: np.longdouble}

_RUNNERS: dict = {}


def _apply(fn, x: np.ndarray) -> np.ndarray:
    run = _RUNNERS.get(fn)
    if run is None:

        @njit(error_model="numpy", fastmath={"contract"})
        def run(a, out):
            for i in range(a.size):
                out[i] = fn(a[i])

        _RUNNERS[fn] = run
    out = np.empty_like(x)
    run(x, out)
    return out


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


REFS = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
}


def _fn(name: str, dtype):
    return getattr(mathlib, f"{name}_{'f32' if dtype == np.float32 else 'f64'}")


def _domain(name: str, dtype) -> list[tuple[float, float]]:
    """Intervals where the result is finite and not trivially 0, +-1 or x."""
    fi = np.finfo(dtype)
    big = float(np.log(fi.max))  # exp overflows above
    small = float(np.log(fi.smallest_subnormal)) - 1  # and underflows below
    return {
        "exp": [(small, big + 1), (-1, 1)],
        "expm1": [(-40, big + 1), (-1, 1)],
        "log": [(0.5, 2)],
        "log1p": [(-1, 10), (-0.5, 0.5)],
        "tanh": [(-20, 20), (-1, 1)],
        "sigmoid": [(small, 40), (-20, 20)],
    }[name]


def _grid(name: str, dtype) -> np.ndarray:
    """A dense grid of each interval of the domain, plus magnitudes spread geometrically
    from the smallest subnormal to the largest finite value."""
    fi = np.finfo(dtype)
    parts = [np.linspace(lo, hi, 300_001) for lo, hi in _domain(name, dtype)]
    with np.errstate(over="ignore"):
        mags = np.geomspace(float(fi.smallest_subnormal), float(fi.max), 200_001)
        parts += [mags, -mags]
        x = np.concatenate(parts).astype(dtype)
    return x[np.isfinite(x)]


def _ordered(x: np.ndarray) -> np.ndarray:
    """Bits as integers in the order of the values: adjacent floats differ by 1."""
    ints = np.int32 if x.dtype == np.float32 else np.int64
    i = x.view(ints).astype(np.int64)
    return np.where(i < 0, -(i & np.iinfo(ints).max), i)


def ulp_distance(name: str, x: np.ndarray, got: np.ndarray, dtype) -> tuple[int, float]:
    """Max distance in ulp of ``got`` from the correctly rounded result, and its input.

    Where the result overflows or is nan, ``got`` must be the same inf or nan."""
    with np.errstate(all="ignore"):
        ref = REFS[name](x.astype(_WIDE[dtype])).astype(dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    inf = np.isinf(ref)
    np.testing.assert_array_equal(got[inf], ref[inf])
    finite = np.isfinite(ref)
    if not finite.any():
        return 0, float("nan")
    dist = np.abs(_ordered(got[finite]) - _ordered(ref[finite]))
    worst = int(np.argmax(dist))
    return int(dist[worst]), float(x[finite][worst])


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", NAMES)
def test_error_bound_on_a_dense_grid(name, dtype):
    x = _grid(name, dtype)
    dist, at = ulp_distance(name, x, _apply(_fn(name, dtype), x), dtype)
    assert dist <= BOUND[name, dtype], f"{name} {dtype.__name__}: {dist} ulp at {at!r}"


@st.composite
def _inputs(draw):
    name = draw(st.sampled_from(NAMES))
    dtype = draw(st.sampled_from(FLOATS))
    width = 32 if dtype == np.float32 else 64
    lo, hi = draw(st.sampled_from(_domain(name, dtype)))
    if name == "log":
        values = st.floats(min_value=0.0, allow_infinity=False, allow_nan=False, width=width)
    else:
        values = st.floats(min_value=lo, max_value=hi, width=width)
    xs = draw(st.lists(values, min_size=0, max_size=200))
    return name, dtype, np.array(xs, dtype)


@given(_inputs())
def test_error_bound_on_drawn_floats(case):
    name, dtype, x = case
    dist, at = ulp_distance(name, x, _apply(_fn(name, dtype), x), dtype)
    assert dist <= BOUND[name, dtype], f"{name} {dtype.__name__}: {dist} ulp at {at!r}"


def test_float16_conversions_are_exact():
    """Every half-precision bit pattern converts exactly; float32 -> half rounds as numpy."""
    bits = np.arange(65536, dtype=np.uint16)
    f = np.empty(65536, np.float32)

    @njit
    def widen(h, out):
        for i in range(h.size):
            out[i] = mathlib.f16_to_f32(h[i])

    widen(bits, f)
    ref = bits.view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(f, ref)  # nan == nan under assert_array_equal
    x = np.concatenate(
        [
            rng.standard_normal(200_000).astype(np.float32) * 1000,
            rng.standard_normal(200_000).astype(np.float32) * 1e-5,
            np.array(
                [
                    65504,
                    65519,
                    65520,
                    1e6,
                    -1e6,
                    np.inf,
                    -np.inf,
                    np.nan,
                    6e-8,
                    3e-8,
                    2.9e-8,
                    0.0,
                    -0.0,
                ],
                np.float32,
            ),
        ]
    )
    h = np.empty(x.size, np.uint16)

    @njit
    def narrow(a, out):
        for i in range(a.size):
            out[i] = mathlib.f32_to_f16(a[i])

    narrow(x, h)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)
    got = h.view(np.float16)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    ok = ~np.isnan(expected)
    np.testing.assert_array_equal(h[ok], expected.view(np.uint16)[ok])


@pytest.mark.parametrize(
    "fn,ref", [(mathlib.floordiv_float, np.floor_divide), (mathlib.mod_float, np.remainder)]
)
def test_float_floordiv_and_mod_match_numpy_exactly(fn, ref):
    specials = np.array(
        [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 3.0, 7.5, -7.5, np.inf, -np.inf, np.nan, 1e-300, 1e300]
    )
    a, b = np.meshgrid(specials, specials)
    a = np.concatenate([a.ravel(), rng.standard_normal(5000) * 100])
    b = np.concatenate([b.ravel(), rng.standard_normal(5000) * 10])

    @njit(error_model="numpy")
    def run(x, y, out):
        for i in range(x.size):
            out[i] = fn(x[i], y[i])

    out = np.empty_like(a)
    run(a, b, out)
    with np.errstate(all="ignore"):
        expected = ref(a, b)
    np.testing.assert_array_equal(out, expected)


# The numpy tier (first calls while kernels compile) meets the same bounds in float32: it
# computes a chain in float64 from its first transcendental op and rounds once. Called
# directly here (whatever the pass's ``tiered`` option); ``make test``'s tiered pass runs
# this file again with the option on, where the tier answers through the engine too.
_TIER_EXPR = {
    "exp": lambda t: ax.exp(t),
    "expm1": lambda t: ax.expm1(t),
    "log": lambda t: ax.log(t),
    "log1p": lambda t: ax.log1p(t),
    "tanh": lambda t: ax.tanh(t),
    "sigmoid": lambda t: 1 / (1 + ax.exp(-t)),  # as a user writes it (no rewrite here)
}


@pytest.mark.parametrize("name", NAMES)
def test_the_numpy_tier_meets_the_bounds_in_float32(name):
    x = _grid(name, np.float32)
    expr = _TIER_EXPR[name](ax.tensor(x, "N"))
    out = ax.empty(expr.axes, "float32")
    tiers.tier_assign(out.node, expr.node)  # what the tier runs
    got = out.numpy()
    dist, at = ulp_distance(name, x, got, np.float32)
    assert dist <= BOUND[name, np.float32], f"tier {name}: {dist} ulp at {at!r}"
