"""Chunked tensors on dask.array: ``chunk``, ``chunks``, ``to_dask``, ``compute``,
``from_dask``, and layouts on chunks. A mixin of ``Tensor`` (results built with
``type(self)``); evaluation is ``engine.chunked.lowering``'s.

A chunked tensor is a ``Tensor`` whose expression reads ``expr.Chunked`` leaves (dask
arrays in logical dim order). A laid-out chunked tensor also keeps its physical dask array
(``node.physical``): its chunks hold whole blocks, and its logical array is derived from
it chunk by chunk. dask is imported only when a chunked tensor is made.
"""

from __future__ import annotations

import math
from typing import Self

import numpy as np

from .. import engine
from ..core.axes import Axes, Axis, axes_for_shape
from ..dag import nodes as ex
from ..dag.chunked_leaf import Chunked, has_chunked
from ..errors import AxesError, LayoutError, fmt_axes, message
from ..storage.devices import host_array
from ..storage.layouts import Layout, physical_dims
from ..storage.memory import wrap_array
from .layout_methods import allocate_leaf, layout_for_axes, wrap_physical_leaf

__all__ = ["ChunkedMethods", "dask_array", "to_physical", "to_logical", "block_aligned"]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_INNER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def dask_array(op: str):
    """``dask.array``, or an ImportError saying how to install it."""
    try:
        import dask.array as da
    except ImportError:
        raise ImportError(
            message(op, "dask is not installed", None, "pip install 'axesarray[dask]'")
        ) from None
    return da


def _target_chunks(t, spec: dict, op: str) -> tuple:
    """Per dim, the chunking asked by ``spec`` (name -> size, tuple of sizes, or -1/None
    for the whole axis); unnamed axes keep their chunks (or are whole)."""
    current = t.chunks or {}
    out = []
    for name in spec:
        t.axes.index(name, op)
    for a in t.axes:
        want = spec.get(a.name, current.get(a.name, -1))
        if want is None or want == -1:
            out.append((a.length,))
            continue
        if isinstance(want, (tuple, list)):
            sizes = tuple(int(c) for c in want)
            if sum(sizes) != a.length or any(c < 0 for c in sizes):
                raise AxesError(
                    message(
                        op,
                        f"the chunks of {a.name!r} do not add up to its length",
                        f"{a}; chunks {sizes}",
                        f"Give sizes that sum to {a.length}, or one size",
                    )
                )
            out.append(sizes)
            continue
        if not isinstance(want, (int, np.integer)) or want <= 0:
            raise AxesError(
                message(
                    op,
                    f"the chunk size of {a.name!r} must be a positive integer",
                    f"got {want!r}",
                    "Give a size like 64, a tuple of sizes, or -1 for the whole axis",
                )
            )
        n = int(want)
        out.append(tuple(min(n, a.length - s) for s in range(0, a.length, n)) or (0,))
    return tuple(out)


def _check_blocks(axes: Axes, layout, chunks: tuple, op: str) -> None:
    """Refuse chunks that split a layout block (every chunk but the last holds whole
    blocks), naming the axes and chunk sizes."""
    for name, x in layout.blocks:
        d = axes.index(name)
        sizes = chunks[d]
        if any(c % x for c in sizes[:-1]):
            raise AxesError(
                message(
                    op,
                    f"chunks of {name!r} split the {x}-element blocks of layout {layout}",
                    f"{axes[d]}; chunks {sizes}",
                    f"Use chunk sizes that are multiples of {x} along {name!r}",
                )
            )


def block_aligned(chunks: tuple, block: int) -> tuple:
    """``chunks`` of one axis moved to block boundaries (each chunk a multiple of
    ``block`` but the last), keeping about the same size."""
    length = sum(chunks)
    if not length:
        return chunks
    size = max(block, round(max(chunks) / block) * block)
    return tuple(min(size, length - s) for s in range(0, length, size))


def _letters(dims) -> tuple:
    """Blockwise indices of physical dims: a logical dim's letter, a new one per block."""
    return tuple(_INNER[k] if d.kind == "inner" else _LETTERS[d.axis] for k, d in enumerate(dims))


