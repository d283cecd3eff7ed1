"""Scalar math for generated CPU kernels, written so LLVM can vectorize loops that call it.

numba's ``math.exp`` is a call into libm, which blocks SIMD; these functions are straight-line
arithmetic plus bit casts (LLVM ``bitcast`` intrinsics), so a loop over them vectorizes.
Every function takes and returns one dtype; generated code picks ``exp_f32`` or ``exp_f64``.

Error bounds (checked by tests/test_mathlib.py over the finite range and the special values,
against float64 numpy for float32 and numpy itself for float64): exp, expm1, log, log1p,
tanh within 1 ulp in float32 and 3 ulp in float64; sigmoid within 3 ulp (float32) and 5 ulp
(float64), its division and addition adding their roundings to exp's. float32 sigmoid
returns 0 below x = -88.7, where the exact result is subnormal, like numpy's float32
``1 / (1 + np.exp(-x))``.
Special values follow numpy: nan -> nan, exp(+-inf) = inf/0, log(0) = -inf, log(<0) = nan.

Also here: NaN-propagating max/min, numpy's float floor-division and remainder, and float16
<-> float32 conversion on raw uint16 bits (numba has no float16 arithmetic on the CPU).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .repack_simd import store_fence, stream

__all__ = [
    "exp_f32",
    "exp_f64",
    "expm1_f32",
    "expm1_f64",
    "log_f32",
    "log_f64",
    "log1p_f32",
    "log1p_f64",
    "tanh_f32",
    "tanh_f64",
    "sigmoid_f32",
    "sigmoid_f64",
    "fmax_nan",
    "fmin_nan",
    "floordiv_float",
    "mod_float",
    "sign_float",
    "f16_to_f32",
    "f32_to_f16",
    "radd",
    "rmul",
    "stream_out",
    "store_fence",  # re-exported for generated kernels
]

_jit = njit(inline="always", error_model="numpy", cache=True, fastmath={"contract"})

# --- bit casts ----------------------------------------------------------------------------


def _bitcast(src, dst, llvm_type):
    """An intrinsic reinterpreting the bits of a ``src`` scalar as ``dst`` (LLVM bitcast)."""

    @intrinsic
    def cast(typingctx, x):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], llvm_type)

        return dst(src), codegen

    return cast


_i32_as_f32 = _bitcast(types.int32, types.float32, ir.FloatType())
_f32_as_i32 = _bitcast(types.float32, types.int32, ir.IntType(32))
_i64_as_f64 = _bitcast(types.int64, types.float64, ir.DoubleType())
_f64_as_i64 = _bitcast(types.float64, types.int64, ir.IntType(64))


# --- reassociable accumulation ---------------------------------------------------------------
# A float reduction loop vectorizes only if LLVM may reorder its additions. Numba's fastmath
# flags would apply to every operation of the kernel (reordering the user's expression and
# this library's argument reductions too); these intrinsics put ``reassoc`` on the
# accumulating operation alone.


def _float_pair(a, b):
    return isinstance(a, types.Float) and a == b


@intrinsic
def radd(typingctx, a, b):
    """``a + b`` that LLVM may reassociate (for accumulators only)."""
    if not _float_pair(a, b):
        return None

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], args[1], flags=("reassoc",))

    return a(a, b), codegen


@intrinsic
def rmul(typingctx, a, b):
    """``a * b`` that LLVM may reassociate (for accumulators only)."""
    if not _float_pair(a, b):
        return None

    def codegen(context, builder, sig, args):
        return builder.fmul(args[0], args[1], flags=("reassoc",))

    return a(a, b), codegen


# --- streaming stores -------------------------------------------------------------------------


@njit(inline="always", error_model="numpy", cache=True)
def stream_out(dst, off, buf, m):
    """Write ``buf[:m]`` to ``dst[off:off + m]``: non-temporal vector stores where the
    destination is 32-byte aligned, plain stores for the unaligned head and the tail.

    Non-temporal stores skip reading each destination line before writing it, so a big
    output costs 2 bytes of traffic per byte instead of 3. ``dst`` must be element-aligned.
    """
    width = dst.itemsize
    lanes = 32 // width
    addr = dst.ctypes.data + off * width
    head = ((32 - addr % 32) % 32) // width
    if head > m:
        head = m
    for k in range(head):
        dst[off + k] = buf[k]
    vecs = (m - head) // lanes
    stream(buf, head, dst, off + head, vecs)
    for k in range(head + vecs * lanes, m):
        dst[off + k] = buf[k]


# --- exp ----------------------------------------------------------------------------------
# x = n*ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2 split in a high part exact in few bits
# and a low correction), exp(r) by a polynomial, then scale by 2**n built from its bits.
# The scale is applied as two factors 2**(n//2) * 2**(n - n//2) so that results in the
# subnormal range and the overflow threshold come out right without branches.


@_jit
def _pow2_f32(n):
    return _i32_as_f32((n + np.int32(127)) << np.int32(23))


@_jit
def _exp_parts_f32(xc):
    """``exp(xc) == p * 2**n``: the reduced argument's polynomial ``p`` and the exponent."""
    n = np.floor(xc * np.float32(1.4426950408889634) + np.float32(0.5))
    r = xc - n * np.float32(0.693359375)
    r = r - n * np.float32(-2.12194440e-4)
    p = np.float32(1.9875691500e-4)
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    return p * (r * r) + r + np.float32(1.0), np.int32(n)


