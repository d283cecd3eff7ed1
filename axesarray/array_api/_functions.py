"""Statistical, searching, sorting, set, manipulation, indexing and linear algebra
functions of the array API namespace, over the named engine.

Lazy (fused) where the engine has the operation: reductions, views (permute_dims,
expand_dims, squeeze, flip, broadcast_to, reshape through flatten/split), concat/stack,
cumulative sums, sort/argsort. The rest (set functions,
nonzero, searchsorted, repeat, tile, roll, take...) computes its inputs and runs numpy:
their shapes depend on the data, or the engine has no node for them.
"""

from __future__ import annotations

import builtins as _b
import math
import operator

import numpy as np

from ..core.axes import Axis
from ..errors import message
from ..functions import concat as _concat
from ..functions import pad as _pad
from ._array import (
    HOOKS,
    Array,
    _check_dtype,
    asarray,
    astype,
    broadcast_operands,
    broadcast_shape,
    names_for,
    wrap,
)
from ._creation import _arr, _axes, _eager, _pos, exporter, not_equal, result_type

__all__: list[str] = []
export = exporter(__all__, globals())


# --- statistical ---------------------------------------------------------------------------


def _reduce(method, x, axis, keepdims, op, dtype=None):
    x = _arr(x, op)
    names = _axes(x, axis, op)
    dt = None if dtype is None else _check_dtype(dtype, op)
    t = x._t if dt is None else x._t.astype(dt)
    if not names:
        return Array._new(t)
    r = getattr(t, method)(names, keepdims=keepdims)
    # the engine sums integers in (u)int64; an asked dtype is the result's
    return wrap(r if dt is None or r.dtype == dt else r.astype(dt))


def _sum_dtype(x, dtype):
    if dtype is not None:
        return dtype
    if x.dtype.kind == "b" or x.dtype.kind == "i":
        return np.int64 if x.dtype != np.int64 else None
    if x.dtype.kind == "u":
        return np.uint64 if x.dtype != np.uint64 else None
    return None


@export
def sum(x, /, *, axis=None, dtype=None, keepdims=False) -> Array:  # noqa: A001
    x = _arr(x, "sum")
    return _reduce("sum", x, axis, keepdims, "sum", _sum_dtype(x, dtype))


@export
def prod(x, /, *, axis=None, dtype=None, keepdims=False) -> Array:
    x = _arr(x, "prod")
    return _reduce("prod", x, axis, keepdims, "prod", _sum_dtype(x, dtype))


@export
def max(x, /, *, axis=None, keepdims=False) -> Array:  # noqa: A001
    return _reduce("max", x, axis, keepdims, "max")


@export
def min(x, /, *, axis=None, keepdims=False) -> Array:  # noqa: A001
    return _reduce("min", x, axis, keepdims, "min")


@export
def mean(x, /, *, axis=None, keepdims=False) -> Array:
    return _reduce("mean", x, axis, keepdims, "mean")


@export
def var(x, /, *, axis=None, correction=0.0, keepdims=False, ddof=None) -> Array:
    # ddof: numpy's (and xarray's) name for correction
    correction = correction if ddof is None else ddof
    x = _arr(x, "var")
    names = _axes(x, axis, "var")
    return wrap(x._t.var(names, ddof=correction, keepdims=keepdims))


@export
def std(x, /, *, axis=None, correction=0.0, keepdims=False, ddof=None) -> Array:
    # ddof: numpy's (and xarray's) name for correction
    correction = correction if ddof is None else ddof
    x = _arr(x, "std")
    names = _axes(x, axis, "std")
    return wrap(x._t.std(names, ddof=correction, keepdims=keepdims))


@export
def all(x, /, *, axis=None, keepdims=False) -> Array:  # noqa: A001
    return _reduce("all", x, axis, keepdims, "all")


@export
def any(x, /, *, axis=None, keepdims=False) -> Array:  # noqa: A001
    return _reduce("any", x, axis, keepdims, "any")


