"""The same DAG at other lengths: ``resize`` rebuilds a graph for new lengths of some dims
of its input leaves (a placeholder's batch axis bound per call).

Which dims of which nodes have an input's length is found by unification: a ``Map``'s
dims are its operands' dims, a ``Reduce`` keeps its argument's other dims, a ``Remap``
or a view reads a source dim whole (start 0, step 1) or not at all, a ``Dot`` ties the
dims that share a label... A dim whose class holds a resized input dim takes the new
length; every other node keeps its shape, and a subgraph that reads no resized dim is
kept as it is (variables, constants). A graph that cuts, pads, reverses, reshapes or
hands to numpy (``Call``) a resized dim is not length-generic: ``NotLengthGeneric``.

``Const`` nodes registered in ``COUNTS`` (a mean's divisor: the product of some dims of
a node) get the new product. Positions only, like the rest of the DAG layer.
"""

from __future__ import annotations

import math
import weakref

from ..core.strided import contiguous, remap_view
from .nodes import Const, Dot, Leaf, Node, Remap, derived_leaf, walk

__all__ = ["NotLengthGeneric", "COUNTS", "counted", "resize"]

# Const node -> (node, dims, fn): its value is fn(product of node.shape[d] for d in dims)
# (fn None: the product itself); constants folded from one follow it (``dag.build``).
COUNTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def counted(new: Const, old: Const, fn) -> None:
    """Register ``new``, folded from the counted ``old`` as ``fn(old's value)``."""
    src, dims, inner = COUNTS[old]
    COUNTS[new] = (src, dims, fn if inner is None else (lambda n: fn(inner(n))))


class NotLengthGeneric(ValueError):
    """The graph uses a resized dim in a way that depends on its length."""


class _Dims:
    """Union-find over (node id, dim)."""

    def __init__(self) -> None:
        self.parent: dict = {}

    def find(self, k):
        p = self.parent.setdefault(k, k)
        while p != k:
            self.parent[k] = self.parent.setdefault(p, p)
            k, p = p, self.parent[p]
        return k

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def _full(step, start, n_src, n_out) -> bool:
    return step == 1 and start == 0 and n_src == n_out


def _remap_dims(u: _Dims, out: Node, src: Node, maps) -> list:
    """Tie the dims a remap reads whole; return (src dim, kind) of the others."""
    partial = []
    for k, (s, start, step) in enumerate(maps):
        if s >= 0 and _full(step, start, src.shape[k], out.shape[s]):
            u.union((id(out), s), (id(src), k))
        else:
            partial.append(k)
    return partial


def _edges(node: Node) -> tuple:
    if type(node) is Leaf and node.origin is not None:
        return (node.origin[0],)
    return node.children


def resize(roots: list[Node], lengths: dict) -> tuple[list[Node], dict]:
    """``roots`` rebuilt with new lengths: ``lengths`` maps an input root ``Leaf`` to
    ``{dim: new length}``; each such leaf is replaced by a contiguous leaf of the new
    shape (same dummy storage: a placeholder is bound per call). Returns the new roots
    and, per input leaf, its replacement."""
    u = _Dims()
    order: list[Node] = []
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        for node in walk(todo.pop(), _edges):  # a view of a leaf after the leaf
            if id(node) not in seen:
                seen.add(id(node))
                order.append(node)
                if type(node) is Const and node in COUNTS:
                    # A count of dims of a node the outputs may not read (a gradient
                    # without its loss): that node's dims join the unification.
                    todo.append(COUNTS[node][0])
    cut: list[tuple[Node, int]] = []  # (node, dim of a child) used in a length-dependent way
    for node in order:
        kind = node.kind
        if kind == "leaf":
            if node.origin is not None:
                parent, step = node.origin
                if step[0] == "remap":
                    for k in _remap_dims(u, node, parent, step[2]):
                        cut.append((parent, k))
                elif step[0] == "same":
                    for k in range(node.ndim):
                        u.union((id(node), k), (id(parent), k))
                else:
                    cut.extend((parent, k) for k in range(parent.ndim))
        elif kind in ("map", "cast"):
            for c in node.children:
                for k in range(node.ndim):
                    u.union((id(node), k), (id(c), k))
        elif kind == "reduce":
            kept = [d for d in range(node.arg.ndim) if d not in node.axes]
            for k, d in enumerate(kept):
                u.union((id(node), k), (id(node.arg), d))
        elif kind == "remap":
            for k in _remap_dims(u, node, node.arg, node.maps):
                cut.append((node.arg, k))
        elif kind in ("pad", "concat"):
            for c in node.children:
                for k in range(node.ndim):
                    if k == node.dim:
                        cut.append((c, k))
                    else:
                        u.union((id(node), k), (id(c), k))
        elif kind == "dot":
            label_dim: dict = {}
            for n, labels in (
                (node, node.out_labels),
                (node.a, node.a_labels),
                (node.b, node.b_labels),
            ):
                for k, lab in enumerate(labels):
                    if lab in label_dim:
                        u.union((id(n), k), label_dim[lab])
                    else:
                        label_dim[lab] = (id(n), k)
        elif kind != "const":  # call, reshape and anything new: length-dependent
            cut.extend((c, k) for c in node.children for k in range(c.ndim))
    new_len: dict = {}
    for leaf, dims in lengths.items():
        for d, n in dims.items():
            if new_len.setdefault(u.find((id(leaf), d)), n) != n:
                raise NotLengthGeneric(
                    f"dims the graph ties get lengths {new_len[u.find((id(leaf), d))]} and {n}"
                )
    for node, k in cut:
        if u.find((id(node), k)) in new_len:
            raise NotLengthGeneric(f"{node.kind} node uses dim {k} by its length")

    def shape_of(node: Node) -> tuple:
        return tuple(new_len.get(u.find((id(node), k)), n) for k, n in enumerate(node.shape))

    done: dict[int, Node] = {}
    for node in order:
        shape = shape_of(node)
        kids = tuple(done[id(c)] for c in node.children)
        changed = shape != node.shape or any(
            a is not b for a, b in zip(kids, node.children, strict=True)
        )
        if type(node) is Leaf:
            if node in lengths:
                new = Leaf(node.data, contiguous(shape), node.writeable, tag=node.tag)
            elif node.origin is not None and done[id(node.origin[0])] is not node.origin[0]:
                parent, step = node.origin
                p = done[id(parent)]
                if step[0] == "remap":
                    step = (step[0], shape, step[2])
                    view = remap_view(p.view, shape, step[2])
                else:  # "same"
                    view = p.view
                new = derived_leaf(p, view, step, node.writeable)
                new.tag = node.tag
            else:
                new = node
        elif type(node) is Const and node in COUNTS and id(COUNTS[node][0]) in seen:
            src, dims, fn = COUNTS[node]  # a mean's divisor: the new product of its dims
            n = math.prod(shape_of(src)[d] for d in dims)
            same = n == math.prod(src.shape[d] for d in dims) and shape == node.shape
            value = n if fn is None else fn(n)
            new = node if same else Const(node.dtype.type(value), node.dtype, shape)
        elif not changed:
            new = node
        elif type(node) is Const:
            new = Const(node.value, node.dtype, shape)
        elif isinstance(node, Remap):  # a lazy node is of its kind's twin subclass
            new = Remap(kids[0], shape, node.maps)
        elif isinstance(node, Dot):
            a, b = kids
            new = Dot(a, b, node.a_labels, node.b_labels, node.out_labels, shape, node.dtype)
        else:
            new = node.rebuild(kids)
        done[id(node)] = new
    return [done[id(r)] for r in roots], {leaf: done[id(leaf)] for leaf in lengths}
