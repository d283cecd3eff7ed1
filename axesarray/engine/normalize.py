"""Normalize kernels: the planner's choice to store a reduced value once in the result.

A kernel computing ``f(E, reduce(E))`` (softmax written by hand, ``e / e.sum(K)``) whose
output can hold ``E`` writes ``E`` there while reducing it and reads it back for ``f``
(``kernels.cpu_normalize.normalize_kernel``), instead of computing ``E`` once in a reduction kernel
of its own and again in the root's. ``cost.stored_reduction`` decides; this module builds
the kernel: ``f``'s tree over a ``KReduce(stores=True)`` whose child is the very ``E``
subtree ``f`` reads, in an index space of the output's dims, kept ones first. A mixin of
the planner's builder (``engine.planner``), which owns the fusion state it uses.

When ``E`` reads another reduction over the same dims at the kernel's own index
(``exp(x - x.max(K))``), that reduction becomes a first sweep of the same kernel
(``KSwept``, ``cost.worth_sweeping``): its inputs come from memory once, and the sweeps
after it find them in cache.

``E`` may also be an input (``x - x.max(K)``, a log-softmax ``x - logsumexp(x)``) or
scratch, computed from values ``f`` computes without ``f`` reading it (a layer norm's
``(x - mean)**2``); both reductions may carry an epilogue of constants (a mean).
"""

from __future__ import annotations

from ..core.reductions_table import REDUCTIONS
from ..core.strided import remap_view
from ..dag.nodes import Node
from ..kernels.ir import (
    KCast,
    KLeaf,
    KMap,
    KReduce,
    KSwept,
    kernel_leaves,
    reindex,
    stored_reads,
)
from . import cost

__all__ = ["Normalize"]