def _cumulative(method, x, axis, dtype, include_initial, op, initial):
    x = _arr(x, op)
    if axis is None:
        if x.ndim > 1:
            raise ValueError(
                message(op, "axis is required for more than one dimension", f"ndim={x.ndim}")
            )
        axis = 0
    if x.ndim == 0:
        raise ValueError(message(op, "a 0-d array has no axis", ""))
    name = _axes(x, axis, op)[0]
    t = x._t.astype(_check_dtype(dtype, op)) if dtype is not None else x._t
    sd = _sum_dtype(x, None) if dtype is None else None
    if sd is not None:
        t = t.astype(sd)
    out = getattr(t, method)(name)
    if dtype is not None and out.dtype != np.dtype(dtype):
        out = out.astype(dtype)  # the engine accumulates integers in 64 bits
    if include_initial:
        out = _pad(out, **{name: (1, 0)}, value=initial)
    return Array._new(out)


@export
def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False) -> Array:
    return _cumulative("cumsum", x, axis, dtype, include_initial, "cumulative_sum", 0)


@export
def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False) -> Array:
    return _cumulative("cumprod", x, axis, dtype, include_initial, "cumulative_prod", 1)


@export
def diff(x, /, *, axis=-1, n=1, prepend=None, append=None) -> Array:
    x = _arr(x, "diff")
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = concat([asarray(p) if not isinstance(p, Array) else p for p in parts], axis=axis)
    a = _pos(x, axis, "diff")
    for _ in range(n):
        hi = [slice(None)] * x.ndim
        lo = [slice(None)] * x.ndim
        hi[a] = slice(1, None)
        lo[a] = slice(None, -1)
        x = (
            x[tuple(hi)] - x[tuple(lo)]
            if x.dtype != np.bool_
            else not_equal(x[tuple(hi)], x[tuple(lo)])
        )
    return x


# --- searching -----------------------------------------------------------------------------


def _arg(method, x, axis, keepdims, op):
    x = _arr(x, op)
    if axis is None:
        flat = reshape(x, (-1,))
        out = getattr(flat._t, method)("m1")
        out = Array._new(out)
        if keepdims:
            out = reshape(out, (1,) * x.ndim)
        return out
    name = _axes(x, axis, op)[0]
    return wrap(getattr(x._t, method)(name, keepdims=keepdims))


@export
def argmax(x, /, *, axis=None, keepdims=False) -> Array:
    return _arg("argmax", x, axis, keepdims, "argmax")


@export
def argmin(x, /, *, axis=None, keepdims=False) -> Array:
    return _arg("argmin", x, axis, keepdims, "argmin")


@export
def count_nonzero(x, /, *, axis=None, keepdims=False) -> Array:
    x = _arr(x, "count_nonzero")
    return sum(astype(x != 0, np.int64), axis=axis, keepdims=keepdims)


@export
def nonzero(x, /) -> tuple[Array, ...]:
    x = _arr(x, "nonzero")
    if x.ndim == 0:
        raise ValueError(message("nonzero", "a 0-d array has no positions", "", "Use x[None]"))
    return tuple(asarray(np.array(i, dtype=np.int64)) for i in np.nonzero(np.asarray(x)))


@export
def searchsorted(x1, x2, /, *, side="left", sorter=None) -> Array:
    x1, x2 = np.asarray(x1), np.asarray(x2)
    s = None if sorter is None else np.asarray(sorter)
    return asarray(np.searchsorted(x1, x2, side=side, sorter=s).astype(np.int64))


# --- sorting ---------------------------------------------------------------------------------


@export
def sort(x, /, *, axis=-1, descending=False, stable=True) -> Array:
    x = _arr(x, "sort")
    name = _axes(x, axis, "sort")[0]
    out = Array._new(x._t.sort(name))
    return flip(out, axis=axis) if descending else out


@export
def argsort(x, /, *, axis=-1, descending=False, stable=True) -> Array:
    x = _arr(x, "argsort")
    name = _axes(x, axis, "argsort")[0]
    if not descending:
        return Array._new(x._t.argsort(name))
    # stable descending order: sort the reversed array, map indices back, reverse
    r = flip(x, axis=axis)
    idx = Array._new(r._t.argsort(name))
    n = x.shape[_pos(x, axis, "argsort")]
    return flip((n - 1) - idx, axis=axis)


# --- set functions (data-dependent shapes: computed) -------------------------------------------


def _unique(x, **kw):
    a = np.asarray(_arr(x, "unique")).reshape(-1)
    return np.unique(a, equal_nan=False, **kw)


@export
def unique_values(x, /) -> Array:
    return asarray(_unique(x))


@export
def unique_counts(x, /):
    v, c = _unique(x, return_counts=True)
    from collections import namedtuple

    return namedtuple("UniqueCountsResult", ["values", "counts"])(
        asarray(v), asarray(c.astype(np.int64))
    )


