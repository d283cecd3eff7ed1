"""Protocols other libraries use to read tensors: ``__array__``, DLPack, the CUDA array
interface, ``__array_function__``, and ``to_xarray``.

Everything hands over the *logical* order (the tensor's axes, in order) with the strides
memory has, so a transposed view goes out zero-copy as strides. A copy is made only when
memory cannot be described that way (an r-tensor, a blocked layout, device memory for
numpy, negative strides for DLPack), and ``copy=False`` turns that copy into an error.

``__array_function__`` dispatches through ``ARRAY_FUNCTIONS`` (numpy function ->
implementation): the reductions are registered here; functions defined above ``tensor``
(``where``, ``concatenate``, ``stack``...) register themselves with ``implements`` when
their module is imported. Any other numpy function raises a ``TypeError`` naming it.
A mixin of ``Tensor``; results are built with ``type(self)``.
"""

from __future__ import annotations

import numpy as np

from .. import engine
from ..core.ops import UFUNCS
from ..core.reductions_table import REDUCTIONS, UFUNC_REDUCE
from ..dag import nodes as ex
from ..errors import AxesError, fmt_axes, message
from ..storage.devices import device_of
from ..storage.memory import wrap_array
from .base import TensorBase

__all__ = [
    "InteropMethods",
    "ARRAY_FUNCTIONS",
    "implements",
    "axis_names",
    "write_out",
    "array_ufunc",
    "relabel_dlpack",
    "bfloat16_from_dlpack",
]

# numpy function -> implementation, filled here and by the modules above ``tensor``.
ARRAY_FUNCTIONS: dict = {}

_DL_CPU, _DL_CUDA = 1, 2  # DLPack device types (kDLCPU, kDLCUDA)
_DL_UINT, _DL_BFLOAT = 1, 4  # DLPack type codes (kDLUInt, kDLBfloat)


def relabel_dlpack(capsule, old: int, new: int):
    """Change the type code of an unused 16-bit DLPack capsule from ``old`` to ``new``
    (uint16 <-> bfloat16), in place; returns the capsule.

    numpy neither exports nor imports bfloat16 through DLPack, but the bits are a uint16
    array's: bfloat16 goes out as numpy's uint16 capsule relabelled, and comes in as a
    producer's bfloat16 capsule relabelled uint16 (then viewed as bfloat16). The DLTensor
    is at offset 0 of a ``dltensor`` capsule and at 32 of a ``dltensor_versioned`` one
    (after version, manager context, deleter and flags); its dtype is at offset 20
    (after data, device and ndim). ``BufferError`` when the capsule is anything else.
    """
    import ctypes

    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = api.PyCapsule_GetName(capsule)
    if name not in (b"dltensor", b"dltensor_versioned"):
        raise BufferError(message("DLPack", "not an unused DLPack capsule", repr(name)))
    base = api.PyCapsule_GetPointer(capsule, name) + (32 if name == b"dltensor_versioned" else 0)
    code, bits, lanes = (ctypes.c_uint8 * 2).from_address(base + 20)[:] + [
        ctypes.c_uint16.from_address(base + 22).value
    ]
    if (code, bits, lanes) != (old, 16, 1):
        raise BufferError(
            message("DLPack", "unexpected element type", f"code {code}, {bits} bits, {lanes} lanes")
        )
    ctypes.c_uint8.from_address(base + 20).value = new
    return capsule


class _Relabelled:
    """A DLPack producer whose bfloat16 capsules are handed over as uint16 (for numpy)."""

    def __init__(self, producer) -> None:
        self.producer = producer

    def __dlpack_device__(self):
        return self.producer.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return relabel_dlpack(self.producer.__dlpack__(**kwargs), _DL_BFLOAT, _DL_UINT)


def bfloat16_from_dlpack(obj):
    """``np.from_dlpack`` of a bfloat16 producer (torch, JAX): a zero-copy bfloat16 array."""
    from ..core.dtypes import bfloat16

    return np.from_dlpack(_Relabelled(obj)).view(bfloat16())


def implements(*funcs):
    """Register an implementation of numpy functions for ``np.f(tensor, ...)``."""

    def register(impl):
        for f in funcs:
            ARRAY_FUNCTIONS[f] = impl
        return impl

    return register


