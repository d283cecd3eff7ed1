"""Positional ``__getitem__`` / ``__setitem__`` of the array API on named tensors.

Basic keys (integers, slices, ``...``, ``None``) are views of the tensor, lazy on a lazy
array; integer-array and boolean-mask keys are numpy's advanced indexing, run on the
array's value (their result shape can depend on the data)."""

from __future__ import annotations

import operator

import numpy as np

from ..core.axes import Axis
from ..errors import message
from ._array import HOOKS, Array, asarray, names_for, wrap

__all__ = ["getitem", "setitem"]


def _is_basic(k) -> bool:
    return (
        k is None
        or k is Ellipsis
        or isinstance(k, slice)
        or (isinstance(k, int | np.integer) and not isinstance(k, bool | np.bool_))
        or (isinstance(k, Array) and k.ndim == 0 and k.dtype.kind in "iu")
    )


def _expand(key, ndim: int, op: str):
    """The key as one entry per source axis, plus where ``None`` inserts axes."""
    if not isinstance(key, tuple):
        key = (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError(message(op, "more than one ellipsis", repr(key)))
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexError(
            message(
                op, "too many indices", f"{used} for {ndim} dimensions", "Index at most ndim axes"
            )
        )
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(k)
    if not any(k is Ellipsis for k in key):
        out.extend([slice(None)] * (ndim - used))
    return out


def getitem(x: Array, key) -> Array:
    if isinstance(x._t, np.ndarray):  # complex: numpy's indexing (views stay views)
        return Array._new(np.asarray(x._t[_np_key(key)]))
    keys = key if isinstance(key, tuple) else (key,)
    if not all(_is_basic(k) for k in keys):
        gathered = _one_list(x, keys)
        return gathered if gathered is not None else _advanced(x, key)
    entries = _expand(key, x.ndim, "__getitem__")
    t = x._t
    if all(isinstance(k, slice) and k == slice(None) for k in entries):
        return x
    scalar = all(k is not None and not isinstance(k, slice) for k in entries)
    if scalar and not t.is_lvalue:
        # one element of a lazy array: computing the whole value once beats one kernel
        # per element when elements are read one by one
        x._value()
        t = x._t
    names = names_for(x.ndim)
    sel = {}
    pos = 0  # source axis
    inserted = []  # result positions of new axes
    out_pos = 0
    for k in entries:
        if k is None:
            inserted.append(out_pos)
            out_pos += 1
            continue
        name = names[pos]
        length = x.shape[pos]
        pos += 1
        if isinstance(k, slice):
            if k != slice(None):
                sel[name] = k
            out_pos += 1
        else:
            i = operator.index(k)
            if not -length <= i < length:
                raise IndexError(
                    message(
                        "__getitem__",
                        f"index {i} is out of range for axis {pos - 1}",
                        f"length {length}",
                    )
                )
            sel[name] = i
    if sel:
        t = t.isel(sel)
    if inserted:
        # temporary names keep the order while axes are inserted, then wrap renames by position
        tmp = [f"q{i}" for i in range(len(t.axes))]
        t = t.rename(dict(zip(t.names, tmp, strict=True)))
        for j, p in enumerate(inserted):
            t = t.expand_dims(Axis(f"n{j}", 1), position=p)
    return wrap(t)


def _one_list(x: Array, keys):
    """One 1-D integer list along one axis, the other entries slices (what xarray sends
    for ``isel(dim=[...])``): the engine's gather, lazy like numpy's result."""
    if any(k is None for k in keys) or any(
        k is not Ellipsis and not isinstance(k, slice) and _is_basic(k) for k in keys
    ):
        return None
    adv = [k for k in keys if not _is_basic(k)]
    if len(adv) != 1:
        return None
    idx = np.asarray(adv[0]._value() if isinstance(adv[0], Array) else adv[0])
    if idx.ndim != 1 or idx.dtype.kind not in "iu" or (idx.size == 0 and idx.dtype.kind != "i"):
        return None
    entries = _expand(keys, x.ndim, "__getitem__")
    names = names_for(x.ndim)
    sel = {}
    for name, k in zip(names, entries, strict=True):
        if isinstance(k, slice):
            if k != slice(None):
                sel[name] = k
        else:
            length = x._t.axes[name].length
            if idx.size and not (-length <= idx.min() and idx.max() < length):
                return None  # numpy's IndexError
            sel[name] = [int(i) for i in idx]
    return wrap(x._t.isel(sel))


def _np_key(key):
    if isinstance(key, tuple):
        return tuple(_np_key(k) for k in key)
    if isinstance(key, Array):
        return np.asarray(key)
    return key


def _advanced(x: Array, key) -> Array:
    out = x._value()[_np_key(key)]
    return asarray(np.array(out, copy=True))


def setitem(x: Array, key, value) -> None:
    """numpy's assignment on the array's memory (a lazy array is computed first)."""
    a = x._value()
    if not a.flags.writeable:
        a = np.array(a)
        x._t = asarray(a)._t
        a = x._value()
    if isinstance(value, Array):
        v = value._value()
    elif isinstance(value, bool | int | float | complex):
        if isinstance(value, float) and x.dtype.kind in "iub":
            raise TypeError(
                message("__setitem__", "a float value for an integer array", f"dtype {x.dtype}")
            )
        v = value
    else:
        v = np.asarray(value)
    a[_np_key(key)] = v


HOOKS["getitem"] = getitem
HOOKS["setitem"] = setitem
