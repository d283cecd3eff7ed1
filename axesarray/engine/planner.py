"""Planner: split an expression DAG into kernels, temporaries and BLAS calls.

Owns the materialization rules (DESIGN §3, §5):

- ``dot`` runs on BLAS (``np.matmul``); its operands must be l-values, so a computed operand
  is materialized first (a transposed leaf is passed as is: matmul handles its strides);
- a reduction fuses its input, and the elementwise ops *above* it (the epilogue, e.g. the
  division of ``mean``); one reduction per kernel. A reduction whose result is read any
  other way (broadcast back, as in softmax, or under a pad) is materialized;
- a computed value read through a view (broadcast along a new axis, transposed, sliced) is
  materialized once instead of being recomputed per element;
- a subexpression that ends up in more than one kernel is materialized once when the cost
  model (``engine.cost``: work with shared nodes counted once, against the bytes of a
  temporary) says writing it once is cheaper than recomputing it; a reduction is never
  recomputed per element of its consumer (it is read from a temporary);
- everything else fuses into one kernel: maps, casts, constants, pads and concats (guarded
  reads whose children are shifted so every leaf reads ``offset + sum(stride * index)``);
- a kernel computing ``f(E, reduce(E))`` (softmax written by hand) whose output can hold
  ``E`` stores ``E`` there while reducing it and reads it back for ``f`` (a normalize
  kernel, ``engine.normalize``), when ``cost.stored_reduction`` says so: ``E`` computed
  once, not once for the reduction's kernel and once for the root's.

Kernel trees hold no arrays: leaves refer to ``("param", i)`` (the i-th of the root's
``params``), ``("temp", t)`` or ``("dst",)``. Structurally identical subtrees over the same
parameters are computed once (hash-consing by ``(key, params)``). Node kinds dispatch
through ``_Builder._fuse_<kind>``.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

from ..core.ops import OPS
from ..core.strided import View, contiguous, merge_dims, remap_view, split_dim
from ..dag.nodes import Leaf, Node, walk
from ..dag.reshape import merge_order
from ..kernels import scans
from ..kernels.ir import KCast, KConcat, KConst, KLeaf, KMap, KPad, KReduce, kernel_nodes, reindex
from ..kernels.loops import LoopNest, build_loop_nest
from . import cost
from .normalize import Normalize
from .order import result_order
from .schedule import CallStep, DotStep, KernelStep, Schedule

__all__ = ["build_schedule", "make_step", "fresh_view", "make_nest", "heavy_nodes"]

# ``_stage_it``: outputs at least this big, inputs at most this big (elements), 1/16 of it.
_STAGE_MIN_OUTPUT = 1 << 16
_STAGE_MAX_INPUT = 1 << 18


def _canonical(order: list, param_index: dict[int, int]) -> dict[int, int]:
    """``id(node)`` -> an int equal for nodes computing the same thing: the structural key
    plus which parameters they read (so two ``x.max("C")`` built separately merge, and two
    constants or leaves never do unless they are the same object).

    Built bottom-up from the children's values (hash-consing), so each node costs its
    own arity: listing every node's parameters would be quadratic in a long program,
    where each step reads a new view of the input."""
    canon: dict[int, int] = {}
    table: dict[tuple, int] = {}
    for node in order:
        if not node.children:  # a leaf or constant: which parameter it is
            value = (node.key, param_index.get(id(node), -1))
        elif node.kind == "pad":  # its fill value is a parameter of its own
            source = node.source or node
            value = (node.own(), param_index.get(id(source), -1), canon[id(node.arg)])
        else:  # its own structure (no key to finish in a lazy node) over its children's
            value = (node.own(), *(canon[id(c)] for c in node.children))
        canon[id(node)] = table.setdefault(value, len(table))
    return canon


def _shared_candidates(order: list, canon: dict) -> dict:
    """Canonical value -> ``(work, elements, itemsize)`` of the elementwise nodes that could
    be worth materializing when several kernels read them (``cost.worth_materializing``
    decides, once the first pass knows how many). A reduction, a dot, or a computed value
    read through a view is computed once into a temp anyway (or is its kernel's own
    accumulator): reading it again costs a load, so the cost model counts it as a leaf
    (batch norm's ``x - x.mean(r)`` is recomputed where needed, never written out)."""
    work = cost.dag_work(order)
    by_id = {id(n): n for n in order}
    found = {}
    for node in order:
        if node.kind in ("map", "cast"):
            w, _, ids = work[id(node)]
            inputs = 0
            if ids is not None:  # what the kernel writing it would read again
                inputs = sum(by_id[i].dtype.itemsize for i in ids if by_id[i].kind in cost.BOUNDARY)
            found[canon[id(node)]] = (w, math.prod(node.shape), node.dtype.itemsize, inputs)
    return found


def _worth(candidate: tuple, uses: int) -> bool:
    work, elements, itemsize, inputs = candidate
    return cost.worth_materializing(work, elements, itemsize, uses, inputs)


_HEAVY_LEAVES = 4


def heavy_nodes(root: Node, order: list | None = None) -> set[int]:
    """Ids of computed nodes that are expensive to recompute (``autograd.program``'s rule
    for values shared by several outputs; the planner itself asks ``engine.cost``). A
    reduction, a dot, or a computed value read through a view is computed once into a temp
    anyway: reading it again costs a load, so it counts as a leaf. ``order``: ``walk(root)``
    when the caller has it."""
    leaves: dict[int, int] = {}
    costly: dict[int, bool] = {}
    heavy: set[int] = set()
    for node in walk(root) if order is None else order:
        kind = node.kind
        if kind in ("leaf", "remap", "reduce", "dot", "call"):
            leaves[id(node)], costly[id(node)] = 1, False
            continue
        kids = node.children
        leaves[id(node)] = sum(leaves[id(c)] for c in kids)
        own = kind == "map" and OPS[node.op].expensive
        costly[id(node)] = own or any(costly[id(c)] for c in kids)
        elementwise = kind in ("map", "cast")
        if elementwise and (costly[id(node)] or leaves[id(node)] > _HEAVY_LEAVES):
            heavy.add(id(node))
    return heavy


def make_nest(out: KLeaf, tree) -> LoopNest:
    """The loop nest of a kernel writing ``tree`` into ``out``: index space = output dims,
    then the reduce dims of its reduction; guard and blocked dims are pinned."""
    nodes = kernel_nodes(tree)
    red = next((n for n in nodes if n.kind == "reduce"), None)
    shape = out.view.shape + (red.lengths if red is not None and not red.stores else ())
    leaves = [n for n in nodes if n.kind == "leaf"]
    pinned = {n.dim for n in nodes if n.kind in ("pad", "concat")}
    for lf in [out] + leaves:
        if lf.view.blocks is not None:
            pinned.update(d for d, b in enumerate(lf.view.blocks) if b is not None)
    operands = [out.view.strides] + [lf.view.strides for lf in leaves]
    by_size = sorted(leaves, key=lambda lf: -lf.view.size)
    return build_loop_nest(
        shape,
        red.n_out if red is not None and red.stores else out.view.ndim,
        operands,
        frozenset(pinned),
        [lf.view.strides for lf in by_size] or None,
    )


def make_step(out: KLeaf, tree, same_index=frozenset(), why="", order_from=None) -> KernelStep:
    return KernelStep(out, tree, make_nest(out, tree), same_index, why, order_from)


def fresh_view(shape: tuple[int, ...], order: tuple[int, ...]) -> View:
    phys = contiguous(tuple(shape[d] for d in order))
    strides = [0] * len(shape)
    for p, d in enumerate(order):
        strides[d] = phys.strides[p]
    return View(tuple(shape), tuple(strides), 0)


def _shift_maps(ndim: int, dim: int, delta: int) -> tuple:
    """Maps reading a tree ``delta`` further along ``dim``: new(i) = old(i - delta)."""
    return tuple((d, -delta if d == dim else 0, 1) for d in range(ndim))


def _shifted(tree, shape: tuple, dim: int, delta: int, length: int):
    new_shape = tuple(length if d == dim else n for d, n in enumerate(shape))
    return reindex(tree, new_shape, _shift_maps(len(shape), dim, delta))


# Kinds with no ``_Builder._fuse_<kind>``, and why (tests/test_kinds_coverage.py).
NO_RULE = {"chunked": "a chunked leaf is lowered to dask (engine.chunked), never fused here"}


class _Builder(Normalize):
    def __init__(self, dag: Node, params: tuple, canon: dict, force: set, blas: bool, heavy: dict):
        self.blas = blas  # False: lower dot to a fused sum of products (CUDA without CuPy)
        self.stores = True  # normalize kernels allowed (the CPU templates have them)
        self.unstored: set = set()  # reductions no normalize kernel stores (``wasted_stores``)
        self.stored_sites: list = []  # (epilogue, reduction) canonical values it stored
        self.canon = canon  # id(node) -> canonical value; all memos are keyed by it
        self.param_index = {id(p): i for i, p in enumerate(params)}
        # Inputs are numbered among the leaf parameters (what a user calls input 0, 1...).
        leaves = [p for p in params if type(p) is Leaf]
        self.ordinals = {id(p): k for k, p in enumerate(leaves)}
        self.force = force
        self.heavy = heavy  # canonical value -> (work, elements, itemsize, input bytes)
        self.orders: dict = {}  # result_order's per-node memo, shared by every temp
        self.temps: list = []
        # kernel steps as make_step's arguments: their loop nests are built only for the
        # pass that is kept (``finished``)
        self.steps: list = []
        self.realized: dict = {}
        self.kernel_of: dict = {}  # candidate node -> kernels it was fused into
        self._kernels = 0
        self._kernel = 0  # id of the kernel being fused
        self._root = None  # canonical value of the node that kernel computes
        self._reduction = None  # the reduction fused into that kernel (one at most)
        self._memo: dict = {}
        self._same: set = set()
        self._out: KLeaf | None = None  # the output of the kernel being fused
        # a normalize kernel's (canonical value of the remap, reduce, the remapped
        # reductions its E reads: engine.normalize._sweep_sites)
        self._store = None
        self._swept = None  # that kernel's first-sweep reduction (KSwept), if any
        # step index -> (the node it computes, the reduction fused into it or None): what
        # explain names its loops after, without walking the DAG below each step
        self.step_nodes: dict = {}
        self.dot_into = None  # (canonical value, destination KLeaf): a BLAS call writing dst
        self.parents: dict = {}  # canonical value -> parent edges (empty: no in-place temps)
        self.overwritten: dict = {}  # BLAS results written over -> read again afterwards

    def finished(self) -> list:
        """The steps, kernel steps made (their loop nests) now that this pass is kept."""
        return [make_step(*s) if type(s) is tuple else s for s in self.steps]

    # --- temporaries ---------------------------------------------------------------------

    def temp(self, shape, dtype, order) -> KLeaf:
        t = len(self.temps)
        self.temps.append((tuple(shape), np.dtype(dtype), tuple(order)))
        return KLeaf(fresh_view(tuple(shape), tuple(order)), np.dtype(dtype), ("temp", t))

    def realize(self, node: Node, order: tuple[int, ...] | None = None) -> KLeaf:
        """A temp holding ``node``'s value (computed by new steps), once per node; in
        memory ``order`` when given (else its dominant input's)."""
        cid = self.canon[id(node)]
        key = cid if order is None else (cid, order)
        hit = self.realized.get(key)
        if hit is not None:
            if cid in self.overwritten:  # read after a kernel wrote over it: plan again
                self.overwritten[cid] = True
            return hit
        if node.kind == "call" and order is None:
            leaf = self._call(node)
        elif node.kind == "dot" and self.blas and order is None:
            leaf = self._dot(node)
        elif node.kind == "dot" and order is None:
            leaf = self._dot_reduce(node)
        else:
            host = self._blas_host(node) if order is None and self.parents else None
            if host is not None:  # written over the BLAS result it reads
                leaf, dot = host
                self.kernel(leaf, node, "temporary (in place)")
                self.overwritten[dot] = False  # True once read again afterwards
            else:
                dominant = None
                if order is None:
                    order, dominant = result_order(node, self.orders)
                leaf = self.temp(node.shape, node.dtype, order)
                self.kernel(leaf, node, "temporary", self.ordinal(dominant))
        self.realized[key] = leaf
        return leaf

    def _blas_host(self, node: Node) -> tuple | None:
        """``(temp, the product's canonical value)``: the temp of a BLAS result ``node`` may
        be written over (``cost.blas_host``: the product read only by ``node``'s
        elementwise ops), the product computed first."""
        dot = cost.blas_host(node, self.canon, self.parents)
        if dot is None or not self.blas or self.canon[id(dot)] in self.realized:
            return None
        if self.dot_into is not None and self.dot_into[0] == self.canon[id(dot)]:
            return None
        temp = self.realize(dot)
        return KLeaf(temp.view, temp.dtype, temp.src), self.canon[id(dot)]

    def ordinal(self, leaf: Leaf | None) -> int | None:
        """Which input a leaf is: its rank among the root's leaf parameters."""
        return None if leaf is None else self.ordinals.get(id(leaf))

    # --- kernels ---------------------------------------------------------------------------

    def kernel(self, out: KLeaf, node: Node, why: str, order_from: int | None = None) -> None:
        """Append the kernel computing ``node`` into ``out`` (after the kernels it needs)."""
        site = self._stored_site(out, node)
        if site is not None:
            return self._normalize(out, node, why, order_from, *site)
        with self._context(node):
            self._out = out
            tree = self.fuse(node, "epi")
            self.step_nodes[len(self.steps)] = (node, self._reduction)
            self.steps.append((out, tree, frozenset(self._same), why, order_from))

    @contextmanager
    def _context(self, node: Node):
        """Fusion state of one kernel; kernels realized while fusing get their own."""
        saved = (self._kernel, self._root, self._reduction, self._memo, self._same)
        saved_out, saved_store = self._out, (self._store, self._swept)
        self._kernels += 1
        self._kernel, self._root = self._kernels, self.canon[id(node)]
        self._reduction, self._memo, self._same = None, {}, set()
        self._store = self._swept = None
        try:
            yield
        finally:
            self._kernel, self._root, self._reduction, self._memo, self._same = saved
            self._out, (self._store, self._swept) = saved_out, saved_store

    def fuse(self, node: Node, ctx: str):
        """Kernel IR for ``node`` in context ``epi`` (the kernel's own index: a reduction
        may be fused here), ``red`` (inside the reduction) or ``guard`` (under pad/concat)."""
        key = (self.canon[id(node)], ctx)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        kind = node.kind
        cid = self.canon[id(node)]
        if kind not in ("leaf", "const") and cid in self.force and cid != self._root:
            out = self._leaf_of(self.realize(node))
        else:
            if cid in self.heavy:
                self.kernel_of.setdefault(cid, set()).add(self._kernel)
            out = getattr(self, "_fuse_" + kind)(node, ctx)
        self._memo[key] = out
        return out

    def _fuse_leaf(self, node, ctx):
        if ctx == "epi" and self._stage_it(node):
            return self._staged(node)
        leaf = KLeaf(node.view, node.dtype, ("param", self.param_index[id(node)]))
        if ctx == "epi":
            self._same.add(id(leaf))
        return leaf

    def _stage_it(self, node) -> bool:
        """Whether a small broadcast input is read across the output's innermost (fastest)
        dim with a stride (``b(W,H)`` added to ``a(N,C,H,W)``): every element of the output
        row then gathers from another row of ``b``, and the loop does not vectorize. A copy
        of the small input in the output's order costs little and makes the reads
        contiguous (``_staged``)."""
        out = self._out
        if out is None or node.view.blocks is not None or out.view.blocks is not None:
            return False
        view, shape = node.view, node.shape
        if len(shape) != out.view.ndim or math.prod(shape) < _STAGE_MIN_OUTPUT:
            return False
        distinct = math.prod(n for n, s in zip(shape, view.strides, strict=True) if s)
        if distinct > _STAGE_MAX_INPUT or distinct * 16 > math.prod(shape):
            return False
        moving = [d for d, n in enumerate(shape) if n > 1]
        inner = min(moving, key=lambda d: abs(out.view.strides[d]), default=None)
        return inner is not None and abs(view.strides[inner]) > 1

    def _staged(self, node) -> KLeaf:
        """A compact copy of the broadcast input ``node`` (its broadcast dims of length 1)
        laid out in the output's dim order, read back with stride 0 on those dims."""
        cid = ("staged", self.canon[id(node)], self._out.view.strides)
        hit = self.realized.get(cid)
        if hit is None:
            view = node.view
            compact = tuple(
                1 if s == 0 else n for n, s in zip(node.shape, view.strides, strict=True)
            )
            order = tuple(
                sorted(range(len(compact)), key=lambda d: -abs(self._out.view.strides[d]))
            )
            temp = self.temp(compact, node.dtype, order)
            src = KLeaf(
                View(compact, view.strides, view.offset),
                node.dtype,
                ("param", self.param_index[id(node)]),
            )
            self.step_nodes[len(self.steps)] = (node, None)
            self.steps.append((temp, src, frozenset(), "staged broadcast input", None))
            strides = tuple(
                0 if s == 0 else t for s, t in zip(view.strides, temp.view.strides, strict=True)
            )
            hit = self.realized[cid] = KLeaf(View(node.shape, strides, 0), node.dtype, temp.src)
        return hit

    def _fuse_const(self, node, ctx):
        if node.special is not None:  # its value is part of the plan's key: a literal
            return KConst(node.dtype, ("lit", node.special))
        return KConst(node.dtype, ("param", self.param_index[id(node)]))

    def _fuse_map(self, node, ctx):
        return KMap(node.op, tuple(self.fuse(a, ctx) for a in node.children), node.dtype)

    def _fuse_cast(self, node, ctx):
        return KCast(self.fuse(node.arg, ctx), node.dtype)

    def _fuse_reduce(self, node, ctx):
        if ctx != "epi" or self._reduction is not None:
            return self._leaf_of(self.realize(node))
        self._reduction = node
        n = node.arg.ndim
        kept = [d for d in range(n) if d not in node.axes]
        perm = tuple(kept) + tuple(node.axes)  # new dim p reads old dim perm[p]
        shape = tuple(node.arg.shape[d] for d in perm)
        maps = tuple((perm.index(d), 0, 1) for d in range(n))
        child = reindex(self.fuse(node.arg, "red"), shape, maps)
        lengths = tuple(node.arg.shape[d] for d in node.axes)
        return KReduce(node.op, child, len(kept), node.dtype, lengths)

    def _fuse_remap(self, node, ctx):
        if self._store is not None and ctx == "epi" and self.canon[id(node)] == self._store[0]:
            return self._stored_reduce(node)
        if self._store is not None and ctx == "epi":
            swept = self._swept_reduce(node)
            if swept is not None:
                return swept
        arg = node.arg
        if arg.kind == "const":  # a scalar whatever its shape (a compacted contraction)
            return self.fuse(arg, ctx)
        if arg.kind == "leaf" and arg.view.blocks is None:  # an input read through a view
            view = remap_view(arg.view, node.shape, node.maps)
            if view is not None:
                return KLeaf(view, arg.dtype, ("param", self.param_index[id(arg)]))
        base = self.realize(node.arg)
        return KLeaf(remap_view(base.view, node.shape, node.maps), base.dtype, base.src)

    def _fuse_pad(self, node, ctx):
        inner = "red" if ctx == "red" else "guard"
        n = node.arg.shape[node.dim]
        child = self.fuse(node.arg, inner)
        child = _shifted(child, node.arg.shape, node.dim, node.before, node.shape[node.dim])
        # A pad rebuilt by a rewrite reads the value of the pad it was made from.
        value = KConst(node.dtype, ("param", self.param_index[id(node.source or node)]))
        return KPad(child, node.dim, node.before, node.before + n, value)

    def _fuse_concat(self, node, ctx):
        inner = "red" if ctx == "red" else "guard"
        length = node.shape[node.dim]
        parts, bounds, start = [], [0], 0
        for a in node.children:
            parts.append(_shifted(self.fuse(a, inner), a.shape, node.dim, start, length))
            start += a.shape[node.dim]
            bounds.append(start)
        return KConcat(tuple(parts), node.dim, tuple(bounds))

    def _fuse_dot(self, node, ctx):
        leaf = self._leaf_of(self.realize(node))
        if ctx == "epi" and self._out is not None and leaf.src == self._out.src:  # in place
            self._same.add(id(leaf))
        return leaf

    def _fuse_call(self, node, ctx):
        return self._leaf_of(self.realize(node))

    def _fuse_reshape(self, node, ctx):
        """A reshape of a computed value reads a temp through the reshaped view; a merge
        needs the merged dims adjacent and in order, so that temp is laid out for it."""
        if node.step[0] == "split":
            base = self.realize(node.arg)
            return KLeaf(split_dim(base.view, *node.step[1:]), base.dtype, base.src)
        _, dims, pos = node.step
        arg = node.arg
        order = None
        if arg.kind != "dot":  # (a dot's BLAS result has its own layout: try it as it is)
            usual, _ = result_order(arg, self.orders)
            if merge_dims(fresh_view(arg.shape, usual), dims, pos) is None:
                order = merge_order(arg.ndim, dims, pos)
        base = self.realize(arg, order)
        view = merge_dims(base.view, dims, pos)
        if view is None:
            base = self.realize(arg, merge_order(arg.ndim, dims, pos))
            view = merge_dims(base.view, dims, pos)
        return KLeaf(view, base.dtype, base.src)

    @staticmethod
    def _leaf_of(temp: KLeaf) -> KLeaf:
        return KLeaf(temp.view, temp.dtype, temp.src)

    # --- dot ----------------------------------------------------------------------------------

    def _dot_operand(self, node: Node) -> KLeaf:
        if node.kind == "leaf" and node.view.blocks is None:
            return KLeaf(node.view, node.dtype, ("param", self.param_index[id(node)]))
        if node.kind == "remap" and node.arg.kind == "leaf" and node.arg.view.blocks is None:
            # a view of an input (a contraction's operand without its broadcast dims)
            view = remap_view(node.arg.view, node.shape, node.maps)
            if view is not None:
                return KLeaf(view, node.dtype, ("param", self.param_index[id(node.arg)]))
        return self.realize(node)

    def _dot_reduce(self, node) -> KLeaf:
        """``dot`` as one fused reduction (CUDA without CuPy): the sum over contracted
        labels of a * b broadcast to the joint index space (``any`` of ``and`` for bool, as
        matmul does). Floats accumulate in float64 and round once."""
        A, B, OUT = node.a_labels, node.b_labels, node.out_labels
        joint = list(OUT) + [lb for lb in A if lb in B and lb not in OUT]
        size = dict(zip(A, node.a.shape, strict=True))
        size.update(zip(B, node.b.shape, strict=True))
        shape = tuple(size[lb] for lb in joint)
        temp = self.temp(node.shape, node.dtype, tuple(range(node.ndim)))
        with self._context(node):
            a = reindex(self.fuse(node.a, "red"), shape, tuple((joint.index(x), 0, 1) for x in A))
            b = reindex(self.fuse(node.b, "red"), shape, tuple((joint.index(x), 0, 1) for x in B))
            boolean = node.dtype.kind == "b"
            prod = KMap("and" if boolean else "mul", (a, b), node.dtype)
            tree = KReduce(
                "any" if boolean else "sum", prod, len(OUT), node.dtype, shape[len(OUT) :]
            )
            self.step_nodes[len(self.steps)] = (node, None)
            self.steps.append((temp, tree, frozenset(), "dot (sum of products)", None))
        return temp

    def _dot(self, node) -> KLeaf:
        ops = [(self._dot_operand(node.a), node.a_labels)]
        ops.append((self._dot_operand(node.b), node.b_labels))
        OUT = node.out_labels
        into = None
        if self.dot_into is not None and self.dot_into[0] == self.canon[id(node)]:
            into = self.dot_into[1]
            fits = [cost.blas_rows(into.view, o) for o in cost.dot_layouts(node)]
            if not fits[0]:
                ops.reverse()  # b's free dims first: the destination's order
        (a, A), (b, B) = ops
        batch = [lb for lb in OUT if lb in A and lb in B]
        free_a = [lb for lb in OUT if lb in A and lb not in B]
        free_b = [lb for lb in OUT if lb in B and lb not in A]
        contr = [lb for lb in A if lb in B and lb not in OUT]
        size = dict(zip(node.a_labels, node.a.shape, strict=True))
        size.update(zip(node.b_labels, node.b.shape, strict=True))
        layout = batch + free_a + free_b
        order = tuple(OUT.index(lb) for lb in layout)  # layout dim p is result dim order[p]
        if into is not None:  # the destination read in layout order: BLAS rows (checked)
            v = into.view
            shape, strides = (tuple(x[d] for d in order) for x in (v.shape, v.strides))
            rows = View(shape, strides, v.offset)
            out = KLeaf(rows, node.dtype, ("dst",))
        else:
            out = self.temp(tuple(size[lb] for lb in layout), node.dtype, tuple(range(len(layout))))
        self.step_nodes[len(self.steps)] = (node, None)
        self.steps.append(
            DotStep(
                a,
                b,
                out,
                tuple(A.index(lb) for lb in batch + free_a + contr),
                tuple(B.index(lb) for lb in batch + contr + free_b),
                tuple(math.prod(size[lb] for lb in g) for g in (batch, free_a, contr, free_b)),
            )
        )
        if into is not None:
            return KLeaf(into.view, node.dtype, ("dst",))
        # the temp's dim p is the result's dim order[p] (a permutation, not its inverse:
        # the two differ for a cycle of three dims, a gradient's (A, X1, X2) of a product
        # laid out (X1, X2, A))
        maps = tuple((order[p], 0, 1) for p in range(len(layout)))
        return KLeaf(remap_view(out.view, node.shape, maps), out.dtype, out.src)

    # --- call (a numpy function) -------------------------------------------------------------

    def _call(self, node) -> KLeaf:
        """A ``CallStep``: operands as leaves (a broadcast or transposed computed value is
        read through its view of a temp, not spread into a bigger one), result a temp."""
        args = []
        for c in node.children:
            if c.kind == "leaf" and c.view.blocks is None:
                args.append(KLeaf(c.view, c.dtype, ("param", self.param_index[id(c)])))
            elif c.kind == "remap":
                args.append(self._fuse_remap(c, "epi"))
            else:
                args.append(self.realize(c))
        temp = self.temp(node.shape, node.dtype, tuple(range(node.ndim)))
        self.step_nodes[len(self.steps)] = (node, None)
        scan = scans.plan(node.fn, args[0], temp) if len(args) == 1 else None
        why = f"{node.name} ({'a compiled scan' if scan else 'numpy'})"
        self.steps.append(CallStep(node.fn, tuple(args), temp, node.name, why, scan))
        return temp


# Compile time grows with a kernel's body (numba's passes, then LLVM): about 3 ms per
# arithmetic op and 10 ms per transcendental on the 2-core machine (benchmarks/
# bench_compile.py), plus ~0.15 s per kernel, and more per operand (``_READ_COST``). A
# body past this budget is cut: the cut
# subexpression is materialized (a temporary written once, read once), so compile time
# stays linear and each kernel compiles in about 0.3 s at most.
KERNEL_BUDGET = 48
_EXPENSIVE_COST = 4  # an exp/log/division counts as four additions
# An operand (a distinct array read) costs two additions: numba types and addresses each
# array argument. A sum of 40 arrays compiled in 2.2-3.3 s against 0.6 s for a sum of 8 (one
# kernel each, load 12): ~50 ms per operand, ~15 ms per op. Without it the recurrent
# gradient's sum over its steps made kernels of 48 additions over 50 operands.
_READ_COST = 2


def _body_of(node_id: int, kept: list, body: dict, own: dict) -> tuple[int, frozenset]:
    """Size and nodes of a fused body: the node and its kept children's bodies, each
    distinct node once."""
    ids = frozenset((node_id,)).union(*(body[id(c)] for c in kept))
    return sum(own[i] for i in ids), ids


def _size_cuts(order: list, canon: dict, stored: frozenset | set = frozenset()) -> dict:
    """``id(node) -> canonical value`` of the elementwise nodes to materialize so that no
    kernel body exceeds ``KERNEL_BUDGET``: bottom-up, a node whose fused children would
    take it past the budget cuts its biggest child, then the next. A body's size counts
    each distinct node once (it is one local in the generated source: a ``where`` chain
    that repeats its argument does not grow with the repeats); each distinct operand it
    reads (a leaf, a temporary) counts ``_READ_COST``. Values in ``stored`` (canonical)
    are materialized anyway: bodies stop there, as at a leaf."""
    size: dict[int, int] = {}
    body: dict[int, frozenset] = {}
    own: dict[int, int] = {}
    cuts: dict[int, tuple] = {}
    for node in order:
        kind = node.kind
        if kind not in ("map", "cast", "pad", "concat") or canon[id(node)] in stored:
            # a boundary: a leaf, or computed by a kernel of its own. Reading it is an
            # operand of the kernel (an array, its offset and strides to type and address)
            if kind == "const":
                size[id(node)], body[id(node)] = 0, frozenset()
            else:
                own[id(node)] = size[id(node)] = _READ_COST
                body[id(node)] = frozenset((id(node),))
            continue
        own[id(node)] = _EXPENSIVE_COST if kind == "map" and OPS[node.op].expensive else 1
        kids = sorted(node.children, key=lambda c: -size[id(c)])
        kept = list(kids)
        total, ids = _body_of(id(node), kept, body, own)
        for c in kids:
            if total <= KERNEL_BUDGET:
                break
            if id(c) in own and len(body[id(c)]) > 1:  # an elementwise child: cut it
                cuts[id(c)] = canon[id(c)]
                # from now on every kernel reads it from its temporary: an operand
                own[id(c)] = size[id(c)] = _READ_COST
                body[id(c)] = frozenset((id(c),))
                total, ids = _body_of(id(node), kept, body, own)
        size[id(node)], body[id(node)] = total, ids
    return cuts


_ATTEMPTS = 4  # builder passes at most (each linear in the DAG)


def _fan_out(order: list, canon: dict) -> dict:
    """Canonical value -> how many distinct canonical nodes read it (each node once)."""
    count: dict = {}
    done: set = set()
    for node in order:
        cid = canon[id(node)]
        if cid in done:
            continue
        done.add(cid)
        for k in {canon[id(c)] for c in node.children}:
            count[k] = count.get(k, 0) + 1
    return count


def stored_in_order(order: list, canon: dict, force: set) -> list:
    """The nodes to store (canonical values in ``force``), children first, the root left
    out: realized in this order, each kernel stops at the last stored value below it, so
    fusing never recurses down a long chain (a recurrence of 800 steps)."""
    root = canon[id(order[-1])]
    out, seen = [], set()
    for n in order:
        cid = canon[id(n)]
        if cid in force and cid != root and cid not in seen and n.kind not in ("leaf", "const"):
            seen.add(cid)
            out.append(n)
    return out


def _in_place_ok(steps) -> bool:
    """Whether every kernel that reads its own output (a BLAS result written there before
    it) reads it only at its own index: anything else would read elements it overwrote."""
    return all(
        lf.view == step.out.view and id(lf) in step.same_index
        for step in steps
        if type(step) is KernelStep
        for lf in kernel_nodes(step.tree)
        if lf.kind == "leaf" and lf.src == step.out.src
    )


def build_schedule(
    dag: Node,
    params: tuple,
    dst: tuple[View, np.dtype] | None,
    blas: bool = True,
    record: dict | None = None,
    stores: bool = True,
) -> Schedule:
    """Schedule ``dst[...] = dag`` (or a fresh result when ``dst`` is None).

    ``params`` are the run-time parameters in the order kernels will receive them (the
    original root's, before rewrites). Runs the builder twice: the first pass finds the
    subexpressions fused into more than one kernel; the second materializes those that
    the cost model says are cheaper written once than recomputed (``cost``). In a long
    chain (the structural rule) the second stores the costly values read by several
    nodes (a value read by one node is computed where that node is), and a later pass,
    at most ``_ATTEMPTS`` in all, stores what is still computed by several kernels.
    ``record`` (explain) receives step index -> (the node that step computes, the
    reduction node fused into it or None). ``stores``: normalize kernels allowed (CPU).
    """
    nodes = walk(dag)  # every pass below visits each node once, in this order
    canon = _canonical(nodes, {id(p): i for i, p in enumerate(params)})
    cuts = _size_cuts(nodes, canon)
    heavy = _shared_candidates(nodes, canon)
    structural = {canon[k] for k in heavy_nodes(dag, nodes)}
    force: set = set(cuts.values())
    into = None
    if dst is not None and blas:
        found = cost.blas_into_destination(dag, *dst)
        if found is not None:  # (the dot's canonical value, the destination as its dims)
            into = (canon[id(found[0])], KLeaf(found[1], dst[1], ("dst",)))
    parents = cost.parent_edges(dag, canon) if blas else {}
    by_structure = False
    unstored: set = set()  # normalize kernels found to save nothing (``wasted_stores``)
    attempt = 0  # builder passes that stored more values (planning again without in-place
    # BLAS results does not count: it happens at most once)
    while True:
        b = _Builder(dag, params, canon, force, blas, heavy)
        b.dot_into, b.parents, b.stores, b.unstored = into, parents, stores, unstored
        for node in stored_in_order(nodes, canon, force):
            b.realize(node)
        if dst is None and (dag.kind == "dot" and blas or dag.kind == "call"):
            result = b.realize(dag)  # the BLAS or numpy output is the result: no copy
        elif dst is None:
            order, dominant = result_order(dag, b.orders)
            result = b.temp(dag.shape, dag.dtype, order)
            b.kernel(result, dag, "result", b.ordinal(dominant))
        else:
            view, dtype = dst
            result = KLeaf(view, dtype, ("dst",))
            top = dag.arg if dag.kind == "remap" else dag  # (a dot with its dims permuted)
            if into is not None and into[0] == canon[id(top)]:
                b.realize(top)  # BLAS writes the destination: nothing to copy
            else:
                b.kernel(result, dag, "assignment")
        more: set = set()
        if attempt == 0:
            more = {n for n, ks in b.kernel_of.items() if _worth(heavy[n], len(ks))}
            # A value whose work passes a kernel's budget sits in a long chain without a
            # boundary (gradients summed over an unrolled loop): its estimate grows with
            # the chain, so the cost model would store a different node per loop length.
            # There the structural rule decides, and identical steps plan identical kernels.
            if any(heavy[n][0] > KERNEL_BUDGET for n in more):
                by_structure = True
                fan_out = _fan_out(nodes, canon)
                # This pass fused everything, so values deep in the chain sit in many
                # kernels, and values a later kernel will read may sit in one. The rule:
                # a costly value read by several nodes is stored; a value read by one
                # node is computed once, where that node is.
                more = {n for n in more if heavy[n][0] <= KERNEL_BUDGET} | {
                    n for n in b.kernel_of if n in structural
                }
                more = {n for n in more if fan_out.get(n, 0) > 1}
        elif by_structure and attempt < _ATTEMPTS - 1:
            # Still computed by several kernels (rare): values read by several nodes are
            # stored first, then values read by one node that is itself recomputed (a
            # pad read twice).
            more = {
                n
                for n, ks in b.kernel_of.items()
                if len(ks) > 1 and (n in structural or _worth(heavy[n], len(ks)))
            }
            more -= force
            more = {n for n in more if fan_out.get(n, 0) > 1} or more
        if more and by_structure:
            # The chain is cut where values are stored anyway; the budget's cuts are
            # made again around them (cutting first would split the chain at other
            # nodes and store those too).
            shared = (force - set(cuts.values())) | more
            cuts = _size_cuts(nodes, canon, shared)
            force = shared | set(cuts.values())
            attempt += 1
            continue
        if more:
            force = force | more
            attempt += 1
            continue
        wasted = b.wasted_stores() - unstored
        if wasted:  # planned again without those normalize kernels (at most once per value)
            unstored |= wasted
            continue
        steps = b.finished()
        if (into is not None or parents) and (
            any(b.overwritten.values()) or not _in_place_ok(steps)
        ):
            into, parents = None, {}  # a kernel reads a BLAS result away from its own index
            continue
        if record is not None:
            record.update(b.step_nodes)
        return Schedule(b.temps, steps, result, dst_early=into is not None)
