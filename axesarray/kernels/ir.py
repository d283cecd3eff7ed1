"""Kernel IR: the tree one fused kernel computes, in the kernel's own index space.

A small family of frozen node classes, made only by the planner:

- ``KLeaf``: a strided read (or the output), with where its storage comes from at run
  time (``src``); ``KConst``: a scalar argument or a literal;
- ``KMap``/``KCast``: an op of ``ops.OPS`` / a conversion;
- ``KPad``: ``child`` where ``lo <= i[dim] < hi``, else ``value`` (a guarded read);
- ``KConcat``: ``parts[k]`` where ``bounds[k] <= i[dim] < bounds[k+1]``;
- ``KReduce``: accumulate ``child`` over the trailing (reduce) dims of the index space
  (``stores``: the normalize template, whose index space is the output's own);
- ``KSwept``: a reduction the normalize kernel computes in a first sweep of its own,
  read by the stored value ``E`` (the max of a softmax written by hand).

Every class has ``kind``, ``children`` and ``rebuild(children)``; ``reindex`` is the one
transform of index spaces (permute, shift, broadcast are all remaps), so passes over the
IR dispatch on ``kind`` instead of repeating an ``isinstance`` ladder.

Children of guards are already shifted to read at the kernel's index, so every leaf's
address is ``offset + sum(stride * i)`` over the same index variables. Leaves of the
epilogue (above a ``KReduce``) and the output have the output dims only; leaves under the
``KReduce`` have output dims followed by reduce dims.
"""

from __future__ import annotations

import attrs
import numpy as np

from ..core.strided import View, remap_view

__all__ = [
    "KLeaf",
    "KConst",
    "KMap",
    "KCast",
    "KPad",
    "KConcat",
    "KReduce",
    "KSwept",
    "reindex",
    "kernel_nodes",
    "kernel_leaves",
    "computed_from",
    "stored_reads",
]

_frozen = attrs.frozen(eq=False, repr=False)  # identity equality: trees share subtrees


@_frozen
class KLeaf:
    """A strided read (or the output). ``src`` is ``("param", i)`` (the i-th parameter of
    the expression), ``("temp", t)``, ``("alias",)`` or ``("dst",)``: kernel trees hold
    no arrays, so schedules can be cached and reused."""

    view: View
    dtype: np.dtype
    src: tuple
    kind = "leaf"
    children = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.view.shape


@_frozen
class KConst:
    """A scalar: ``src`` is ``("param", i)`` (known at run time) or ``("lit", value)`` (a
    literal in the source, e.g. the 1 of a reciprocal)."""

    dtype: np.dtype
    src: tuple
    kind = "const"
    children = ()
    shape = ()


@_frozen
class KMap:
    op: str
    args: tuple
    dtype: np.dtype
    kind = "map"

    @property
    def children(self) -> tuple:
        return self.args

    @property
    def shape(self) -> tuple[int, ...]:
        return self.args[0].shape

    def rebuild(self, children) -> KMap:
        return KMap(self.op, tuple(children), self.dtype)


@_frozen
class KCast:
    arg: object
    dtype: np.dtype
    kind = "cast"

    @property
    def children(self) -> tuple:
        return (self.arg,)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.arg.shape

    def rebuild(self, children) -> KCast:
        return KCast(children[0], self.dtype)


@_frozen
class KPad:
    child: object
    dim: int
    lo: int
    hi: int
    value: KConst
    kind = "pad"

    @property
    def children(self) -> tuple:
        return (self.child, self.value)

    @property
    def dtype(self) -> np.dtype:
        return self.child.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.child.shape

    def rebuild(self, children) -> KPad:
        return KPad(children[0], self.dim, self.lo, self.hi, children[1])


@_frozen
class KConcat:
    parts: tuple
    dim: int
    bounds: tuple[int, ...]
    kind = "concat"

    @property
    def children(self) -> tuple:
        return self.parts

    @property
    def dtype(self) -> np.dtype:
        return self.parts[0].dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.parts[0].shape

    def rebuild(self, children) -> KConcat:
        return KConcat(tuple(children), self.dim, self.bounds)


@_frozen
class _Reduction:
    """The fields of ``KReduce`` and ``KSwept``: ``op`` over index dims ``n_out..`` (of
    lengths ``lengths``) of ``child``, ``dtype`` the result."""

    op: str
    child: object
    n_out: int
    dtype: np.dtype
    lengths: tuple[int, ...]

    @property
    def children(self) -> tuple:
        return (self.child,)


