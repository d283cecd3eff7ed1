"""Lazy expression DAG nodes (r-tensors) and their constructors; no execution.

Nodes are positional: dim ``k`` of a node is the ``k``-th axis of the Tensor wrapping it.
Equality is identity. Every node class has a ``kind`` (its name in visitor tables), its
``children`` (a tuple) and ``rebuild(children)``; code that walks the DAG dispatches on
``kind`` through a table (``engine.reference``, ``engine.planner``...), never through a
ladder of ``isinstance``.

Each node computes two things once, at construction, so that looking up a cached plan
costs one dict lookup and no tree walk:

- ``params``: its run-time parameters (leaves, constants, pads), each once, in order of
  first appearance depth-first;
- ``key``: an int naming its structure (op, dtypes, leaf views, which params a child
  shares with another; never data or scalar values, except the few constants rewrites
  look at, ``ops.SPECIAL_CONSTANTS``). Keys are interned, so a DAG with much sharing (a
  backward pass) hashes in time proportional to its nodes, not to its unfolded tree.
  The same key serves the plan cache and hash-consing in the planner.

A ``Leaf`` made by a view of another leaf keeps it in ``origin`` (with the view step):
``leaf_roots`` finds the tensors a user created behind any view, and autograd maps a
gradient back through the steps.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from . import dtypes
from .ops import COMPARISONS, OPS, SPECIAL_CONSTANTS, apply_map
from .strided import View, merge_dims, remap_view, split_dim

__all__ = [
    "Node",
    "Leaf",
    "Const",
    "Map",
    "Cast",
    "Reduce",
    "Remap",
    "Pad",
    "Concat",
    "Dot",
    "map_op",
    "cast",
    "remap",
    "reduce",
    "walk",
    "rebuild_dag",
    "compose_maps",
    "transform_views",
    "leaf_roots",
    "derived_leaf",
]

# --- structural keys ------------------------------------------------------------------------

_KEYS: dict[tuple, int] = {}
_KEYS_MAX = 1 << 16
_next_key = itertools.count(1).__next__
_keys_lock = threading.Lock()


def _intern(t: tuple) -> int:
    """The int naming structure ``t``. Past ``_KEYS_MAX`` entries the table starts over;
    ids are never reused, so an old key simply stops matching (a plan-cache miss)."""
    k = _KEYS.get(t)
    if k is None:
        with _keys_lock:
            k = _KEYS.get(t)
            if k is None:
                if len(_KEYS) >= _KEYS_MAX:
                    _KEYS.clear()
                k = _KEYS[t] = _next_key()
    return k


def _combine(head: tuple, children: tuple) -> tuple[int, tuple]:
    """Key and params of a node with structure ``head`` over ``children``.

    Params are merged in order, each object once; when children share a param (``x * x``,
    or ``a + b`` with ``b`` a view of the same leaf object...) the key records which
    positions each child's params took, so equal keys mean equal param layouts.
    """
    if len(children) == 1:
        c = children[0]
        return _intern(head + (c.key,)), c.params
    if len(children) == 2:
        pa, pb = children[0].params, children[1].params
        if len(pa) == 1 and len(pb) == 1 and pa[0] is not pb[0] or not pa or not pb:
            return _intern(head + (children[0].key, children[1].key)), pa + pb
    params: list = []
    index: dict[int, int] = {}
    slots = []
    shared = False
    for c in children:
        slot = []
        for p in c.params:
            k = index.get(id(p))
            if k is None:
                k = index[id(p)] = len(params)
                params.append(p)
            else:
                shared = True
            slot.append(k)
        slots.append(tuple(slot))
    keys = tuple(c.key for c in children)
    return _intern(head + keys + ((tuple(slots),) if shared else ())), tuple(params)


class Node:
    """Base of all nodes: shape (positional), dtype, children, structural key, params."""

    __slots__ = ("shape", "dtype", "children", "key", "params", "__weakref__")
    kind = "node"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def arg(self) -> Node:
        """The only (or first) child."""
        return self.children[0]

    @property
    def args(self) -> tuple[Node, ...]:
        return self.children

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.dtype} {self.shape}>"


class Leaf(Node):
    """A strided view over 1-D storage: the only node that holds data (an l-tensor).

    ``origin`` is ``(parent leaf, step)`` when this leaf is a view of another one made by
    ``step``: ``("remap", shape, maps)``, ``("split", dim, lengths)``, ``("merge", dims,
    pos)`` or ``("same",)`` (a read-only alias); None for a leaf a user created.
    """

    __slots__ = ("data", "view", "writeable", "origin", "tag")
    kind = "leaf"
    children = ()

    def __init__(self, data, view: View, writeable: bool = True, origin=None, tag=None):
        self.data = data
        self.view = view
        self.shape = view.shape
        self.dtype = data.dtype
        self.writeable = writeable
        self.origin = origin
        # What the user declared the storage to be (autograd's kinds), inherited by views.
        self.tag = tag if origin is None or tag is not None else origin[0].tag
        self.key = _intern(
            ("L", self.dtype.char, view.shape, view.strides, view.offset, view.blocks)
        )

    @property
    def params(self):
        # A property, not a stored (self,): that would be a reference cycle, and leaves
        # (with their storage) would wait for the cyclic garbage collector to be freed.
        return (self,)


def derived_leaf(leaf: Leaf, view: View, step: tuple, writeable: bool | None = None) -> Leaf:
    """A view of ``leaf`` (same storage) that remembers where it came from."""
    w = leaf.writeable if writeable is None else writeable
    return Leaf(leaf.data, view, w, (leaf, step))


def leaf_roots(root: Node) -> list[Leaf]:
    """The leaves a user created (no ``origin``) behind every leaf ``root`` reads, once each,
    in order of first appearance."""
    found: dict[int, Leaf] = {}
    for p in root.params:
        if type(p) is Leaf:
            while p.origin is not None:
                p = p.origin[0]
            found.setdefault(id(p), p)
    return list(found.values())


_SPECIAL = frozenset(SPECIAL_CONSTANTS)


class Const(Node):
    """A scalar value broadcast to ``shape``; the value is a run-time argument, except that
    whether it is one of ``ops.SPECIAL_CONSTANTS`` (and which) is structure."""

    __slots__ = ("value",)
    kind = "const"
    children = ()

    def __init__(self, value, dtype: np.dtype, shape: tuple[int, ...] = ()):
        self.dtype = dtype
        self.value = v = dtype.type(value)
        self.shape = shape
        self.key = _intern(("K", dtype.char, shape, float(v) if v in _SPECIAL else None))

    @property
    def params(self):
        return (self,)  # not stored: see Leaf.params

    @property
    def special(self) -> float | None:
        """The value when it is one of ``ops.SPECIAL_CONSTANTS`` (so part of the key)."""
        return float(self.value) if self.value in _SPECIAL else None


class Map(Node):
    """An elementwise op from ``ops.OPS``; args share the node's shape and loop dtype."""

    __slots__ = ("op",)
    kind = "map"

    def __init__(self, op: str, args: tuple[Node, ...], dtype: np.dtype):
        self.op = op
        self.children = args
        self.shape = args[0].shape
        self.dtype = dtype
        self.key, self.params = _combine(("M", op, dtype.char), args)

    def rebuild(self, children):
        return Map(self.op, tuple(children), self.dtype)


