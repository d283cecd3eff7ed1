"""Creating tensors: ``tensor`` (zero-copy over numpy), ``zeros ones full empty arange random``.

Imports ``tensor`` and below.
"""

from __future__ import annotations

import numpy as np

from . import expr as ex
from .axes import Axes, Axis, as_axes, parse_names
from .dtypes import as_dtype
from .errors import AxesError, fmt_axes, message
from .layout_ops import wrap_physical
from .storage import allocate, fresh, wrap_array
from .strided import contiguous
from .tensor import Tensor

__all__ = ["tensor", "zeros", "ones", "full", "empty", "arange", "random"]


def _axes_for_data(axes, shape: tuple[int, ...]) -> Axes:
    """Match an axes spec (Axes, Axis list, names, mixed) against a data shape."""
    if isinstance(axes, str):
        items = list(parse_names(axes, "tensor"))
    elif isinstance(axes, Axis):
        items = [axes]
    else:
        items = list(axes)
    if len(items) != len(shape):
        raise AxesError(
            message(
                "tensor",
                f"the data has {len(shape)} dimensions but {len(items)} axes were given",
                f"data shape {shape}; axes {' '.join(str(a) for a in items) or '()'}",
                "Give one axis per dimension of the data",
            )
        )
    out = []
    for item, n in zip(items, shape, strict=True):
        if isinstance(item, Axis):
            if item.length != n:
                raise AxesError(
                    message(
                        "tensor",
                        f"axis {item.name!r} has length {item.length} but the data has {n}",
                        f"data shape {shape}; axes {fmt_axes(items)}",
                        "Pass names only to take lengths from the data",
                    )
                )
            out.append(item)
        else:
            out.append(Axis(item, n))
    return Axes(out)


def tensor(data, axes, dtype=None, copy: bool = False, layout=None) -> Tensor:
    """Wrap data as a tensor with named axes; zero-copy over a numpy array.

    ``axes`` is a string of names (``"N C H W"``), or a sequence of names or ``Axis``
    objects (whose lengths must match the data). Writes through the tensor are visible in
    the array and back. Lists, scalars and arrays needing a dtype change are copied.

    >>> import axesarray as ax, numpy as np
    >>> a = np.zeros((2, 3))
    >>> x = ax.tensor(a, "N C")
    >>> x[{"C": 1}] = 5.0
    >>> a[0, 1]
    np.float64(5.0)

    With ``layout`` (``"NCHW4"``, an ``ax.Layout``...), ``data`` is the *physical* array
    and ``axes`` the logical axes; a blocked axis given as an ``Axis`` may be shorter than
    its padded length: ``ax.tensor(buf, (N, ax.Axis("C", 3), H, W), layout="NCHW4")``.
    """
    if isinstance(data, Tensor):
        data = data.numpy()
    arr = np.asarray(data) if dtype is None else np.asarray(data, dtype=as_dtype(dtype, "tensor"))
    as_dtype(arr.dtype, "tensor")
    if layout is not None:
        return wrap_physical(arr, axes, layout, copy)
    ax = _axes_for_data(axes, arr.shape)
    wrapped = None if copy else wrap_array(arr)
    if wrapped is None:
        buf = allocate(arr.size, arr.dtype)
        buf[...] = arr.reshape(-1)
        wrapped = (buf, contiguous(arr.shape))
    base, view = wrapped
    return Tensor(ax, ex.Leaf(base, view, bool(arr.flags.writeable)))


def _new(axes, dtype, fill) -> Tensor:
    ax = as_axes(axes, "create")
    dt = as_dtype(dtype, "create")
    data, view = fresh(ax.shape, dt)
    if fill is not None:
        data.fill(fill)
    return Tensor(ax, ex.Leaf(data, view))


def zeros(axes, dtype="float64") -> Tensor:
    """A new tensor of zeros.

    >>> import axesarray as ax
    >>> ax.zeros((ax.Axis("N", 2),), dtype="int8").numpy()
    array([0, 0], dtype=int8)
    """
    return _new(axes, dtype, 0)


def ones(axes, dtype="float64") -> Tensor:
    """A new tensor of ones."""
    return _new(axes, dtype, 1)


def empty(axes, dtype="float64") -> Tensor:
    """A new tensor whose values are whatever the memory held."""
    return _new(axes, dtype, None)


def full(axes, value, dtype=None) -> Tensor:
    """A new tensor filled with ``value``; the dtype defaults to numpy's for the value.

    >>> import axesarray as ax
    >>> ax.full((ax.Axis("N", 2),), 7).dtype
    dtype('int64')
    """
    dt = np.asarray(value).dtype if dtype is None else dtype
    return _new(axes, dt, value)


def arange(axis: Axis, dtype=None, start=0, step=1) -> Tensor:
    """Values ``start + step*i`` along one axis (int64 unless a dtype or float is given).

    >>> import axesarray as ax
    >>> ax.arange(ax.Axis("C", 4)).numpy()
    array([0, 1, 2, 3])
    """
    if not isinstance(axis, Axis):
        raise AxesError(message("arange", "expects one Axis", f"got {axis!r}", "ax.Axis('C', 4)"))
    values = np.arange(axis.length) * step + start
    if dtype is not None:
        values = values.astype(as_dtype(dtype, "arange"))
    return tensor(values, (axis,))


def random(axes, dtype="float64", seed=None) -> Tensor:
    """Uniform random values in [0, 1) (floats) from ``np.random.default_rng(seed)``.

    >>> import axesarray as ax
    >>> x = ax.random((ax.Axis("N", 3),), seed=0)
    >>> bool(((x >= 0) & (x < 1)).all())
    True
    """
    ax = as_axes(axes, "random")
    dt = as_dtype(dtype, "random")
    rng = np.random.default_rng(seed)
    if dt.kind != "f":
        raise TypeError(message("random", "only float dtypes are supported", str(dt)))
    values = rng.random(ax.shape, dtype=np.float64 if dt.itemsize == 2 else dt).astype(dt)
    return tensor(values, ax)
