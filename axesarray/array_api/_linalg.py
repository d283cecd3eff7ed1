"""Linear algebra of the array API namespace: ``matmul``, ``tensordot``, ``vecdot``.

Positional axes become named ones (the contracted pair shares a name, batch axes keep
theirs and broadcast by name), so each is one ``ax.dot`` (BLAS) or a fused reduction.
"""

from __future__ import annotations

import builtins as _b

import numpy as np

from ..errors import message
from ..functions import dot as _dot
from ._array import HOOKS, Array, broadcast_shape, names_for, wrap
from ._creation import _arr, _pos, exporter, result_type
from ._functions import sum  # noqa: A004 - the namespace's sum

__all__: list[str] = []
export = exporter(__all__, globals())


# --- linear algebra ----------------------------------------------------------------------------


@export
def matmul(x1, x2, /) -> Array:
    x1, x2 = _arr(x1, "matmul"), _arr(x2, "matmul")
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(
            message(
                "matmul",
                "0-d arrays cannot be multiplied as matrices",
                f"{x1.shape} @ {x2.shape}",
                "Use multiply",
            )
        )
    a, b = x1, x2
    if a.ndim == 1:
        a = a[None, :]
    if b.ndim == 1:
        b = b[:, None]
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            message("matmul", "the contracted lengths differ", f"{x1.shape} @ {x2.shape}")
        )
    batch = broadcast_shape([a.shape[:-2], b.shape[:-2]], "matmul")
    # batch axes broadcast by name (length-1 ones dropped); the matrix axes get own names
    ta = _drop_batch(a, batch).rename(m2="mm_i", m1="mm_k")
    tb = _drop_batch(b, batch).rename(m2="mm_k", m1="mm_j")
    dt = result_type(x1, x2)
    if dt == np.bool_:
        ta, tb = ta.astype(np.int64), tb.astype(np.int64)
    t = _dot(ta, tb, over="mm_k")
    nb = len(batch)
    order = names_for(nb + 2)[:nb] + ("mm_i", "mm_j")
    t = t.transpose(*order)
    if dt == np.bool_:
        t = t.astype(np.bool_)
    elif t.dtype != dt:
        t = t.astype(dt)
    out = wrap(t)
    if x1.ndim == 1:
        out = out[..., 0, :]
    if x2.ndim == 1:
        out = out[..., 0]
    return out


def _drop_batch(a: Array, batch) -> object:
    nb = len(batch)
    drop = {}
    for i, ln in enumerate(a.shape[:-2]):
        if ln == 1 and batch[nb - (a.ndim - 2) + i] != 1:
            drop[f"m{a.ndim - i}"] = 0
    return a._t.isel(drop) if drop else a._t


@export
def tensordot(x1, x2, /, *, axes=2) -> Array:
    x1, x2 = _arr(x1, "tensordot"), _arr(x2, "tensordot")
    if isinstance(axes, int):
        if axes < 0:
            raise ValueError(message("tensordot", "axes must be non-negative", repr(axes)))
        ax1 = list(range(x1.ndim - axes, x1.ndim))
        ax2 = list(range(axes))
    else:
        ax1 = [_pos(x1, a, "tensordot") for a in axes[0]]
        ax2 = [_pos(x2, a, "tensordot") for a in axes[1]]
    n1, n2 = names_for(x1.ndim), names_for(x2.ndim)
    ren1 = {n1[p]: f"c{i}" for i, p in enumerate(ax1)}
    ren2 = {n2[p]: f"c{i}" for i, p in enumerate(ax2)}
    t1, t2 = x1._t, x2._t
    # contracted length-1 axes broadcast against the other side
    drop1 = {
        n1[p]: 0 for p, q in zip(ax1, ax2, strict=True) if x1.shape[p] == 1 and x2.shape[q] != 1
    }
    drop2 = {
        n2[q]: 0 for p, q in zip(ax1, ax2, strict=True) if x2.shape[q] == 1 and x1.shape[p] != 1
    }
    free1 = [n for i, n in enumerate(n1) if i not in ax1]
    free2 = [n for i, n in enumerate(n2) if i not in ax2]
    ren1.update({n: f"a{i}" for i, n in enumerate(free1)})
    ren2.update({n: f"b{i}" for i, n in enumerate(free2)})
    t1 = t1.rename({k: v for k, v in ren1.items() if k != v})
    t2 = t2.rename({k: v for k, v in ren2.items() if k != v})
    dt = result_type(x1, x2)
    over = [f"c{i}" for i in range(len(ax1))]
    both = [
        c for c in over if c not in [ren1[k] for k in drop1] and c not in [ren2[k] for k in drop2]
    ]
    t1 = t1.isel({ren1[k]: 0 for k in drop1}) if drop1 else t1
    t2 = t2.isel({ren2[k]: 0 for k in drop2}) if drop2 else t2
    if not over:
        t = t1 * t2
    else:
        one_side = [c for c in over if c not in both]
        for c in one_side:
            if c in t1.names:
                t1 = t1.sum(c)
            else:
                t2 = t2.sum(c)
        t = _dot(t1, t2, over=both) if both else t1 * t2
    order = [f"a{i}" for i in range(len(free1))] + [f"b{i}" for i in range(len(free2))]
    t = t.transpose(*order) if order else t
    if t.dtype != dt:
        t = t.astype(dt)
    return wrap(t)


@export
def vecdot(x1, x2, /, *, axis=-1) -> Array:
    x1, x2 = _arr(x1, "vecdot"), _arr(x2, "vecdot")
    n = _b.max(x1.ndim, x2.ndim)
    if not -_b.min(x1.ndim, x2.ndim) <= axis < 0:
        raise ValueError(
            message("vecdot", "axis must be negative and within both arrays", repr(axis))
        )
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(
            message("vecdot", "the contracted lengths differ", f"{x1.shape} and {x2.shape}")
        )
    p = x1 * x2
    return sum(p, axis=axis % n, dtype=p.dtype)


HOOKS["matmul"] = matmul
