"""``axesarray.array_api``: the Python array API standard (2024.12) over the named engine.

A positional array is a named tensor whose axes are named by their distance from the last
dimension, so trailing-aligned broadcasting is broadcasting by name and ``permute_dims``
is a rename plus a view. Results stay lazy until a value is needed (``np.asarray``,
``__dlpack__``, ``float()``, ``bool()``, printing); then the pending expression runs as
fused kernels. xarray wraps these arrays (``__array_namespace__``) and stays lazy.

>>> import axesarray.array_api as xp
>>> x = xp.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
>>> y = xp.exp(x - xp.max(x, axis=1, keepdims=True))   # lazy
>>> xp.sum(y / xp.sum(y, axis=1, keepdims=True), axis=1)
Array([1., 1.], dtype=float64)
"""

from __future__ import annotations

import math as _math
import sys as _sys

import numpy as _np

from . import _indexing, _linalg, _numpy, _operators  # noqa: F401 - they fill the Array's hooks
from ._array import HOOKS as _HOOKS
from ._array import Array
from ._creation import *  # noqa: F403 - the namespace is the standard's list
from ._creation import __all__ as _cnames
from ._functions import *  # noqa: F403
from ._functions import __all__ as _fnames
from ._info import __array_namespace_info__
from ._linalg import *  # noqa: F403
from ._linalg import __all__ as _lnames
from ._xarray import to_xarray

__array_api_version__ = "2024.12"

bool = _np.dtype("bool")  # noqa: A001 - the standard's names
int8 = _np.dtype("int8")
int16 = _np.dtype("int16")
int32 = _np.dtype("int32")
int64 = _np.dtype("int64")
uint8 = _np.dtype("uint8")
uint16 = _np.dtype("uint16")
uint32 = _np.dtype("uint32")
uint64 = _np.dtype("uint64")
float32 = _np.dtype("float32")
float64 = _np.dtype("float64")
complex64 = _np.dtype("complex64")  # complex arrays run numpy (no complex kernels)
complex128 = _np.dtype("complex128")

e = _math.e
inf = _math.inf
nan = _math.nan
pi = _math.pi
newaxis = None

__all__ = [
    "__array_api_version__",
    "__array_namespace_info__",
    "Array",
    "to_xarray",
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "e",
    "inf",
    "nan",
    "pi",
    "newaxis",
    *_cnames,
    *_fnames,
    *_lnames,
]
_HOOKS["namespace"] = _sys.modules[__name__]
