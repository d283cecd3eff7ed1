"""Creation, data type and elementwise functions of the array API namespace, and the
helpers every namespace function shares (``exporter``: complex arrays run numpy's).

Lazy (fused) where the engine has the operation: elementwise ops of the op table,
reductions, views (indexing, permute_dims, expand_dims, squeeze, flip, broadcast_to,
reshape through flatten/split), where, astype, concat/stack, matmul/tensordot/vecdot (dot),
cumulative sums, sort/argsort. Other elementwise functions are lazy numpy call nodes. The
rest (set functions, nonzero, searchsorted, repeat, tile, take...) computes its inputs and
runs numpy: their shapes depend on the data, or the engine has no node for them.
"""

from __future__ import annotations

import builtins as _b
import functools
import operator
import warnings

import attrs
import numpy as np

from .. import functions as F
from ..errors import message
from ._array import (
    Array,
    _check_dtype,
    asarray,
    astype,
    elementwise,
    from_numpy_result,
    is_numpy,
    names_for,
    to_numpy_args,
    ufunc_call,
)

__all__: list[str] = []  # filled by ``export``; the shared helpers are module-private


def _complex_involved(args, kwargs) -> bool:
    for v in args:
        if is_numpy(v) or (isinstance(v, list | tuple) and _b.any(is_numpy(u) for u in v)):
            return True
    dt = kwargs.get("dtype")
    return dt is not None and np.dtype(dt).kind == "c"


def _numpy_version(name, args, kwargs):
    """The standard's function run by numpy 2 (whose namespace follows the standard)."""
    if name in ("sort", "argsort"):
        x = args[0]._value()
        axis = kwargs.get("axis", -1)
        out = getattr(np, name)(x, axis=axis, stable=True)
        return from_numpy_result(np.flip(out, axis=axis) if kwargs.get("descending") else out)
    if name == "clip":
        kwargs = dict(kwargs)
        lo = args[1] if len(args) > 1 else kwargs.pop("min", None)
        hi = args[2] if len(args) > 2 else kwargs.pop("max", None)
        return from_numpy_result(np.clip(args[0]._value(), to_numpy_args(lo), to_numpy_args(hi)))
    if name in ("meshgrid", "broadcast_arrays"):  # a list in the standard (2024.12)
        return list(_numpy_version("_" + name, args, kwargs))
    fn = getattr(np, name.lstrip("_"))
    kwargs = {k: to_numpy_args(v) for k, v in kwargs.items() if k != "device"}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return from_numpy_result(fn(*to_numpy_args(list(args)), **kwargs))


def exporter(names: list, namespace: dict):
    """A decorator adding a function to a module's ``__all__``; on complex arrays the
    function runs numpy's version instead (there are no complex kernels)."""

    def export(fn):
        name = fn.__name__
        names.append(name)
        if name in ("can_cast", "finfo", "iinfo", "isdtype", "result_type"):
            return fn

        @functools.wraps(fn)
        def public(*args, **kwargs):
            if _complex_involved(args, kwargs):
                return _numpy_version(name, args, kwargs)
            return fn(*args, **kwargs)

        namespace[name] = public
        return public

    return export


export = exporter(__all__, globals())


def _arr(x, op) -> Array:
    if isinstance(x, Array):
        return x
    raise TypeError(message(op, "expected an Array", type(x).__name__, "Use asarray(x) first"))


def _eager(fn, *args, **kwargs):
    """Run a numpy function on the values of Arrays (computed first) and wrap the result."""
    conv = [np.asarray(a) if isinstance(a, Array) else a for a in args]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(*conv, **kwargs)
    if isinstance(out, tuple):
        return tuple(asarray(np.array(o, copy=True)) for o in out)
    return asarray(np.array(out, copy=True))


def _axes(x: Array, axis, op: str) -> tuple[str, ...]:
    """The names of positional axes (``None``: all), checked and normalized."""
    if axis is None:
        return names_for(x.ndim)
    axs = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    out = []
    for a in axs:
        a = operator.index(a)
        if not -x.ndim <= a < x.ndim:
            raise IndexError(message(op, f"axis {a} is out of range", f"ndim={x.ndim}"))
        a = a % x.ndim
        out.append(f"m{x.ndim - a}")
    if len(set(out)) != len(out):
        raise ValueError(message(op, "an axis is repeated", repr(axis)))
    return tuple(out)


def _pos(x: Array, axis: int, op: str, extra: int = 0) -> int:
    n = x.ndim + extra
    a = operator.index(axis)
    if not -n <= a < n:
        raise IndexError(message(op, f"axis {a} is out of range", f"ndim={x.ndim}"))
    return a % n


# --- creation ---------------------------------------------------------------------------


def _default_float(dtype):
    return np.dtype(np.float64) if dtype is None else _check_dtype(dtype, "creation")


def _filled(shape, fill, dtype) -> Array:
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    return asarray(np.full(shape, fill, dtype=dtype))


