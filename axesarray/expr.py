"""Lazy expression DAG nodes (r-tensors) and their constructors; no execution.

Owns the node types, dtype inference (through ``dtypes``), and the rewrite that pushes an
index remap (transpose, slice, broadcast) down to the leaves, where it becomes view math.
Nodes are positional: dim ``k`` of a node is the ``k``-th axis of the Tensor wrapping it.
Equality is identity. Each node computes two things once, at construction, so that looking
up a cached plan costs no tree walk: ``key``, a hashable structural key (ops, dtypes, leaf
views; never data or scalar values), and ``params``, its run-time parameters (leaves,
constants, pads) in depth-first order, repeats included.

Every node type lowers to a scalar loop body: ``Leaf`` is a strided read, ``Const`` a
scalar, ``Map``/``Cast`` scalar code, ``Remap`` index substitution, ``Pad``/``Concat``
guarded reads, ``Reduce`` an accumulation loop and ``Dot`` a sum of products.
"""

from __future__ import annotations

import numpy as np

from . import dtypes
from .ops import COMPARISONS, OPS, apply_map
from .strided import View, remap_view

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
    "compose_maps",
    "transform_views",
]


class Node:
    """Base of all nodes: a shape (positional), a dtype, a structural key, parameters."""

    __slots__ = ("shape", "dtype", "key", "params", "__weakref__")
    children: tuple = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.dtype} {self.shape}>"


class Leaf(Node):
    """A strided view over 1-D storage: the only node that holds data (an l-tensor)."""

    __slots__ = ("data", "view", "writeable")

    def __init__(self, data, view: View, writeable: bool = True):
        self.data = data
        self.view = view
        self.shape = view.shape
        self.dtype = data.dtype
        self.writeable = writeable
        # The view's fields, not the View: tuples hash in C, attrs' __hash__ in Python.
        self.key = ("L", self.dtype.char, view.shape, view.strides, view.offset, view.blocks)

    @property
    def params(self):
        # A property, not a stored (self,): that would be a reference cycle, and leaves
        # (with their storage) would wait for the cyclic garbage collector to be freed.
        return (self,)


class Const(Node):
    """A scalar value broadcast to ``shape``; the value is a run-time argument."""

    __slots__ = ("value",)

    def __init__(self, value, dtype: np.dtype, shape: tuple[int, ...] = ()):
        self.dtype = dtype
        self.value = dtype.type(value)
        self.shape = shape
        self.key = ("K", dtype.char, shape)

    @property
    def params(self):
        return (self,)  # not stored: see Leaf.params


class Map(Node):
    """An elementwise op from ``ops.OPS``; args share the node's shape and loop dtype."""

    __slots__ = ("op", "args")

    def __init__(self, op: str, args: tuple[Node, ...], dtype: np.dtype):
        self.op = op
        self.args = args
        self.shape = args[0].shape
        self.dtype = dtype
        if len(args) == 1:
            self.key = ("M", op, dtype.char, args[0].key)
            self.params = args[0].params
        elif len(args) == 2:
            a, b = args
            self.key = ("M", op, dtype.char, a.key, b.key)
            self.params = a.params + b.params
            if op == "pow" and isinstance(b, Const):
                # Small exponents compile to special code (square, sqrt...): part of the key.
                self.key += (_fast_exponent(b),)
            elif op == "add" or op == "truediv":
                # 1 / (1 + exp(-x)) is planned as sigmoid: which constants are 1 is structure.
                self.key += (
                    type(a) is Const and a.value == 1,
                    type(b) is Const and b.value == 1,
                )
        else:
            self.key = ("M", op, dtype.char) + tuple(a.key for a in args)
            self.params = sum((a.params for a in args), ())

    @property
    def children(self):
        return self.args


class Cast(Node):
    """Convert to ``dtype`` with numpy's ``astype`` semantics (unsafe casting)."""

    __slots__ = ("arg",)

    def __init__(self, arg: Node, dtype: np.dtype):
        self.arg = arg
        self.shape = arg.shape
        self.dtype = dtype
        self.key = ("C", dtype.char, arg.key)
        self.params = arg.params

    @property
    def children(self):
        return (self.arg,)


