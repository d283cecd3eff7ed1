"""Creating tensors: ``tensor`` (zero-copy over numpy), ``zeros ones full empty arange random``,
and from other libraries: ``from_dlpack``, ``from_xarray``.

Imports ``tensor`` and below.
"""

from __future__ import annotations

import reprlib

import numpy as np

from .core.axes import Axis, as_axes, axes_for_shape
from .core.dtypes import as_dtype
from .core.strided import contiguous
from .dag import nodes as ex
from .errors import AxesError, message
from .layout_ops import new_in_layout, wrap_physical
from .storage.memory import allocate, fresh, wrap_array
from .tensors.interop import bfloat16_from_dlpack
from .tensors.tensor import Tensor

__all__ = [
    "tensor",
    "zeros",
    "ones",
    "full",
    "empty",
    "arange",
    "random",
    "from_dlpack",
    "from_xarray",
]

_PIECE = 1 << 16  # elements per piece when a fill goes through numpy temporaries


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
    _refuse_tracked(data, "tensor")
    if not isinstance(data, np.ndarray) and _bf16_producer(data):
        data = bfloat16_from_dlpack(data)  # torch refuses np.asarray of bfloat16
    arr = _as_array(data, None if dtype is None else as_dtype(dtype, "tensor"))
    as_dtype(arr.dtype, "tensor")
    if layout is not None:
        return wrap_physical(arr, axes, layout, copy)
    ax = axes_for_shape(axes, arr.shape)
    wrapped = None if copy else wrap_array(arr)
    if wrapped is None:
        buf = allocate(arr.size, arr.dtype, axes=ax, op="tensor")
        buf[...] = arr.reshape(-1)
        wrapped = (buf, contiguous(arr.shape))
    base, view = wrapped
    leaf = ex.Leaf(base, view, bool(arr.flags.writeable))
    ex.name_dims(leaf, ax.names)  # what explain calls its dims, wherever it is read
    return Tensor(ax, leaf)


def _refuse_tracked(data, op: str) -> None:
    """A torch tensor that requires grad: torch refuses to export it; say what to do.

    Not detached silently: the result would not carry torch's gradient, and a user who
    expects ``loss.backward()`` to reach the torch tensor would get nothing.
    """
    if getattr(data, "requires_grad", False) is True and hasattr(data, "detach"):
        raise TypeError(
            message(
                op,
                "the torch tensor requires grad; axesarray cannot record torch's autograd",
                f"shape {tuple(data.shape)}, {data.dtype}",
                "Pass t.detach() (shares memory, no gradient), or use ax.variable for "
                "axesarray's own gradients",
            )
        )


def _bf16_producer(data) -> bool:
    """A DLPack producer of bfloat16 (a torch or JAX array), which numpy cannot read."""
    return hasattr(data, "__dlpack__") and "bfloat16" in str(getattr(data, "dtype", ""))


def _ragged(data) -> str | None:
    """Where nested sequences stop being rectangular, e.g. ``lengths 1, 2 after shape (2,)``."""
    level, shape = [data], []
    while True:
        seq = [
            isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.ndim) for x in level
        ]
        if not any(seq):
            return None
        if not all(seq):
            return f"lists mixed with scalars after shape {tuple(shape)}"
        lengths = sorted({len(x) for x in level})
        if len(lengths) > 1:
            return f"lengths {', '.join(map(str, lengths))} after shape {tuple(shape)}"
        shape.append(lengths[0])
        level = [y for x in level for y in x]


def _as_array(data, dtype) -> np.ndarray:
    """``np.asarray`` with our errors for ragged lists and values the dtype cannot hold."""
    try:
        return np.asarray(data) if dtype is None else np.asarray(data, dtype=dtype)
    except (ValueError, TypeError, OverflowError):
        where = _ragged(data)
        if where is not None:
            raise AxesError(
                message(
                    "tensor",
                    "the nested lists are ragged, so they have no shape",
                    where,
                    "Give every list at one depth the same length",
                )
            ) from None
        raise TypeError(
            message(
                "tensor",
                f"the data cannot be converted to {dtype or 'a numeric dtype'}",
                reprlib.repr(data),
                "Pass numbers that fit the dtype",
            )
        ) from None


