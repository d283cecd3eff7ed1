"""Views of expressions pushed down to the leaves (no execution).

A view of an r-tensor (transpose, slice, broadcast: an index remap; split, flatten: a
reshape) is applied to each child of elementwise nodes, down to the leaves, where it
becomes view math on storage: ``(a + b)[slice]`` reads only the sliced elements. What
cannot be pushed down stays a ``Remap`` node (the engine materializes its argument).
"""

from __future__ import annotations

from ..core.ops import OPS
from ..core.strided import merge_dims, remap_view, split_dim
from .build import _const, rebuilt_map
from .nodes import Const, Leaf, Node, Remap, derived_leaf, lazy
from .resize import COUNTS, counted

__all__ = ["remap", "transform_views", "compose_maps"]

_ELEMENTWISE = frozenset(("map", "cast"))

# ``remap_view``'s answers by (id of the View, shape, maps), the entry keeping the View
# alive and checked by identity: a broadcast rebuilt each call (``x * w`` over a new
# axis) reads the same leaves' views, and composing a view costs more than the lookup.
# Views are immutable and small (no storage). Bounded.
_VIEWS: dict = {}


def _const_like(node: Const, shape: tuple) -> Const:
    """``node`` at another shape (a shared Const), or, for a mean's count, a Const of its
    own that stays registered (``dag.resize``)."""
    if COUNTS and node in COUNTS:
        out = Const(node.value, node.dtype, shape)
        counted(out, node, lambda n: n)
        return out
    return _const(node.value, node.dtype, shape)


def remap(node: Node, shape: tuple[int, ...], maps: tuple, _memo: dict | None = None) -> Node:
    """Apply an index remap, pushing it through elementwise nodes down to the leaves.

    On a Leaf it becomes view math (no copy); on Map/Cast it is applied to each child, so
    ``(a + b)[slice]`` reads only the sliced elements. Shared subtrees stay shared.
    """
    if _memo is None:
        if type(node) is Leaf:  # a leaf alone (a broadcast operand)
            return _leaf_remap(node, shape, maps)
        out = _remembered(node, shape, maps)
        if out is not None:  # kept whole as before (``x - x.mean(K)`` built each call)
            return out
    if (
        node.kind != "leaf"
        and shape == node.shape
        and all(m == (k, 0, 1) for k, m in enumerate(maps))
    ):
        # an identity of a computed value (a length-1 axis inserted and then dropped
        # again): no node, so the planner sees the value itself (a reduction's epilogue
        # still fuses). A view of a leaf stays a new leaf: autograd tells views apart.
        return node
    memo = {} if _memo is None else _memo
    hit = memo.get(id(node))
    if hit is not None:
        return hit
    kind = node.kind
    out: Node
    if kind == "leaf":
        out = _leaf_remap(node, shape, maps)
    elif kind == "const":
        out = _const_like(node, shape)
    elif kind in _ELEMENTWISE and _spreads(memo, shape, maps) and _costly(node):
        # A computed value spread along a new axis: keep it whole so the engine computes it
        # once and broadcasts the result, instead of recomputing it per element.
        out = _kept(node, shape, maps)
    elif kind in _ELEMENTWISE:
        kids = tuple(remap(c, shape, maps, memo) for c in node.children)
        out = rebuilt_map(node, kids) if kind == "map" else node.rebuild(kids)
    elif kind == "remap":
        out = remap(node.arg, shape, compose_maps(node.maps, maps))
    else:
        out = _kept(node, shape, maps)
    memo[id(node)] = out
    return out


def _remembered(node: Node, shape: tuple, maps: tuple) -> Remap | None:
    """``Remap(node, shape, maps)`` when ``_WHOLE`` knows its key, else None."""
    try:
        hit = _WHOLE.get((node.known_key, id(maps)))
    except AttributeError:  # a lazy node
        return None
    if hit is None or hit[0] is not maps or hit[1] != shape:
        return None
    out = _new(Remap)
    out.children, out.maps, out.shape, out.dtype = (node,), maps, shape, node.dtype
    out.key, out.params = hit[2], node.params
    return out


def _kept(node: Node, shape: tuple, maps: tuple) -> Remap:
    """``Remap(node, shape, maps)``: a value ``remap`` keeps whole (costly, or not
    elementwise), its key remembered in ``_WHOLE`` by structure (the same for every node
    of its key): at the top of a remap (``x - x.mean(K)``) or inside one pushed down an
    expression (the dot under ``h * w2``), built each call."""
    out = _remembered(node, shape, maps)
    if out is None:
        out = Remap(node, shape, maps)
        if not lazy(out):
            if len(_WHOLE) >= 1024:
                _WHOLE.clear()
            _WHOLE[(node.key, id(maps))] = (maps, shape, out.key)  # keeps ``maps``: its id stays
    return out