class Reduce(Node):
    """Reduce ``axes`` (positions in ``arg``) with sum/prod/max/min/argmax/argmin.

    The result keeps the other dims in order. ``arg`` already has the accumulation dtype.
    """

    __slots__ = ("op", "arg", "axes")

    def __init__(self, op: str, arg: Node, axes: tuple[int, ...], dtype: np.dtype):
        self.op = op
        self.arg = arg
        self.axes = axes
        self.shape = tuple(n for d, n in enumerate(arg.shape) if d not in axes)
        self.dtype = dtype
        self.key = ("R", op, dtype.char, axes, arg.key)
        self.params = arg.params

    @property
    def children(self):
        return (self.arg,)


class Remap(Node):
    """Index remap of a computed node: ``arg[maps(out)]`` (see ``strided.remap_view``)."""

    __slots__ = ("arg", "maps")

    def __init__(self, arg: Node, shape: tuple[int, ...], maps: tuple):
        self.arg = arg
        self.maps = maps
        self.shape = shape
        self.dtype = arg.dtype
        self.key = ("X", shape, maps, arg.key)
        self.params = arg.params

    @property
    def children(self):
        return (self.arg,)


class Pad(Node):
    """Pad dim ``dim`` with ``before``/``after`` copies of ``value`` (a guarded read)."""

    __slots__ = ("arg", "dim", "before", "after", "value")

    def __init__(self, arg: Node, dim: int, before: int, after: int, value):
        self.arg = arg
        self.dim = dim
        self.before = before
        self.after = after
        self.dtype = arg.dtype
        self.value = arg.dtype.type(value)
        shape = list(arg.shape)
        shape[dim] += before + after
        self.shape = tuple(shape)
        self.key = ("P", dim, before, after, arg.key)

    @property
    def params(self):
        return self.arg.params + (self,)  # not stored: see Leaf.params

    @property
    def children(self):
        return (self.arg,)


class Concat(Node):
    """Join ``args`` (same dtype, same shape but for ``dim``) along ``dim``."""

    __slots__ = ("args", "dim")

    def __init__(self, args: tuple[Node, ...], dim: int):
        self.args = args
        self.dim = dim
        shape = list(args[0].shape)
        shape[dim] = sum(a.shape[dim] for a in args)
        self.shape = tuple(shape)
        self.dtype = args[0].dtype
        self.key = ("J", dim) + tuple(a.key for a in args)
        self.params = sum((a.params for a in args), ())

    @property
    def children(self):
        return self.args


class Dot(Node):
    """Sum of products, einsum style: each dim carries an integer label.

    Labels of ``a`` and ``b`` missing from ``out_labels`` are contracted; labels shared by
    ``a``, ``b`` and the output are batch dims.
    """

    __slots__ = ("a", "b", "a_labels", "b_labels", "out_labels")

    def __init__(self, a, b, a_labels, b_labels, out_labels, shape, dtype):
        self.a = a
        self.b = b
        self.a_labels = a_labels
        self.b_labels = b_labels
        self.out_labels = out_labels
        self.shape = shape
        self.dtype = dtype
        self.key = ("D", a_labels, b_labels, out_labels, shape, dtype.char, a.key, b.key)
        self.params = a.params + b.params

    @property
    def children(self):
        return (self.a, self.b)


# Exponents numpy's ``ndarray.__pow__`` computes without pow (``fast_scalar_power``); the
# planner does the same, so the key of ``x ** c`` records which of them ``c`` is.
FAST_EXPONENTS = (2.0, 0.5, -1.0, 1.0)


def _is_one(n: Node) -> bool:
    return isinstance(n, Const) and n.value == 1


def _fast_exponent(c: Const) -> float | None:
    v = float(c.value)
    return v if v in FAST_EXPONENTS else None


# --- constructors: dtype inference and simplification ------------------------------------


def cast(node: Node, dtype: np.dtype) -> Node:
    """Cast ``node`` to ``dtype``; a no-op when it already has it; folds into constants."""
    if node.dtype == dtype:
        return node
    if isinstance(node, Const):
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
        resolved = dtypes.ufunc_dtypes(info.ufunc, types, opname)
        hit = (resolved[: info.arity], resolved[-1])
    _LOOPS[(op, types)] = hit
    return hit


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
    if len(args) == 2:
        return _map2(op, args[0], args[1], shape, opname)
    if len(args) == 1 and isinstance(args[0], Node) and type(args[0]) is not Const:
        a = args[0]
        hit = _LOOPS.get((op, (a.dtype,)))
        (la,), out = hit if hit is not None else _loop_dtypes(op, (a.dtype,), opname)
        return Map(op, (a if a.dtype is la else cast(a, la),), out)
    types = tuple(a.dtype if isinstance(a, Node) else type(a) for a in args)
    hit = _LOOPS.get((op, types))
    loop, out = hit if hit is not None else _loop_dtypes(op, types, opname)
    nodes = []
    all_const = True
    for a, dt in zip(args, loop, strict=True):
        if isinstance(a, Node):
            if a.dtype is not dt and a.dtype != dt:  # dtypes are mostly the same object
                a = cast(a, dt)
            if all_const and not isinstance(a, Const):
                all_const = False
        else:
            if type(a) is int and dt.kind in "iu":
                dtypes.check_weak_scalar(a, dt, opname)
            a = Const(a, dt, shape)
        nodes.append(a)
    if all_const:
        with np.errstate(all="ignore"):
            value = apply_map(op, [np.asarray(n.value) for n in nodes], out)
        return Const(value[()], out, shape)
    return Map(op, tuple(nodes), out)


