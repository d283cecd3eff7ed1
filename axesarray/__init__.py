"""axesarray: named-axis arrays whose expressions fuse into one compiled kernel.

>>> import axesarray as ax, numpy as np
>>> x = ax.tensor(np.ones((2, 3)), "N C")
>>> y = ax.tensor(np.arange(3.0), "C")
>>> (x + y).sum("N").numpy()
array([2., 4., 6.])
"""

import sys as _sys

from . import _startup  # noqa: F401 - first: Ctrl-C while the program imports (see _startup)
from .core.axes import Axes, Axis, broadcast_axes

__all__ = ["Axis", "Axes", "broadcast_axes"]

from .errors import AxesError, LayoutError

__all__ += ["AxesError", "LayoutError"]

from .options import get_option, set_options

__all__ += ["get_option", "set_options"]

from .engine import warmup

__all__ += ["warmup"]

from .storage.devices import Device

__all__ += ["Device"]

from .tensors.tensor import Tensor, TensorDescription, assign

__all__ += ["Tensor", "TensorDescription", "assign"]

from .creation import (
    arange,
    empty,
    from_dlpack,
    from_xarray,
    full,
    ones,
    random,
    tensor,
    zeros,
)

__all__ += ["arange", "empty", "full", "ones", "random", "tensor", "zeros"]
__all__ += ["from_dlpack", "from_xarray"]

# The elementwise functions are generated from the op table (ops.OPS): one row per op.
from . import functions as _functions

globals().update({name: getattr(_functions, name) for name in _functions.__all__})
__all__ += _functions.__all__

from .everyday import allclose, apply, einsum, isclose, stack

__all__ += ["allclose", "apply", "einsum", "isclose", "stack"]

from .io.npy import load, save
from .layout_ops import empty_like_layout, physical, repack, to_layout
from .storage.layouts import Layout

__all__ += ["Layout", "empty_like_layout", "load", "physical", "repack", "save", "to_layout"]

from .io.zarr_store import from_dask, open_zarr, to_zarr

__all__ += ["from_dask", "open_zarr", "to_zarr"]

from .nn import optim
from .nn.functional import log_softmax, logsumexp, softmax, softmax_cross_entropy
from .nn.graph import (  # graph.explain also takes lists and functions (it replaces functions')
    constant,
    explain,  # noqa: F401 - already in __all__
    function,
    grad,
    persistent_tensor,
    placeholder,
    variable,
    variables,
)

# ``import axesarray.optim`` / ``from axesarray.optim import SGD`` keep working.
_sys.modules[__name__ + ".optim"] = optim

__all__ += [
    "constant",
    "function",
    "grad",
    "log_softmax",
    "logsumexp",
    "optim",
    "persistent_tensor",
    "placeholder",
    "softmax",
    "softmax_cross_entropy",
    "variable",
    "variables",
]

from .display.pictures import show_layout

__all__ += ["show_layout"]

from ._version import __version__

__all__ += ["__version__"]

# The positional namespace of the Python array API standard, over the named engine.
from . import array_api
from .array_api import to_xarray

__all__ += ["array_api", "to_xarray"]