class _ToPhysical:
    """Blockwise function: a logical chunk -> its physical array (padding zero); ``serial``
    kernels when the layer has several chunks (dask runs them in parallel)."""

    def __init__(self, layout: Layout, names: tuple, dtype, serial: bool = True):
        self.layout, self.names, self.dtype = layout, names, np.dtype(dtype)
        self.serial = serial

    def __dask_tokenize__(self):
        return ("axesarray-to-physical", str(self.layout), self.names, self.dtype.str, self.serial)

    def __call__(self, block):
        block = np.asarray(block)
        axes = Axes(Axis(n, k) for n, k in zip(self.names, block.shape, strict=True))
        lay = layout_for_axes(axes, self.layout)
        leaf = allocate_leaf(axes, self.dtype, lay)
        base, view = wrap_array(np.ascontiguousarray(block))
        engine.chunked_engine().run_assign(leaf, ex.Leaf(base, view, False), self.serial)
        return leaf.data.reshape(tuple(d.length for d in physical_dims(lay, axes)))


class _ToLogical:
    """Blockwise function: a physical chunk -> its logical values, padding lanes included
    (the caller trims them)."""

    def __init__(self, layout: Layout, names: tuple):
        self.layout, self.names = layout, names

    def __dask_tokenize__(self):
        return ("axesarray-to-logical", str(self.layout), self.names)

    def __call__(self, block):
        _, leaf, _ = wrap_physical_leaf(np.asarray(block), self.names, self.layout)
        return host_array(leaf.data, leaf.view)