@export
def arange(start, /, stop=None, step=1, *, dtype=None, device=None) -> Array:
    if dtype is not None:
        dtype = _check_dtype(dtype, "arange")
    elif _b.all(isinstance(v, int) for v in (start, stop if stop is not None else 0, step)):
        dtype = np.dtype(np.int64)
    else:
        dtype = np.dtype(np.float64)
    if stop is None:
        start, stop = 0, start
    return asarray(np.arange(start, stop, step, dtype=dtype))


@export
def empty(shape, *, dtype=None, device=None) -> Array:
    return zeros(shape, dtype=dtype)


@export
def empty_like(x, /, *, dtype=None, device=None) -> Array:
    return zeros_like(x, dtype=dtype)


@export
def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None) -> Array:
    return asarray(np.eye(n_rows, n_cols, k=k, dtype=_default_float(dtype)))


@export
def from_dlpack(x, /, *, device=None, copy=None) -> Array:
    return asarray(np.from_dlpack(x, copy=copy) if copy is not None else np.from_dlpack(x))


@export
def full(shape, fill_value, *, dtype=None, device=None) -> Array:
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
        if isinstance(fill_value, Array):
            dtype = fill_value.dtype
    dtype = _check_dtype(dtype, "full")
    return _filled(shape, np.asarray(fill_value), dtype)


@export
def full_like(x, /, fill_value, *, dtype=None, device=None) -> Array:
    return full(x.shape, fill_value, dtype=x.dtype if dtype is None else dtype)


@export
def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True) -> Array:
    return asarray(np.linspace(start, stop, num, endpoint=endpoint, dtype=_default_float(dtype)))


@export
def ones(shape, *, dtype=None, device=None) -> Array:
    return _filled(shape, 1, _default_float(dtype))


@export
def ones_like(x, /, *, dtype=None, device=None) -> Array:
    return _filled(x.shape, 1, x.dtype if dtype is None else _check_dtype(dtype, "ones_like"))


@export
def tril(x, /, *, k=0) -> Array:
    return _eager(np.tril, x, k=k)


@export
def triu(x, /, *, k=0) -> Array:
    return _eager(np.triu, x, k=k)


@export
def zeros(shape, *, dtype=None, device=None) -> Array:
    return _filled(shape, 0, _default_float(dtype))


@export
def zeros_like(x, /, *, dtype=None, device=None) -> Array:
    return _filled(x.shape, 0, x.dtype if dtype is None else _check_dtype(dtype, "zeros_like"))


export(asarray)


# --- data type functions -----------------------------------------------------------------

export(astype)


@export
def can_cast(from_, to, /) -> bool:
    f = from_.dtype if isinstance(from_, Array) else np.dtype(from_)
    return bool(np.can_cast(f, np.dtype(to)))


@attrs.frozen
class FInfo:
    """Machine limits of a floating dtype, as Python numbers (the standard's ``finfo``)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


@attrs.frozen
class IInfo:
    """Machine limits of an integer dtype (the standard's ``iinfo``)."""

    bits: int
    max: int
    min: int
    dtype: np.dtype


@export
def finfo(type, /):  # noqa: A002 - the standard's name
    """Limits of a floating dtype (of a complex one: of its real part).

    >>> import axesarray.array_api as xp
    >>> xp.finfo(xp.float32).bits
    32
    """
    f = np.finfo(type.dtype if isinstance(type, Array) else np.dtype(type))
    return FInfo(
        int(f.bits),
        float(f.eps),
        float(f.max),
        float(f.min),
        float(f.smallest_normal),
        np.dtype(f.dtype),
    )


@export
def iinfo(type, /):  # noqa: A002
    """Limits of an integer dtype.

    >>> import axesarray.array_api as xp
    >>> xp.iinfo(xp.int8).min
    -128
    """
    f = np.iinfo(type.dtype if isinstance(type, Array) else np.dtype(type))
    return IInfo(int(f.bits), int(f.max), int(f.min), np.dtype(f.dtype))


_KINDS = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc",
}


@export
def isdtype(dtype, kind) -> bool:
    dtype = np.dtype(dtype)
    if isinstance(kind, tuple):
        return _b.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(
                message("isdtype", "unknown kind", repr(kind), f"Use one of {sorted(_KINDS)}")
            )
        return _KINDS[kind](dtype)
    return dtype == np.dtype(kind)


@export
def result_type(*arrays_and_dtypes):
    args = [a.dtype if isinstance(a, Array) else a for a in arrays_and_dtypes]
    if not _b.any(not isinstance(a, bool | int | float) for a in args):
        raise TypeError(
            message("result_type", "at least one array or dtype is needed", repr(arrays_and_dtypes))
        )
    return np.result_type(*args)


# --- elementwise ---------------------------------------------------------------------------


def _unary_op(name, op_fn):
    def fn(x, /):
        return Array._new(op_fn(_arr(x, name)._t))

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (lazy, fused)."
    return export(fn)