def _operand(a, dt: np.dtype, shape: tuple, opname: str) -> Node:
    if isinstance(a, Node):
        return a if a.dtype is dt or a.dtype == dt else cast(a, dt)
    if type(a) is int and dt.kind in "iu":
        dtypes.check_weak_scalar(a, dt, opname)
    return Const(a, dt, shape)


def _map2(op: str, a, b, shape: tuple, opname: str) -> Node:
    """``map_op`` for two operands, straight-line: it runs for every binary operator."""
    types = (
        a.dtype if isinstance(a, Node) else type(a),
        b.dtype if isinstance(b, Node) else type(b),
    )
    hit = _LOOPS.get((op, types))
    (la, lb), out = hit if hit is not None else _loop_dtypes(op, types, opname)
    a = _operand(a, la, shape, opname)
    b = _operand(b, lb, shape, opname)
    if type(a) is Const and type(b) is Const:
        with np.errstate(all="ignore"):
            value = apply_map(op, [np.asarray(a.value), np.asarray(b.value)], out)
        return Const(value[()], out, shape)
    return Map(op, (a, b), out)


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


def remap(node: Node, shape: tuple[int, ...], maps: tuple, _memo: dict | None = None) -> Node:
    """Apply an index remap, pushing it through elementwise nodes down to the leaves.

    On a Leaf it becomes view math (no copy); on Map/Cast it is applied to each child, so
    ``(a + b)[slice]`` reads only the sliced elements. Shared subtrees stay shared.
    """
    memo = {} if _memo is None else _memo
    hit = memo.get(id(node))
    if hit is not None:
        return hit
    out: Node
    if isinstance(node, Leaf):
        v = remap_view(node.view, shape, maps)
        out = Leaf(node.data, v, node.writeable) if v is not None else Remap(node, shape, maps)
    elif isinstance(node, Const):
        out = Const(node.value, node.dtype, shape)
    elif isinstance(node, (Map, Cast)) and _broadcasts(shape, maps) and _costly(node):
        # A computed value spread along a new axis: keep it whole so the engine computes it
        # once and broadcasts the result, instead of recomputing it per element.
        out = Remap(node, shape, maps)
    elif isinstance(node, Map):
        out = Map(node.op, tuple(remap(a, shape, maps, memo) for a in node.args), node.dtype)
    elif isinstance(node, Cast):
        out = Cast(remap(node.arg, shape, maps, memo), node.dtype)
    elif isinstance(node, Remap):
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
        if isinstance(n, Map) and OPS[n.op].expensive:
            return True
        if isinstance(n, (Map, Cast)):
            stack.extend(n.children)
    return False


def transform_views(node: Node, shape: tuple[int, ...], view_fn, _memo=None) -> Node | None:
    """Apply a reshaping ``view_fn`` (View -> View | None) to every leaf under ``node``.

    Passes through elementwise nodes; returns None when a leaf cannot be reshaped as a view
    or a non-elementwise node is in the way (the caller then copies).
    """
    memo = {} if _memo is None else _memo
    if id(node) in memo:
        return memo[id(node)]
    out: Node | None = None
    if isinstance(node, Leaf):
        v = view_fn(node.view)
        out = Leaf(node.data, v, node.writeable) if v is not None else None
    elif isinstance(node, Const):
        out = Const(node.value, node.dtype, shape)
    elif isinstance(node, (Map, Cast)):
        kids = [transform_views(c, shape, view_fn, memo) for c in node.children]
        if all(k is not None for k in kids):
            out = (
                Map(node.op, tuple(kids), node.dtype)
                if isinstance(node, Map)
                else Cast(kids[0], node.dtype)
            )
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
