"""Kernel IR: the tree one fused kernel computes, in the kernel's own index space.

A kernel tree is made of ``expr.Map`` and ``expr.Cast`` nodes plus the node types here,
which only the planner creates: ``KLeaf``/``KConst`` (data-free leaves and scalars), and

- ``KPad``: ``child`` where ``lo <= i[dim] < hi``, else ``value`` (a guarded read);
- ``KConcat``: ``children[k]`` where ``bounds[k] <= i[dim] < bounds[k+1]``;
- ``KReduce``: accumulate ``child`` over the trailing (reduce) dims of the index space.

Children of guards are already shifted to read at the kernel's index, so every leaf's
address is ``offset + sum(stride * i)`` over the same index variables. Leaves of the
epilogue (above a ``KReduce``) and the output have the output dims only; leaves under the
``KReduce`` have output dims followed by reduce dims.
"""

from __future__ import annotations

import numpy as np

from ..expr import Node
from ..strided import View

__all__ = ["KLeaf", "KConst", "KPad", "KConcat", "KReduce", "kernel_leaves", "kernel_nodes"]


class KLeaf(Node):
    """A strided read (or the output): a view plus where its storage comes from at run time.

    ``src`` is ``("param", i)`` (the i-th leaf of the expression), ``("temp", t)`` or
    ``("dst",)``; kernel trees hold no arrays, so plans can be cached and reused.
    """

    __slots__ = ("view", "src")

    def __init__(self, view: View, dtype: np.dtype, src: tuple):
        self.view = view
        self.src = src
        self.shape = view.shape
        self.dtype = dtype
        self.key = None
        self.params = ()


class KConst(Node):
    """A scalar known only at run time (a constant of the expression or a pad value)."""

    __slots__ = ("src",)

    def __init__(self, dtype: np.dtype, src: tuple, shape: tuple[int, ...] = ()):
        self.src = src
        self.shape = shape
        self.dtype = dtype
        self.key = None
        self.params = ()


class KPad(Node):
    __slots__ = ("child", "dim", "lo", "hi", "value")

    def __init__(self, child: Node, dim: int, lo: int, hi: int, value: KConst):
        self.child = child
        self.dim = dim
        self.lo = lo
        self.hi = hi
        self.value = value
        self.shape = child.shape
        self.dtype = child.dtype
        self.key = None
        self.params = ()

    @property
    def children(self):
        return (self.child, self.value)


class KConcat(Node):
    __slots__ = ("parts", "dim", "bounds")

    def __init__(self, parts: tuple[Node, ...], dim: int, bounds: tuple[int, ...]):
        self.parts = parts
        self.dim = dim
        self.bounds = bounds
        self.shape = parts[0].shape
        self.dtype = parts[0].dtype
        self.key = None
        self.params = ()

    @property
    def children(self):
        return self.parts


class KReduce(Node):
    """Reduce ``child`` over index dims ``n_out..`` (of lengths ``lengths``) with ``op``;
    ``dtype`` is the result."""

    __slots__ = ("op", "child", "n_out", "lengths")

    def __init__(self, op: str, child: Node, n_out: int, dtype: np.dtype, lengths: tuple):
        self.op = op
        self.child = child
        self.n_out = n_out
        self.lengths = tuple(lengths)
        self.shape = child.shape[:n_out]
        self.dtype = dtype
        self.key = None
        self.params = ()

    @property
    def children(self):
        return (self.child,)


def kernel_nodes(root: Node) -> list[Node]:
    """Distinct nodes of a kernel tree, children first."""
    order: list[Node] = []
    seen: set[int] = set()

    def visit(n: Node) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        for c in n.children:
            visit(c)
        order.append(n)

    visit(root)
    return order


def kernel_leaves(root: Node) -> list[KLeaf]:
    """Distinct leaves in order of first appearance."""
    return [n for n in kernel_nodes(root) if isinstance(n, KLeaf)]