def _new(axes, dtype, fill, op: str = "create", layout=None, roles=None) -> Tensor:
    if layout is not None:
        return new_in_layout(axes, dtype, layout, fill, op, roles or {})
    if roles:
        raise TypeError(
            message(
                op,
                "role keywords map a layout's letters to axis names; no layout was given",
                ", ".join(f"{k}={v!r}" for k, v in roles.items()),
                "Add layout=, e.g. layout='NHWC'",
            )
        )
    # Plain allocations keep their historical op name in messages ("create: ...").
    ax = as_axes(axes, "create")
    dt = as_dtype(dtype, "create")
    data, view = fresh(ax.shape, dt, axes=ax, op="create")
    if fill is not None:
        data.fill(fill)
    leaf = ex.Leaf(data, view)
    ex.name_dims(leaf, ax.names)  # what explain calls its dims, wherever it is read
    return Tensor(ax, leaf)


def zeros(axes, dtype="float64", layout=None, **roles) -> Tensor:
    """A new tensor of zeros, stored in ``layout`` when given (``"NCHW4"``, ``"NHWC"``, an
    ``ax.Layout``; role keywords map its letters to axis names, as for ``to_layout``).

    >>> import axesarray as ax
    >>> ax.zeros((ax.Axis("N", 2),), dtype="int8").numpy()
    array([0, 0], dtype=int8)
    >>> N, C, H, W = ax.Axis("N", 1), ax.Axis("C", 3), ax.Axis("H", 2), ax.Axis("W", 2)
    >>> z = ax.zeros((N, C, H, W), "int8", layout="NCHW4")
    >>> str(z.layout), z.physical.shape
    ('NCHW4', (1, 1, 2, 2, 4))
    """
    return _new(axes, dtype, 0, "zeros", layout, roles)


def ones(axes, dtype="float64", layout=None, **roles) -> Tensor:
    """A new tensor of ones (in ``layout`` when given; its padding stays zero).

    >>> import axesarray as ax
    >>> ax.ones((ax.Axis("N", 2), ax.Axis("C", 3)), dtype="float32").sum("C").numpy()
    array([3., 3.], dtype=float32)
    >>> o = ax.ones((ax.Axis("N", 1), ax.Axis("C", 3)), "int8", ax.Layout("N C", {"C": 4}))
    >>> o.physical.ravel()
    array([1, 1, 1, 0], dtype=int8)
    """
    return _new(axes, dtype, 1, "ones", layout, roles)


def empty(axes, dtype="float64", layout=None, **roles) -> Tensor:
    """A new tensor whose values are whatever the memory held (fill it before reading);
    in ``layout`` when given (padding zero).

    >>> import axesarray as ax
    >>> t = ax.empty((ax.Axis("N", 3),), dtype="int32")
    >>> t[...] = 7
    >>> t.numpy()
    array([7, 7, 7], dtype=int32)
    >>> b, f, y, x = ax.Axis("b", 2), ax.Axis("f", 8), ax.Axis("y", 4), ax.Axis("x", 4)
    >>> e = ax.empty((b, f, y, x), "float32", layout="NHWC", N="b", C="f", H="y", W="x")
    >>> e.physical.shape
    (2, 4, 4, 8)
    """
    return _new(axes, dtype, None, "empty", layout, roles)


def full(axes, value, dtype=None, layout=None, **roles) -> Tensor:
    """A new tensor filled with ``value``; the dtype defaults to numpy's for the value;
    in ``layout`` when given (padding zero).

    >>> import axesarray as ax
    >>> ax.full((ax.Axis("N", 2),), 7).dtype
    dtype('int64')
    """
    dt = np.asarray(value).dtype if dtype is None else dtype
    return _new(axes, dt, value, "full", layout, roles)