@_jit
def exp_f32(x):
    p, n = _exp_parts_f32(min(max(x, np.float32(-104.0)), np.float32(89.0)))
    half = n >> np.int32(1)
    y = p * _pow2_f32(half) * _pow2_f32(n - half)
    return y if x == x else x


@_jit
def _pow2_f64(n):
    return _i64_as_f64((n + np.int64(1023)) << np.int64(52))


@_jit
def _exp_poly_f64(r):
    # Taylor series to degree 13 on |r| <= ln2/2: truncation error below 1e-17 relative.
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    return p * (r * r) + r


@_jit
def exp_f64(x):
    xc = min(max(x, -746.0), 710.0)
    n = np.floor(xc * 1.4426950408889634 + 0.5)
    r = xc - n * 6.93147180369123816490e-01
    r = r - n * 1.90821492927058770002e-10
    p = _exp_poly_f64(r) + 1.0
    ni = np.int64(n)
    half = ni >> np.int64(1)
    y = p * _pow2_f64(half) * _pow2_f64(ni - half)
    return y if x == x else x


@_jit
def expm1_f64(x):
    # Near 0, exp(x) - 1 cancels: use the polynomial without its leading 1. Further out,
    # expm1(x) = 2**n * expm1(r) + (2**n - 1), where 2**n - 1 is exact for small n.
    if abs(x) < 0.34657359027997264:
        return _exp_poly_f64(x)
    if abs(x) < 40.0:
        n = np.floor(x * 1.4426950408889634 + 0.5)
        r = x - n * 6.93147180369123816490e-01
        r = r - n * 1.90821492927058770002e-10
        t = _pow2_f64(np.int64(n))
        return t * _exp_poly_f64(r) + (t - 1.0)
    return exp_f64(x) - 1.0


@_jit
def expm1_f32(x):
    return np.float32(expm1_f64(np.float64(x)))


# --- log ----------------------------------------------------------------------------------
# x = m * 2**e with m in [sqrt(1/2), sqrt(2)); log(x) = e*ln2 + log(m), and
# log(m) = 2*atanh(s) with s = (m-1)/(m+1), |s| < 0.172, by an odd series in s.


@_jit
def _log_core_f64(m, e):
    f = m - 1.0
    s = f / (m + 1.0)
    z = s * s
    p = 1.0 / 23.0
    p = p * z + 1.0 / 21.0
    p = p * z + 1.0 / 19.0
    p = p * z + 1.0 / 17.0
    p = p * z + 1.0 / 15.0
    p = p * z + 1.0 / 13.0
    p = p * z + 1.0 / 11.0
    p = p * z + 1.0 / 9.0
    p = p * z + 1.0 / 7.0
    p = p * z + 1.0 / 5.0
    p = p * z + 1.0 / 3.0
    # log(m) = 2s + s*r with r = 2z/3 + 2z^2/5 + ... = f - (hfsq - s*(hfsq + r)) (fdlibm's
    # arrangement: the large terms f and hfsq stay exact, the series only corrects).
    hfsq = 0.5 * f * f
    r = 2.0 * z * p
    ln2_hi = 6.93147180369123816490e-01
    ln2_lo = 1.90821492927058770002e-10
    return e * ln2_hi - ((hfsq - (s * (hfsq + r) + e * ln2_lo)) - f)


@_jit
def log_f64(x):
    bits = _f64_as_i64(x)
    # Subnormals: scale into the normal range first.
    sub = x < 2.2250738585072014e-308
    xs = x * 18014398509481984.0 if sub else x  # 2**54
    bits = _f64_as_i64(xs)
    e = ((bits >> np.int64(52)) & np.int64(0x7FF)) - np.int64(1023)
    mbits = (bits & np.int64(0x000FFFFFFFFFFFFF)) | np.int64(0x3FF0000000000000)
    m = _i64_as_f64(mbits)
    big = m > 1.4142135623730951
    m = m * 0.5 if big else m
    e = e + np.int64(1) if big else e
    e = e - np.int64(54) if sub else e
    y = _log_core_f64(m, np.float64(e))
    if x != x or x == np.inf:
        return x
    if x < 0.0:
        return np.nan
    if x == 0.0:
        return -np.inf
    return y


@_jit
def log_f32(x):
    return np.float32(log_f64(np.float64(x)))


