"""The layout functions users call: ``to_layout``, ``repack``, ``physical``, ``wrap_physical``,
``empty_like_layout`` (Tensor-level; the work is in ``tensors.layout_methods``).
"""

from __future__ import annotations

import numpy as np

from .core.axes import Axes, as_axes
from .core.dtypes import as_dtype
from .errors import AxesError, LayoutError, fmt_axes, message
from .storage.layouts import Layout, bind
from .tensors.layout_methods import allocate_leaf, layout_for_axes, stored_as, wrap_physical_leaf
from .tensors.tensor import Tensor, assign

__all__ = ["empty_like_layout", "to_layout", "repack", "physical", "wrap_physical"]


def empty_like_layout(axes, dtype=None, layout=None, device=None) -> Tensor:
    """An l-tensor for ``axes`` in ``layout``: what ``copy()``/``eval()`` allocate into.

    ``axes`` may be a tensor: its axes, and its dtype, layout and device unless given
    (numpy's ``empty_like``). Axes the layout does not place (a broadcast added them) go
    outermost, in axis order. Padding is zero; the logical elements are left empty.

    >>> import axesarray as ax
    >>> a = ax.Axes([ax.Axis("N", 1), ax.Axis("C", 3), ax.Axis("H", 1), ax.Axis("W", 1)])
    >>> ax.empty_like_layout(a, "float32", ax.Layout.parse("NCHW4")).physical.shape
    (1, 1, 1, 1, 4)
    >>> t = ax.zeros(a, "int8", layout="NCHW32")
    >>> o = ax.empty_like_layout(t)
    >>> str(o.layout), o.dtype, o.physical.shape
    ('NCHW32', dtype('int8'), (1, 1, 1, 1, 32))
    """
    if isinstance(axes, Tensor):
        like = axes
        axes = like.axes
        dtype = like.dtype if dtype is None else dtype
        device = like.device if device is None else device
        if layout is None:
            layout = like.layout if like.layout is not None else Layout(like.names)
    if dtype is None or layout is None:
        missing = " and ".join(n for n, v in (("dtype", dtype), ("layout", layout)) if v is None)
        raise TypeError(
            message(
                "empty_like_layout",
                f"{missing} needed for axes (only a tensor gives them)",
                fmt_axes(axes) if isinstance(axes, Axes) else repr(axes),
                "Pass them: ax.empty_like_layout(axes, 'float32', 'NCHW4'), "
                "or pass a tensor as the first argument",
            )
        )
    axes = as_axes(axes, "empty_like_layout")
    lay = layout_for_axes(axes, layout)
    return Tensor(
        axes,
        allocate_leaf(
            axes, as_dtype(dtype, "empty_like_layout"), lay, "cpu" if device is None else device
        ),
        lay,
    )


def new_in_layout(axes, dtype, layout, fill, op: str, roles: dict) -> Tensor:
    """``ax.empty/zeros/ones/full(..., layout=)``: a fresh l-tensor stored in ``layout``
    (role keywords map its letters to axis names, as for ``to_layout``), padding zero."""
    axes = as_axes(axes, op)
    dt = as_dtype(dtype, op)
    lay = bind(Layout.parse(layout, **roles), axes, op)
    return Tensor(axes, allocate_leaf(axes, dt, lay, "cpu", fill), lay)


def to_layout(t: Tensor, layout, **roles) -> Tensor:
    """A new l-tensor with ``t``'s axes and values, stored in ``layout`` (``t.to_layout``).

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.arange(6.0).reshape(1, 3, 1, 2), "N C H W")
    >>> str(ax.to_layout(x, "NHWC").layout)
    'NHWC'
    """
    if not isinstance(t, Tensor):
        raise TypeError(message("to_layout", "expected a Tensor", type(t).__name__))
    return t.to_layout(layout, **roles)


def physical(t: Tensor) -> np.ndarray:
    """The physical array of a laid-out l-tensor (``t.physical``), a zero-copy view.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.ones((1, 2, 1, 1), "int8"), "N C H W").to_layout("NCHW4")
    >>> ax.physical(x).shape
    (1, 1, 1, 1, 4)
    """
    if not isinstance(t, Tensor):
        raise TypeError(message("physical", "expected a Tensor", type(t).__name__))
    return t.physical


def repack(t: Tensor, layout=None, *, out: Tensor | None = None, **roles) -> Tensor:
    """Copy ``t`` into ``layout`` (a new tensor), or into ``out`` (returned).

    With ``out``, ``layout`` is optional and, when given, must be ``out``'s layout (an
    untagged ``out`` whose strides are exactly that unblocked layout's counts as it).
    ``out`` must have the same axes (any order); its padding is left as it is.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.arange(8.0).reshape(1, 2, 2, 2), "N C H W")
    >>> o = ax.repack(x, "NHWC")
    >>> ax.repack(o, out=ax.zeros(x.axes)).numpy().ravel()[:4]
    array([0., 1., 2., 3.])
    """
    if out is None:
        if layout is None:
            raise LayoutError(
                message("repack", "give a layout or an out tensor", None, "ax.repack(t, 'NCHW4')")
            )
        return to_layout(t, layout, **roles)
    if not isinstance(out, Tensor) or not out.is_lvalue:
        raise TypeError(
            message("repack", "out must be an l-tensor", type(out).__name__, "Allocate it first")
        )
    if sorted(out.axes, key=lambda a: a.name) != sorted(t.axes, key=lambda a: a.name):
        raise AxesError(
            message(
                "repack",
                "out must have the same axes as the input",
                f"input: {fmt_axes(t.axes)}; out: {fmt_axes(out.axes)}",
                "Allocate out with t.axes",
            )
        )
    if layout is not None:
        want = bind(Layout.parse(layout, **roles), out.axes, "repack")
        if out.layout != want and not (out.layout is None and stored_as(out.node, out.axes, want)):
            raise LayoutError(
                message(
                    "repack",
                    "out is not stored in the requested layout",
                    f"out: {out.layout}; requested: {want}",
                    "Drop layout= or pass an out with that layout",
                )
            )
    # Validates, casts, handles aliasing; a big plain copy runs the repack kernels.
    assign(out, t)
    return out


def wrap_physical(arr: np.ndarray, axes, layout, copy: bool = False) -> Tensor:
    """``ax.tensor(buf, axes, layout=...)``: wrap a physical array with logical ``axes``.

    ``axes`` lists the logical axes (names, or Axis objects to give a blocked axis a length
    shorter than its padded one). Zero-copy unless ``copy`` or the strides need it.
    """
    full, leaf, lay = wrap_physical_leaf(arr, axes, layout, copy)
    return Tensor(full, leaf, lay)
