"""The positional ``Array``: a named tensor whose axes are named by their distance from
the last dimension (``m1`` is axis -1, ``m2`` axis -2, ...).

With those names numpy's trailing-aligned broadcasting *is* broadcasting by name (after
length-1 axes that stretch are dropped, which is a view), so every elementwise operation,
reduction and view of the named engine serves the positional API unchanged and stays
lazy: results are r-tensors until a value is needed (``__array__``, ``__dlpack__``,
``__float__``, ``__bool__``, printing), then the whole pending expression runs as fused
kernels. Imports only the public API modules below it.
"""

from __future__ import annotations

import operator
import warnings
from functools import lru_cache

import numpy as np

from ..core.dtypes import SUPPORTED
from ..creation import tensor as _tensor
from ..errors import message
from ..everyday import apply as _apply
from ..tensors.tensor import Tensor

__all__ = [
    "Array",
    "HOOKS",
    "asarray",
    "is_numpy",
    "from_numpy_result",
    "to_numpy_args",
    "names_for",
    "wrap",
    "broadcast_operands",
    "elementwise",
]

# float16 is stored and computed by the engine but is not an array API dtype. Complex
# arrays have no kernels: they hold a numpy array and every operation on them is numpy's
# (eager), so the namespace is complete while the engine stays real-valued.
REAL_DTYPES = tuple(d for d in SUPPORTED if d != np.dtype("float16"))
COMPLEX_DTYPES = (np.dtype("complex64"), np.dtype("complex128"))
DTYPES = REAL_DTYPES + COMPLEX_DTYPES
_DTYPES = frozenset(DTYPES)


# Filled from above (the way ``interop.ARRAY_FUNCTIONS`` is): the Array's methods that
# are namespace functions (``@``, ``mT``, indexing, numpy's protocols) and the namespace.
HOOKS: dict = {}


def is_numpy(v) -> bool:
    """Whether ``v`` is an Array held as a numpy array (complex), or a complex scalar."""
    return (isinstance(v, Array) and isinstance(v._t, np.ndarray)) or isinstance(v, complex)


def from_numpy_result(out):
    """Wrap what a numpy function returned: arrays become Arrays, tuples stay tuples."""
    if isinstance(out, np.ndarray | np.generic):
        return asarray(np.asarray(out))
    if isinstance(out, tuple):
        vals = [from_numpy_result(o) for o in out]
        return type(out)(*vals) if hasattr(out, "_fields") else tuple(vals)
    if isinstance(out, list):
        return [from_numpy_result(o) for o in out]
    return out


def to_numpy_args(v):
    if isinstance(v, Array):
        return v._value()
    if isinstance(v, tuple | list) and not hasattr(v, "_fields"):
        return type(v)(to_numpy_args(u) for u in v)
    return v


@lru_cache(maxsize=64)
def names_for(ndim: int) -> tuple[str, ...]:
    """The canonical names of an ``ndim``-dimensional array: ``m<distance from the end>``."""
    return tuple(f"m{ndim - i}" for i in range(ndim))


def wrap(t: Tensor) -> Array:
    """An Array over ``t``, whose axes are renamed by position (a view, never a copy)."""
    want = names_for(len(t.axes))
    have = t.names
    if have != want:
        t = t.rename({h: w for h, w in zip(have, want, strict=True) if h != w})
    return Array._new(t)


def _finish(t: Tensor, ndim: int) -> Array:
    """Put a result broadcast by name back in canonical (positional) order, then wrap."""
    want = names_for(ndim)
    if t.names != want:
        t = t.transpose(*want)
    return Array._new(t)


def _check_dtype(dt, op: str) -> np.dtype:
    dt = np.dtype(dt)
    if dt not in _DTYPES:
        raise TypeError(
            message(
                op,
                "not an array API dtype of axesarray",
                f"got {dt}",
                "Use bool, int8..int64, uint8..uint64, float32, float64, complex64 or complex128",
            )
        )
    return dt


