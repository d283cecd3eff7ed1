"""The loops of ``tier_math``: one per float32 function of the math library, over 1-D
contiguous arrays, and the max and min of each row of a 2-D C-ordered float array,
releasing the GIL (the tier's slabs call them from several threads). Each is written out
(not made by a factory): numba caches module-level functions on disk, not closures."""

from __future__ import annotations

import numpy as np
from numba import njit

from .mathlib import (
    exp_f32,
    expm1_f32,
    log1p_f32,
    log_f32,
    radd,
    rmax,
    rmin,
    sigmoid_f32,
    tanh_f32_inline,
    wide_vectors,
)

_jit = njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})


@_jit
def exp_f32_loop(x, out):
    wide_vectors()
    for i in range(x.size):
        out[i] = exp_f32(x[i])


@_jit
def expm1_f32_loop(x, out):
    wide_vectors()
    for i in range(x.size):
        out[i] = expm1_f32(x[i])


@_jit
def log_f32_loop(x, out):
    wide_vectors()
    for i in range(x.size):
        out[i] = log_f32(x[i])


@_jit
def log1p_f32_loop(x, out):
    wide_vectors()
    for i in range(x.size):
        out[i] = log1p_f32(x[i])


@_jit
def tanh_f32_loop(x, out):
    wide_vectors()
    for i in range(x.size):
        out[i] = tanh_f32_inline(x[i])  # tanh is too big for LLVM's inliner: see mathlib


@_jit
def sigmoid_f32_loop(x, out):
    wide_vectors()
    for i in range(x.size):
        out[i] = sigmoid_f32(x[i])


# In place: the tier often writes an op over its dying operand. The two-array loops would
# not vectorize there: LLVM checks at run time that ``out`` and ``x`` do not overlap and
# falls back to scalar code when they do (8x slower).


@_jit
def exp_f32_inplace(x):
    wide_vectors()
    for i in range(x.size):
        x[i] = exp_f32(x[i])


@_jit
def expm1_f32_inplace(x):
    wide_vectors()
    for i in range(x.size):
        x[i] = expm1_f32(x[i])


@_jit
def log_f32_inplace(x):
    wide_vectors()
    for i in range(x.size):
        x[i] = log_f32(x[i])


@_jit
def log1p_f32_inplace(x):
    wide_vectors()
    for i in range(x.size):
        x[i] = log1p_f32(x[i])


@_jit
def tanh_f32_inplace(x):
    wide_vectors()
    for i in range(x.size):
        x[i] = tanh_f32_inline(x[i])


@_jit
def sigmoid_f32_inplace(x):
    wide_vectors()
    for i in range(x.size):
        x[i] = sigmoid_f32(x[i])


# The max, min and sum of each row, as the kernels fold them (``mathlib.rmax``/``rmin``:
# NaN wins; sums in a float64 accumulator, ``radd``). numpy's reduction
# along a row pays ~100 ns a row: its max over rows of 128 float32 ran at 0.8 ns an
# element, this loop at 0.18; its float32 sum (pairwise, in float32) at 0.27, this 0.14.


@_jit
def max_rows_f32(x, out):
    wide_vectors()
    for i in range(x.shape[0]):
        acc = np.float32(-np.inf)
        for j in range(x.shape[1]):
            acc = rmax(acc, x[i, j])
        out[i] = acc


@_jit
def min_rows_f32(x, out):
    wide_vectors()
    for i in range(x.shape[0]):
        acc = np.float32(np.inf)
        for j in range(x.shape[1]):
            acc = rmin(acc, x[i, j])
        out[i] = acc


@_jit
def max_rows_f64(x, out):
    wide_vectors()
    for i in range(x.shape[0]):
        acc = -np.inf
        for j in range(x.shape[1]):
            acc = rmax(acc, x[i, j])
        out[i] = acc


@_jit
def min_rows_f64(x, out):
    wide_vectors()
    for i in range(x.shape[0]):
        acc = np.inf
        for j in range(x.shape[1]):
            acc = rmin(acc, x[i, j])
        out[i] = acc


@_jit
def sum_rows_f32(x, out):
    wide_vectors()
    for i in range(x.shape[0]):
        acc = 0.0
        for j in range(x.shape[1]):
            acc = radd(acc, np.float64(x[i, j]))
        out[i] = acc


@_jit
def sum_rows_f64(x, out):
    wide_vectors()
    for i in range(x.shape[0]):
        acc = 0.0
        for j in range(x.shape[1]):
            acc = radd(acc, x[i, j])
        out[i] = acc
