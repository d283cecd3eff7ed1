"""Planner: split an expression DAG into kernels, temporaries and BLAS calls.

Owns the materialization rules (DESIGN §3, §5):

- ``dot`` runs on BLAS (``np.matmul``); its operands must be l-values, so a computed operand
  is materialized first (a transposed leaf is passed as is: matmul handles its strides);
- a reduction fuses its input, and the elementwise ops *above* it (the epilogue, e.g. the
  division of ``mean``); one reduction per kernel. A reduction whose result is read any
  other way (broadcast back, as in softmax, or under a pad) is materialized;
- a computed value read through a view (broadcast along a new axis, transposed, sliced) is
  materialized once instead of being recomputed per element;
- a heavy subexpression (an expensive op, or more than 4 leaves) that ends up in more than
  one kernel is materialized once;
- everything else fuses into one kernel: maps, casts, constants, pads and concats (guarded
  reads whose children are shifted so every leaf reads ``offset + sum(stride * index)``).

Kernel trees hold no arrays: leaves refer to ``("param", i)`` (the i-th leaf/const/pad of
the expression in ``signature`` order), ``("temp", t)`` or ``("dst",)``. Plans are cached
by ``signature`` and bound to new data on each run.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import attrs
import numpy as np

from ..expr import (
    FAST_EXPONENTS,
    Cast,
    Concat,
    Const,
    Dot,
    Leaf,
    Map,
    Node,
    Pad,
    Reduce,
    Remap,
    walk,
)
from ..kernels.ir import KConcat, KConst, KLeaf, KPad, KReduce, kernel_leaves, kernel_nodes
from ..kernels.loops import LoopNest, build_loop_nest
from ..ops import OPS
from ..strided import View, contiguous, permute, remap_view
from .order import result_order

__all__ = [
    "signature",
    "KernelStep",
    "DotStep",
    "Schedule",
    "build_plan",
    "make_step",
    "fresh_view",
]

_HEAVY_LEAVES = 4


def signature(root: Node) -> tuple[tuple, list[Node], dict[int, int]]:
    """Encode the DAG for the plan cache, merging structurally identical subtrees.

    Returns ``(key, params, canon)``: ``key`` is hashable (structure, sharing, dtypes, leaf
    views, never data or scalar values); ``params`` the run-time parameters (leaves,
    constants, pads) in canonical order; ``canon`` maps ``id(node)`` to its canonical
    number, equal for nodes computing the same thing (hash-consing at plan time: two
    ``x.max("C")`` built separately are computed once). Leaves merge only when they view
    the same array the same way; constants and pads never merge (their values are run-time).
    """
    canon: dict[int, int] = {}
    merged: dict[tuple, int] = {}
    parts: list[tuple] = []
    params: list[Node] = []
    for node in walk(root):
        ch = tuple(canon[id(c)] for c in node.children)
        mergeable = True
        if isinstance(node, Leaf):
            part = ("L", node.dtype.char, node.view)
            merge_key = (part, id(node))
        elif isinstance(node, Const):
            part, mergeable = ("K", node.dtype.char, node.shape), False
        elif isinstance(node, Pad):
            part = ("P", node.dim, node.before, node.after, node.dtype.char, ch)
            mergeable = False
        elif isinstance(node, Map):
            part = ("M", node.op, node.dtype.char, ch)
            if node.op == "pow" and isinstance(node.args[1], Const):
                part += (_exponent(node.args[1]),)  # specialized, see _fast_pow
        elif isinstance(node, Cast):
            part = ("C", node.dtype.char, ch)
        elif isinstance(node, Reduce):
            part = ("R", node.op, node.axes, node.dtype.char, ch)
        elif isinstance(node, Remap):
            part = ("X", node.shape, node.maps, ch)
        elif isinstance(node, Concat):
            part = ("J", node.dim, ch)
        elif isinstance(node, Dot):
            part = (
                "D",
                node.a_labels,
                node.b_labels,
                node.out_labels,
                node.shape,
                node.dtype.char,
                ch,
            )
        else:  # pragma: no cover - closed node set
            raise TypeError(f"signature: unknown node {node!r}")
        if mergeable:
            if not isinstance(node, Leaf):
                merge_key = part
            hit = merged.get(merge_key)
            if hit is not None:
                canon[id(node)] = hit
                continue
            merged[merge_key] = len(parts)
        canon[id(node)] = len(parts)
        parts.append(part)
        if isinstance(node, (Leaf, Const, Pad)):
            params.append(node)
    return tuple(parts), params, canon


@attrs.define(eq=False)
class KernelStep:
    """One fused kernel: ``out`` receives ``tree`` over the loops of ``nest``."""

    out: KLeaf
    tree: Node
    nest: LoopNest
    same_index: frozenset  # ids of leaves read exactly at the output's index
    why: str  # what this kernel computes, for explain
    order_from: str | None = None  # which input set a fresh output's memory order
    compiled: dict = attrs.field(factory=dict)  # target -> Lowered/Kernel, filled lazily
    size: int = attrs.field(init=False)  # elements of the loop nest (read on every run)

    def __attrs_post_init__(self) -> None:
        self.size = math.prod(self.nest.lengths)

    def leaves(self) -> list[KLeaf]:
        return kernel_leaves(self.tree)


@attrs.define(eq=False)
class DotStep:
    """``out[b, m, n] = sum_k a[b, m, k] * b[b, k, n]`` on BLAS, operands transposed by
    ``perm_a``/``perm_b`` then reshaped to 3-D (numpy copies only if it must)."""

    a: KLeaf
    b: KLeaf
    out: KLeaf  # the temp, laid out (batch, free_a, free_b), C-contiguous
    perm_a: tuple[int, ...]
    perm_b: tuple[int, ...]
    sizes: tuple[int, int, int, int]  # batch, M, K, N
    why: str = "dot (BLAS)"


@attrs.define(eq=False)
class Schedule:
    temps: list  # (shape, dtype, order) per temp
    steps: list
    result: KLeaf
    device: str = "cpu"
    positions: tuple = ()  # where each canonical param sits in ``root.params``


def _exponent(c: Const) -> float | None:
    v = float(c.value)
    return v if v in FAST_EXPONENTS else None


def _fast_pow(base: Node, exponent: float | None, dtype: np.dtype) -> Node | None:
    """``base ** exponent`` without pow, as numpy does: square, sqrt, reciprocal, copy."""
    if exponent == 2.0:
        return Map("square", (base,), dtype)
    if dtype.kind != "f":
        return None
    if exponent == 0.5:
        return Map("sqrt", (base,), dtype)
    if exponent == -1.0:
        return Map("truediv", (KConst(dtype, ("lit", 1.0)), base), dtype)
    if exponent == 1.0:
        return base
    return None


def _is_one(n: Node) -> bool:
    return isinstance(n, Const) and n.value == 1


def _sigmoid_argument(node: Map) -> Node | None:
    """``x`` when ``node`` is ``1 / (1 + exp(-x))`` (either order of the sum), else None.

    The math library's sigmoid evaluates that same formula with an exp specialized for it;
    the plan key records which constants are 1 (``Map.key``), so this is exact per plan."""
    if node.op != "truediv" or node.dtype.kind != "f" or not _is_one(node.args[0]):
        return None
    den = node.args[1]
    if not (isinstance(den, Map) and den.op == "add"):
        return None
    a, b = den.args
    e = b if _is_one(a) else a if _is_one(b) else None
    if not (isinstance(e, Map) and e.op == "exp" and isinstance(e.args[0], Map)):
        return None
    neg = e.args[0]
    return neg.args[0] if neg.op == "neg" and neg.dtype == node.dtype else None


def _heavy_nodes(root: Node) -> set[int]:
    """Ids of computed nodes that are expensive to recompute."""
    leaves: dict[int, int] = {}
    costly: dict[int, bool] = {}
    heavy: set[int] = set()
    for node in walk(root):
        kids = node.children
        leaves[id(node)] = 1 if isinstance(node, Leaf) else sum(leaves[id(c)] for c in kids)
        own = isinstance(node, Map) and OPS[node.op].expensive
        costly[id(node)] = own or any(costly[id(c)] for c in kids)
        if isinstance(node, (Map, Cast)) and (costly[id(node)] or leaves[id(node)] > _HEAVY_LEAVES):
            heavy.add(id(node))
    return heavy


def _permute_ir(node: Node, perm: tuple[int, ...], memo: dict) -> Node:
    """The same kernel tree with index dims reordered: new dim p is old dim perm[p]."""
    if id(node) in memo:
        return memo[id(node)]
    inv = {old: new for new, old in enumerate(perm)}
    if isinstance(node, KLeaf):
        out = KLeaf(permute(node.view, perm), node.dtype, node.src)
    elif isinstance(node, KConst):
        shape = tuple(node.shape[p] for p in perm) if node.shape else node.shape
        out = KConst(node.dtype, node.src, shape)
    elif isinstance(node, Map):
        out = Map(node.op, tuple(_permute_ir(a, perm, memo) for a in node.args), node.dtype)
    elif isinstance(node, Cast):
        out = Cast(_permute_ir(node.arg, perm, memo), node.dtype)
    elif isinstance(node, KPad):
        out = KPad(_permute_ir(node.child, perm, memo), inv[node.dim], node.lo, node.hi, node.value)
    elif isinstance(node, KConcat):
        parts = tuple(_permute_ir(p, perm, memo) for p in node.parts)
        out = KConcat(parts, inv[node.dim], node.bounds)
    else:  # pragma: no cover
        raise TypeError(f"permute: {node!r}")
    memo[id(node)] = out
    return out


def _shift_ir(node: Node, dim: int, delta: int, length: int, memo: dict) -> Node:
    """The tree read ``delta`` further along ``dim``: new(i) = old(i - delta)."""
    if id(node) in memo:
        return memo[id(node)]
    if isinstance(node, KLeaf):
        shape = list(node.view.shape)
        shape[dim] = length
        maps = tuple((d, -delta if d == dim else 0, 1) for d in range(node.view.ndim))
        out = KLeaf(remap_view(node.view, tuple(shape), maps), node.dtype, node.src)
    elif isinstance(node, KConst):
        out = node
    elif isinstance(node, Map):
        out = Map(
            node.op, tuple(_shift_ir(a, dim, delta, length, memo) for a in node.args), node.dtype
        )
    elif isinstance(node, Cast):
        out = Cast(_shift_ir(node.arg, dim, delta, length, memo), node.dtype)
    elif isinstance(node, KPad):
        moved = node.dim == dim
        out = KPad(
            _shift_ir(node.child, dim, delta, length, memo),
            node.dim,
            node.lo + delta if moved else node.lo,
            node.hi + delta if moved else node.hi,
            node.value,
        )
    elif isinstance(node, KConcat):
        parts = tuple(_shift_ir(p, dim, delta, length, memo) for p in node.parts)
        bounds = tuple(b + delta for b in node.bounds) if node.dim == dim else node.bounds
        out = KConcat(parts, node.dim, bounds)
    else:  # pragma: no cover
        raise TypeError(f"shift: {node!r}")
    memo[id(node)] = out
    return out


def make_nest(out: KLeaf, tree: Node) -> LoopNest:
    """The loop nest of a kernel writing ``tree`` into ``out``: index space = output dims,
    then the reduce dims of its reduction; guard and blocked dims are pinned."""
    nodes = kernel_nodes(tree)
    red = next((n for n in nodes if isinstance(n, KReduce)), None)
    shape = out.view.shape + (red.lengths if red is not None else ())
    leaves = [n for n in nodes if isinstance(n, KLeaf)]
    pinned = set()
    for n in nodes:
        if isinstance(n, (KPad, KConcat)):
            pinned.add(n.dim)
    for lf in [out] + leaves:
        if lf.view.blocks is not None:
            pinned.update(d for d, b in enumerate(lf.view.blocks) if b is not None)
    operands = [out.view.strides] + [lf.view.strides for lf in leaves]
    by_size = sorted(leaves, key=lambda lf: -lf.view.size)
    return build_loop_nest(
        shape,
        out.view.ndim,
        operands,
        frozenset(pinned),
        [lf.view.strides for lf in by_size] or None,
    )


def make_step(out: KLeaf, tree: Node, same_index=frozenset(), why="", order_from=None):
    return KernelStep(out, tree, make_nest(out, tree), same_index, why, order_from)


def _broadcast_ir(node: Node, shape: tuple[int, ...], dims: list[int], memo: dict) -> Node:
    """The tree with its dim k moved to index dim ``dims[k]`` of ``shape``; the other dims
    are broadcast (stride 0)."""
    if id(node) in memo:
        return memo[id(node)]
    if isinstance(node, KLeaf):
        maps = tuple((d, 0, 1) for d in dims)
        out = KLeaf(remap_view(node.view, shape, maps), node.dtype, node.src)
    elif isinstance(node, KConst):
        out = node
    elif isinstance(node, Map):
        out = Map(
            node.op, tuple(_broadcast_ir(a, shape, dims, memo) for a in node.args), node.dtype
        )
    elif isinstance(node, Cast):
        out = Cast(_broadcast_ir(node.arg, shape, dims, memo), node.dtype)
    elif isinstance(node, KPad):
        out = KPad(
            _broadcast_ir(node.child, shape, dims, memo),
            dims[node.dim],
            node.lo,
            node.hi,
            node.value,
        )
    elif isinstance(node, KConcat):
        parts = tuple(_broadcast_ir(p, shape, dims, memo) for p in node.parts)
        out = KConcat(parts, dims[node.dim], node.bounds)
    else:  # pragma: no cover - reductions are realized before they get here
        raise TypeError(f"broadcast: {node!r}")
    memo[id(node)] = out
    return out


def fresh_view(shape: tuple[int, ...], order: tuple[int, ...]) -> View:
    phys = contiguous(tuple(shape[d] for d in order))
    strides = [0] * len(shape)
    for p, d in enumerate(order):
        strides[d] = phys.strides[p]
    return View(tuple(shape), tuple(strides), 0)


class _Builder:
    def __init__(
        self,
        root: Node,
        params: list[Node],
        canon: dict[int, int],
        force: set[int],
        blas: bool = True,
    ):
        self.root = root
        self.blas = blas  # False: lower dot to a fused sum of products (CUDA without CuPy)
        self.canon = canon  # id(node) -> canonical number; all memos are keyed by it
        by_canon = {canon[id(p)]: i for i, p in enumerate(params)}
        self.param_index = {k: by_canon[c] for k, c in canon.items() if c in by_canon}
        self.force = force
        self.heavy = {canon[k] for k in _heavy_nodes(root)}
        self.temps: list = []
        self.steps: list = []
        self.realized: dict[int, KLeaf] = {}
        self.kernel_of: dict[int, set[int]] = {}  # heavy node -> kernels it was fused into
        self._kernels = 0
        self._kernel = 0  # id of the kernel being fused
        self._root = 0  # id of the node that kernel computes
        self._reduce_free = True
        self._memo: dict = {}
        self._same: set = set()

    # --- temporaries ---------------------------------------------------------------------

    def _temp(self, shape, dtype, order) -> KLeaf:
        t = len(self.temps)
        self.temps.append((tuple(shape), np.dtype(dtype), tuple(order)))
        return KLeaf(fresh_view(tuple(shape), tuple(order)), np.dtype(dtype), ("temp", t))

    def _describe(self, leaf: Leaf | None) -> str | None:
        if leaf is None:
            return None
        return f"input t{self.param_index.get(id(leaf), '?')}"

    def realize(self, node: Node) -> KLeaf:
        """A temp holding ``node``'s value (computed by new steps), once per node."""
        cid = self.canon[id(node)]
        hit = self.realized.get(cid)
        if hit is not None:
            return hit
        if isinstance(node, Dot) and self.blas:
            leaf = self._dot(node)
        elif isinstance(node, Dot):
            leaf = self._dot_reduce(node)
        else:
            order, dominant = result_order(node)
            leaf = self._temp(node.shape, node.dtype, order)
            self.kernel(leaf, node, "temporary", self._describe(dominant))
        self.realized[cid] = leaf
        return leaf

    # --- kernels ---------------------------------------------------------------------------

    def kernel(self, out: KLeaf, node: Node, why: str, order_from: str | None = None) -> None:
        """Append the kernel computing ``node`` into ``out`` (after the kernels it needs)."""
        with self._context(node):
            tree = self.fuse(node, "epi")
            self.steps.append(make_step(out, tree, frozenset(self._same), why, order_from))

    @contextmanager
    def _context(self, node: Node):
        """Fusion state of one kernel; kernels realized while fusing get their own."""
        saved = (self._kernel, self._root, self._reduce_free, self._memo, self._same)
        self._kernels += 1
        self._kernel, self._root = self._kernels, self.canon[id(node)]
        self._reduce_free, self._memo, self._same = True, {}, set()
        try:
            yield
        finally:
            self._kernel, self._root, self._reduce_free, self._memo, self._same = saved

    def fuse(self, node: Node, ctx: str) -> Node:
        """Kernel IR for ``node`` in context ``epi`` (the kernel's own index: a reduction
        may be fused here), ``red`` (inside the reduction) or ``guard`` (under pad/concat)."""
        key = (self.canon[id(node)], ctx)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        out = self._fuse(node, ctx)
        self._memo[key] = out
        return out

    def _fuse(self, node: Node, ctx: str) -> Node:
        if isinstance(node, Leaf):
            leaf = KLeaf(node.view, node.dtype, ("param", self.param_index[id(node)]))
            if ctx == "epi":
                self._same.add(id(leaf))
            return leaf
        if isinstance(node, Const):
            return KConst(node.dtype, ("param", self.param_index[id(node)]), node.shape)
        cid = self.canon[id(node)]
        if cid in self.force and cid != self._root:
            return self._leaf_of(self.realize(node))
        if cid in self.heavy:
            self.kernel_of.setdefault(cid, set()).add(self._kernel)
        if isinstance(node, Map):
            x = _sigmoid_argument(node)
            if x is not None:
                return Map("sigmoid", (self.fuse(x, ctx),), node.dtype)
            if node.op == "pow" and isinstance(node.args[1], Const):
                fast = _fast_pow(self.fuse(node.args[0], ctx), _exponent(node.args[1]), node.dtype)
                if fast is not None:
                    return fast
            return Map(node.op, tuple(self.fuse(a, ctx) for a in node.args), node.dtype)
        if isinstance(node, Cast):
            return Cast(self.fuse(node.arg, ctx), node.dtype)
        if isinstance(node, Reduce):
            if ctx == "epi" and self._reduce_free:
                self._reduce_free = False
                kept = [d for d in range(node.arg.ndim) if d not in node.axes]
                perm = tuple(kept) + tuple(node.axes)
                child = _permute_ir(self.fuse(node.arg, "red"), perm, {})
                lengths = tuple(node.arg.shape[d] for d in node.axes)
                return KReduce(node.op, child, len(kept), node.dtype, lengths)
            return self._leaf_of(self.realize(node))
        if isinstance(node, Remap):
            base = self.realize(node.arg)
            view = remap_view(base.view, node.shape, node.maps)
            return KLeaf(view, base.dtype, base.src)
        inner = "red" if ctx == "red" else "guard"
        if isinstance(node, Pad):
            n = node.arg.shape[node.dim]
            length = node.shape[node.dim]
            child = _shift_ir(self.fuse(node.arg, inner), node.dim, node.before, length, {})
            value = KConst(node.dtype, ("param", self.param_index[id(node)]))
            return KPad(child, node.dim, node.before, node.before + n, value)
        if isinstance(node, Concat):
            length = node.shape[node.dim]
            parts, bounds, start = [], [0], 0
            for a in node.args:
                parts.append(_shift_ir(self.fuse(a, inner), node.dim, start, length, {}))
                start += a.shape[node.dim]
                bounds.append(start)
            return KConcat(tuple(parts), node.dim, tuple(bounds))
        if isinstance(node, Dot):
            return self._leaf_of(self.realize(node))
        raise TypeError(f"planner: unknown node {node!r}")  # pragma: no cover

    @staticmethod
    def _leaf_of(temp: KLeaf) -> KLeaf:
        return KLeaf(temp.view, temp.dtype, temp.src)

    # --- dot ----------------------------------------------------------------------------------

    def _dot_operand(self, node: Node) -> KLeaf:
        if isinstance(node, Leaf) and node.view.blocks is None:
            return KLeaf(node.view, node.dtype, ("param", self.param_index[id(node)]))
        return self.realize(node)

    def _dot_reduce(self, node: Dot) -> KLeaf:
        """``dot`` as one fused reduction (CUDA without CuPy): the sum over contracted
        labels of a * b broadcast to the joint index space (``any`` of ``and`` for bool, as
        matmul does). Floats accumulate in float64 and round once."""
        A, B, OUT = node.a_labels, node.b_labels, node.out_labels
        joint = list(OUT) + [lb for lb in A if lb in B and lb not in OUT]
        size = dict(zip(A, node.a.shape, strict=True))
        size.update(zip(B, node.b.shape, strict=True))
        shape = tuple(size[lb] for lb in joint)
        temp = self._temp(node.shape, node.dtype, tuple(range(node.ndim)))
        with self._context(node):
            a = _broadcast_ir(self.fuse(node.a, "red"), shape, [joint.index(lb) for lb in A], {})
            b = _broadcast_ir(self.fuse(node.b, "red"), shape, [joint.index(lb) for lb in B], {})
            boolean = node.dtype.kind == "b"
            prod = Map("and" if boolean else "mul", (a, b), node.dtype)
            tree = KReduce(
                "any" if boolean else "sum", prod, len(OUT), node.dtype, shape[len(OUT) :]
            )
            self.steps.append(make_step(temp, tree, frozenset(), "dot (sum of products)"))
        return temp

    def _dot(self, node: Dot) -> KLeaf:
        a = self._dot_operand(node.a)
        b = self._dot_operand(node.b)
        A, B, OUT = node.a_labels, node.b_labels, node.out_labels
        batch = [lb for lb in OUT if lb in A and lb in B]
        free_a = [lb for lb in OUT if lb in A and lb not in B]
        free_b = [lb for lb in OUT if lb in B and lb not in A]
        contr = [lb for lb in A if lb in B and lb not in OUT]
        size = {lb: n for lb, n in zip(A, node.a.shape, strict=True)}
        size.update(zip(B, node.b.shape, strict=True))
        layout = batch + free_a + free_b
        temp = self._temp(tuple(size[lb] for lb in layout), node.dtype, tuple(range(len(layout))))
        self.steps.append(
            DotStep(
                a,
                b,
                temp,
                tuple(A.index(lb) for lb in batch + free_a + contr),
                tuple(B.index(lb) for lb in batch + contr + free_b),
                tuple(math.prod(size[lb] for lb in g) for g in (batch, free_a, contr, free_b)),
            )
        )
        view = permute(temp.view, tuple(layout.index(lb) for lb in OUT))
        return KLeaf(view, temp.dtype, temp.src)


def build_plan(
    root: Node,
    params: list[Node],
    canon: dict[int, int],
    dst: tuple[View, np.dtype] | None,
    blas: bool = True,
) -> Schedule:
    """Schedule ``dst[...] = root`` (or a fresh result when ``dst`` is None).

    Runs the builder twice: the first pass finds heavy subexpressions fused into more than
    one kernel; the second materializes those once.
    """
    force: set[int] = set()
    for attempt in range(2):
        b = _Builder(root, params, canon, force, blas)
        if dst is None and isinstance(root, Dot) and blas:
            result = b.realize(root)  # the BLAS output is the result: no copy
        elif dst is None:
            order, dominant = result_order(root)
            result = b._temp(root.shape, root.dtype, order)
            b.kernel(result, root, "result", b._describe(dominant))
        else:
            view, dtype = dst
            result = KLeaf(view, dtype, ("dst",))
            b.kernel(result, root, "assignment")
        shared = {n for n, ks in b.kernel_of.items() if len(ks) > 1}
        if attempt == 0 and shared:
            force = shared
            continue
        return Schedule(b.temps, b.steps, result)
    raise AssertionError("unreachable")  # pragma: no cover