# (node key, id of the maps) -> (the maps, shape, the Remap's key): the computed values
# ``remap`` kept whole, by structure. Bounded.
_WHOLE: dict = {}
_new = object.__new__


def _leaf_remap(node: Leaf, shape: tuple[int, ...], maps: tuple) -> Node:
    """The remap of a leaf: a view of its storage (view math), else a ``Remap`` node."""
    view = node.view
    hit = _VIEWS.get((id(view), shape, maps))
    if hit is not None and hit[0] is view:
        v = hit[1]
    else:
        v = remap_view(view, shape, maps)
        if len(_VIEWS) >= 1024:
            _VIEWS.clear()
        _VIEWS[(id(view), shape, maps)] = (view, v)
    if v is None:  # e.g. a blocked axis read in a way strides cannot express
        return Remap(node, shape, maps)
    return derived_leaf(node, v, ("remap", shape, maps))


def _spreads(memo: dict, shape: tuple[int, ...], maps: tuple) -> bool:
    """``_broadcasts(shape, maps)``, found once per remap (in its memo: ids are ints)."""
    spread = memo.get("spreads")
    if spread is None:
        spread = memo["spreads"] = _broadcasts(shape, maps)
    return spread


def _broadcasts(shape: tuple[int, ...], maps: tuple) -> bool:
    """Whether a remap spreads its input along a result dim of length > 1 it does not read
    (remembered: a broadcast built each call asks again)."""
    hit = _SPREADS.get((shape, maps))
    if hit is None:
        used = {src for src, _, _ in maps if src >= 0}
        hit = any(n > 1 and d not in used for d, n in enumerate(shape))
        if len(_SPREADS) >= 1024:
            _SPREADS.clear()
        _SPREADS[(shape, maps)] = hit
    return hit


_SPREADS: dict = {}  # (shape, maps) -> ``_broadcasts``. Bounded.


def _costly(node: Node) -> bool:
    """Whether an elementwise subtree contains an expensive op (exp, log, division...):
    structure, so remembered by the node's key (a remap walks down a chain, asking at each
    node). Bounded."""
    try:
        key = node.known_key
    except AttributeError:  # a lazy node: asked anew
        return _walk_costly(node)
    hit = _COSTLY.get(key)
    if hit is None:
        if len(_COSTLY) >= 4096:
            _COSTLY.clear()
        hit = _COSTLY[key] = _walk_costly(node)
    return hit


_COSTLY: dict = {}


def _walk_costly(node: Node) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind == "map" and OPS[n.op].expensive:
            return True
        if n.kind in _ELEMENTWISE:
            stack.extend(n.children)
    return False


def transform_views(node: Node, shape: tuple[int, ...], step: tuple, _memo=None) -> Node | None:
    """Reshape every leaf under ``node`` by ``step`` (``("split", dim, lengths)`` or
    ``("merge", dims, pos)``, see ``strided.split_dim``/``merge_dims``).

    Passes through elementwise nodes; returns None when a leaf cannot be reshaped as a view
    or a non-elementwise node is in the way (the caller then copies).
    """
    memo = {} if _memo is None else _memo
    if id(node) in memo:
        return memo[id(node)]
    out: Node | None = None
    kind = node.kind
    if kind == "leaf":
        fn = split_dim if step[0] == "split" else merge_dims
        v = fn(node.view, *step[1:])
        out = derived_leaf(node, v, step) if v is not None else None
    elif kind == "chunked":
        out = node.reshaped(shape, step)
    elif kind == "const":
        out = _const_like(node, shape)
    elif kind in _ELEMENTWISE:
        kids = [transform_views(c, shape, step, memo) for c in node.children]
        if all(k is not None for k in kids):
            out = node.rebuild(tuple(kids))
    memo[id(node)] = out
    return out


def compose_maps(inner: tuple, outer: tuple) -> tuple:
    """Maps of ``x[inner][outer]`` expressed directly on ``x``."""
    composed = []
    for src, start, step in inner:
        if src < 0:
            composed.append((-1, start, 0))
            continue
        src2, start2, step2 = outer[src]
        first = start + step * start2
        composed.append((src2, first, step * step2) if src2 >= 0 else (-1, first, 0))
    return tuple(composed)
