"""Scalar math for generated CPU kernels, written so LLVM can vectorize loops that call it.

numba's ``math.exp`` is a call into libm, which blocks SIMD; these functions are straight-line
arithmetic plus bit casts (LLVM ``bitcast`` intrinsics), so a loop over them vectorizes.
Every function takes and returns one dtype; generated code picks ``exp_f32`` or ``exp_f64``.

Error bounds, as the distance in ulp from the correctly rounded result (1: that result or a
neighbour), checked by tests/test_mathlib.py on a dense grid of each domain and on drawn
floats: every function within 1 ulp in float32 and float64, except sigmoid within 2: it
evaluates ``1 / (1 + exp(-x))`` as numpy does, the rounding of exp, of the sum and of the
division adding up (a double-float version within 1 ulp costs 15% (float64) to 50%
(float32) more time). Measured maximum error against the exact value: float32 expm1, log,
log1p, tanh 0.5 (they round a float64 result; on every float32 of the domain's main
binades), exp 1.01, sigmoid 2.48 (numpy's float32 formula: 3.6); float64 exp, expm1, log,
log1p, tanh 0.83 (double-float arithmetic up to the last rounding), sigmoid 2.4 (numpy: 2.4).
Results in the subnormal range come out (float32 sigmoid(-100) is 3.7e-44, not 0), and the
special values are numpy's: f(-0.0) == -0.0 for expm1, log1p and tanh, nan -> nan,
exp(+-inf) = inf/0, log(0) = -inf, log(<0) = nan (tests/test_special_values.py checks every
float op of the fused engine on signed zeros, subnormals, infinities and nan).

Also here: NaN-propagating max/min, numpy's float floor-division and remainder, and float16
<-> float32 conversion on raw uint16 bits (numba has no float16 arithmetic on the CPU).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ..storage.numba_private import (
    add_function_attribute,
    call_inlined,
    compiled_overload,
    target_features,
)
from .repack.simd import store_fence, stream

__all__ = [
    "exp_f32",
    "exp_f64",
    "exp_sum_f64",
    "expm1_f32",
    "expm1_f64",
    "log_f32",
    "log_f64",
    "log1p_f32",
    "log1p_f64",
    "tanh_f32",
    "tanh_f64",
    "tanh_f32_inline",
    "tanh_f64_inline",
    "sigmoid_f32",
    "sigmoid_f64",
    "fmax_nan",
    "fmin_nan",
    "floordiv_float",
    "mod_float",
    "sign_float",
    "f16_to_f32",
    "f32_to_f16",
    "bf16_to_f32",
    "f32_to_bf16",
    "radd",
    "rmul",
    "rmax",
    "rmin",
    "stream_out",
    "wide_vectors",
    "store_fence",  # re-exported for generated kernels
]

# Functions kernels call are compiled once (cached on disk) and left to LLVM to inline into
# each kernel: inlining in numba's IR instead (inline="always") re-runs numba's passes per
# call site, which made a 32-op kernel take 28 s to compile (0.26 s now). Small helpers are
# inlined into these functions, once.
_jit = njit(inline="never", error_model="numpy", cache=True, fastmath={"contract"})
_jit_inline = njit(inline="always", error_model="numpy", cache=True, fastmath={"contract"})

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


def _llvm_binary(name: str, flags: tuple[str, ...] = ()):
    """An intrinsic ``f(a, b)`` on two floats of one type: a call of LLVM's ``name`` with
    the fast-math ``flags``."""

    @intrinsic
    def call(typingctx, a, b):
        if not _float_pair(a, b):
            return None

        def codegen(context, builder, sig, args):
            t = args[0].type
            full = f"{name}.{'f32' if isinstance(t, ir.FloatType) else 'f64'}"
            fn = builder.module.globals.get(full)
            if fn is None:
                fn = ir.Function(builder.module, ir.FunctionType(t, [t, t]), full)
            return builder.call(fn, args, fastmath=flags)

        return a(a, b), codegen

    return call


# NaN-propagating max and min as LLVM's ``maximum``/``minimum`` (IEEE 754-2019): a loop
# folding values into one accumulator with them vectorizes (LLVM reduces vectors with
# ``vector.reduce.fmaximum``); the select in ``fmax_nan`` does not (16x slower over an
# array in L1, 4x slower than numpy's max). With ``nsz`` a tie of -0.0 and +0.0 may give
# either, as numpy's max does (it keeps the later one): x86's ``vmaxps`` then does the work,
# where ordering the zeros costs a compare and a blend per vector (``x.max()`` of 131k
# float32: 11.3 -> 7.0 us, numpy 7.0).
rmax = _llvm_binary("llvm.maximum", ("nsz",))
rmax.__doc__ = "max(a, b), NaN if either is NaN, as a vectorizable reduction (floats)."
rmin = _llvm_binary("llvm.minimum", ("nsz",))
rmin.__doc__ = "min(a, b), NaN if either is NaN, as a vectorizable reduction (floats)."


# --- vector width -----------------------------------------------------------------------------


@intrinsic
def wide_vectors(typingctx):
    """Let LLVM vectorize the calling function with 512-bit registers where the CPU has
    AVX-512 (a no-op elsewhere); generated kernels call it first.

    LLVM's tuning for AVX-512 CPUs prefers 256-bit vectors (older chips lowered their clock
    on 512-bit code); numpy's SIMD loops use 512 bits there. Compute-bound loops (the
    math library's exp, log, tanh) run about 1.4x faster with 16 float32 lanes than with 8
    (measured: ``exp_f32`` over 4M floats 2.1 -> 1.45 ms, numpy's ``exp`` 2.0 ms).
    """

    def codegen(context, builder, sig, args):
        if "+avx512f" in target_features(context).split(","):
            add_function_attribute(builder, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return types.none(), codegen


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
#
# float64 exp, expm1 and tanh carry their result as an unevaluated sum hi + lo up to the
# last rounding, which is what keeps them within 1 ulp. The sums are error-free: Fast2Sum
# ``s = a + b; err = (a - s) + b`` is exact when |a| >= |b| (TwoSum, 6 operations, without
# that condition), and with FMA contraction ``a - q * d`` is the exact remainder of a
# division.
# float64 n is rounded with the 1.5 * 2**52 shifter instead of a conversion: AVX2 has no
# vector float64 <-> int64 conversion.


@_jit_inline
def _pow2_f32(n):
    return _i32_as_f32((n + np.int32(127)) << np.int32(23))


@_jit_inline
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


_SHIFT = 6755399441055744.0  # 1.5 * 2**52: x + _SHIFT holds round(x) in its low bits
_SHIFT_BITS = np.int64(0x4338000000000000)
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # low 21 bits zero: n * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10


@_jit_inline
def _pow2_f64(n):
    return _i64_as_f64((n + np.int64(1023)) << np.int64(52))


@_jit_inline
def _reduce_f64(x):
    """``x == n*ln2 + r + c`` with |r| <= ln2/2 and ``c`` the rounding error of ``r``."""
    kd = x * _LOG2E + _SHIFT
    nd = kd - _SHIFT
    hi = x - nd * _LN2_HI  # exact: n * _LN2_HI is, and it is close to x
    lo = nd * _LN2_LO
    r = hi - lo
    return _f64_as_i64(kd) - _SHIFT_BITS, r, (hi - r) - lo


@_jit_inline
def _expm1_tail_f64(r):
    """``exp(r) - 1 - r`` for |r| <= ln2/2: Taylor series to degree 13, truncation error
    below 2**-57; the leading r*r/2 is rounded once (an FMA)."""
    q = 1.0 / 6227020800.0
    q = q * r + 1.0 / 479001600.0
    q = q * r + 1.0 / 39916800.0
    q = q * r + 1.0 / 3628800.0
    q = q * r + 1.0 / 362880.0
    q = q * r + 1.0 / 40320.0
    q = q * r + 1.0 / 5040.0
    q = q * r + 1.0 / 720.0
    q = q * r + 1.0 / 120.0
    q = q * r + 1.0 / 24.0
    q = q * r + 1.0 / 6.0
    return (0.5 * r) * r + (r * r) * (r * q)


@_jit_inline
def _exp_parts_f64(x):
    """``exp(x) == p * 2**n``, p rounded once from a double-float sum (|x| < 2**20)."""
    n, r, c = _reduce_f64(x)
    # exp(r + c) == 1 + r + tail(r) + c * (1 + r), up to c**2; 1 + r as t + its error
    s = _expm1_tail_f64(r) + c * (1.0 + r)
    t = 1.0 + r
    return n, t + (((1.0 - t) + r) + s)


@_jit
def exp_f64(x):
    n, p = _exp_parts_f64(min(max(x, -746.0), 710.0))
    half = n >> np.int64(1)
    y = p * _pow2_f64(half) * _pow2_f64(n - half)
    return y if x == x else x


@_jit
def exp_sum_f64(x):
    """exp(x) within 3e-13 relative (no double-float tail): the terms of a float64 sum
    whose result is then rounded to float32 (logsumexp and softmax of float32 values),
    where that error is 1e-6 of the final rounding's. 1.6x faster than ``exp_f64``."""
    xc = min(max(x, -746.0), 710.0)
    kd = xc * _LOG2E + _SHIFT
    nd = kd - _SHIFT
    n = _f64_as_i64(kd) - _SHIFT_BITS
    r = (xc - nd * _LN2_HI) - nd * _LN2_LO
    # Taylor series of exp(r) - 1 - r to degree 10: truncation below 2.2e-13 on |r| <= ln2/2
    q = 1.0 / 3628800.0
    q = q * r + 1.0 / 362880.0
    q = q * r + 1.0 / 40320.0
    q = q * r + 1.0 / 5040.0
    q = q * r + 1.0 / 720.0
    q = q * r + 1.0 / 120.0
    q = q * r + 1.0 / 24.0
    q = q * r + 1.0 / 6.0
    q = q * r + 0.5
    p = 1.0 + (r + (r * r) * q)
    half = n >> np.int64(1)
    y = p * _pow2_f64(half) * _pow2_f64(n - half)
    return y if x == x else x


@_jit_inline
def _expm1_dd_f64(x):
    """``expm1(x) == (hi + lo) * scale`` for x in [-40, 710]; scale is 2 where 2**n would
    overflow (n = 1024), else 1."""
    n, r, c = _reduce_f64(x)
    m = max(n - np.int64(1023), np.int64(0))
    p2 = _pow2_f64(n - m)
    one = _pow2_f64(-m)
    # 2**n * exp(r + c) - 1 == (2**n - 1) + 2**n * r + 2**n * s, the first two exact
    s = _expm1_tail_f64(r) + c * (1.0 + r)
    t1 = p2 - one  # TwoSum: inexact for n < -53 or n > 53
    b = t1 - p2
    d = (p2 - (t1 - b)) + (-one - b)
    t2 = p2 * r
    s1 = t1 + t2  # Fast2Sum: |t1| >= |t2| for every n
    lo = (((t1 - s1) + t2) + d) + p2 * s
    hi = s1 + lo
    return hi, (s1 - hi) + lo, _pow2_f64(m)


@_jit
def expm1_f64(x):
    hi, _, scale = _expm1_dd_f64(min(max(x, -40.0), 710.0))  # expm1(-40) rounds to -1
    y = hi * scale
    y = x if x == 0.0 else y  # keeps the sign of -0.0
    return y if x == x else x


@_jit
def expm1_f32(x):
    return np.float32(expm1_f64(np.float64(x)))


# --- log ----------------------------------------------------------------------------------
# x = m * 2**e with m in [sqrt(1/2), sqrt(2)); log(x) = e*ln2 + log(m), and
# log(m) = 2*atanh(s) with s = (m-1)/(m+1), |s| < 0.172, by an odd series in s.

_TWO52_BITS = np.int64(0x4330000000000000)  # 2**52: adding a small integer i makes 2**52 + i
_SQRT_HALF_BITS = np.int64(0x3FE6A09E667F3BCD)  # sqrt(1/2)


@_jit_inline
def _log_split_f64(x):
    """``x == m * 2**e`` with m in [sqrt(1/2), sqrt(2)), e as a float (x > 0, finite)."""
    sub = x < 2.2250738585072014e-308
    xs = x * 18014398509481984.0 if sub else x  # subnormals: scale by 2**54 first
    bits = _f64_as_i64(xs)
    # Offsetting the bits by those of sqrt(1/2) puts the exponent boundary at sqrt(1/2)
    # (musl's log): e in the high bits, m = x's mantissa with the exponent field replaced.
    ix = bits - _SQRT_HALF_BITS
    k = (ix >> np.int64(52)) - (np.int64(54) if sub else np.int64(0))
    m = _i64_as_f64(bits - (ix & np.int64(-4503599627370496)))  # clear all but mantissa
    e = _i64_as_f64(_TWO52_BITS + k + np.int64(2048)) - (4503599627370496.0 + 2048.0)
    return m, e


@_jit_inline
def _log_core_f64(m, e, c):
    """``log(m * 2**e) + c`` for m in [sqrt(1/2), sqrt(2)) and a small correction c."""
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
    return e * _LN2_HI - ((hfsq - (s * (hfsq + r) + (e * _LN2_LO + c))) - f)


@_jit
def log_f64(x):
    m, e = _log_split_f64(x)
    y = _log_core_f64(m, e, 0.0)
    y = -np.inf if x == 0.0 else y
    y = np.nan if x < 0.0 else y
    return x if (x != x or x == np.inf) else y


@_jit
def log_f32(x):
    return np.float32(log_f64(np.float64(x)))


@_jit
def log1p_f64(x):
    # log1p(x) = log(u) + log(1 + c/u) with u + c == 1 + x exactly (TwoSum): the rounding
    # of u is corrected to first order, as fdlibm's log1p does.
    u = 1.0 + x
    b = u - 1.0
    c = (1.0 - (u - b)) + (x - b)
    m, e = _log_split_f64(u)
    y = _log_core_f64(m, e, c / u)
    y = x if x == 0.0 else y  # keeps the sign of -0.0
    y = -np.inf if x == -1.0 else y
    y = np.nan if x < -1.0 else y
    return x if (x != x or x == np.inf) else y


@_jit
def log1p_f32(x):
    return np.float32(log1p_f64(np.float64(x)))


# --- tanh and sigmoid -------------------------------------------------------------------------


@_jit_inline
def _tanh_f64(x):
    # tanh(a) = t / (t + 2) with t = expm1(2a) as th + tl; the division is corrected with its
    # exact remainder. tanh(20) rounds to 1.
    a = min(abs(x), 20.0)
    th, tl, _ = _expm1_dd_f64(2.0 * a)
    big = max(th, 2.0)
    small = min(th, 2.0)
    dh = big + small
    dl = ((big - dh) + small) + tl
    inv = 1.0 / dh
    q = th * inv
    y = q + (((th - q * dh) + tl) - q * dl) * inv
    y = np.copysign(y, x)  # a = |x|: this keeps tanh odd, -0.0 included
    return y if x == x else x


@_jit
def tanh_f64(x):
    return _tanh_f64(x)


@_jit_inline
def _tanh_f32(x):
    # float32 needs no double-floats: in float64, tanh(a) = (e - 1) / (e + 1) with
    # e = exp(2a) is within 1e-12 relative of tanh for a >= 2**-12 (e - 1 loses at most
    # log2(1 / 2a) bits), and a - a**3 / 3 is exact to float32 below; one rounding to
    # float32 then keeps 1 ulp. Short enough for LLVM to inline and vectorize (AVX2: 4
    # lanes of float64), 8x faster than the float64 algorithm.
    a = min(abs(x), 9.5)  # tanh(9.02) rounds to 1 in float32
    n, r, _ = _reduce_f64(2.0 * a)
    e = (1.0 + (r + _expm1_tail_f64(r))) * _pow2_f64(n)
    big = (e - 1.0) / (e + 1.0)
    small = a - a * a * a * (1.0 / 3.0)
    y = np.copysign(big if a >= 0.000244140625 else small, x)
    return np.float32(y if x == x else x)


@_jit
def tanh_f32(x):
    return _tanh_f32(np.float64(x))


# tanh is too big for LLVM's inliner to take on its own, and a loop that calls it does not
# vectorize (4x slower). These variants call the function compiled once above with
# ``alwaysinline`` on the call: LLVM inlines its optimized code into the kernel's loop.
# Inlining in numba's IR instead (inline="always") re-ran numba's typing and lowering of
# tanh's body at each call site: 0.15-0.2 s per site, most of a kernel's compile time.


def _inlined(disp, ty, name: str):
    """An intrinsic ``name(x)`` for ``x`` of type ``ty``: ``disp(x)`` inlined by LLVM."""

    @intrinsic
    def call(typingctx, x):
        if x != ty:
            return None
        cres = compiled_overload(disp, (x,))  # once per process; numba's disk cache has it

        def codegen(context, builder, sig, args):
            return call_inlined(context, builder, cres, sig, args)

        return cres.signature.return_type(x), codegen

    call.__name__ = call.__qualname__ = name
    return call


tanh_f64_inline = _inlined(tanh_f64, types.float64, "tanh_f64_inline")
tanh_f32_inline = _inlined(tanh_f32, types.float32, "tanh_f32_inline")


@_jit
def sigmoid_f32(x):
    # 1 / (1 + exp(-x)) == 2**-64 / (2**-64 + exp(-x) * 2**-64): the scaled exp stays finite
    # down to x = -104, so results in the subnormal range round once, at the division, and
    # the scaling costs nothing. exp(-x) < 2**-57 for x > 40, where the result is 1.
    p, n = _exp_parts_f32(min(max(-x, np.float32(-40.0)), np.float32(104.0)))
    s = np.float32(5.421010862427522e-20)  # 2**-64
    y = s / (s + p * _pow2_f32(n - np.int32(64)))
    return y if x == x else x


@_jit
def sigmoid_f64(x):
    # As sigmoid_f32 with 2**-600: finite down to x = -746 (results below 2**-1074 round
    # to 0); exp(-x) < 2**-420 for x > 292, where the result is 1.
    n, p = _exp_parts_f64(min(max(-x, -292.0), 746.0))
    s = 2.409919865102884e-181  # 2**-600
    y = s / (s + p * _pow2_f64(n - np.int64(600)))
    return y if x == x else x


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


# --- bfloat16 bits <-> float32 -------------------------------------------------------------
# bfloat16 is the top half of a float32: widening is a shift, narrowing rounds the low 16
# bits away (half to even), as ml_dtypes does; NaN stays NaN (made quiet).


@_jit
def bf16_to_f32(h):
    """uint16 bits of a bfloat16 -> float32 (exact)."""
    return _i32_as_f32(np.int32(np.uint32(h) << np.uint32(16)))


@_jit
def f32_to_bf16(f):
    """float32 -> uint16 bits of the nearest bfloat16 (round half to even)."""
    bits = np.uint32(_f32_as_i32(f))
    if (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):  # nan: keep sign and payload
        return np.uint16((bits >> np.uint32(16)) | np.uint32(0x40))
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return np.uint16(rounded >> np.uint32(16))
