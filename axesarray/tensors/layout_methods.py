"""Layouts as views of storage: allocation, physical arrays, wrapping buffers (positions).

A tensor stored in a layout is an ordinary l-tensor: one ``Leaf`` whose ``View`` gives
each logical axis its physical stride; a blocked axis gets a ``Block`` (see ``strided``).
Padding (the lanes past the logical length in the last block) is zeroed at allocation and
never written afterwards, because only logical elements are ever written.

This module works on leaves and returns leaves; ``LayoutMethods`` gives ``Tensor`` its
``to_layout``/``physical`` (results built with ``type(self)``). The free functions users
call (``ax.to_layout``, ``ax.repack``...) are in ``layout_ops``.
"""

from __future__ import annotations

import math

import numpy as np

from .. import engine
from ..autograd.rules import in_graph
from ..core.axes import Axes, Axis, parse_names
from ..core.strided import Block, View, contiguous_strides
from ..dag import nodes as ex
from ..dag.chunked_leaf import has_chunked
from ..errors import AxesError, LayoutError, fmt_axes, message
from ..storage.devices import as_device, device_of
from ..storage.layouts import Layout, bind, physical_dims
from ..storage.memory import allocate, wrap_array

__all__ = ["allocate_leaf", "layout_for_axes", "stored_as", "wrap_physical_leaf", "LayoutMethods"]


def _logical_view(layout: Layout, axes: Axes, pstrides, offset: int) -> View:
    """The logical view of a physical array with element strides ``pstrides``."""
    dims = physical_dims(layout, axes)
    strides = [0] * len(axes)
    blocks: list = [None] * len(axes)
    outer: dict[int, int] = {}
    for d, s in zip(dims, pstrides, strict=True):
        if d.kind == "plain":
            strides[d.axis] = s
        elif d.kind == "outer":
            outer[d.axis] = s
        else:
            o = outer[d.axis]
            if s * d.block == o:
                # j//x*o + j%x*s == j*s: contiguous blocks are an ordinary axis.
                strides[d.axis] = s
            else:
                strides[d.axis] = o
                blocks[d.axis] = Block(d.block, s)
    return View(axes.shape, tuple(strides), offset, tuple(blocks) if any(blocks) else None)


def _zero_padding(phys: np.ndarray, layout: Layout, axes: Axes) -> None:
    dims = physical_dims(layout, axes)
    for k, d in enumerate(dims):
        if d.kind != "outer":
            continue
        tail = axes[d.axis].length % d.block
        if tail == 0:
            continue
        inner = next(i for i, e in enumerate(dims) if e.kind == "inner" and e.axis == d.axis)
        index = [slice(None)] * len(dims)
        index[k] = -1
        index[inner] = slice(tail, None)
        phys[tuple(index)] = 0


def allocate_leaf(axes: Axes, dtype, layout: Layout, device="cpu", fill=None) -> ex.Leaf:
    """New storage for ``axes`` in ``layout`` (already bound): padding zero, the rest
    ``fill`` (a scalar already checked against the dtype) or left empty."""
    dtype = np.dtype(dtype)
    device = as_device(device)
    shape = tuple(d.length for d in physical_dims(layout, axes))
    n = math.prod(shape)
    padded = n != axes.size
    if device.is_cpu:
        data = allocate(n, dtype)
        if fill is not None:
            data.fill(fill)
        _zero_padding(data.reshape(shape), layout, axes)
    elif fill is not None:
        host = np.full(n, fill, dtype)
        _zero_padding(host.reshape(shape), layout, axes)
        data = device.upload(host)
    else:
        data = device.upload(np.zeros(n, dtype)) if padded else device.empty(n, dtype)
    view = _logical_view(layout, axes, contiguous_strides(shape), 0)
    return ex.Leaf(data, view)


def stored_as(leaf: ex.Leaf, axes: Axes, layout: Layout) -> bool:
    """Whether an untagged leaf's memory is exactly ``layout`` (bound to ``axes``): the
    strides a fresh allocation in that layout would have. Blocked layouts never match (a
    plain view cannot hold their padding)."""
    if layout.blocks or leaf.view.blocks is not None:
        return False
    shape = tuple(d.length for d in physical_dims(layout, axes))
    want = _logical_view(layout, axes, contiguous_strides(shape), 0)
    return all(
        s == w or n <= 1
        for s, w, n in zip(leaf.view.strides, want.strides, axes.shape, strict=True)
    )


def layout_for_axes(axes: Axes, layout) -> Layout:
    """``layout`` bound to ``axes``; axes it does not place (a broadcast added them) go
    outermost, in axis order."""
    layout = Layout.parse(layout)
    extra = [a.name for a in axes if a.name not in layout.order]
    if extra:
        layout = Layout(tuple(extra) + layout.order, layout.blocks, layout.roles)
    return bind(layout, axes, "allocate")


