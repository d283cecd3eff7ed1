"""Engines: evaluate a node into fresh storage, or assign it into an existing l-tensor.

``engine="numpy"`` runs the reference engine; ``engine="numba"`` the fused engine
(``executor``, imported on first use because it imports numba). Both allocate results in
the order ``order.result_order`` picks. An expression reading chunked (dask) arrays goes to
``chunked`` (imported on first use: it imports dask), whatever the engine option; that
option then picks the engine each chunk runs.
"""

from __future__ import annotations

import numpy as np

from ..devices import host_array
from ..expr import Leaf, Node
from ..expr_chunked import has_chunked
from ..options import OPTIONS
from ..storage import fresh, wrap_array
from . import reference
from .order import result_order

__all__ = ["evaluate", "assign", "to_numpy", "explain", "result_order", "warmup"]


_FUSED: list = []  # the executor module, imported on first use (it imports numba)
_CHUNKED: list = []  # the dask lowering, imported on first use (it imports dask)


def _executor():
    if not _FUSED:
        from . import executor

        _FUSED.append(executor)
    return _FUSED[0]


def chunked_engine():
    """The dask lowering module (``engine.chunked``)."""
    if not _CHUNKED:
        from . import chunked as module

        _CHUNKED.append(module)
    return _CHUNKED[0]


def allocate_for(root: Node) -> Leaf:
    """A fresh, writeable leaf shaped like ``root``, in its dominant input's memory order."""
    order, _ = result_order(root)
    data, view = fresh(root.shape, root.dtype, order)
    return Leaf(data, view)


def evaluate(root: Node) -> Node:
    """Compute ``root`` into newly allocated storage (a ``Leaf``); for an expression over
    chunked arrays, the lazy dask result (a ``Chunked`` node)."""
    if has_chunked(root):
        return chunked_engine().evaluate(root)
    if OPTIONS["engine"] == "numba":
        return _executor().evaluate(root)
    out = allocate_for(root)
    reference.assign(out, root)
    return out


def assign(dst: Leaf, root: Node) -> None:
    """Write ``root`` into ``dst`` (same shape, castable dtype, already validated)."""
    if has_chunked(root):  # computed whole first: ``root`` may read ``dst``
        data, view = wrap_array(np.ascontiguousarray(chunked_engine().compute(root)))
        root = Leaf(data, view, False)
    if OPTIONS["engine"] == "numba":
        _executor().assign(dst, root)
    else:
        reference.assign(dst, root)


def explain(root: Node, dst: Leaf | None = None, names=None):
    """The fused engine's public ``Plan`` for ``root`` (into ``dst`` when given); the
    ``ChunkedPlan`` of an expression over chunked arrays."""
    if has_chunked(root):
        return chunked_engine().explain(root, names)
    return _executor().explain(root, dst, names)


def to_numpy(root: Node) -> np.ndarray:
    """The value in logical order: a view for plain leaves, else a computed array."""
    if isinstance(root, Leaf):
        return host_array(root.data, root.view, root.writeable)
    if has_chunked(root):
        return chunked_engine().compute(root)
    leaf = evaluate(root)
    return host_array(leaf.data, leaf.view)


def warmup() -> None:
    """Pay numba's one-time start-up now: import it and load its CPU target's registries.

    The first evaluation in a new process otherwise includes that (about a second here);
    after it, loading a kernel compiled by an earlier process takes milliseconds. Useful in
    a notebook's first cell or a server's start-up.

    >>> import axesarray as ax
    >>> ax.warmup()
    """
    from ..numba_private import load_cpu_target

    _executor()  # imports the code generator and the math library
    load_cpu_target()
