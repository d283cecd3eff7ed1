"""Physical order of a freshly allocated result: the memory order of its dominant input.

Shared by both engines so that ``eval()`` lays memory out the same way whichever runs.
"""

from __future__ import annotations

import math

from ..dag.nodes import Leaf, Node
from ..kernels.loops import nditer_order
from ..storage.memory import fresh

__all__ = ["result_order", "allocate_for"]


def _leaves_in_index_space(root: Node) -> list[tuple[Leaf, tuple[int | None, ...]]]:
    """Leaves read at the root's own index, each with root dim -> leaf dim positions."""
    found = []
    stack = [(root, tuple(range(root.ndim)))]
    while stack:
        node, dims = stack.pop()
        kind = node.kind
        if kind == "leaf":
            found.append((node, dims))
        elif kind == "map" or kind == "cast":
            stack.extend((c, dims) for c in reversed(node.children))
        elif kind == "reduce":
            kept = [d for d in range(node.arg.ndim) if d not in node.axes]
            stack.append((node.arg, tuple(kept[d] if d is not None else None for d in dims)))
    return found


def _distinct_elements(leaf: Leaf) -> int:
    return math.prod(n for n, s in zip(leaf.shape, leaf.view.strides, strict=True) if s != 0)


def result_order(root: Node) -> tuple[tuple[int, ...], Leaf | None]:
    """Dims of ``root`` from outermost to innermost, and the leaf that decided it.

    Leaves are ranked by how many distinct elements they hold (ties: first seen). Two dims
    are ordered by the first leaf in that ranking with a non-zero stride on both (larger
    |stride| goes outside), else they keep logical order: numpy's nditer rule, with the
    biggest operand consulted first.
    """
    n = root.ndim
    if n < 2:
        return tuple(range(n)), None
    leaves = _leaves_in_index_space(root)
    plain = [(lf, dims) for lf, dims in leaves if lf.view.blocks is None]
    if not plain:
        return tuple(range(n)), None
    plain.sort(key=lambda item: -_distinct_elements(item[0]))
    # Each leaf's strides in the root's dims (0 where it broadcasts or has length 1).
    vectors = [
        tuple(0 if k is None or leaf.shape[k] <= 1 else leaf.view.strides[k] for k in dims)
        for leaf, dims in plain
    ]
    return tuple(nditer_order(list(range(n)), vectors)), plain[0][0]


def allocate_for(root: Node) -> Leaf:
    """A fresh, writeable leaf shaped like ``root``, in its dominant input's memory order."""
    order, _ = result_order(root)
    data, view = fresh(root.shape, root.dtype, order)
    return Leaf(data, view)