def _unary_np(name, ufunc):
    def fn(x, /):
        return ufunc_call(ufunc, (_arr(x, name),), name)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (lazy numpy call: ``np.{ufunc.__name__}``)."
    return export(fn)


def _binary_op(name, op_fn, ufunc=None, use_numpy=None):
    def fn(x1, x2, /):
        if not isinstance(x1, Array) and not isinstance(x2, Array):
            raise TypeError(
                message(
                    name,
                    "at least one argument must be an Array",
                    f"{type(x1).__name__}, {type(x2).__name__}",
                )
            )
        vals = tuple(
            (asarray(v) if isinstance(v, np.ndarray | np.generic) else v) for v in (x1, x2)
        )
        if ufunc is not None and (op_fn is None or (use_numpy and use_numpy(*vals))):
            return ufunc_call(ufunc, vals, name)
        return elementwise(op_fn, vals, name)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name}, broadcasting positionally (lazy)."
    return export(fn)


for _n, _f in {
    "abs": F.abs,
    "ceil": F.ceil,
    "cos": F.cos,
    "exp": F.exp,
    "expm1": F.expm1,
    "floor": F.floor,
    "isfinite": F.isfinite,
    "isinf": F.isinf,
    "isnan": F.isnan,
    "log": F.log,
    "log1p": F.log1p,
    "sign": F.sign,
    "sin": F.sin,
    "sqrt": F.sqrt,
    "square": F.square,
    "tanh": F.tanh,
    "negative": operator.neg,
    "positive": operator.pos,
    "logical_not": F.logical_not,
}.items():
    _unary_op(_n, _f)

for _n, _u in {
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atan": np.arctan,
    "atanh": np.arctanh,
    "cosh": np.cosh,
    "sinh": np.sinh,
    "tan": np.tan,
    "log2": np.log2,
    "log10": np.log10,
    "trunc": np.trunc,
    "signbit": np.signbit,
    "reciprocal": np.reciprocal,
    "conj": np.conj,
    "real": np.real,
    "imag": np.imag,
}.items():
    _unary_np(_n, _u)


def _int_pow(a, b):
    da = a.dtype if isinstance(a, Array) else None
    db = b.dtype if isinstance(b, Array) else None
    return (
        (da is not None and da.kind in "iu")
        and (db is None or db.kind in "iu")
        and not isinstance(b, float)
    )


for _n, (_f, _u, _use) in {
    "add": (operator.add, np.add, None),
    "subtract": (operator.sub, np.subtract, None),
    "multiply": (operator.mul, np.multiply, None),
    "divide": (operator.truediv, np.divide, None),
    "floor_divide": (operator.floordiv, np.floor_divide, None),
    "remainder": (operator.mod, np.remainder, None),
    "pow": (operator.pow, np.power, _int_pow),
    "maximum": (F.maximum, np.maximum, None),
    "minimum": (F.minimum, np.minimum, None),
    "hypot": (F.hypot, np.hypot, None),
    "equal": (operator.eq, np.equal, None),
    "not_equal": (operator.ne, np.not_equal, None),
    "less": (operator.lt, np.less, None),
    "less_equal": (operator.le, np.less_equal, None),
    "greater": (operator.gt, np.greater, None),
    "greater_equal": (operator.ge, np.greater_equal, None),
    "bitwise_and": (operator.and_, np.bitwise_and, None),
    "bitwise_or": (operator.or_, np.bitwise_or, None),
    "bitwise_xor": (operator.xor, np.bitwise_xor, None),
    "logical_and": (operator.and_, np.logical_and, None),
    "logical_or": (operator.or_, np.logical_or, None),
    "logical_xor": (operator.xor, np.logical_xor, None),
    "bitwise_left_shift": (None, np.left_shift, None),
    "bitwise_right_shift": (None, np.right_shift, None),
    "atan2": (None, np.arctan2, None),
    "copysign": (None, np.copysign, None),
    "logaddexp": (None, np.logaddexp, None),
    "nextafter": (None, np.nextafter, None),
}.items():
    _binary_op(_n, _f, _u, _use)


@export
def bitwise_invert(x, /) -> Array:
    return Array._new(~_arr(x, "bitwise_invert")._t)


@export
def round(x, /) -> Array:  # noqa: A001
    return Array._new(F.round(_arr(x, "round")._t))


@export
def clip(x, /, min=None, max=None) -> Array:  # noqa: A002
    x = _arr(x, "clip")
    out = x
    if min is not None:
        out = elementwise(F.maximum, (out, min), "clip")  # NaN bounds give NaN, as numpy
    if max is not None:
        out = elementwise(F.minimum, (out, max), "clip")
    if out.dtype != x.dtype:
        out = astype(out, x.dtype)
    return out


# --- where ---------------------------------------------------------------------------------


@export
def where(condition, x1, x2, /) -> Array:
    vals = tuple(
        (asarray(v) if isinstance(v, np.ndarray | np.generic) else v) for v in (condition, x1, x2)
    )
    return elementwise(F.where, vals, "where")