def arange(axis: Axis, dtype=None, start=0, step=1) -> Tensor:
    """Values ``start + step*i`` along one axis (int64 unless a dtype or float is given).

    >>> import axesarray as ax
    >>> ax.arange(ax.Axis("C", 4)).numpy()
    array([0, 1, 2, 3])
    """
    if not isinstance(axis, Axis):
        raise AxesError(message("arange", "expects one Axis", f"got {axis!r}", "ax.Axis('C', 4)"))
    natural = (np.arange(0) * step + start).dtype  # numpy's dtype for these step and start
    dt = as_dtype(natural if dtype is None else dtype, "arange")
    n = axis.length
    buf = allocate(n, dt, axes=(axis,), op="arange")
    for i in range(0, n, _PIECE):  # numpy's temporaries stay a piece long
        j = min(i + _PIECE, n)
        buf[i:j] = np.arange(i, j) * step + start
    return tensor(buf, (axis,))


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
    if dt.kind not in "fV":  # V: bfloat16
        raise TypeError(message("random", "only float dtypes are supported", str(dt)))
    buf = allocate(ax.size, dt, axes=ax, op="random")
    if dt.itemsize == 2:  # numpy draws no float16: draw float64 a piece at a time and round
        for i in range(0, buf.size, _PIECE):
            j = min(i + _PIECE, buf.size)
            buf[i:j] = rng.random(j - i)
    else:
        rng.random(out=buf, dtype=dt)
    return tensor(buf.reshape(ax.shape), ax)


def from_dlpack(obj, axes) -> Tensor:
    """A tensor sharing the memory of any DLPack producer (torch, CuPy on the host, numpy,
    JAX...): ``axes`` name its dims in order, as for ``ax.tensor``.

    Only host (CPU) memory is read this way; a device tensor must first be moved to the
    host by its library (``t.cpu()``).

    >>> import axesarray as ax, numpy as np
    >>> a = np.arange(6.0).reshape(2, 3)
    >>> x = ax.from_dlpack(a.T, "C N")
    >>> x.names, np.shares_memory(x.numpy(), a)
    (('C', 'N'), True)
    """
    _refuse_tracked(obj, "from_dlpack")
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(
            message(
                "from_dlpack",
                "the object does not implement DLPack (__dlpack__)",
                type(obj).__name__,
                "Use ax.tensor for numpy arrays and sequences",
            )
        )
    device = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (1, 0)
    if int(device[0]) not in (1, 3):  # kDLCPU, kDLCUDAHost (pinned host memory)
        raise BufferError(
            message(
                "from_dlpack",
                "only host memory can be wrapped",
                f"DLPack device {tuple(int(d) for d in device)}",
                "Move it to the host first, e.g. t.cpu() in torch or a.get() in CuPy",
            )
        )
    try:
        arr = np.from_dlpack(obj)
    except (RuntimeError, BufferError, TypeError) as err:
        # numpy reads no bfloat16 capsule: relabel it uint16 and view the bits (ml_dtypes)
        if not _bf16_producer(obj):
            raise
        del err
        arr = bfloat16_from_dlpack(obj)
    return tensor(arr, axes)


def from_xarray(da) -> Tensor:
    """A tensor over an ``xarray.DataArray``'s values, named by its dims (zero-copy for
    numpy-backed data; dask-backed data gives a chunked tensor; other backends are read
    with ``np.asarray``).

    Coordinates, the name and attrs are not kept (tensors have no coordinates); reattach
    them on the way back: ``t.to_xarray(coords=da.coords)``.

    >>> import axesarray as ax, numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((2, 3)), dims=("y", "x"))
    >>> ax.from_xarray(da).axes
    Axes(Axis('y', 2), Axis('x', 3))
    """
    if hasattr(da, "data_vars"):
        raise TypeError(
            message(
                "from_xarray",
                "a Dataset holds several arrays",
                ", ".join(map(str, da.data_vars)),
                "Pick one: ax.from_xarray(ds['name'])",
            )
        )
    if not (hasattr(da, "dims") and hasattr(da, "variable")):
        raise TypeError(message("from_xarray", "expected an xarray.DataArray", type(da).__name__))
    for d in da.dims:
        if not isinstance(d, str):
            raise AxesError(
                message(
                    "from_xarray",
                    "every dim must be a string to become an axis name",
                    f"dims {da.dims}",
                    "Rename the dims: da.rename({old: 'name'})",
                )
            )
    data = da.data
    if hasattr(data, "__dask_graph__"):  # dask-backed: a chunked tensor, still lazy
        return Tensor.from_dask(data, tuple(da.dims))
    if not isinstance(data, (np.ndarray, Tensor)):
        data = np.asarray(da)
    return tensor(data, tuple(da.dims))
