"""numpy's protocols on Arrays: ufuncs and the numpy functions xarray calls stay lazy.

xarray computes ``da.mean("time")`` on a float duck array as ``np.nanmean(data, axis=...)``
(NaN-skipping by default), so those functions are lazy here: ``where(isnan(x), 0, x)``
summed, over a count of non-NaN values. Any other numpy function computes its Array
arguments and runs numpy (what ``np.asarray`` would do), giving an Array back.
"""

from __future__ import annotations

import types
import warnings

import numpy as np

from . import _creation, _functions, _linalg
from ._array import HOOKS, REAL_DTYPES, Array, asarray

# the namespace's functions (its package module is above this one)
fx = types.SimpleNamespace(
    **{k: getattr(_creation, k) for k in _creation.__all__},
    **{k: getattr(_functions, k) for k in _functions.__all__},
    **{k: getattr(_linalg, k) for k in _linalg.__all__},
)

__all__ = ["array_ufunc", "array_function", "FUNCTIONS"]

# numpy ufunc name -> namespace function (lazy)
_UFUNCS = {
    "add": "add",
    "subtract": "subtract",
    "multiply": "multiply",
    "divide": "divide",
    "true_divide": "divide",
    "floor_divide": "floor_divide",
    "remainder": "remainder",
    "power": "pow",
    "maximum": "maximum",
    "minimum": "minimum",
    "hypot": "hypot",
    "equal": "equal",
    "not_equal": "not_equal",
    "less": "less",
    "less_equal": "less_equal",
    "greater": "greater",
    "greater_equal": "greater_equal",
    "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor",
    "logical_and": "logical_and",
    "logical_or": "logical_or",
    "logical_xor": "logical_xor",
    "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift",
    "arctan2": "atan2",
    "copysign": "copysign",
    "logaddexp": "logaddexp",
    "nextafter": "nextafter",
    "absolute": "abs",
    "negative": "negative",
    "positive": "positive",
    "invert": "bitwise_invert",
    "logical_not": "logical_not",
    "exp": "exp",
    "expm1": "expm1",
    "log": "log",
    "log1p": "log1p",
    "log2": "log2",
    "log10": "log10",
    "sqrt": "sqrt",
    "square": "square",
    "sign": "sign",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
    "floor": "floor",
    "ceil": "ceil",
    "trunc": "trunc",
    "rint": "round",
    "isnan": "isnan",
    "isinf": "isinf",
    "isfinite": "isfinite",
    "signbit": "signbit",
    "reciprocal": "reciprocal",
    "conjugate": "conj",
}


def _plain(v):
    if isinstance(v, Array):
        return np.asarray(v)
    if isinstance(v, tuple | list):
        return type(v)(_plain(u) for u in v)
    return v


def _numpy(func, args, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = func(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()})
    if isinstance(out, np.ndarray) and out.dtype in REAL_DTYPES:
        return asarray(out)
    return out


def array_ufunc(ufunc, method, inputs, kwargs):
    name = _UFUNCS.get(ufunc.__name__)
    if method == "__call__" and name is not None and not kwargs:
        vals = [asarray(v) if isinstance(v, np.ndarray | np.generic) else v for v in inputs]
        return getattr(fx, name)(*vals)
    return _numpy(getattr(ufunc, method), inputs, kwargs)


# --- numpy functions ---------------------------------------------------------------------

FUNCTIONS: dict = {}


def _register(*funcs):
    def deco(impl):
        for f in funcs:
            FUNCTIONS[f] = impl
        return impl

    return deco


def _ax(axis):
    return None if axis is None else axis


def _float(a):
    return a if a.dtype.kind == "f" else fx.astype(a, np.float64)


def _nan_sum_count(a, axis):
    """Sum of the non-NaN values and their count (both lazy). nanmean and nanvar build
    them identically, so the planner computes them once for ``x - mean`` over ``std``."""
    nan = fx.isnan(a)
    s = fx.sum(fx.where(nan, 0.0, a), axis=axis)
    c = fx.sum(fx.astype(fx.logical_not(nan), np.int64), axis=axis)
    return nan, s, fx.astype(c, a.dtype)


def _axis_tuple(a, axis):
    return (
        tuple(range(a.ndim))
        if axis is None
        else ((axis,) if isinstance(axis, int) else tuple(axis))
    )


def _keep(r, a, axis):
    """``r`` (reduced over ``axis``) with length-1 axes put back where ``axis`` was."""
    return fx.expand_dims(r, axis=tuple(p % a.ndim for p in _axis_tuple(a, axis)))