@_frozen
class KReduce(_Reduction):
    """Reduce ``child`` over index dims ``n_out..`` (of lengths ``lengths``) with ``op``;
    ``dtype`` is the result.

    ``stores``: the normalize kernel (``kernels.cpu_normalize.normalize_kernel``). The index space
    is the output's own (kept dims, then the reduced ones); ``child`` (the value E, with
    the output's dtype) is written to the output as it is folded, and the tree above the
    reduction runs at every index, reading E back from the output where it names
    ``child`` (E computed once per element, not once for the sum and once for the root)."""

    stores: bool = False
    kind = "reduce"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.child.shape if self.stores else self.child.shape[: self.n_out]

    def rebuild(self, children) -> KReduce:
        return KReduce(self.op, children[0], self.n_out, self.dtype, self.lengths, self.stores)


@_frozen
class KSwept(_Reduction):
    """Reduce ``child`` over index dims ``n_out..`` (of lengths ``lengths``) with ``op`` in
    a normalize kernel's first sweep: ``child`` lives in the kernel's own index space
    (the output's dims, kept ones first, like the stored ``E``), and the finished value is
    read at every index of the reduced dims (broadcast back). Only under a
    ``KReduce(stores=True)``: the inputs are read from memory once, the later sweeps find
    them in cache."""

    kind = "swept"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.child.shape

    def rebuild(self, children) -> KSwept:
        return KSwept(self.op, children[0], self.n_out, self.dtype, self.lengths)


def reindex(node, shape: tuple[int, ...], maps: tuple, memo: dict | None = None):
    """The tree read through an index remap (``strided.remap_view``'s ``maps``: per dim of
    the tree's index space, ``(new dim, start, step)``): its leaves' views are remapped and
    its guards move to the new dim, their bounds shifted by ``-start`` (guards only ever
    move with step 1). Permuting, shifting and broadcasting a kernel tree are all this."""
    memo = {} if memo is None else memo
    hit = memo.get(id(node))
    if hit is not None:
        return hit
    kind = node.kind
    if kind == "leaf":
        out = KLeaf(remap_view(node.view, shape, maps), node.dtype, node.src)
    elif kind == "const":
        out = node
    elif kind == "reduce" and node.stores:  # its child lives in the same index space
        out = node.rebuild((reindex(node.child, shape, maps, memo),))
    elif kind == "reduce":  # pragma: no cover - reductions are realized before this
        raise TypeError("reindex: a reduction cannot be remapped")
    else:
        kids = tuple(reindex(c, shape, maps, memo) for c in node.children)
        out = node.rebuild(kids)
        if kind == "pad":
            new, start, _ = maps[node.dim]
            out = KPad(kids[0], new, node.lo - start, node.hi - start, kids[1])
        elif kind == "concat":
            new, start, _ = maps[node.dim]
            out = KConcat(kids, new, tuple(b - start for b in node.bounds))
    memo[id(node)] = out
    return out


def kernel_nodes(root) -> list:
    """Distinct nodes of a kernel tree, children first."""
    order: list = []
    seen: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(node.children))
    return order


def computed_from(nodes: list, given) -> set[int]:
    """Ids of the nodes of ``nodes`` (``kernel_nodes`` order: children first) computed from
    constants and the nodes ``given(node)`` accepts only (a normalize kernel's reductions:
    what reads no input at the kernel's own index, the same for every element of a row)."""
    found: set[int] = set()
    for node in nodes:
        computed = node.kind in ("map", "cast") and all(id(c) in found for c in node.children)
        if computed or node.kind == "const" or given(node):
            found.add(id(node))
    return found


def kernel_leaves(root) -> list[KLeaf]:
    """Distinct leaves in order of first appearance."""
    return [n for n in kernel_nodes(root) if n.kind == "leaf"]


def stored_reads(tree) -> frozenset:
    """Ids of the leaves a normalize kernel's tree reads only in its first sweep, under
    the ``KReduce(stores=True)`` (where ``E`` is computed): each is read before the output
    is written at its index. The second sweep reads the rest of the tree, ``E`` taken
    from the output. Leaves under a ``KSwept`` are read in the sweep before the first
    (its value is kept per output, never read from them again)."""
    stored = next(x for x in kernel_nodes(tree) if x.kind == "reduce" and x.stores)
    later: set[int] = set()
    stack = [tree]
    while stack:
        x = stack.pop()
        if id(x) in later or x is stored or x is stored.child:
            continue
        later.add(id(x))
        if x.kind == "swept":
            continue
        stack.extend(x.children)
    first = kernel_nodes(stored.child)
    return frozenset(id(x) for x in first if x.kind == "leaf" and id(x) not in later)