def axis_names(t, axis, op: str):
    """numpy's ``axis=`` as names: None (all), a position of the logical order (negative
    counts from the end), a name, an Axis, or a tuple of them."""
    if axis is None:
        return None
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    names = []
    for a in items:
        if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
            if not -t.ndim <= a < t.ndim:
                raise AxesError(
                    message(
                        op,
                        f"axis {a} is out of range",
                        f"axes: {fmt_axes(t.axes)}",
                        "Give a position of the logical order or a name",
                    )
                )
            names.append(t.names[a])
        else:
            names.append(a)
    return names


def write_out(result, out, op: str):
    """numpy's ``out=``: assign into a tensor, or into a numpy array of the result's shape
    (read as the result's axes, in order); returns ``out``."""
    if isinstance(out, tuple):
        if len(out) != 1:
            raise TypeError(message(op, "takes one output", f"got {len(out)}"))
        out = out[0]
    if isinstance(out, np.ndarray):
        wrapped = wrap_array(out) if out.shape == result.shape else None
        if wrapped is None:
            raise AxesError(
                message(
                    op,
                    "the out array does not have the result's shape",
                    f"result: {fmt_axes(result.axes)}; out shape {out.shape}",
                    "Pass an array of the result's shape, in its axis order",
                )
            )
        target = type(result)(result.axes, ex.Leaf(wrapped[0], wrapped[1], out.flags.writeable))
        target[...] = result
        return out
    if not isinstance(out, TensorBase):
        raise TypeError(message(op, "out must be a tensor or a numpy array", type(out).__name__))
    out[...] = result
    return out


def _array_function(self, func, types, args, kwargs):
    impl = ARRAY_FUNCTIONS.get(func)
    name = f"{getattr(func, '__module__', None) or 'numpy'}.{func.__name__}"
    if impl is None:
        raise TypeError(
            message(
                name,
                "has no named meaning for tensors",
                None,
                "Use ax.apply(fn, t, core=...) to run it over named axes, or t.numpy()",
            )
        )
    if not all(issubclass(t, (InteropMethods, np.ndarray)) for t in types):
        return NotImplemented
    return impl(*args, **kwargs)


class _TypeOnly:
    """A method found on the class but not on instances.

    numpy looks ``__array_function__`` up on the type, so dispatch works. Libraries that
    ask ``hasattr(obj, "__array_function__")`` to decide whether to keep an object as a
    *positional* duck array (xarray, dask) do not find it and convert through
    ``__array__``: a tensor refuses positional indexing, so it must not be wrapped as one.
    """

    def __init__(self, fn):
        self.fn = fn

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn
        raise AttributeError(
            message(
                "__array_function__",
                "numpy finds it on the type; instances do not offer it",
                None,
                "Call the numpy function on the tensor: np.sum(t, axis='C')",
            )
        )


def cuda_interface(pointer: int, view, dtype: np.dtype, readonly: bool) -> dict:
    """The CUDA array interface (version 3) of a plain view over storage at ``pointer``."""
    size = dtype.itemsize
    return {
        "shape": view.shape,
        "strides": tuple(s * size for s in view.strides),
        "typestr": dtype.str,
        "data": (pointer + view.offset * size, readonly),
        "version": 3,
    }