@_register(np.nanmean)
def _nanmean(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    a = asarray(a)
    if a.dtype.kind != "f":
        return fx.mean(_float(a), axis=axis, keepdims=keepdims)
    _, s, c = _nan_sum_count(a, axis)
    m = s / c
    return _keep(m, a, axis) if keepdims else m


def _nanvar_impl(a, axis, ddof, keepdims):
    a = asarray(a)
    if a.dtype.kind != "f":
        return fx.var(_float(a), axis=axis, correction=ddof, keepdims=keepdims)
    nan, s, c = _nan_sum_count(a, axis)
    d = fx.where(nan, 0.0, a - _keep(s / c, a, axis))
    v = fx.sum(d * d, axis=axis) / fx.maximum(c - ddof, 0.0)
    return _keep(v, a, axis) if keepdims else v


@_register(np.nanvar)
def _nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return _nanvar_impl(a, axis, ddof, keepdims)


@_register(np.nanstd)
def _nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return fx.sqrt(_nanvar_impl(a, axis, ddof, keepdims))


def _nan_extreme(name, fill):
    def impl(a, axis=None, out=None, keepdims=False, **kw):
        a = asarray(a)
        if a.dtype.kind != "f":
            return getattr(fx, name)(a, axis=axis, keepdims=keepdims)
        nan = fx.isnan(a)
        r = getattr(fx, name)(fx.where(nan, fill, a), axis=axis, keepdims=keepdims)
        return fx.where(fx.all(nan, axis=axis, keepdims=keepdims), np.nan, r)  # all-NaN: NaN

    return impl


_register(np.nanmax)(_nan_extreme("max", -np.inf))
_register(np.nanmin)(_nan_extreme("min", np.inf))


def _nan_arg(name, fill):
    def impl(a, axis=None, out=None, keepdims=False, **kw):
        a = asarray(a)
        if a.dtype.kind == "f":
            a = fx.where(fx.isnan(a), fill, a)
        return getattr(fx, name)(a, axis=axis, keepdims=keepdims)

    return impl


_register(np.nanargmax)(_nan_arg("argmax", -np.inf))
_register(np.nanargmin)(_nan_arg("argmin", np.inf))


@_register(np.nansum)
def _nansum(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    a = asarray(a)
    if a.dtype.kind == "f":
        a = fx.where(fx.isnan(a), 0.0, a)
    return fx.sum(a, axis=axis, dtype=dtype, keepdims=keepdims)


@_register(np.nanprod)
def _nanprod(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    a = asarray(a)
    if a.dtype.kind == "f":
        a = fx.where(fx.isnan(a), 1.0, a)
    return fx.prod(a, axis=axis, dtype=dtype, keepdims=keepdims)


def _simple(name, np_funcs, kwmap=None):
    def impl(a, axis=None, *args, keepdims=False, **kw):
        fn = getattr(fx, name)
        kwargs = {"axis": axis, "keepdims": keepdims}
        if "ddof" in kw:
            kwargs["correction"] = kw.pop("ddof")
        if kw.get("dtype") is not None:
            kwargs["dtype"] = kw.pop("dtype")
        return fn(asarray(a), **kwargs)

    _register(*np_funcs)(impl)


_simple("sum", (np.sum,))
_simple("prod", (np.prod,))
_simple("mean", (np.mean,))
_simple("max", (np.max, np.amax))
_simple("min", (np.min, np.amin))
_simple("var", (np.var,))
_simple("std", (np.std,))
_simple("all", (np.all,))
_simple("any", (np.any,))


@_register(np.transpose)
def _transpose(a, axes=None):
    a = asarray(a)
    return fx.permute_dims(a, tuple(reversed(range(a.ndim))) if axes is None else axes)


@_register(np.where)
def _where(cond, x=None, y=None):
    if x is None:
        return fx.nonzero(asarray(cond))
    return fx.where(
        *(asarray(v) if isinstance(v, np.ndarray | np.generic | list) else v for v in (cond, x, y))
    )


@_register(*([np.astype] if hasattr(np, "astype") else []))
def _astype(x, dtype, copy=True, **kw):
    return fx.astype(x, dtype, copy=copy)


@_register(np.reshape)
def _reshape(a, shape=None, *args, **kw):
    return fx.reshape(asarray(a), (shape,) if isinstance(shape, int) else shape)


@_register(np.concatenate)
def _concatenate(arrays, axis=0, **kw):
    return fx.concat([asarray(a) for a in arrays], axis=axis)


@_register(np.stack)
def _stack(arrays, axis=0, **kw):
    return fx.stack([asarray(a) for a in arrays], axis=axis)


@_register(np.broadcast_to)
def _broadcast_to(a, shape, subok=False):
    return fx.broadcast_to(asarray(a), shape)


@_register(np.clip)
def _clip(a, a_min=None, a_max=None, **kw):
    return fx.clip(asarray(a), a_min, a_max)


@_register(np.isnan)
def _isnan(a):
    return fx.isnan(asarray(a))


@_register(np.expand_dims)
def _expand_dims(a, axis):
    return fx.expand_dims(asarray(a), axis=axis)


@_register(np.squeeze)
def _squeeze(a, axis=None):
    a = asarray(a)
    if axis is None:
        axis = tuple(i for i, n in enumerate(a.shape) if n == 1)
    return fx.squeeze(a, axis)


@_register(np.cumsum)
def _cumsum(a, axis=None, dtype=None, out=None):
    return fx.cumulative_sum(asarray(a), axis=axis, dtype=dtype)


@_register(np.shape)
def _shape(a):
    return a.shape


@_register(np.ndim)
def _ndim(a):
    return a.ndim


@_register(np.size)
def _size(a, axis=None):
    return a.size if axis is None else a.shape[axis]


def array_function(func, types, args, kwargs):
    impl = FUNCTIONS.get(func)
    if impl is not None:
        return impl(*args, **kwargs)
    return _numpy(func, args, kwargs)


HOOKS["array_ufunc"] = array_ufunc
HOOKS["array_function"] = array_function