class Normalize:
    """The builder's normalize-kernel methods (``_Builder`` has the state: ``canon``,
    ``force``, ``heavy``, ``stores``, ``_store``, ``_swept``, ``realized``, ``fuse``,
    ``_context``, ``steps``, ``unstored``, ``stored_sites``)."""

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

        def stop(n):  # stored by a kernel of its own (or found so by an earlier pass)
            return n is not node and (canon[id(n)] in force or canon[id(n)] in self.unstored)

        key = canon.__getitem__
        return cost.stored_reduction(
            node, (out.view, out.dtype), lambda n: key(id(n)), cost_of, stop
        )

    def _normalize(self, out, node, why, order_from, back, red) -> None:
        """The normalize kernel of ``node`` = ``f(E, reduce(E))`` into ``out``: its index
        space is ``out``'s dims, kept ones first, then the reduced ones (as the reduction's
        own), and its tree ``f`` over a ``KReduce(stores=True)`` whose child is the same
        ``E`` subtree ``f`` reads (``kernels.cpu_normalize.normalize_kernel`` reads it back from
        ``out``). Only ``E``'s own leaves are read before ``out`` is written at their
        index: they alone are in place (``same_index``)."""
        n = node.ndim
        kept = [d for d in range(n) if d not in red.axes]
        perm = tuple(kept) + tuple(red.axes)
        with self._context(node):
            self._out = out
            self._store = (self.canon[id(back)], red, self._sweep_sites(red.arg))
            # the kernel's one reduction: another read at the root's index is a temporary
            self._reduction = red
            tree = self.fuse(node, "epi")
            self.step_nodes[len(self.steps)] = (node, red)
            self.stored_sites.append((self.canon[id(back.arg)], self.canon[id(red)]))
        shape = tuple(node.shape[d] for d in perm)
        maps = tuple((perm.index(d), 0, 1) for d in range(n))
        tree = reindex(tree, shape, maps)
        view = remap_view(out.view, shape, maps)
        out = KLeaf(view, out.dtype, out.src)
        self.steps.append((out, tree, stored_reads(tree), f"{why} (normalize)", order_from))

    def wasted_stores(self) -> set:
        """Canonical values of the stored reductions (or their epilogues) that another
        kernel of this pass stored in a temporary anyway (a mean a full sum of it reads
        too): their normalize kernels saved nothing, and the next pass plans without them
        (``unstored``)."""
        done = {k[0] if type(k) is tuple else k for k in self.realized}
        return {c for pair in self.stored_sites for c in pair if c in done}

    def _stored_reduce(self, node: Node):
        """The normalize kernel's reduction of ``E`` (fused at the output's index, the
        subtree ``f`` reads too), in the original dims (``_normalize`` permutes them), under
        its epilogue (``cost.reduced``: a mean's division) when ``node`` has one."""
        _, red, _ = self._store
        self._reduction = red
        child = self.fuse(red.arg, "epi")
        lengths = tuple(red.arg.shape[d] for d in red.axes)
        n_out = red.arg.ndim - len(red.axes)
        value = KReduce(red.op, child, n_out, red.dtype, lengths, stores=True)
        return self._epilogue(node.arg, red, value)

    def _epilogue(self, top: Node, red: Node, value):
        """The kernel tree of ``top``, the epilogue of ``red`` (``cost.reduced``: maps and
        casts over it and constants), with ``red`` computed as ``value``."""
        red_cid = self.canon[id(red)]

        def tree(n: Node):  # (``top`` may hold another node computing the same value)
            if self.canon[id(n)] == red_cid:
                return value
            if n.kind == "cast":
                return KCast(tree(n.arg), n.dtype)
            kids = (self.fuse(c, "epi") if c.kind == "const" else tree(c) for c in n.children)
            return KMap(n.op, tuple(kids), n.dtype)

        return tree(top)

    def _sweep_sites(self, value: Node) -> frozenset:
        """Canonical values of the remapped reductions ``E`` (``value``) reads through maps
        and casts (stored values end the walk): the only ones a first sweep may compute
        (``f`` reads them from that sweep's per-output value)."""
        found, seen, stack = set(), set(), [value]
        while stack:
            n = stack.pop()
            cid = self.canon[id(n)]
            if cid in seen:
                continue
            seen.add(cid)
            if n.kind == "remap" and cost.reduced(n.arg) is not None:
                found.add(cid)
            elif n.kind in ("map", "cast") and (n is value or cid not in self.force):
                stack.extend(n.children)
        return frozenset(found)

    def _swept_reduce(self, node: Node) -> KSwept | None:
        """``node`` (a remap of a reduction, read by ``E`` in a normalize kernel) as a
        ``KSwept``: a reduction over the normalize kernel's reduced dims, read back at
        the kernel's own index, not stored by a kernel of its own (in ``force`` or
        realized already) and worth a first sweep (``cost.worth_sweeping``); one per
        kernel. None otherwise: it is read from its temporary."""
        _, red, sites = self._store
        red2 = cost.reduced(node.arg)  # (under its epilogue: a mean's division)
        if self._swept is not None or self.canon[id(node)] not in sites or red2 is red:
            return None
        row = REDUCTIONS[red2.op]
        if row.index or row.kernel == "logsumexp" or red2.axes != red.axes:
            return None
        value = red.arg
        kept = [d for d in range(value.ndim) if d not in red.axes]
        if red2.arg.shape != value.shape or node.shape != value.shape:
            return None
        if node.maps != tuple((d, 0, 1) for d in kept):
            return None
        for cid in (self.canon[id(red2)], self.canon[id(node.arg)]):
            if cid in self.force or cid in self.realized:
                return None
        child = self.fuse(red2.arg, "red")  # (reductions below it: their temporaries)
        input_bytes = sum(lf.dtype.itemsize for lf in kernel_leaves(child))
        extent = 1
        for d in red.axes:
            extent *= value.shape[d]
        if not cost.worth_sweeping(input_bytes, red2.dtype.itemsize, extent):
            return None
        lengths = tuple(value.shape[d] for d in red.axes)
        self._swept = KSwept(red2.op, child, len(kept), red2.dtype, lengths)
        return self._epilogue(node.arg, red2, self._swept)