class InteropMethods:
    """numpy, DLPack, CUDA array interface and xarray exports, in logical order."""

    __slots__ = ()

    __array_function__ = _TypeOnly(_array_function)

    def __len__(self) -> int:
        # A length "along the first axis" would make the logical order a positional
        # contract; tensors are not sequences (iteration is refused too).
        raise TypeError(
            message(
                "len",
                "a tensor has no length by position",
                fmt_axes(self.axes),
                (
                    f"Ask an axis: x.axes[{self.names[0]!r}].length"
                    ", or x.size for the element count"
                    if self.names
                    else "A 0-d tensor has one element: x.size is 1, x.item() its value"
                ),
            )
        )

    @property
    def dims(self) -> tuple[str, ...]:
        """The axis names (xarray's word): ``xr.DataArray(t)`` takes its dims from here.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((2, 3)), "N C").dims
        ('N', 'C')
        """
        return self.names

    def _host(self, op: str, copy, error=ValueError) -> np.ndarray:
        """The values as a host numpy array in logical order: a view of the storage when
        possible and ``copy`` is not True; ``copy=False`` raises ``error`` otherwise."""
        node = self.node
        plain = type(node) is ex.Leaf and node.view.blocks is None
        if plain and device_of(node.data).is_cpu:
            arr = engine.to_numpy(node)
            return arr.copy() if copy else arr
        if copy is False:
            why = (
                "an r-tensor must be computed"
                if type(node) is not ex.Leaf
                else "a blocked layout has no strides"
                if node.view.blocks is not None
                else "device memory must be copied to the host"
            )
            raise error(
                message(op, f"cannot share memory: {why}", fmt_axes(self.axes), "Allow a copy")
            )
        arr = engine.to_numpy(node)  # computed, gathered or copied from the device: new
        return arr if arr.flags.writeable else arr.copy()

    def __array__(self, dtype=None, copy=None):
        arr = self._host("__array__", copy)
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(
                    message(
                        "__array__",
                        "cannot share memory: the dtype differs",
                        f"{arr.dtype} -> {np.dtype(dtype)}",
                        "Allow a copy",
                    )
                )
            arr = arr.astype(dtype)
        return arr

    # --- DLPack ---------------------------------------------------------------------------

    def __dlpack_device__(self) -> tuple[int, int]:
        device = self.device
        return (_DL_CPU, 0) if device.is_cpu else (_DL_CUDA, device.index)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of the values in logical order (zero-copy for a plain view of
        host memory; strides as they are). Read by ``np.from_dlpack``, ``torch.from_dlpack``,
        ``cupy.from_dlpack``... Negative strides are copied (torch aborts on them)."""
        if not self.device.is_cpu:
            return self._device_dlpack(stream, max_version, dl_device, copy)
        arr = self._host("__dlpack__", copy, BufferError)
        legacy = max_version is None or tuple(max_version) < (1, 0)
        reversed_ = any(s < 0 for s in arr.strides)
        readonly = not arr.flags.writeable and legacy  # old DLPack cannot say read-only
        if reversed_ or readonly:
            if copy is False:
                why = "negative strides" if reversed_ else "read-only memory (DLPack < 1.0)"
                raise BufferError(
                    message(
                        "__dlpack__",
                        f"cannot share memory: {why}",
                        f"strides {arr.strides}",
                        "Allow a copy",
                    )
                )
            arr = np.array(arr, order="K")  # positive strides, same memory order
        kwargs = {"stream": stream, "copy": copy if copy is not False else None}
        if max_version is not None:
            kwargs["max_version"] = max_version
        if dl_device is not None:
            kwargs["dl_device"] = dl_device
        if arr.dtype.kind == "V":  # bfloat16: numpy's uint16 capsule, relabelled
            return relabel_dlpack(arr.view(np.uint16).__dlpack__(**kwargs), _DL_UINT, _DL_BFLOAT)
        return arr.__dlpack__(**kwargs)

    def _device_dlpack(self, stream, max_version, dl_device, copy):
        t = self.eval() if type(self.node) is not ex.Leaf else self
        node = t.node
        device = device_of(node.data)
        if device.backend != "cupy" or node.view.blocks is not None:
            raise BufferError(
                message(
                    "__dlpack__",
                    "device tensors go out through DLPack only as CuPy arrays",
                    f"{device} storage with backend {device.backend}",
                    "Install CuPy, or move the tensor first: t.to('cpu')",
                )
            )
        arr = device.array_view(node.data, node.view)
        return arr.__dlpack__(
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    # --- CUDA array interface ---------------------------------------------------------------

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA array interface of a plain view of device memory (logical order, byte
        strides). Absent (``AttributeError``) on the CPU, for r-tensors, blocked layouts
        and numba's simulator, so ``hasattr`` tells consumers whether it applies."""
        node = self.node
        why = None
        if type(node) is not ex.Leaf:
            why = "an r-tensor has no memory: evaluate it first (t.eval())"
        elif device_of(node.data).is_cpu:
            why = "the tensor is in host memory: use __array__ or DLPack"
        elif node.view.blocks is not None:
            why = "a blocked layout has no strides"
        elif device_of(node.data).backend == "simulator":
            why = "numba's CUDA simulator has no device pointers"
        if why is not None:
            raise AttributeError(message("__cuda_array_interface__", why))
        base = node.data.__cuda_array_interface__["data"][0]
        return cuda_interface(base, node.view, node.dtype, not node.writeable)

    # --- xarray ----------------------------------------------------------------------------

    @property
    def values(self) -> np.ndarray:
        """The values as a numpy array in logical order (xarray's ``values``; ``numpy()``).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.arange(3), "N").values
        array([0, 1, 2])
        """
        return self.numpy()

    def tolist(self):
        """The values as nested Python lists in logical order (a number for a tensor
        without axes), as ``ndarray.tolist``.

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.arange(4).reshape(2, 2), "N C")
        >>> x.T.tolist(), x.sum().tolist()
        ([[0, 2], [1, 3]], 6)
        """
        return self.numpy().tolist()

    def to_xarray(self, coords=None, name=None, attrs=None):
        """An ``xarray.DataArray`` with dims = axis names, sharing memory when the tensor is
        a plain view of host memory (a blocked layout converts to logical order; an
        r-tensor is computed; a chunked tensor gives a lazy dask-backed DataArray).
        Coordinates are not kept by tensors: pass ``coords`` (and ``name``, ``attrs``) to
        attach them.

        >>> import axesarray as ax, numpy as np
        >>> da = ax.tensor(np.zeros((2, 3)), "N C").to_xarray()
        >>> da.dims, da.shape
        (('N', 'C'), (2, 3))
        """
        import xarray as xr

        if self.chunks is not None:  # a chunked tensor stays lazy: a dask-backed DataArray
            # Through a Variable: given a dask array, DataArray takes the array's task name
            # ("xarray-<this-array>-...", "array-...") as its own name.
            data = xr.Variable(self.names, self.to_dask())
            return xr.DataArray(data, coords=coords, name=name, attrs=attrs)
        return xr.DataArray(
            self._host("to_xarray", None), dims=self.names, coords=coords, name=name, attrs=attrs
        )