@_jit
def log1p_f64(x):
    # log1p(x) = log(u) * x / (u - 1) with u = 1 + x rounded: the factor corrects the
    # rounding of u (Goldberg's trick); exact where u == 1.
    u = 1.0 + x
    if u == 1.0:
        return x
    y = log_f64(u)
    if u == np.inf:
        return y
    return y * (x / (u - 1.0))


@_jit
def log1p_f32(x):
    return np.float32(log1p_f64(np.float64(x)))


# --- tanh and sigmoid -------------------------------------------------------------------------


@_jit
def tanh_f64(x):
    a = abs(x)
    if a < 0.5:
        # tanh = -expm1(-2a) / (2 + expm1(-2a)) is exact-ish everywhere but loses nothing here.
        t = expm1_f64(-2.0 * a)
        y = -t / (2.0 + t)
    elif a < 22.0:
        y = 1.0 - 2.0 / (exp_f64(2.0 * a) + 1.0)
    else:
        y = 1.0
    y = -y if x < 0.0 else y
    return y if x == x else x


@_jit
def tanh_f32(x):
    return np.float32(tanh_f64(np.float64(x)))


@_jit
def _exp_f32_normal(x):
    """exp without subnormal results (x clamped to [-87, 89]; above 88.7 the single scale
    factor 2**128 is inf): 25% faster than ``exp_f32``. Enough for sigmoid, where a tiny
    exp is only added to 1, and an overflow makes the result 0 as numpy's float32
    ``1 / (1 + np.exp(-x))`` does."""
    p, n = _exp_parts_f32(min(max(x, np.float32(-87.0)), np.float32(89.0)))
    return p * _pow2_f32(n)


@_jit
def sigmoid_f32(x):
    y = np.float32(1.0) / (np.float32(1.0) + _exp_f32_normal(-x))
    return y if x == x else x


@_jit
def sigmoid_f64(x):
    return 1.0 / (1.0 + exp_f64(-x))


# --- numpy's float semantics for max/min, //, %, sign -----------------------------------------


@_jit
def fmax_nan(a, b):
    return a if (a > b or a != a) else b


@_jit
def fmin_nan(a, b):
    return a if (a < b or a != a) else b


@_jit
def floordiv_float(a, b):
    """numpy's floor_divide for floats (npy_divmod): exact, not floor(a / b)."""
    if b == 0:
        return a / b
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0 and ((b < 0) != (mod < 0)):
        div -= 1
    if div != 0:
        fl = np.floor(div)
        if div - fl > 0.5:
            fl += 1
        return fl
    return np.copysign(div * 0, a / b)


@_jit
def mod_float(a, b):
    """numpy's remainder for floats: the result takes the sign of the divisor."""
    if b == 0:
        return np.fmod(a, b)
    mod = np.fmod(a, b)
    if mod != 0:
        if (b < 0) != (mod < 0):
            mod += b
    else:
        mod = np.copysign(mod * 0, b)
    return mod


@_jit
def sign_float(a):
    if a != a:
        return a  # nan stays nan
    return (a > 0) - (a < 0)


# --- float16 bits <-> float32 ---------------------------------------------------------------


@_jit
def f16_to_f32(h):
    """uint16 bits of an IEEE half -> float32 (exact)."""
    hi = np.int32(h)
    sign = (hi & np.int32(0x8000)) << np.int32(16)
    exp = (hi >> np.int32(10)) & np.int32(0x1F)
    mant = hi & np.int32(0x3FF)
    if exp == 0:
        # zero or subnormal: mant * 2**-24
        v = np.float32(mant) * np.float32(5.9604644775390625e-08)
        return -v if sign else v
    if exp == 31:
        bits = sign | np.int32(0x7F800000) | (mant << np.int32(13))
        return _i32_as_f32(bits)
    bits = sign | ((exp + np.int32(112)) << np.int32(23)) | (mant << np.int32(13))
    return _i32_as_f32(bits)


@_jit
def f32_to_f16(f):
    """float32 -> uint16 bits of the nearest half (round half to even), as numpy does."""
    bits = _f32_as_i32(f)
    sign = np.uint16((bits >> np.int32(16)) & np.int32(0x8000))
    a = bits & np.int32(0x7FFFFFFF)
    if a >= np.int32(0x7F800000):  # inf or nan
        nan = np.int32(0x200) if a > np.int32(0x7F800000) else np.int32(0)
        return sign | np.uint16(np.int32(0x7C00) | nan | ((a >> np.int32(13)) & np.int32(0x3FF)))
    if a >= np.int32(0x477FF000):  # rounds to >= 65520: overflow to inf
        return sign | np.uint16(0x7C00)
    if a < np.int32(0x38800000):  # below the smallest normal half: subnormal or zero
        v = _i32_as_f32(a) * np.float32(16777216.0)  # value / 2**-24, exact in float32
        return sign | np.uint16(np.rint(v))
    # normal: drop 13 mantissa bits with round half to even
    rounded = a + np.int32(0xFFF) + ((a >> np.int32(13)) & np.int32(1))
    return sign | np.uint16((rounded - np.int32(0x38000000)) >> np.int32(13))
