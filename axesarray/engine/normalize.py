"""Normalize kernels: the planner's choice to store a reduced value once in the result.

A kernel computing ``f(E, reduce(E))`` (softmax written by hand, ``e / e.sum(K)``) whose
output can hold ``E`` writes ``E`` there while reducing it and reads it back for ``f``
(``kernels.cpu._normalize_kernel``), instead of computing ``E`` once in a reduction kernel
of its own and again in the root's. ``cost.stored_reduction`` decides; this module builds
the kernel: ``f``'s tree over a ``KReduce(stores=True)`` whose child is the very ``E``
subtree ``f`` reads, in an index space of the output's dims, kept ones first. A mixin of
the planner's builder (``engine.planner``), which owns the fusion state it uses.
"""

from __future__ import annotations

from ..core.strided import remap_view
from ..dag.nodes import Node
from ..kernels.ir import KLeaf, KReduce, reindex, stored_reads
from . import cost

__all__ = ["Normalize"]


class Normalize:
    """The builder's normalize-kernel methods (``_Builder`` has the state: ``canon``,
    ``force``, ``heavy``, ``stores``, ``_store``, ``fuse``, ``_context``, ``steps``)."""

    def _stored_site(self, out: KLeaf, node: Node):
        """``(remap, reduce)`` when the kernel computing ``node`` into ``out`` stores the
        reduced value ``E`` in ``out`` (``cost.stored_reduction``); values stored by kernels
        of their own are leaves here."""
        if not self.stores or node.kind not in ("map", "cast"):
            return None
        canon, force, heavy = self.canon, self.force, self.heavy

        def cost_of(value):  # (work, input bytes), as the first pass estimated them
            work, _, _, inputs = heavy[canon[id(value)]]
            return work, inputs

        def stop(n):
            return n is not node and canon[id(n)] in force

        key = canon.__getitem__
        return cost.stored_reduction(
            node, (out.view, out.dtype), lambda n: key(id(n)), cost_of, stop
        )

    def _normalize(self, out, node, why, order_from, back, red) -> None:
        """The normalize kernel of ``node`` = ``f(E, reduce(E))`` into ``out``: its index
        space is ``out``'s dims, kept ones first, then the reduced ones (as the reduction's
        own), and its tree ``f`` over a ``KReduce(stores=True)`` whose child is the same
        ``E`` subtree ``f`` reads (``kernels.cpu._normalize_kernel`` reads it back from
        ``out``). Only ``E``'s own leaves are read before ``out`` is written at their
        index: they alone are in place (``same_index``)."""
        n = node.ndim
        kept = [d for d in range(n) if d not in red.axes]
        perm = tuple(kept) + tuple(red.axes)
        with self._context(node):
            self._out = out
            self._store = (self.canon[id(back)], red)
            tree = self.fuse(node, "epi")
            self.step_nodes[len(self.steps)] = (node, red)
        shape = tuple(node.shape[d] for d in perm)
        maps = tuple((perm.index(d), 0, 1) for d in range(n))
        tree = reindex(tree, shape, maps)
        view = remap_view(out.view, shape, maps)
        out = KLeaf(view, out.dtype, out.src)
        self.steps.append((out, tree, stored_reads(tree), f"{why} (normalize)", order_from))

    def _stored_reduce(self, node: Node) -> KReduce:
        """The normalize kernel's reduction of ``E`` (fused at the output's index, the
        subtree ``f`` reads too), in the original dims (``_normalize`` permutes them)."""
        _, red = self._store
        self._reduction = red
        child = self.fuse(red.arg, "epi")
        lengths = tuple(red.arg.shape[d] for d in red.axes)
        n_out = red.arg.ndim - len(red.axes)
        return KReduce(red.op, child, n_out, red.dtype, lengths, stores=True)