# --- numpy functions with a named meaning (the reductions) ----------------------------------


def _refuse(op: str, **given) -> None:
    """A TypeError for numpy arguments that have no meaning here, when given."""
    bad = [k for k, v in given.items() if v is not None and v is not np._NoValue]
    if bad:
        raise TypeError(
            message(op, "unsupported argument(s): " + ", ".join(bad), None, "Leave them out")
        )


def _finish(result, out, op: str):
    return result if out is None else write_out(result, out, op)


def _reducer(method: str):
    op = f"numpy.{method}"

    def impl(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
        _refuse(op, initial=initial, where=where)
        x = a if dtype is None else a.astype(dtype)
        return _finish(
            getattr(x, method)(axis_names(a, axis, op), keepdims=bool(keepdims)), out, op
        )

    return impl


def _extreme(method: str):
    op = f"numpy.{method}"

    def impl(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        _refuse(op, initial=initial, where=where)
        return _finish(
            getattr(a, method)(axis_names(a, axis, op), keepdims=bool(keepdims)), out, op
        )

    return impl


def _logical(method: str):
    op = f"numpy.{method}"

    def impl(a, axis=None, out=None, keepdims=False, *, where=None):
        _refuse(op, where=where)
        return _finish(
            getattr(a, method)(axis_names(a, axis, op), keepdims=bool(keepdims)), out, op
        )

    return impl


def _spread(method: str):
    op = f"numpy.{method}"

    def impl(
        a,
        axis=None,
        dtype=None,
        out=None,
        ddof=0,
        keepdims=False,
        *,
        where=None,
        mean=None,
        correction=None,
    ):
        _refuse(op, where=where, mean=mean)
        if correction is not None:
            ddof = correction
        x = a if dtype is None else a.astype(dtype)
        r = getattr(x, method)(axis_names(a, axis, op), ddof=ddof, keepdims=bool(keepdims))
        return _finish(r, out, op)

    return impl


def _arg(method: str):
    op = f"numpy.{method}"

    def impl(a, axis=None, out=None, *, keepdims=False):
        if axis is None and a.ndim != 1:  # numpy's flat index in the logical order
            _refuse(op, keepdims=keepdims or None)
            return _finish(a._flat_arg(method, a.names), out, op)
        return _finish(getattr(a, method)(_one_axis(a, axis, op, method), keepdims), out, op)

    return impl


def _one_axis(a, axis, op: str, method: str):
    """The name of numpy's single ``axis`` (None only for a 1-D tensor)."""
    if axis is None:
        if a.ndim != 1:
            raise AxesError(
                message(
                    op,
                    "flattening first has no named meaning",
                    fmt_axes(a.axes),
                    f"Name an axis: np.{method}(t, axis='C')",
                )
            )
        return a.names[0]
    names = axis_names(a, axis, op)
    if len(names) != 1:
        raise AxesError(message(op, "takes exactly one axis", f"got {axis!r}"))
    return names[0]


def _scan(method: str):
    op = f"numpy.{method}"

    def impl(a, axis=None, dtype=None, out=None):
        x = a if dtype is None else a.astype(dtype)
        return _finish(getattr(x, method)(_one_axis(a, axis, op, method)), out, op)

    return impl


def _sorter(method: str):
    op = f"numpy.{method}"

    def impl(a, axis=-1, kind=None, order=None, *, stable=None):
        _refuse(op, order=order)  # kind and stable: the sort is always stable
        return getattr(a, method)(_one_axis(a, axis, op, method))

    return impl


def _median(method: str):
    op = f"numpy.{method}"

    def impl(a, axis=None, out=None, overwrite_input=False, keepdims=False):
        return _finish(getattr(a, method)(axis_names(a, axis, op), bool(keepdims)), out, op)

    return impl


def _quantile(name: str):
    op = f"numpy.{name}"

    def impl(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):  # fmt: skip
        _refuse(op, weights=weights, interpolation=interpolation)
        r = getattr(a, name)(q, axis_names(a, axis, op), bool(keepdims), method=method)
        return _finish(r, out, op)

    return impl


# numpy's functions of each row of the reduction table, by how their arguments read
_SIGNATURES = {
    "reduce": _reducer,
    "extreme": _extreme,
    "logical": _logical,
    "spread": _spread,
    "arg": _arg,
    "median": _median,
    "quantile": _quantile,
}
for _row in REDUCTIONS.values():
    if _row.numpy_functions:
        implements(*_row.numpy_functions)(_SIGNATURES[_row.signature](_row.name))
for _m in ("cumsum", "cumprod"):
    implements(getattr(np, _m))(_scan(_m))
for _m in ("sort", "argsort"):
    implements(getattr(np, _m))(_sorter(_m))


@implements(np.shape)
def _shape(a):
    return a.shape


@implements(np.ndim)
def _ndim(a):
    return a.ndim


@implements(np.size)
def _size(a, axis=None):
    return a.size if axis is None else a.shape[a.axes.index(axis_names(a, axis, "numpy.size")[0])]


@implements(np.transpose)
def _transpose(a, axes=None):
    names = list(reversed(a.names)) if axes is None else axis_names(a, tuple(axes), "transpose")
    return a.transpose(names)


@implements(np.copy)
def _copy(a, order="K", subok=False):
    return a.copy()


@implements(np.round, np.around)
def _round(a, decimals=0, out=None):
    return _finish(a.round(decimals), out, "numpy.round")


@implements(np.squeeze)
def _squeeze(a, axis=None):
    return a.squeeze(axis_names(a, axis, "numpy.squeeze"))


# --- numpy ufuncs ---------------------------------------------------------------------------

# ufunc.reduce / ufunc.accumulate with a named meaning: the tensor method they are.
_UFUNC_REDUCE = UFUNC_REDUCE
_UFUNC_ACCUMULATE = {"add": "cumsum", "multiply": "cumprod"}


def array_ufunc(elementwise, ufunc, method: str, inputs: tuple, kwargs: dict):
    """``Tensor.__array_ufunc__``: ufuncs stay lazy and named (``np.exp(t)`` is an r-tensor
    with ``t``'s axes); ``out=`` is written and returned; ``np.add.reduce`` and
    ``np.add.accumulate`` are ``sum`` and ``cumsum``. ``elementwise`` is ``tensor``'s
    function that applies an ``ops`` row with broadcasting by name."""
    for v in inputs:  # another array type that handles ufuncs may know what to do
        if not isinstance(v, (TensorBase, np.ndarray)) and hasattr(v, "__array_ufunc__"):
            return NotImplemented
    name = ufunc.__name__
    op = f"numpy.{name}"
    out = kwargs.pop("out", None)
    dtype = kwargs.pop("dtype", None)
    if method == "__call__" and name in UFUNCS:
        _refuse(op, **kwargs)
        result = elementwise(UFUNCS[name], *inputs, name=name)
    elif method in ("reduce", "accumulate") and name in (
        _UFUNC_REDUCE if method == "reduce" else _UFUNC_ACCUMULATE
    ):
        (x,) = inputs
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        _refuse(op, **kwargs)
        if dtype is not None:
            x = x.astype(dtype)
            dtype = None
        if method == "reduce":
            result = getattr(x, _UFUNC_REDUCE[name])(axis_names(x, axis, op), keepdims=keepdims)
        else:
            result = getattr(x, _UFUNC_ACCUMULATE[name])(_one_axis(x, axis, op, method))
    else:
        what = name if method == "__call__" else f"{name}.{method}"
        raise TypeError(
            message(
                f"numpy.{what}",
                "has no named meaning for tensors",
                None,
                "Use ax.apply(fn, t, core=...) to run it over named axes, or t.numpy()",
            )
        )
    if dtype is not None:
        result = result.astype(dtype)
    return result if out is None else write_out(result, out, op)