def to_physical(arr, axes: Axes, layout: Layout):
    """The physical dask array of a logical one whose chunks hold whole blocks."""
    da = dask_array("to_layout")
    dims = physical_dims(layout, axes)
    ind = _letters(dims)
    adjust = {
        _LETTERS[d.axis]: tuple(-(-c // d.block) for c in arr.chunks[d.axis])
        for d in dims
        if d.kind == "outer"
    }
    new = {_INNER[k]: d.block for k, d in enumerate(dims) if d.kind == "inner"}
    fn = _ToPhysical(layout, axes.names, arr.dtype, arr.npartitions > 1)
    return da.blockwise(
        fn, ind, arr, _LETTERS[: len(axes)], new_axes=new, adjust_chunks=adjust,
        dtype=arr.dtype, meta=np.empty((0,) * len(dims), arr.dtype), token="axesarray-to-physical",
    )  # fmt: skip


def to_logical(phys, axes: Axes, layout: Layout):
    """The logical dask array (logical order) of a physical one."""
    da = dask_array("chunk")
    dims = physical_dims(layout, axes)
    inner = {k: -1 for k, d in enumerate(dims) if d.kind == "inner"}
    if any(len(phys.chunks[k]) > 1 for k in inner):  # a block split across chunks
        phys = phys.rechunk(inner)
    adjust = {
        _LETTERS[d.axis]: tuple(c * d.block for c in phys.chunks[k])
        for k, d in enumerate(dims)
        if d.kind == "outer"
    }
    fn = _ToLogical(layout, axes.names)
    arr = da.blockwise(
        fn, _LETTERS[: len(axes)], phys, _letters(dims), adjust_chunks=adjust,
        concatenate=True, dtype=phys.dtype, meta=np.empty((0,) * len(axes), phys.dtype),
        token="axesarray-to-logical",
    )  # fmt: skip
    if arr.shape != axes.shape:
        arr = arr[tuple(slice(0, n) for n in axes.shape)]
    return arr


class ChunkedMethods:
    """``Tensor``'s chunked methods (a mixin; ``LayoutMethods`` sends chunked tensors to its
    ``_chunked_*`` methods explicitly, so the order of the bases does not matter)."""

    __slots__ = ()

    @classmethod
    def from_dask(cls, array, axes) -> Self:
        """A chunked tensor over a dask array; ``axes`` names its dims (mandatory).

        >>> import axesarray as ax, dask.array as da
        >>> t = ax.from_dask(da.ones((4, 6), chunks=(2, 3)), "N C")
        >>> t.chunks
        {'N': (2, 2), 'C': (3, 3)}
        """
        shape = getattr(array, "shape", None)
        chunks = getattr(array, "chunks", None)
        if shape is None or chunks is None or not hasattr(array, "__dask_graph__"):
            raise TypeError(message("from_dask", "expected a dask array", type(array).__name__))
        if any(isinstance(c, float) and math.isnan(c) for cs in chunks for c in cs):
            raise AxesError(
                message(
                    "from_dask",
                    "the array has unknown chunk sizes",
                    f"chunks {chunks}",
                    "Call array.compute_chunk_sizes() first",
                )
            )
        named = axes_for_shape(axes, tuple(int(n) for n in shape), "from_dask", "array")
        dtype = np.dtype(array.dtype)
        if dtype.hasobject or dtype.names:
            raise TypeError(message("from_dask", "unsupported dtype", str(dtype)))
        return cls(named, Chunked(array))

    @property
    def chunks(self) -> dict | None:
        """Chunk sizes per axis name of a chunked tensor; None for an in-memory one.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((4, 3)), "N C").chunk({"N": 2}).chunks
        {'N': (2, 2), 'C': (3,)}
        """
        if not has_chunked(self.node):
            return None
        arr = engine.chunked_engine().logical_array(self.node)
        return {
            a.name: tuple(int(c) for c in cs) for a, cs in zip(self.axes, arr.chunks, strict=True)
        }

    def chunk(self, chunks: dict | None = None, **sizes) -> Self:
        """A chunked copy (dask): ``t.chunk({"N": 8, "H": 64})``; unnamed axes keep their
        chunks (one chunk for an in-memory tensor). A laid-out tensor's chunks must hold
        whole blocks along its blocked axes.

        >>> import axesarray as ax, numpy as np
        >>> t = ax.tensor(np.zeros((4, 3)), "N C").chunk({"N": 3})
        >>> t.chunks, (t + 1).sum("C").numpy()
        ({'N': (3, 1), 'C': (3,)}, array([3., 3., 3., 3.]))
        """
        da = dask_array("chunk")
        target = _target_chunks(self, dict(chunks or {}, **sizes), "chunk")
        layout = self.layout
        if layout is not None and not layout.partial:
            _check_blocks(self.axes, layout, target, "chunk")
        node = self.node
        if not has_chunked(node):
            arr = da.from_array(self.numpy(), chunks=target)
        else:
            arr = engine.chunked_engine().logical_array(node).rechunk(target)
        out = type(self)(self.axes, Chunked(arr))
        if layout is not None and not layout.partial:
            return out._chunked_layout(layout)
        return out

    def to_dask(self):
        """The values as a dask array in axis order (lazy for a chunked tensor; one chunk
        for an in-memory one).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((4, 3)), "N C").chunk({"N": 2}).to_dask().chunks
        ((2, 2), (3,))
        """
        da = dask_array("to_dask")
        if has_chunked(self.node):
            return engine.chunked_engine().logical_array(self.node)
        values = self.numpy()
        return da.from_array(values, chunks=values.shape)

    def compute(self) -> Self:
        """An in-memory tensor with the values (dask computes them), in this tensor's
        layout; an in-memory tensor is evaluated (``eval()``).

        >>> import axesarray as ax, numpy as np
        >>> t = ax.tensor(np.arange(4.0), "N").chunk({"N": 2})
        >>> (t * 2).compute().numpy()
        array([0., 2., 4., 6.])
        """
        node = self.node
        if not has_chunked(node):
            return self.eval()
        layout = self.layout
        if type(node) is Chunked and node.physical is not None and layout is not None:
            phys = np.asarray(node.physical.compute())
            axes, leaf, lay = wrap_physical_leaf(phys, tuple(self.axes), layout)
            return type(self)(axes, leaf, lay)
        base, view = wrap_array(np.ascontiguousarray(engine.to_numpy(node)))
        out = type(self)(self.axes, ex.Leaf(base, view))
        return out.to_layout(layout_for_axes(self.axes, layout)) if layout is not None else out

    def _chunked_layout(self, lay: Layout) -> Self:
        """This chunked tensor stored in ``lay`` (bound): chunks moved to block boundaries."""
        arr = engine.chunked_engine().logical_array(self.node)
        want = list(arr.chunks)
        for name, x in lay.blocks:
            d = self.axes.index(name)
            want[d] = block_aligned(want[d], x)
        if tuple(want) != arr.chunks:
            arr = arr.rechunk(tuple(want))
        phys = to_physical(arr, self.axes, lay)
        node = Chunked(to_logical(phys, self.axes, lay), physical=phys)
        return type(self)(self.axes, node, lay)

    def _chunked_physical(self):
        """``physical`` of a chunked tensor: the dask array of its physical storage."""
        node = self.node
        if type(node) is not Chunked or node.physical is None or self.layout is None:
            raise LayoutError(
                message(
                    "physical",
                    "a chunked tensor has a physical array only once stored in a layout",
                    f"layout {self.layout}; {fmt_axes(self.axes)}",
                    "Store it first: t.to_layout('NCHW32').physical (a dask array)",
                )
            )
        return node.physical