class Cast(Node):
    """Convert to ``dtype`` with numpy's ``astype`` semantics (unsafe casting)."""

    __slots__ = ()
    kind = "cast"

    def __init__(self, arg: Node, dtype: np.dtype):
        self.children = (arg,)
        self.shape = arg.shape
        self.dtype = dtype
        self.key, self.params = _intern(("C", dtype.char, arg.key)), arg.params

    def rebuild(self, children):
        return Cast(children[0], self.dtype)


class Reduce(Node):
    """Reduce ``axes`` (positions in ``arg``) with sum/prod/max/min/any/all/argmax/argmin.

    The result keeps the other dims in order. ``arg`` already has the accumulation dtype.
    """

    __slots__ = ("op", "axes")
    kind = "reduce"

    def __init__(self, op: str, arg: Node, axes: tuple[int, ...], dtype: np.dtype):
        self.op = op
        self.children = (arg,)
        self.axes = axes
        self.shape = tuple(n for d, n in enumerate(arg.shape) if d not in axes)
        self.dtype = dtype
        self.key, self.params = _intern(("R", op, dtype.char, axes, arg.key)), arg.params

    def rebuild(self, children):
        return Reduce(self.op, children[0], self.axes, self.dtype)


class Remap(Node):
    """Index remap of a computed node: ``arg[maps(out)]`` (see ``strided.remap_view``)."""

    __slots__ = ("maps",)
    kind = "remap"

    def __init__(self, arg: Node, shape: tuple[int, ...], maps: tuple):
        self.children = (arg,)
        self.maps = maps
        self.shape = shape
        self.dtype = arg.dtype
        self.key, self.params = _intern(("X", shape, maps, arg.key)), arg.params

    def rebuild(self, children):
        return Remap(children[0], self.shape, self.maps)


