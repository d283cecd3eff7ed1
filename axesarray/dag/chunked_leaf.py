"""The chunked leaf: a dask array (logical dim order) inside an expression DAG.

A node kind of its own (``"chunked"``), separate from ``expr`` only to keep modules short.
``engine.chunked.lowering`` evaluates every expression that reads one; the fused planner never sees
them. ``expr_views.transform_views`` reshapes one through its ``reshaped`` method.
"""

from __future__ import annotations

import numpy as np

from .nodes import Node, _intern

__all__ = ["Chunked", "has_chunked"]


class Chunked(Node):
    """A chunked array (a dask array in logical dim order) used as a leaf; evaluated by
    ``engine.chunked.lowering``, never by a kernel. Its key is its structure (dtype, shape, chunks),
    not the graph's identity. ``physical`` is the laid-out storage it reads, if any."""

    __slots__ = ("array", "chunks", "physical")
    kind = "chunked"
    children = ()

    def __init__(self, array, physical=None):
        self.array, self.physical = array, physical
        self.shape = tuple(int(n) for n in array.shape)
        self.dtype = np.dtype(array.dtype)
        self.chunks = tuple(tuple(int(c) for c in cs) for cs in array.chunks)
        self.key = _intern(("Z", self.dtype.char, self.shape, self.chunks))
        _CHUNKED_SEEN[0] = True

    @property
    def params(self):
        return (self,)  # not stored: see Leaf.params

    def __reduce__(self):
        return (Chunked, (self.array, self.physical))  # the dask graph, lazily

    def reshaped(self, shape: tuple[int, ...], step: tuple) -> Chunked:
        """``transform_views``'s split or merge, done by dask (which may rechunk)."""
        arr = self.array
        if step[0] == "merge":
            dims, pos = step[1], step[2]
            rest = [d for d in range(self.ndim) if d not in dims]
            arr = arr.transpose(tuple(rest[:pos]) + tuple(dims) + tuple(rest[pos:]))
        return Chunked(arr.reshape(shape))


_CHUNKED_SEEN = [False]  # no scan of params at all until a chunked node exists


def has_chunked(root: Node) -> bool:
    """Whether ``root`` reads a chunked array (then ``engine.chunked.lowering`` evaluates it)."""
    return _CHUNKED_SEEN[0] and any(p.kind == "chunked" for p in root.params)