@export
def unique_inverse(x, /):
    v, i = _unique(x, return_inverse=True)
    from collections import namedtuple

    return namedtuple("UniqueInverseResult", ["values", "inverse_indices"])(
        asarray(v), asarray(i.reshape(x.shape).astype(np.int64))
    )


@export
def unique_all(x, /):
    v, idx, inv, c = _unique(x, return_index=True, return_inverse=True, return_counts=True)
    from collections import namedtuple

    return namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])(
        asarray(v),
        asarray(idx.astype(np.int64)),
        asarray(inv.reshape(x.shape).astype(np.int64)),
        asarray(c.astype(np.int64)),
    )


# --- manipulation ------------------------------------------------------------------------


@export
def broadcast_to(x, /, shape) -> Array:
    x = _arr(x, "broadcast_to")
    shape = tuple(shape)
    if broadcast_shape([x.shape, shape], "broadcast_to") != shape:
        raise ValueError(
            message(
                "broadcast_to", "the array does not broadcast to the shape", f"{x.shape} -> {shape}"
            )
        )
    if shape == x.shape:
        return x
    (t,), n = broadcast_operands([x], "broadcast_to")
    drop = {
        f"m{x.ndim - i}": 0
        for i, ln in enumerate(x.shape)
        if ln == 1 and shape[len(shape) - x.ndim + i] != 1
    }
    t = x._t.isel(drop) if drop else x._t
    axes = tuple(Axis(nm, ln) for nm, ln in zip(names_for(len(shape)), shape, strict=True))
    return Array._new(t.broadcast_to(axes))


@export
def meshgrid(*arrays, indexing="xy") -> list[Array]:
    if indexing not in ("xy", "ij"):
        raise ValueError(message("meshgrid", "indexing must be 'xy' or 'ij'", repr(indexing)))
    arrays = [_arr(a, "meshgrid") for a in arrays]
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    n = len(arrays)
    for i, a in enumerate(arrays):
        p = i
        if indexing == "xy" and n >= 2 and i < 2:
            p = 1 - i
        idx = [None] * n
        idx[p] = slice(None)
        out.append(broadcast_to(a[tuple(idx)], tuple(shape)))
    return out


@export
def broadcast_arrays(*arrays) -> list[Array]:
    shape = broadcast_shape([a.shape for a in arrays], "broadcast_arrays")
    return [broadcast_to(a, shape) for a in arrays]


@export
def broadcast_shapes(*shapes) -> tuple[int, ...]:
    return broadcast_shape(shapes, "broadcast_shapes")


@export
def concat(arrays, /, *, axis=0) -> Array:
    arrays = [_arr(a, "concat") for a in arrays]
    dt = result_type(*arrays)
    arrays = [a if a.dtype == dt else astype(a, dt) for a in arrays]
    if axis is None:
        arrays = [reshape(a, (-1,)) for a in arrays]
        axis = 0
    nd = arrays[0].ndim
    if nd == 0 or _b.any(a.ndim != nd for a in arrays):
        raise ValueError(
            message(
                "concat",
                "arrays must have the same number of dimensions (at least 1)",
                str([a.shape for a in arrays]),
            )
        )
    name = f"m{nd - _pos(arrays[0], axis, 'concat')}"
    if len(arrays) == 1:
        return arrays[0]
    return Array._new(_concat([a._t for a in arrays], name))


@export
def stack(arrays, /, *, axis=0) -> Array:
    arrays = [_arr(a, "stack") for a in arrays]
    a0 = arrays[0]
    p = _pos(a0, axis, "stack", extra=1)
    return concat([expand_dims(a, axis=p) for a in arrays], axis=p)


@export
def expand_dims(x, /, axis=0) -> Array:
    x = _arr(x, "expand_dims")
    axs = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    n = x.ndim + len(axs)
    pos = sorted(
        operator.index(a) % n if -n <= a < n else _pos(x, a, "expand_dims", len(axs)) for a in axs
    )
    if len(set(pos)) != len(pos):
        raise ValueError(message("expand_dims", "an axis is repeated", repr(axis)))
    key = []
    src = 0
    for i in range(n):
        if i in pos:
            key.append(None)
        else:
            key.append(slice(None))
            src += 1
    return x[tuple(key)]