def asarray(obj, /, *, dtype=None, device=None, copy=None) -> Array:
    """Convert ``obj`` (an Array, a numpy array, nested sequences, a scalar, a buffer or a
    DLPack producer) to an Array. ``copy=None`` shares memory when it can.

    >>> import axesarray.array_api as xp
    >>> xp.asarray([[1, 2], [3, 4]]).shape
    (2, 2)
    """
    if isinstance(obj, Array):
        if copy and isinstance(obj._t, np.ndarray):
            return Array._new(np.array(obj._t, dtype=dtype, copy=True))
        if dtype is not None and np.dtype(dtype) != obj.dtype:
            if copy is False:
                raise ValueError(
                    message(
                        "asarray",
                        "a dtype change needs a copy",
                        f"{obj.dtype} -> {np.dtype(dtype)}",
                        "Pass copy=None",
                    )
                )
            return astype(obj, dtype)
        if copy:
            return Array._new(obj._t.copy())
        return obj
    if isinstance(obj, Tensor):
        obj = wrap(obj)
        return asarray(obj, dtype=dtype, copy=copy)
    if dtype is not None:
        dtype = _check_dtype(dtype, "asarray")
    if copy is False:
        if not isinstance(obj, np.ndarray) and hasattr(obj, "__dlpack__"):
            arr = np.from_dlpack(obj)
        else:
            try:
                arr = np.array(obj, copy=False)
            except ValueError:
                raise ValueError(
                    message(
                        "asarray",
                        "the data cannot be used without a copy",
                        f"copy=False, {type(obj).__name__}",
                        "Pass copy=None",
                    )
                ) from None
        if dtype is not None and arr.dtype != dtype:
            raise ValueError(
                message(
                    "asarray",
                    "a dtype change needs a copy",
                    f"{arr.dtype} -> {dtype}",
                    "Pass copy=None",
                )
            )
    else:
        if isinstance(obj, (list, tuple)):
            obj = _plain(obj)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if isinstance(obj, np.ndarray) or not hasattr(obj, "__dlpack__"):
                arr = np.array(obj, dtype=dtype, copy=True if copy else None)
            else:
                arr = np.from_dlpack(obj)
                if dtype is not None or copy:
                    arr = np.array(arr, dtype=dtype, copy=True if copy else None)
        if dtype is None and arr.dtype == np.dtype("float16"):
            arr = arr.astype(np.float32)
    if arr.dtype not in _DTYPES:
        _check_dtype(arr.dtype, "asarray")
    if arr.dtype.kind == "c":
        return Array._new(arr)
    return Array._new(_tensor(arr, names_for(arr.ndim)))


def _plain(seq):
    """Nested sequences with Arrays (0-d elements) replaced by numpy values."""
    return [
        (
            _plain(v)
            if isinstance(v, (list, tuple))
            else (np.asarray(v) if isinstance(v, Array) else v)
        )
        for v in seq
    ]


def astype(x, dtype, /, *, copy=True, device=None) -> Array:
    dtype = _check_dtype(dtype, "astype")
    if not copy and x.dtype == dtype:
        return x
    if isinstance(x._t, np.ndarray) or dtype.kind == "c":
        return asarray(x._value().astype(dtype))
    return Array._new(x._t.astype(dtype))


# --- broadcasting ----------------------------------------------------------------------


def _as_operand(v, op):
    if isinstance(v, Array):
        return v
    if isinstance(v, bool | int | float | complex):
        return v
    if isinstance(v, np.ndarray | np.generic):
        return asarray(v)
    if isinstance(v, Tensor):
        return wrap(v)
    return NotImplemented


def broadcast_shape(shapes, op="broadcast"):
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(
            message(
                op,
                "shapes do not broadcast",
                " and ".join(str(s) for s in shapes),
                "Make trailing lengths equal or 1",
            )
        ) from None


def broadcast_operands(values, op: str):
    """Tensors (and Python scalars) ready to broadcast by name, and the result's ndim.

    A length-1 axis that stretches is dropped (a view): the other operand's axis of the same
    name then broadcasts over it, as numpy's rule asks."""
    arrays = [v for v in values if isinstance(v, Array)]
    shape = broadcast_shape([a.shape for a in arrays], op)
    n = len(shape)
    out = []
    for v in values:
        if isinstance(v, Array):
            t = v._t
            drop = {
                f"m{v.ndim - i}": 0
                for i, length in enumerate(v.shape)
                if length == 1 and shape[n - v.ndim + i] != 1
            }
            out.append(t.isel(drop) if drop else t)
        else:
            out.append(v)
    return out, n


def elementwise(fn, values, op: str) -> Array:
    """``fn`` (a function of Tensors and Python scalars) under positional broadcasting."""
    operands, n = broadcast_operands(values, op)
    return _finish(fn(*operands), n)


