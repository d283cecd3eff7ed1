"""The vectorizable math library against numpy: the error bounds stated in mathlib.py.

Bounds (in units in the last place of the result dtype, against a float64 reference for
float32 and numpy itself for float64): float32 functions <= 1 ulp and float64 <= 3 ulp,
sigmoid 2 ulp more (its division and addition round too); special values (nan, +-inf,
+-0, overflow, underflow, subnormals) exactly as numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from axesarray.kernels import mathlib

rng = np.random.default_rng(1)
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30, -1e-30, 0.5, -0.5]
ULP = {np.float32: 1.0, np.float64: 3.0}

_RUNNERS: dict = {}


def _apply(fn, x: np.ndarray) -> np.ndarray:
    run = _RUNNERS.get(fn)
    if run is None:

        @njit(error_model="numpy")
        def run(a, out):
            for i in range(a.size):
                out[i] = fn(a[i])

        _RUNNERS[fn] = run
    out = np.empty_like(x)
    run(x, out)
    return out


def _ulp_error(got: np.ndarray, ref: np.ndarray, dtype) -> float:
    ref_t = ref.astype(dtype)
    finite = np.isfinite(ref_t)
    spacing = np.spacing(np.abs(ref_t[finite])).astype(np.float64)
    return float((np.abs(got[finite].astype(np.float64) - ref[finite]) / spacing).max())


def _inputs(name: str, dtype) -> np.ndarray:
    tiny = np.finfo(dtype).tiny
    if name in ("log",):
        lo = np.log(np.finfo(dtype).smallest_subnormal * 4)
        x = np.exp(rng.uniform(lo, np.log(np.finfo(dtype).max) - 1, 200_000))
    elif name == "log1p":
        x = np.concatenate([rng.uniform(-0.999, 10, 100_000), rng.uniform(-1e-6, 1e-6, 20_000)])
    elif name == "exp":
        top = 88.0 if dtype == np.float32 else 709.0
        x = rng.uniform(-110 if dtype == np.float32 else -750, top, 200_000)
    elif name == "expm1":
        x = np.concatenate([rng.uniform(-40, 40, 100_000), rng.uniform(-1e-5, 1e-5, 20_000)])
    else:  # tanh, sigmoid
        x = np.concatenate([rng.uniform(-25, 25, 100_000), rng.uniform(-1e-4, 1e-4, 20_000)])
    return np.concatenate([x, [tiny, -tiny, *SPECIAL]]).astype(dtype)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


REFS = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(REFS))
def test_error_bound_and_special_values(name, dtype):
    fn = getattr(mathlib, f"{name}_{'f32' if dtype == np.float32 else 'f64'}")
    x = _inputs(name, dtype)
    got = _apply(fn, x)
    with np.errstate(all="ignore"):
        ref = REFS[name](x.astype(np.float64)) if dtype == np.float32 else REFS[name](x)
        ref_t = ref.astype(dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref_t))
    inf = np.isinf(ref_t)
    np.testing.assert_array_equal(got[inf], ref_t[inf])
    # 1/(1+e) adds two roundings to exp's error; float32 sigmoid computes in float32.
    bound = ULP[dtype] + (2.0 if name == "sigmoid" else 0.0)
    assert _ulp_error(got, ref, dtype) <= bound


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