# --- the physical array ----------------------------------------------------------------------


def _physical_strides(t) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape, element strides) of ``t``'s physical array, from its view and layout."""
    leaf = t.node
    layout = t.layout
    dims = physical_dims(layout, t.axes)
    blocks = leaf.view.blocks or (None,) * leaf.ndim
    shape, strides = [], []
    for k, d in enumerate(dims):
        s = leaf.view.strides[d.axis]
        blk = blocks[d.axis]
        length = t.axes[d.axis].length
        if d.kind == "plain":
            stride = s
        elif blk is not None:
            if blk.phase or blk.step != 1 or blk.size != d.block:
                raise _partial_error(t, d)
            stride = s if d.kind == "outer" else blk.inner
        elif length >= 2:
            # A blocked axis the view math turned plain: inner stride s, blocks of x*s.
            stride = s * d.block if d.kind == "outer" else s
        else:
            # Length 0 or 1 kept no stride; the lanes are contiguous after later blocks.
            later = [e.length for e in dims[k + 1 :] if e.kind == "inner"]
            inner = math.prod(later) if d.kind == "inner" else math.prod(later) * d.block
            stride = inner
        shape.append(d.length)
        strides.append(stride)
    return tuple(shape), tuple(strides)


def _partial_error(t, d=None) -> LayoutError:
    blocked = [f"{n}={t.axes[n].length} (block {x})" for n, x in t.layout.blocks]
    return LayoutError(
        message(
            "physical",
            "the view does not cover whole blocks, so it has no physical array",
            f"layout {t.layout}; {', '.join(blocked)}",
            f"Copy it first: t.to_layout(t.layout).physical, or slice {blocked[0].split('=')[0]} "
            "on block boundaries",
        )
    )


def _physical(t) -> np.ndarray:
    """The physical array of a laid-out l-tensor: a zero-copy numpy view of its storage.

    NCHW4 gives shape (N, ceil(C/4), H, W, 4) with the padding lanes visible (zero).
    A view keeps its tensor's layout: slices of unblocked axes and whole-block slices of
    blocked axes have a physical array; a view that cuts through blocks has none.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.ones((1, 2, 1, 1), "int8"), "N C H W").to_layout("NCHW4")
    >>> x.physical.ravel()
    array([1, 1, 0, 0], dtype=int8)
    """
    if t.layout is None:
        raise LayoutError(
            message(
                "physical",
                "the tensor has no layout",
                fmt_axes(t.axes),
                "Store it in one first: t.to_layout('NCHW') (or any layout)",
            )
        )
    leaf = t.node
    if not isinstance(leaf, ex.Leaf):
        raise LayoutError(
            message(
                "physical",
                "an r-tensor has no storage",
                f"layout {t.layout}; {fmt_axes(t.axes)}",
                "Evaluate it first: t.eval().physical",
            )
        )
    if not device_of(leaf.data).is_cpu:
        raise LayoutError(
            message(
                "physical",
                "the tensor is not in host memory",
                f"device {t.device}",
                "Bring it to the CPU first: t.to('cpu').physical",
            )
        )
    if t.layout.partial:
        raise _partial_error(t)
    shape, strides = _physical_strides(t)
    itemsize = leaf.dtype.itemsize
    byte_strides = tuple(s * itemsize for s in strides)
    if math.prod(shape) == 0:
        return np.lib.stride_tricks.as_strided(np.empty(1, leaf.dtype), shape, byte_strides)
    out = np.ndarray(
        shape,
        leaf.dtype,
        buffer=leaf.data,
        offset=leaf.view.offset * itemsize,
        strides=byte_strides,
    )
    if not leaf.writeable:
        out.flags.writeable = False
    return out


# --- wrapping a physical buffer ------------------------------------------------------------