# --- numpy functions the op table lacks: lazy call nodes -------------------------------

_REPR = {bool: True, int: 1, float: 1.0}


@lru_cache(maxsize=1024)
def _result_dtype(fn, kinds):
    args = [np.empty(0, k) if isinstance(k, np.dtype) else _REPR[k] for k in kinds]
    with np.errstate(all="ignore"):
        return fn(*args).dtype


@lru_cache(maxsize=256)
def _quiet(fn):
    """``fn`` without floating-point warnings (the engines never warn); one object per
    ``fn``, so its call nodes share a plan."""

    def quiet(*args):
        with np.errstate(all="ignore"):
            return fn(*args)

    quiet.__name__ = getattr(fn, "__name__", "fn")
    return quiet


def ufunc_call(fn, values, op: str) -> Array:
    """A numpy ufunc (or ufunc-like function) as a lazy call node, positional broadcasting.

    Python scalars become 0-d arrays of the dtype numpy gives them next to the arrays (weak,
    NEP 50), so the result dtype is numpy's."""
    arrays = [v for v in values if isinstance(v, Array)]
    kinds = tuple(v.dtype if isinstance(v, Array) else type(v) for v in values)
    dt = _result_dtype(fn, kinds)
    vals = []
    for v in values:
        if isinstance(v, Array):
            vals.append(v)
        else:
            ref = np.result_type(*(a.dtype for a in arrays), v) if arrays else np.asarray(v).dtype
            vals.append(asarray(np.asarray(v, dtype=ref)))
    operands, n = broadcast_operands(vals, op)
    t = _apply(_quiet(fn), *operands, core=(), out_axes=(), dtype=dt)
    return _finish(t, n)


# --- the Array ------------------------------------------------------------------------