class Pad(Node):
    """Pad dim ``dim`` with ``before``/``after`` copies of ``value`` (a guarded read); the
    value is a run-time parameter (the Pad node itself is in ``params``)."""

    __slots__ = ("dim", "before", "after", "value", "source")
    kind = "pad"

    def __init__(self, arg: Node, dim: int, before: int, after: int, value, source=None):
        self.source = source  # the Pad this was rebuilt from: its param (None: itself)
        self.children = (arg,)
        self.dim = dim
        self.before = before
        self.after = after
        self.dtype = arg.dtype
        self.value = arg.dtype.type(value)
        shape = list(arg.shape)
        shape[dim] += before + after
        self.shape = tuple(shape)
        self.key = _intern(("P", dim, before, after, arg.key))

    @property
    def params(self):
        return self.children[0].params + (self.source or self,)  # not stored: Leaf.params

    def rebuild(self, children):
        return Pad(children[0], self.dim, self.before, self.after, self.value, self.source or self)


class Concat(Node):
    """Join ``args`` (same dtype, same shape but for ``dim``) along ``dim``."""

    __slots__ = ("dim",)
    kind = "concat"

    def __init__(self, args: tuple[Node, ...], dim: int):
        self.children = args
        self.dim = dim
        shape = list(args[0].shape)
        shape[dim] = sum(a.shape[dim] for a in args)
        self.shape = tuple(shape)
        self.dtype = args[0].dtype
        self.key, self.params = _combine(("J", dim), args)

    def rebuild(self, children):
        return Concat(tuple(children), self.dim)


class Dot(Node):
    """Sum of products, einsum style: each dim carries an integer label.

    Labels of ``a`` and ``b`` missing from ``out_labels`` are contracted; labels shared by
    ``a``, ``b`` and the output are batch dims.
    """

    __slots__ = ("a_labels", "b_labels", "out_labels")
    kind = "dot"

    def __init__(self, a, b, a_labels, b_labels, out_labels, shape, dtype):
        self.children = (a, b)
        self.a_labels = a_labels
        self.b_labels = b_labels
        self.out_labels = out_labels
        self.shape = shape
        self.dtype = dtype
        head = ("D", a_labels, b_labels, out_labels, shape, dtype.char)
        self.key, self.params = _combine(head, (a, b))

    @property
    def a(self) -> Node:
        return self.children[0]

    @property
    def b(self) -> Node:
        return self.children[1]

    def rebuild(self, children):
        a, b = children
        return Dot(a, b, self.a_labels, self.b_labels, self.out_labels, self.shape, self.dtype)


# --- traversal -------------------------------------------------------------------------------


def walk(root: Node) -> list[Node]:
    """All distinct nodes, children before parents (a topological order)."""
    order: list[Node] = []
    seen: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded:
            seen.add(id(node))
            order.append(node)
            continue
        stack.append((node, True))
        for c in reversed(node.children):
            if id(c) not in seen:
                stack.append((c, False))
    return order


def rebuild_dag(root: Node, fn) -> Node:
    """Rebuild the DAG bottom-up: ``fn(node, new_children)`` returns the replacement of
    ``node`` (or None to keep ``node`` when its children did not change, else rebuild it).
    Shared subtrees are visited once and stay shared."""
    done: dict[int, Node] = {}
    for node in walk(root):
        kids = tuple(done[id(c)] for c in node.children)
        new = fn(node, kids)
        if new is None:
            changed = any(k is not c for k, c in zip(kids, node.children, strict=True))
            new = node.rebuild(kids) if changed else node
        done[id(node)] = new
    return done[id(root)]


# --- constructors: dtype inference and simplification ------------------------------------


def cast(node: Node, dtype: np.dtype) -> Node:
    """Cast ``node`` to ``dtype``; a no-op when it already has it; folds into constants."""
    if node.dtype == dtype:
        return node
    if type(node) is Const:
        with np.errstate(all="ignore"):
            return Const(np.array(node.value).astype(dtype)[()], dtype, node.shape)
    return Cast(node, dtype)


# (op, operand types) -> (loop dtypes, result dtype); types are dtypes or weak Python types.
_LOOPS: dict = {}


def _loop_dtypes(op: str, types: tuple, opname: str) -> tuple:
    hit = _LOOPS.get((op, types))
    if hit is not None:
        return hit
    if op == "where":
        out = np.result_type(*(t if isinstance(t, np.dtype) else t(0) for t in types[1:]))
        hit = ((np.dtype(bool), out, out), out)
    else:
        info = OPS[op]
        resolved = dtypes.ufunc_dtypes(info.dtype_rule, types, opname)
        hit = (resolved[: info.arity], resolved[-1])
    _LOOPS[(op, types)] = hit
    return hit


def _operand(a, dt: np.dtype, shape: tuple, opname: str) -> Node:
    if isinstance(a, Node):
        return a if a.dtype is dt or a.dtype == dt else cast(a, dt)
    if type(a) is int and dt.kind in "iu":
        dtypes.check_weak_scalar(a, dt, opname)
    return Const(a, dt, shape)