@export
def flip(x, /, *, axis=None) -> Array:
    x = _arr(x, "flip")
    names = _axes(x, axis, "flip")
    if not names:
        return x
    return Array._new(x._t.isel({n: slice(None, None, -1) for n in names}))


@export
def moveaxis(x, source, destination, /) -> Array:
    x = _arr(x, "moveaxis")
    src = [_pos(x, s, "moveaxis") for s in ((source,) if isinstance(source, int) else source)]
    dst = [
        _pos(x, d, "moveaxis")
        for d in ((destination,) if isinstance(destination, int) else destination)
    ]
    if len(src) != len(dst):
        raise ValueError(
            message("moveaxis", "source and destination differ in length", f"{src} and {dst}")
        )
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return permute_dims(x, tuple(order))


@export
def permute_dims(x, /, axes) -> Array:
    x = _arr(x, "permute_dims")
    axes = tuple(_pos(x, a, "permute_dims") for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(
            message("permute_dims", "axes must be a permutation", repr(axes), f"ndim={x.ndim}")
        )
    if axes == tuple(range(x.ndim)):
        return x  # the same view: reading the same leaf lets the planner share work
    names = names_for(x.ndim)
    return wrap(x._t.transpose(*(names[a] for a in axes)))


@export
def matrix_transpose(x, /) -> Array:
    x = _arr(x, "matrix_transpose")
    if x.ndim < 2:
        raise ValueError(
            message("matrix_transpose", "needs at least 2 dimensions", f"ndim={x.ndim}")
        )
    return permute_dims(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


@export
def reshape(x, /, shape, *, copy=None) -> Array:
    x = _arr(x, "reshape")
    shape = tuple(operator.index(s) for s in shape)
    if shape.count(-1) > 1:
        raise ValueError(message("reshape", "at most one -1", repr(shape)))
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or x.size % known:
            raise ValueError(message("reshape", "cannot infer -1", f"{x.shape} -> {shape}"))
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    if math.prod(shape) != x.size:
        raise ValueError(message("reshape", "the sizes differ", f"{x.shape} -> {shape}"))
    if shape == x.shape:
        return Array._new(x._t.copy()) if copy else x
    t = x._t
    if x.ndim == 0:
        t = t.expand_dims(Axis("m1", 1))
    elif x.ndim > 1:
        t = t.flatten(t.names, "m1", copy=False if copy is False else None)
    else:
        pass
    if copy:
        t = t.copy()
    if len(shape) == 0:
        return wrap(t.isel(m1=0))
    if len(shape) == 1:
        return wrap(t)
    t = t.rename(m1="flat")
    return wrap(t.split("flat", tuple(Axis(f"s{i}", s) for i, s in enumerate(shape))))


@export
def roll(x, /, shift, *, axis=None) -> Array:
    return _eager(np.roll, x, shift, axis=axis)


@export
def squeeze(x, /, axis) -> Array:
    x = _arr(x, "squeeze")
    names = _axes(x, axis, "squeeze")
    for n in names:
        if x._t.axes[n].length != 1:
            raise ValueError(
                message(
                    "squeeze",
                    f"axis {x.ndim - int(n[1:])} has length {x._t.axes[n].length}",
                    "only length-1 axes can be removed",
                )
            )
    return wrap(x._t.isel({n: 0 for n in names})) if names else x


@export
def repeat(x, repeats, /, *, axis=None) -> Array:
    r = np.asarray(repeats) if isinstance(repeats, Array) else repeats
    return _eager(np.repeat, x, r, axis=axis)


@export
def tile(x, repetitions, /) -> Array:
    return _eager(np.tile, x, tuple(repetitions))


@export
def unstack(x, /, *, axis=0) -> tuple[Array, ...]:
    x = _arr(x, "unstack")
    a = _pos(x, axis, "unstack")
    key = [slice(None)] * x.ndim
    out = []
    for i in range(x.shape[a]):
        key[a] = i
        out.append(x[tuple(key)])
    return tuple(out)


# --- indexing functions ----------------------------------------------------------------------


@export
def take(x, indices, /, *, axis=None) -> Array:
    x = _arr(x, "take")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(
                message("take", "axis is required for more than one dimension", f"ndim={x.ndim}")
            )
        axis = 0
    return _eager(np.take, x, indices, axis=axis)


@export
def take_along_axis(x, indices, /, *, axis=-1) -> Array:
    return _eager(np.take_along_axis, x, indices, axis=axis)


HOOKS["matrix_transpose"] = matrix_transpose