class Array:
    """A positional array of the Python array API standard over a lazy named tensor.

    >>> import axesarray.array_api as xp
    >>> x = xp.asarray([[1.0, 2.0], [3.0, 4.0]])
    >>> y = (x - xp.mean(x, axis=0)) / 2   # lazy: nothing computed yet
    >>> y.shape, float(xp.sum(y * y))
    ((2, 2), 1.0)
    """

    __slots__ = ("_t", "__weakref__")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, *args, **kwargs):
        raise TypeError(
            message(
                "Array",
                "Arrays are made by the namespace's functions",
                "",
                "Use axesarray.array_api.asarray(data)",
            )
        )

    @classmethod
    def _new(cls, t: Tensor) -> Array:
        self = object.__new__(cls)
        self._t = t
        return self

    # --- attributes ----------------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        """The data type (a numpy dtype).

        >>> import axesarray.array_api as xp
        >>> xp.asarray([1, 2]).dtype
        dtype('int64')
        """
        return self._t.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """The lengths of the dimensions.

        >>> import axesarray.array_api as xp
        >>> xp.ones((2, 3)).shape
        (2, 3)
        """
        return self._t.shape

    @property
    def ndim(self) -> int:
        """The number of dimensions.

        >>> import axesarray.array_api as xp
        >>> xp.ones((2, 3)).ndim
        2
        """
        return len(self._t.shape)

    @property
    def size(self) -> int:
        """The number of elements.

        >>> import axesarray.array_api as xp
        >>> xp.ones((2, 3)).size
        6
        """
        return self._t.size

    @property
    def device(self):
        """Where the data lives (``cpu`` or a GPU).

        >>> import axesarray.array_api as xp
        >>> str(xp.ones(2).device)
        'cpu'
        """
        if isinstance(self._t, np.ndarray):
            from ..storage.devices import as_device

            return as_device("cpu")
        return self._t.device

    @property
    def T(self) -> Array:  # noqa: N802 - the standard's name
        """The transpose of a 2-D array (a view).

        >>> import axesarray.array_api as xp
        >>> xp.ones((2, 3)).T.shape
        (3, 2)
        """
        if self.ndim != 2:
            raise ValueError(
                message("T", "only for 2-D arrays", f"ndim={self.ndim}", "Use permute_dims or mT")
            )
        if isinstance(self._t, np.ndarray):
            return Array._new(self._t.T)
        return wrap(self._t.transpose(*reversed(self._t.names)))

    @property
    def mT(self) -> Array:  # noqa: N802
        """The last two axes swapped (a view).

        >>> import axesarray.array_api as xp
        >>> xp.ones((4, 2, 3)).mT.shape
        (4, 3, 2)
        """
        return HOOKS["matrix_transpose"](self)

    @property
    def tensor(self) -> Tensor:
        """The named tensor underneath (axes ``m<k>`` = position ``-k``), lazy as it is.

        >>> import axesarray.array_api as xp
        >>> xp.ones((2, 3)).tensor.names
        ('m2', 'm1')
        """
        if isinstance(self._t, np.ndarray):
            raise TypeError(
                message("tensor", "a complex array has no named tensor", f"dtype {self.dtype}")
            )
        """The named tensor underneath (axes ``m<k>`` = position ``-k``), lazy as it is."""
        return self._t

    def to_device(self, device, /, *, stream=None) -> Array:
        """The array on ``device`` (itself when it is already there).

        >>> import axesarray.array_api as xp
        >>> str(xp.ones(2).to_device("cpu").device)
        'cpu'
        """
        if isinstance(self._t, np.ndarray):
            return self
        return Array._new(self._t.to(device)) if str(device) != str(self.device) else self

    def __array_namespace__(self, /, *, api_version=None):
        if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
            raise ValueError(
                message(
                    "__array_namespace__",
                    "unsupported api_version",
                    repr(api_version),
                    "Use '2024.12'",
                )
            )
        return HOOKS["namespace"]

    # --- values --------------------------------------------------------------------------
    def _value(self) -> np.ndarray:
        """Evaluate once (the result replaces the expression) and return a numpy view."""
        t = self._t
        if isinstance(t, np.ndarray):
            return t
        if not t.is_lvalue:
            self._t = t = t.eval()
        return np.asarray(t)

    def __array__(self, dtype=None, copy=None):
        if copy is False and not isinstance(self._t, np.ndarray) and not self._t.is_lvalue:
            raise ValueError(
                message(
                    "__array__",
                    "a lazy array is computed into new memory",
                    "copy=False",
                    "Pass copy=None",
                )
            )
        a = self._value()
        if dtype is not None:
            a = a.astype(dtype, copy=bool(copy))
        elif copy:
            a = a.copy()
        return a

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        if isinstance(self._value(), np.ndarray) and isinstance(self._t, np.ndarray):
            kw = {
                k: v
                for k, v in (("max_version", max_version), ("copy", copy), ("dl_device", dl_device))
                if v is not None
            }
            return self._t.__dlpack__(stream=stream, **kw)
        kw = {}
        if max_version is not None:
            kw["max_version"] = max_version
        if copy is not None:
            kw["copy"] = copy
        if dl_device is not None:
            kw["dl_device"] = dl_device
        return self._t.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self):
        if isinstance(self._t, np.ndarray):
            return self._t.__dlpack_device__()
        return self._t.__dlpack_device__()

    def _scalar(self, op):
        if self.ndim != 0:
            raise TypeError(
                message(
                    op,
                    "only a 0-d array converts to a Python scalar",
                    f"shape {self.shape}",
                    "Index one element first",
                )
            )
        return self._value()[()]

    def __bool__(self) -> bool:
        return bool(self._scalar("__bool__"))

    def __float__(self) -> float:
        return float(self._scalar("__float__"))

    def __int__(self) -> int:
        return int(self._scalar("__int__"))

    def __complex__(self) -> complex:
        return complex(self._scalar("__complex__"))

    def __index__(self) -> int:
        if self.dtype.kind not in "iu":
            raise TypeError(
                message("__index__", "only integer arrays are indices", f"dtype {self.dtype}")
            )
        return operator.index(self._scalar("__index__"))

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        body = np.array2string(self._value(), separator=", ", prefix="Array(")
        return f"Array({body}, dtype={self.dtype})"

    __str__ = __repr__

    def __getstate__(self):
        return {"t": self._t}

    def __setstate__(self, state):
        self._t = state["t"]

    # --- indexing ------------------------------------------------------------------------
    def __getitem__(self, key):
        return HOOKS["getitem"](self, key)

    def __setitem__(self, key, value):
        HOOKS["setitem"](self, key, value)

    # numpy protocols: ufuncs and numpy functions on Arrays stay lazy where a lazy
    # implementation exists (xarray calls ``np.nanmean`` and friends on its data).
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return HOOKS["array_ufunc"](ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return HOOKS["array_function"](func, types, args, kwargs)