def _folded(op: str, nodes: list, out: np.dtype, shape) -> Node:
    with np.errstate(all="ignore"):
        value = apply_map(op, [np.asarray(n.value) for n in nodes], out)
    return Const(value[()], out, shape)


def map_op(op: str, args: tuple, shape: tuple[int, ...], opname: str | None = None) -> Node:
    """Build ``op(*args)`` where args are nodes of ``shape`` or weak Python scalars.

    Inputs are cast to numpy's loop dtypes, so each Map computes in one dtype. This runs
    for every operator a user writes, so it avoids all work a cache can do.
    """
    opname = opname or op
    if op in COMPARISONS:
        folded = _compare_out_of_range(op, args, shape)
        if folded is not None:
            return folded
    if len(args) == 1 and isinstance(args[0], Node) and type(args[0]) is not Const:
        a = args[0]
        hit = _LOOPS.get((op, (a.dtype,)))
        (la,), out = hit if hit is not None else _loop_dtypes(op, (a.dtype,), opname)
        return Map(op, (a if a.dtype is la else cast(a, la),), out)
    types = tuple(a.dtype if isinstance(a, Node) else type(a) for a in args)
    hit = _LOOPS.get((op, types))
    loop, out = hit if hit is not None else _loop_dtypes(op, types, opname)
    nodes = [_operand(a, dt, shape, opname) for a, dt in zip(args, loop, strict=True)]
    if all(type(n) is Const for n in nodes):
        return _folded(op, nodes, out, shape)
    return Map(op, tuple(nodes), out)


_MIRROR = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _compare_out_of_range(op: str, args: tuple, shape: tuple[int, ...]) -> Node | None:
    """numpy compares a Python int exactly with an integer array, even one its dtype
    cannot hold (``uint8 < 300`` is all True): then the answer is the same everywhere."""
    a, b = args
    if isinstance(a, Node) and type(b) is int:
        node, value = a, b
    elif isinstance(b, Node) and type(a) is int:
        node, value, op = b, a, _MIRROR[op]  # ``v < x`` is ``x > v``
    else:
        return None
    if node.dtype.kind not in "iu":
        return None
    info = np.iinfo(node.dtype)
    if info.min <= value <= info.max:
        return None
    below = value > info.max  # every element is below the value
    result = {"eq": False, "ne": True, "lt": below, "le": below, "gt": not below, "ge": not below}
    return Const(result[op], np.dtype(bool), shape)


def reduce(op: str, node: Node, axes: tuple[int, ...]) -> Node:
    """``op`` over ``axes`` (positions) with numpy's result dtype (sum of int8 is int64)."""
    out = dtypes.reduce_dtype(op, node.dtype)
    if op in ("sum", "prod"):
        node = cast(node, out)
    return Reduce(op, node, tuple(sorted(axes)), out)


# --- views pushed to the leaves ---------------------------------------------------------------

_ELEMENTWISE = frozenset(("map", "cast"))


def remap(node: Node, shape: tuple[int, ...], maps: tuple, _memo: dict | None = None) -> Node:
    """Apply an index remap, pushing it through elementwise nodes down to the leaves.

    On a Leaf it becomes view math (no copy); on Map/Cast it is applied to each child, so
    ``(a + b)[slice]`` reads only the sliced elements. Shared subtrees stay shared.
    """
    memo = {} if _memo is None else _memo
    hit = memo.get(id(node))
    if hit is not None:
        return hit
    kind = node.kind
    out: Node
    if kind == "leaf":
        v = remap_view(node.view, shape, maps)
        if v is None:  # e.g. a blocked axis read in a way strides cannot express
            out = Remap(node, shape, maps)
        else:
            out = derived_leaf(node, v, ("remap", shape, maps))
    elif kind == "const":
        out = Const(node.value, node.dtype, shape)
    elif kind in _ELEMENTWISE and _broadcasts(shape, maps) and _costly(node):
        # A computed value spread along a new axis: keep it whole so the engine computes it
        # once and broadcasts the result, instead of recomputing it per element.
        out = Remap(node, shape, maps)
    elif kind in _ELEMENTWISE:
        out = node.rebuild(tuple(remap(c, shape, maps, memo) for c in node.children))
    elif kind == "remap":
        out = remap(node.arg, shape, compose_maps(node.maps, maps))
    else:
        out = Remap(node, shape, maps)
    memo[id(node)] = out
    return out


def _broadcasts(shape: tuple[int, ...], maps: tuple) -> bool:
    """Whether a remap spreads its input along a result dim of length > 1 it does not read."""
    used = {src for src, _, _ in maps if src >= 0}
    return any(n > 1 and d not in used for d, n in enumerate(shape))


def _costly(node: Node) -> bool:
    """Whether an elementwise subtree contains an expensive op (exp, log, division...)."""
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
    elif kind == "const":
        out = Const(node.value, node.dtype, shape)
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
