"""The loops of ``kernels.scans``: the running sum (or product) along the middle dim of an
array read as ``(outer, along, inner)`` from its 1-D storage (an offset and three element
strides), into a C-ordered ``(outer, along, inner)`` output at an offset of a 1-D storage.
Written out (not made by a factory): numba caches module-level functions on disk, not
closures.

No fast-math: each add (or multiply) rounds in the output dtype, in order along the dim,
as numpy's ``add.accumulate`` does, so the results are numpy's bit for bit. ``prod`` is the
same for a whole call: the compiler takes the branch out of the loops.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_jit = njit(nogil=True, cache=True, error_model="numpy")

ROWS = 8  # rows ``scan_rows`` runs side by side (16 thrashed L1 on rows 16 KiB apart)


@_jit
def scan_inner(x, at, s0, s1, s2, out, to, n0, n1, n2, prod):
    """Along the middle dim, the inner dim's running values side by side: the inner loop
    is independent and vectorizes (for an inner dim of 8 or more)."""
    for a in range(n0):
        src = at + a * s0
        row = to + a * n1 * n2
        for j in range(n2):
            out[np.uint64(row + j)] = x[np.uint64(src + j * s2)]
        for i in range(1, n1):
            s = src + i * s1
            o = row + i * n2
            for j in range(n2):
                v = x[np.uint64(s + j * s2)]
                if prod:
                    out[np.uint64(o + j)] = out[np.uint64(o - n2 + j)] * v
                else:
                    out[np.uint64(o + j)] = out[np.uint64(o - n2 + j)] + v


@_jit
def scan_rows(x, at, s0, s1, s2, out, to, n0, n1, n2, prod):
    """The same for a short inner dim (the last dim's scan: 1): ``ROWS`` of the ``n0 * n2``
    rows at a time, one element of each in turn, so that their adds overlap (one row alone
    waits on each add: numpy's speed, ~2.3 ns an element)."""
    xs = np.empty(ROWS, np.int64)
    os = np.empty(ROWS, np.int64)
    rows = n0 * n2
    for r0 in range(0, rows, ROWS):
        m = min(ROWS, rows - r0)
        for k in range(m):
            a = (r0 + k) // n2
            j = r0 + k - a * n2
            xs[k] = at + a * s0 + j * s2
            os[k] = to + a * n1 * n2 + j
            out[np.uint64(os[k])] = x[np.uint64(xs[k])]
        for i in range(1, n1):
            for k in range(m):
                o = os[k] + i * n2
                v = x[np.uint64(xs[k] + i * s1)]
                if prod:
                    out[np.uint64(o)] = out[np.uint64(o - n2)] * v
                else:
                    out[np.uint64(o)] = out[np.uint64(o - n2)] + v
