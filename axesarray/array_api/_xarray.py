"""``to_xarray(t, lazy=True)``: a DataArray whose data is a lazy positional Array."""

from __future__ import annotations

from ..errors import message
from ..tensors.tensor import Tensor
from ._array import wrap

__all__ = ["to_xarray"]


def to_xarray(t, lazy: bool = True, coords=None, name=None, attrs=None):
    """A ``xarray.DataArray`` over tensor ``t`` with its names as dims.

    ``lazy=True`` wraps ``t`` as an array API Array: xarray arithmetic, reductions,
    ``isel``, ``where`` and ``transpose`` on it stay lazy and ``.values`` runs the chain as
    fused kernels. ``lazy=False`` computes ``t`` (``t.to_xarray()``).

    >>> import axesarray as ax, numpy as np
    >>> da = ax.to_xarray(ax.tensor(np.arange(6.0).reshape(2, 3), "time x"))
    >>> (da - da.mean("time")).values
    array([[-1.5, -1.5, -1.5],
           [ 1.5,  1.5,  1.5]])
    """
    if not isinstance(t, Tensor):
        raise TypeError(
            message(
                "to_xarray", "expected a Tensor", type(t).__name__, "Use ax.tensor(data, names)"
            )
        )
    if not isinstance(lazy, bool):
        raise TypeError(message("to_xarray", "lazy must be True or False", f"got {lazy!r:.40}"))
    if not lazy:
        return t.to_xarray(coords=coords, name=name, attrs=attrs)
    import xarray as xr

    return xr.DataArray(wrap(t), dims=t.names, coords=coords, name=name, attrs=attrs)
