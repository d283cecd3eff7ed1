"""Physical order of a freshly allocated result: the memory order of its dominant input.

Shared by both engines so that ``eval()`` lays memory out the same way whichever runs.

Each node's answer comes from a small per-node summary (``_summary``) computed once from
its children's: the planner asks for the order of every temporary of a program, and a
summary walk per temporary over its whole subtree made planning quadratic in a long
recurrence (DESIGN §13: every pass memoized per node).
"""

from __future__ import annotations

import math

from ..dag.nodes import Leaf, Node, walk
from ..kernels.loops import nditer_order
from ..storage.memory import fresh

__all__ = ["result_order", "allocate_for"]

# A summary: the leaves read at a node's own index that can decide its order, as
# ``(distinct elements, stride vector in the node's dims, leaf)``, ranked by distinct
# elements (ties: first seen, depth-first left to right). ``nditer_order`` decides a pair
# of dims by the first operand with non-zero, different strides on both, so an entry that
# decides no pair an earlier one does not is dropped: a summary holds at most
# ``1 + ndim * (ndim - 1) / 2`` entries however big the subtree.
_THROUGH = frozenset(("map", "cast", "reduce"))


def _distinct_elements(leaf: Leaf) -> int:
    return math.prod(n for n, s in zip(leaf.shape, leaf.view.strides, strict=True) if s != 0)


def _prune(entries: list) -> tuple:
    kept = []
    covered: set = set()
    for entry in entries:
        vec = entry[1]
        new = False
        moving = [(d, abs(s)) for d, s in enumerate(vec) if s]
        for i, (a, sa) in enumerate(moving):
            for b, sb in moving[i + 1 :]:
                if sa != sb and (a, b) not in covered:
                    covered.add((a, b))
                    new = True
        if new or not kept:
            kept.append(entry)
    return tuple(kept)


def _own_summary(node: Node, memo: dict) -> tuple:
    kind = node.kind
    if kind == "leaf":
        if node.view.blocks is not None:
            return ()
        vec = tuple(0 if n <= 1 else s for n, s in zip(node.shape, node.view.strides, strict=True))
        return ((_distinct_elements(node), vec, node),)
    if kind == "map" or kind == "cast":
        kids = [memo[id(c)] for c in node.children]
        if len(kids) == 1:
            return kids[0]
        merged = [e for k in kids for e in k]
        merged.sort(key=lambda e: -e[0])  # stable: ties keep first-seen order
        return _prune(merged)
    if kind == "reduce":
        kept = [d for d in range(node.arg.ndim) if d not in node.axes]
        projected = [(n, tuple(v[d] for d in kept), lf) for n, v, lf in memo[id(node.arg)]]
        return _prune(projected)
    return ()  # computed by a kernel of its own: its result is a fresh temp, not an input


def _summary(root: Node, memo: dict) -> tuple:
    hit = memo.get(id(root))
    if hit is not None:
        return hit

    def edges(node):
        if node.kind not in _THROUGH:
            return ()
        return [c for c in node.children if id(c) not in memo]

    for node in walk(root, edges):
        memo[id(node)] = _own_summary(node, memo)
    return memo[id(root)]


def result_order(root: Node, memo: dict | None = None) -> tuple[tuple[int, ...], Leaf | None]:
    """Dims of ``root`` from outermost to innermost, and the leaf that decided it.

    Leaves are ranked by how many distinct elements they hold (ties: first seen). Two dims
    are ordered by the first leaf in that ranking with a non-zero stride on both (larger
    |stride| goes outside), else they keep logical order: numpy's nditer rule, with the
    biggest operand consulted first. ``memo`` (``id(node)`` -> summary) shares the work
    between calls over one DAG: the planner passes one per schedule.
    """
    n = root.ndim
    if n < 2:
        return tuple(range(n)), None
    plain = _summary(root, {} if memo is None else memo)
    if not plain:
        return tuple(range(n)), None
    vectors = [vec for _, vec, _ in plain]
    return tuple(nditer_order(list(range(n)), vectors)), plain[0][2]


def allocate_for(root: Node, memo: dict | None = None) -> Leaf:
    """A fresh, writeable leaf shaped like ``root``, in its dominant input's memory order
    (``memo`` as in ``result_order``)."""
    order, _ = result_order(root, memo)
    data, view = fresh(root.shape, root.dtype, order)
    return Leaf(data, view)
