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
from axesarray.engine import tier_eval
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


@pytest.mark.parametrize("loops", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_the_numpy_tier_meets_the_bounds_in_float32(name, loops, monkeypatch):
    """Both ways the tier computes a float32 transcendental: numpy in float64, rounded once
    (before the math library's loops are loaded), and the loops (``tier_math``)."""
    from axesarray.kernels import tier_math

    if loops:
        tier_math.load(tier_math.LOOP_OPS)
    monkeypatch.setattr(tier_math, "LOOPS", dict(tier_math.LOOPS) if loops else {})
    x = _grid(name, np.float32)
    expr = _TIER_EXPR[name](ax.tensor(x, "N"))
    out = ax.empty(expr.axes, "float32")
    tier_eval.tier_assign(out.node, expr.node)  # what the tier runs
    got = out.numpy()
    dist, at = ulp_distance(name, x, got, np.float32)
    assert dist <= BOUND[name, np.float32], f"tier {name}: {dist} ulp at {at!r}"


# --- what the kernels call: vector width, reductions, logsumexp's exp ---------------------


def _kernel_source(expr, kind="serial") -> str:
    from axesarray.engine import executor
    from axesarray.engine.dispatch import source_for

    plan, _ = executor.schedule_for(expr._node, None)
    assert len(plan.steps) == 1
    return source_for(plan.steps[0], plan.device, kind)[0]


def test_kernels_ask_for_512_bit_vectors_exactly_where_the_cpu_has_avx512():
    from numba.core.registry import cpu_target

    from axesarray.storage.numba_private import target_features

    @njit(error_model="numpy")
    def double(a):
        mathlib.wide_vectors()
        for i in range(a.size):
            a[i] *= 2.0

    a = np.ones(5)
    double(a)
    np.testing.assert_array_equal(a, 2.0)
    llvm = next(iter(double.inspect_llvm().values()))
    avx512 = "+avx512f" in target_features(cpu_target.target_context).split(",")
    assert ('"prefer-vector-width"="512"' in llvm) == avx512
    x = ax.tensor(np.ones((300, 4), np.float32), "N K")
    for expr in (ax.exp(x), ax.exp(x).sum("K"), x.max()):
        for kind in ("serial", "parallel"):
            head = _kernel_source(expr, kind).split(
                "\ndef kernel(" if kind == "serial" else "\ndef part(", 1
            )[1]
            assert head.split("\n")[1] == "    wide_vectors()", head


def _floats_with_specials(dtype):
    width = 32 if dtype == np.float32 else 64
    special = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0])
    return st.lists(st.one_of(st.floats(width=width), special), min_size=1, max_size=300)


@given(st.sampled_from(FLOATS), st.data())
def test_max_and_min_reductions_vectorize_and_match_numpy(dtype, data):
    """max/min fold with LLVM's NaN-propagating maximum/minimum in one accumulator (the
    loop vectorizes); the result is numpy's, NaN anywhere in a row included."""
    rows = data.draw(st.integers(1, 3))
    values = [data.draw(_floats_with_specials(dtype)) for _ in range(rows)]
    n = min(len(v) for v in values)
    a = np.array([v[:n] for v in values], dtype)
    x = ax.tensor(a, "N K")
    with ax.set_options(tiered=False):
        for op in ("max", "min"):
            got = getattr(x, op)("K").numpy()
            np.testing.assert_array_equal(got, getattr(np, op)(a, axis=1))
            full = getattr(x, op)().numpy()
            np.testing.assert_array_equal(full, getattr(np, op)(a))


def test_max_and_min_of_zeros_are_zero_and_integers_exact():
    """A tie of -0.0 and +0.0 gives a zero of either sign (``nsz``, as numpy's max, which
    keeps the later one); the compiled fold carries the flag."""
    with ax.set_options(tiered=False):
        for a in ([0.0, -0.0], [-0.0, 0.0]):
            x = ax.tensor(np.array(a * 40, np.float32), "K")
            for got in (x.max("K").numpy(), x.min("K").numpy(), x.max().numpy()):
                assert got == 0.0 and not np.isnan(got)
        f = ax.tensor(np.ones((4, 8), np.float32), "N K")
        i = ax.tensor(np.arange(32, dtype=np.int16).reshape(4, 8), "N K")
        assert "rmax(" in _kernel_source(f.max("K")) and "rmin(" in _kernel_source(f.min("K"))
        assert "rmax(" not in _kernel_source(i.max("K"))
        np.testing.assert_array_equal(i.max("K").numpy(), np.arange(32).reshape(4, 8).max(1))

    @njit
    def fold(v):
        acc = v[0]
        for i in range(v.size):
            acc = mathlib.rmin(mathlib.rmax(acc, v[i]), acc)
        return acc

    fold(np.ones(3, np.float32))
    ir = next(iter(fold.inspect_llvm().values()))
    assert "call nsz float @llvm.maximum.f32" in ir and "call nsz float @llvm.minimum.f32" in ir


def test_exp_sum_f64_is_within_its_stated_error():
    """``exp_sum_f64`` (logsumexp's terms for float32 results): 3e-13 relative on the whole
    finite range, numpy's special values; subnormal results within that or 1 ulp."""
    fi = np.finfo(np.float64)
    x = np.concatenate([np.linspace(-708.0, 709.7, 2_000_001), np.linspace(-1, 1, 200_001)])
    got = _apply(mathlib.exp_sum_f64, x)
    want = np.exp(x.astype(np.longdouble))
    rel = np.abs((got - want) / want).max()
    assert rel < 3e-13, rel
    sub = np.linspace(-745.1, -708.5, 100_001)
    got = _apply(mathlib.exp_sum_f64, sub)
    want = np.exp(sub.astype(np.longdouble)).astype(np.float64)
    assert (np.abs(got - want) <= 3e-13 * want + float(fi.smallest_subnormal)).all()
    special = np.array([np.nan, np.inf, -np.inf, 710.0, -746.0, 0.0, -0.0])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(_apply(mathlib.exp_sum_f64, special), np.exp(special))


@pytest.mark.parametrize("dtype", FLOATS, ids=["f32", "f64"])
def test_logsumexp_kernels_by_dtype_and_their_accuracy(dtype):
    """float32 logsumexp adds ``exp_sum_f64`` terms (float32 max, 16 lanes); float64 keeps
    the 1-ulp ``exp_f64``. Either way the result is within 1 ulp of the exact value."""
    a = (np.random.default_rng(5).standard_normal((64, 257)) * 20).astype(dtype)
    x = ax.tensor(a, "N K")
    m = x.max("K")
    expr = m + ax.log(ax.exp(x - m).sum("K"))
    src = _kernel_source(expr)
    small = dtype == np.float32
    assert ("exp_sum_f64(" in src) == small and ("exp_f64(" in src) != small
    assert "am_ = rmax(am_" in src and f"am_ = np.{np.dtype(dtype).name}(-np.inf)" in src
    wide = a.astype(np.longdouble)
    mx = wide.max(1, keepdims=True)
    want = (mx + np.log(np.exp(wide - mx).sum(1, keepdims=True)))[:, 0]
    with ax.set_options(tiered=False):
        got = expr.numpy()
    assert got.dtype == dtype
    np.testing.assert_array_less(np.abs(_ordered(got) - _ordered(want.astype(dtype))), 2)