def wrap_physical_leaf(arr: np.ndarray, axes, layout, copy: bool = False):
    """``ax.tensor(buf, axes, layout=...)``: ``(axes, leaf, layout)`` wrapping a physical
    array with logical ``axes``.

    ``axes`` lists the logical axes (names, or Axis objects to give a blocked axis a length
    shorter than its padded one). Zero-copy unless ``copy`` or the strides need it.
    """
    items = (
        list(parse_names(axes, "tensor"))
        if isinstance(axes, str)
        else ([axes] if isinstance(axes, Axis) else list(axes))
    )
    names = tuple(a.name if isinstance(a, Axis) else a for a in items)
    given = {a.name: a.length for a in items if isinstance(a, Axis)}
    lay = Layout.parse(layout)
    probe = Axes(Axis(n, 0) for n in names)
    lay = bind(lay, probe, "tensor")
    dims = physical_dims(lay, probe)
    if arr.ndim != len(dims):
        raise LayoutError(
            message(
                "tensor",
                f"a {lay} buffer has {len(dims)} dimensions but the array has {arr.ndim}",
                f"expected ({', '.join(d.label for d in dims)}); got shape {arr.shape}",
                "Pass the physical array (e.g. t.physical), not the logical one",
            )
        )
    lengths: dict[str, int] = {}
    for d, n in zip(dims, arr.shape, strict=True):
        name = names[d.axis]
        if d.kind == "inner":
            if n != d.block:
                raise LayoutError(
                    message(
                        "tensor",
                        f"the block dimension {d.label} must have length {d.block}",
                        f"got shape {arr.shape}",
                        "Check the layout's block size",
                    )
                )
            continue
        if d.kind == "plain":
            lengths[name] = n
            if name in given and given[name] != n:
                raise AxesError(
                    message(
                        "tensor",
                        f"axis {name!r} has length {given[name]} but the buffer has {n}",
                        f"buffer shape {arr.shape}",
                        "Pass names only to take lengths from the buffer",
                    )
                )
        else:
            padded = n * d.block
            length = given.get(name, padded)
            if not (padded - d.block < length <= padded or length == padded == 0):
                raise LayoutError(
                    message(
                        "tensor",
                        f"axis {name!r} of length {length} does not fit {n} blocks of {d.block}",
                        f"buffer shape {arr.shape}",
                        f"Use a length in {padded - d.block + 1}..{padded}",
                    )
                )
            lengths[name] = length
    full = Axes(Axis(n, lengths[n]) for n in names)
    wrapped = None if copy else wrap_array(arr)
    if wrapped is None:
        buf = allocate(arr.size, arr.dtype)
        buf[...] = arr.reshape(-1)
        base, pview = buf, View(arr.shape, contiguous_strides(arr.shape), 0)
    else:
        base, pview = wrapped
    view = _logical_view(lay, full, pview.strides, pview.offset)
    return full, ex.Leaf(base, view, bool(arr.flags.writeable)), lay


class LayoutMethods:
    """``Tensor``'s layout methods (a mixin)."""

    __slots__ = ()

    def to_layout(self, layout, **roles):
        """A new l-tensor with this tensor's axes and values, stored in ``layout``.

        ``layout`` is a standard name (``"NCHW"``, ``"NHWC"``, ``"NCHW4"``, ``"NCHW32"``,
        ``"NCHWx"`` for any x, ``"CHWN4"``) or an ``ax.Layout``; keywords map role letters
        to axis names. Always a copy, even when the tensor already has that layout; lazy
        (an r-tensor laid out by ``eval()``) for a graph tensor: one that reads a constant,
        placeholder, persistent tensor or variable, so functions and autograd see it.

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.arange(6.0).reshape(1, 3, 1, 2), "N C H W")
        >>> y = x.to_layout("NCHW4")
        >>> str(y.layout), y.physical.shape
        ('NCHW4', (1, 1, 1, 2, 4))
        >>> y.numpy().shape
        (1, 3, 1, 2)

        A chunked tensor becomes chunked physical storage: its chunks along a blocked axis
        move to block boundaries (an NCHW32 chunk holds whole 32-channel blocks).

        >>> t = ax.tensor(np.ones((1, 40, 2, 2), "float32"), "N C H W").chunk({"C": 20})
        >>> y = t.to_layout("NCHW32")
        >>> y.chunks["C"], y.physical.chunks[1]
        ((32, 8), (1, 1))
        """
        lay = bind(Layout.parse(layout, **roles), self.axes, "to_layout")
        node = self.node
        if has_chunked(node):
            return self._chunked_layout(lay)  # (tensors.chunking)
        if in_graph(node):
            # A graph tensor (one reading a placeholder, variable...) stays lazy: the
            # layout is where eval() puts it, and autograd sees an identity.
            if type(node) is ex.Leaf:
                node = ex.Cast(node, node.dtype)  # an r-tensor reading it as it is
            return type(self)(self.axes, node, lay)
        leaf = allocate_leaf(self.axes, self.dtype, lay, self.device)
        engine.assign(leaf, self.node)  # big plain copies run the repack kernels
        return type(self)(self.axes, leaf, lay)

    @property
    def physical(self) -> np.ndarray:
        """The physical array of a laid-out l-tensor: a zero-copy numpy view of its storage.

        NCHW4 gives shape (N, ceil(C/4), H, W, 4) with the padding lanes visible (zero).
        A view keeps its tensor's layout: slices of unblocked axes and whole-block slices
        of blocked axes have a physical array; a view that cuts through blocks has none.

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.ones((1, 2, 1, 1), "int8"), "N C H W").to_layout("NCHW4")
        >>> x.physical.ravel()
        array([1, 1, 0, 0], dtype=int8)

        A chunked tensor stored in a layout gives a dask array.
        """
        if has_chunked(self.node):
            return self._chunked_physical()
        return _physical(self)
