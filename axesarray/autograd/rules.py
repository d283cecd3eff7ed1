"""Reverse-mode autograd as rewrite rules on the lazy DAG: gradients are nodes (positions).

``gradients(root, seed, wrt)`` walks the graph from ``root`` in reverse topological order
(each shared node once; contributions from several parents add) and returns, per ``wrt``
leaf, a lazy node of that leaf's shape and dtype, or None when ``root`` does not read it.
The engine then plans, fuses and caches the backward pass like any expression. Because
every gradient has exactly the shape of the node it belongs to, the names come back
exactly when the Tensor layer wraps it with the ``wrt`` tensor's axes.

The rules, one per node kind (``GRADIENTS``), each given the node and its incoming gradient:

- ``map``: the op table's ``grad`` column (``ops.OPS``), on ``_V`` wrappers of nodes;
- ``reduce``: ``sum`` broadcasts back over the reduced dims; ``max``/``min`` send the
  gradient to the elements equal to the extreme, split evenly between ties (numpy-style
  subgradient); ``prod`` is exact with zeros (the product of the other elements);
- ``remap`` and a leaf's ``("remap", ...)`` origin scatter the gradient back: sum over the
  broadcast dims, transpose back, pad a slice back to full length (a strided slice is
  dilated first: split, pad, merge), an integer index becomes a length-1 pad;
- ``pad`` crops, ``concat`` slices, ``cast`` casts back (float to float only), ``dot``
  becomes two dots, ``reshape`` and split/merge origins reshape back;
- a leaf made by a view passes its gradient to its parent (``Leaf.origin``), so views of
  a variable all reach the tensor the user created;
- ``call``: by the function's ``grad_rule``, a row of ``CALL_RULES`` (cumsum, cumprod,
  sort, gathers); a call without one (``ax.apply``) is a ``TypeError`` naming it;
- ``stop_gradient`` (an op row) and non-float values stop the walk.

Symbolic operators (``register_symbolic``): a node may be registered with its inputs and a
hand-written backward (softmax and friends, in ``nn``); the walk then treats it as one op
of those inputs and never looks inside. The registry is weak: it dies with the node.

Also owns ``Kind``, the storage tag of declared graph tensors (Nervana graph's constant,
placeholder, persistent, variable); views inherit it through ``Leaf.tag``.
"""

from __future__ import annotations

import types
import weakref

import attrs
import numpy as np

from .. import engine
from ..core.ops import OPS
from ..core.reductions_table import REDUCTIONS
from ..dag import build as expr_ops
from ..dag import nodes as ex
from ..dag import views as expr_views
from ..dag.reshape import Reshape, reshape
from ..errors import fmt_axes, message

__all__ = [
    "Kind",
    "KIND_FLAGS",
    "F",
    "GRADIENTS",
    "CALL_RULES",
    "NoGradient",
    "SYMBOLIC",
    "GRAD_NAMES",
    "gradients",
    "register_symbolic",
    "scatter",
    "zeros_like",
    "in_graph",
]

# --- tensor kinds -----------------------------------------------------------------------------

# The seed table (Nervana graph): constant, persistent, trainable, input.
KIND_FLAGS = {
    "constant": (True, True, False, False),
    "placeholder": (False, True, False, True),
    "persistent": (False, True, False, False),
    "variable": (False, True, True, False),
}


@attrs.define(eq=False)
class Kind:
    """What a user declared a storage to be; every view of it shares the same tag.

    ``grad`` holds a variable's accumulated gradient (a Tensor with ``axes``); ``owner``
    a weak reference to the Tensor the constructor returned (``ax.variables`` yields it).
    """

    kind: str
    name: str | None
    axes: object
    layout: object = None
    grad: object = None
    owner: object = None

    @property
    def trainable(self) -> bool:
        return KIND_FLAGS[self.kind][2]

    @property
    def label(self) -> str:
        """How messages name it: ``variable 'w'`` or ``placeholder (N=2, C=3)``."""
        if self.name:
            return f"{self.kind} {self.name!r}"
        return f"{self.kind} ({fmt_axes(self.axes)})"

    def __reduce__(self):
        # Everything but ``owner`` (a weak reference: the Tensor that owns the loaded
        # storage sets it, see ``tensors.tensor``).
        return (_kind, (self.kind, self.name, self.axes, self.layout, self.grad))


def _kind(kind: str, name, axes, layout, grad) -> Kind:
    """A loaded ``Kind``; a placeholder is loaded unbound (it has a value only in a call)."""
    tag = Kind(kind, name, axes, layout, grad)
    if kind == "placeholder":
        engine.UNBOUND.add(tag)
    return tag


def in_graph(node: ex.Node) -> bool:
    """Whether ``node`` reads a declared tensor (constant, placeholder, persistent,
    variable): operations that would copy eagerly stay lazy for such values."""
    # A view's leaf has its root's tag (``Leaf`` inherits it from its origin, and nothing
    # gives a view another one), so the params answer without walking to the roots.
    return any(type(p) is ex.Leaf and p.tag is not None for p in node.params)


# --- elementwise rules: the op table on node wrappers -----------------------------------------


class _V:
    """A node with Python arithmetic building ``expr.map_op`` nodes of the same shape, for
    the op table's ``grad`` rules. Python scalars are weak (they take the node's dtype)."""

    __slots__ = ("node",)
    __hash__ = None  # type: ignore[assignment]  # == builds a node

    def __init__(self, node: ex.Node):
        self.node = node


def _is_one(a) -> bool:
    return type(a) is _V and a.node.kind == "const" and a.node.special == 1.0


def _apply(op: str, *args) -> _V:
    if op == "mul" and len(args) == 2:  # the seed of a scalar loss is 1: skip g * 1
        a, b = args
        if _is_one(a) and type(b) is _V and b.node.dtype == a.node.dtype:
            return b
        if _is_one(b) and type(a) is _V and a.node.dtype == b.node.dtype:
            return a
    if op == "pow" and _is_one(args[1]) and type(args[0]) is _V:  # x ** (2 - 1) is x
        return args[0]
    shape = next(a.node.shape for a in args if type(a) is _V)
    return _V(expr_ops.map_op(op, tuple(a.node if type(a) is _V else a for a in args), shape))


def _operators() -> None:
    binary = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "truediv", "pow": "pow"}
    binary.update({"and": "and", "or": "or"})
    for stem, op in binary.items():
        setattr(_V, f"__{stem}__", lambda s, o, op=op: _apply(op, s, o))
        setattr(_V, f"__r{stem}__", lambda s, o, op=op: _apply(op, o, s))
    for stem in ("eq", "ne", "lt", "le", "gt", "ge"):
        setattr(_V, f"__{stem}__", lambda s, o, op=stem: _apply(op, s, o))
    _V.__neg__ = lambda s: _apply("neg", s)


_operators()

# The namespace the rules call: ``where`` and one function per public op of the table.
F = types.SimpleNamespace(
    where=lambda c, a, b: _apply("where", c, a, b),
    **{row.public: (lambda *a, op=row.name: _apply(op, *a)) for row in OPS.values() if row.public},
)


def _map_rule(node: ex.Map, g: ex.Node) -> tuple:
    row = OPS[node.op]
    if row.grad is None or node.dtype.kind != "f":
        return (None,) * len(node.children)
    out = row.grad(F, tuple(_V(c) for c in node.children), _V(node), _V(g))
    return tuple(
        None if r is None else expr_ops.cast(r.node, c.dtype)
        for r, c in zip(out, node.children, strict=True)
    )


# --- structural rules -------------------------------------------------------------------------


def _remap(node: ex.Node, shape: tuple[int, ...], maps: tuple) -> ex.Node:
    """``expr.remap``, except that reading every element in place is ``node`` itself (a
    remap of a computed value would otherwise make the engine copy it)."""
    if shape == node.shape and all(m == (d, 0, 1) for d, m in enumerate(maps)):
        return node
    return expr_views.remap(node, shape, maps)


def _back(v: ex.Node, axes: tuple[int, ...], shape: tuple[int, ...]) -> ex.Node:
    """``v`` (a reduction's shape) broadcast back to the reduced ``shape``."""
    kept = [d for d in range(len(shape)) if d not in axes]
    return _remap(v, shape, tuple((kept[k], 0, 1) for k in range(v.ndim)))


class _R:
    """What a reduction row's ``grad`` builds nodes with (``reductions_table``)."""

    def __init__(self, axes: tuple[int, ...], shape: tuple[int, ...]):
        self.axes, self.shape = axes, shape

    map = staticmethod(expr_ops.map_op)
    reduce = staticmethod(expr_ops.reduce)
    cast = staticmethod(expr_ops.cast)

    def back(self, v: ex.Node) -> ex.Node:
        return _back(v, self.axes, self.shape)


def _reduce_rule(node: ex.Reduce, g: ex.Node) -> tuple:
    """The row's ``grad`` (float reductions only; argmax and the like have none)."""
    rule = REDUCTIONS[node.op].grad
    if node.dtype.kind != "f" or rule is None:
        return (None,)
    x = node.arg
    return (rule(_R(node.axes, x.shape), x, node, g, node.axes),)


def _crop(g: ex.Node, shape: tuple[int, ...], dim: int, start: int) -> ex.Node:
    """``g`` sliced along ``dim`` from ``start`` to ``shape[dim]`` elements."""
    return _remap(g, shape, tuple((k, start if k == dim else 0, 1) for k in range(g.ndim)))


def _dilate(g: ex.Node, k: int, step: int) -> ex.Node:
    """Dim ``k`` of ``g`` spread ``step`` apart with zeros between: n -> (n - 1) * step + 1."""
    n = g.shape[k]
    wide = g.shape[: k + 1] + (1,) + g.shape[k + 1 :]
    g = _remap(g, wide, tuple((j if j <= k else j + 1, 0, 1) for j in range(g.ndim)))
    g = ex.Pad(g, k + 1, 0, step - 1, 0)
    g = reshape(g, ("merge", (k, k + 1), k))
    return _crop(g, g.shape[:k] + ((n - 1) * step + 1,) + g.shape[k + 1 :], k, 0)


def scatter(g: ex.Node, shape: tuple[int, ...], maps: tuple) -> ex.Node:
    """The gradient of ``x`` (of ``shape``) from the gradient ``g`` of ``x[maps]``, i.e. of
    ``expr.remap(x, g.shape, maps)``: the reverse index map, with zeros where no element
    of the view reads ``x`` and sums where one element is read several times."""
    if 0 in shape or 0 in g.shape:
        return ex.Const(0, g.dtype, shape)
    used = [s for s, _, _ in maps if s >= 0]
    if len(set(used)) != len(used):
        raise NotImplementedError("autograd: a view reading one index twice (a diagonal)")
    spread = tuple(d for d in range(g.ndim) if d not in used)
    if spread and all(g.shape[d] == 1 for d in spread):  # length 1: drop by indexing
        rank = {d: k for k, d in enumerate(sorted(used))}
        g = _remap(
            g,
            tuple(g.shape[d] for d in sorted(used)),
            tuple((rank[d], 0, 1) if d in rank else (-1, 0, 0) for d in range(g.ndim)),
        )
        maps = tuple((rank[s], a, b) if s >= 0 else (s, a, b) for s, a, b in maps)
    elif spread:  # broadcast dims: the gradient is the sum over them
        g = expr_ops.reduce("sum", g, spread)
        rank = {d: k for k, d in enumerate(sorted(used))}
        maps = tuple((rank[s], a, b) if s >= 0 else (s, a, b) for s, a, b in maps)
    # Every dim of g is now read by one source dim: lay them out in source order, with a
    # length-1 dim where the source was indexed by an integer.
    src_of = {s: k for k, (s, _, _) in enumerate(maps) if s >= 0}
    shape2 = tuple(g.shape[s] if s >= 0 else 1 for s, _, _ in maps)
    g2 = _remap(g, shape2, tuple((src_of[d], 0, 1) for d in range(g.ndim)))
    for k, (s, start, step) in enumerate(maps):
        n = shape2[k]
        if s < 0:
            step = 1
        elif step < 0 and n > 1:  # reversed: flip back, then it starts at the lowest index
            flip = tuple((j, n - 1 if j == k else 0, -1 if j == k else 1) for j in range(g2.ndim))
            g2 = _remap(g2, g2.shape, flip)
            start, step = start + step * (n - 1), -step
        if step > 1 and n > 1:
            g2 = _dilate(g2, k, step)
        after = shape[k] - start - g2.shape[k]
        if start or after:
            g2 = ex.Pad(g2, k, start, after, 0)
    return g2


def _remap_rule(node: ex.Remap, g: ex.Node) -> tuple:
    return (scatter(g, node.arg.shape, node.maps),)


def _cast_rule(node: ex.Cast, g: ex.Node) -> tuple:
    if node.dtype.kind not in "fV" or node.arg.dtype.kind not in "fV":  # V: bfloat16
        return (None,)
    return (expr_ops.cast(g, node.arg.dtype),)


def _pad_rule(node: ex.Pad, g: ex.Node) -> tuple:
    return (_crop(g, node.arg.shape, node.dim, node.before),)


def _concat_rule(node: ex.Concat, g: ex.Node) -> tuple:
    out, start = [], 0
    for c in node.children:
        out.append(_crop(g, c.shape, node.dim, start))
        start += c.shape[node.dim]
    return tuple(out)


def _dot_rule(node: ex.Dot, g: ex.Node) -> tuple:
    a, b = node.children
    if node.dtype.kind != "f":
        return (None, None)
    o, la, lb = node.out_labels, node.a_labels, node.b_labels
    return (
        ex.Dot(g, b, o, lb, la, a.shape, a.dtype),
        ex.Dot(a, g, la, o, lb, b.shape, b.dtype),
    )


def _unreshape(g: ex.Node, step: tuple, shape: tuple[int, ...]) -> ex.Node:
    """``g`` (of the reshaped value) back to ``shape`` (the value before ``step``)."""
    if step[0] == "split":
        _, d, lengths = step
        return reshape(g, ("merge", tuple(range(d, d + len(lengths))), d))
    _, dims, pos = step
    order = [d for d in range(len(shape)) if d not in dims]
    order[pos:pos] = dims
    g = reshape(g, ("split", pos, tuple(shape[d] for d in dims)))
    return _remap(g, shape, tuple((order[j], 0, 1) for j in range(len(shape))))


def _reshape_rule(node: Reshape, g: ex.Node) -> tuple:
    return (_unreshape(g, node.step, node.arg.shape),)


def _leaf_rule(node: ex.Leaf, g: ex.Node) -> tuple:
    parent, step = node.origin
    if step[0] == "remap":
        return (scatter(g, parent.shape, step[2]),)
    if step[0] == "same":
        return (g,)
    return (_unreshape(g, step, parent.shape),)


# --- calls: numpy functions (scans, sorts, gathers) -----------------------------------------


def _flip(g: ex.Node, d: int) -> ex.Node:
    """``g`` reversed along dim ``d``."""
    n = g.shape[d]
    if n <= 1:
        return g
    maps = tuple((k, n - 1, -1) if k == d else (k, 0, 1) for k in range(g.ndim))
    return _remap(g, g.shape, maps)


def _call(fn, args: tuple, like: ex.Node, name: str) -> ex.Node:
    """A ``Call`` node of ``like``'s shape and dtype (a gradient computed by numpy)."""
    ident = tuple(range(like.ndim))
    dims = tuple(ident if a.shape == like.shape else (-1,) * a.ndim for a in args)
    return ex.Call(fn, args, like.shape, like.dtype, name, dims)


@attrs.frozen
class CumprodGrad:
    """The gradient of ``cumprod`` along ``axis`` given ``(x, g)``, exact with zeros (as
    torch's): ``sum_{i>=k} g_i prod_{j<=i, j!=k} x_j``. Before a row's first zero it is
    ``reverse_cumsum(g * y) / x``; at the first zero, the product of the elements before
    it times ``reverse_cumsum`` of ``g`` weighted by the products after it; after it, 0."""

    axis: int

    def __call__(self, x, g):
        x, g = np.moveaxis(x, self.axis, -1), np.moveaxis(g, self.axis, -1)
        y = np.cumprod(x, axis=-1)
        zero = x == 0
        out = np.zeros(x.shape, g.dtype)
        if x.size:
            back = np.flip(np.cumsum(np.flip(g * y, -1), -1), -1)
            before = ~np.logical_or.accumulate(zero, axis=-1)  # before the first zero
            np.divide(back, x, out=out, where=before)
            rows = np.nonzero(zero.any(-1))
            for row in zip(*rows, strict=True):
                xr, gr = x[row], g[row]
                z = int(np.argmax(xr == 0))
                head = np.prod(xr[:z])
                tail = np.cumprod(np.concatenate(([1], xr[z + 1 :])).astype(g.dtype))
                out[row + (z,)] = head * np.sum(gr[z:] * tail)
        return np.moveaxis(out, -1, self.axis)


@attrs.frozen
class SortGrad:
    """The gradient of a stable ``sort`` along ``axis`` given ``(x, g)``: each element gets
    the gradient of the place it was sorted to (torch's scatter by the sort's indices)."""

    axis: int

    def __call__(self, x, g):
        out = np.empty(g.shape, g.dtype)
        np.put_along_axis(out, np.argsort(x, axis=self.axis, kind="stable"), g, self.axis)
        return out


@attrs.frozen
class TopKGrad:
    """The gradient of ``topk``'s values given ``(g, indices)``: each picked element gets
    the gradient of its place, the others 0 (torch's scatter by the indices)."""

    axis: int
    shape: tuple[int, ...]

    def __call__(self, g, indices):
        out = np.zeros(self.shape, g.dtype)
        np.put_along_axis(out, indices, g, self.axis)
        return out


@attrs.frozen
class GatherGrad:
    """The gradient of a gather (``calls.Gather``) given ``(g, *indices)``: ``g`` added at
    the places each element was read from (zeros elsewhere; repeats add up)."""

    gather: object
    shape: tuple[int, ...]

    def __call__(self, g, *indices):
        out = np.zeros(self.shape, g.dtype)
        np.add.at(out, self.gather.index(self.shape, indices), g)
        return out


def _cumsum_rule(node: ex.Call, g: ex.Node) -> tuple:
    # the reversed running sum of g: node.fn (np.cumsum along the same dim) on g flipped
    d = node.fn.axis
    return (_flip(_call(node.fn, (_flip(g, d),), g, node.name), d),)


def _cumprod_rule(node: ex.Call, g: ex.Node) -> tuple:
    x = node.children[0]
    return (_call(CumprodGrad(node.fn.axis), (x, g), x, "cumprod_grad"),)


def _sort_rule(node: ex.Call, g: ex.Node) -> tuple:
    x = node.children[0]
    return (_call(SortGrad(node.fn.axis), (x, g), x, "sort_grad"),)


def _gather_rule(node: ex.Call, g: ex.Node) -> tuple:
    x, *indices = node.children
    gx = ex.Call(GatherGrad(node.fn, x.shape), (g, *indices), x.shape, g.dtype, "isel_grad")
    return (gx,) + (None,) * len(indices)


def _topk_rule(node: ex.Call, g: ex.Node) -> tuple:
    (x,) = node.children
    fn = node.fn  # ``calls.TopK``: the same call giving the indices
    picks = type(fn)(fn.axis, fn.k, fn.largest, True)
    idx = ex.Call(picks, (x,), node.shape, np.int64, node.name, node.arg_dims)
    gx = ex.Call(TopKGrad(fn.axis, x.shape), (g, idx), x.shape, g.dtype, "topk_grad")
    return (gx,)


# A call's rule, by its function's ``grad_rule`` (``calls.AlongAxis`` names its numpy
# function; ``calls.Gather`` says "gather"). A call without one has no gradient.
CALL_RULES = {
    "cumsum": _cumsum_rule,
    "cumprod": _cumprod_rule,
    "sort": _sort_rule,
    "gather": _gather_rule,
    "topk": _topk_rule,
}


def _call_rule(node: ex.Call, g: ex.Node) -> tuple:
    if node.dtype.kind != "f":
        return (None,) * len(node.children)
    rule = CALL_RULES.get(getattr(node.fn, "grad_rule", None))
    if rule is None:
        raise NoGradient(node.name, f"a numpy call of shape {node.shape}")
    return rule(node, g)


class NoGradient(Exception):
    """A node the walk must differentiate has no rule; ``gradients`` names the caller."""

    def __init__(self, what: str, detail: str):
        super().__init__(what, detail)
        self.what, self.detail = what, detail


# Kinds GRADIENTS has no entry for, and why (tests/test_kinds_coverage.py).
NO_RULE = {
    "const": "a constant has no inputs: the backward walk stops there",
    "chunked": "a chunked leaf has no inputs: the backward walk stops there",
}

GRADIENTS = {
    "leaf": _leaf_rule,
    "call": _call_rule,
    "map": _map_rule,
    "cast": _cast_rule,
    "reduce": _reduce_rule,
    "remap": _remap_rule,
    "pad": _pad_rule,
    "concat": _concat_rule,
    "dot": _dot_rule,
    "reshape": _reshape_rule,
}

# --- symbolic operators and names ---------------------------------------------------------

# node -> (inputs, backward(g, node) -> one gradient node or None per input). The walk
# passes the node: a backward that closed over its own result would keep the weak key
# alive through the value (and with it the inputs' storage), one entry per call forever.
SYMBOLIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# gradient node -> "grad_<name>", for explain
GRAD_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def register_symbolic(node: ex.Node, inputs: tuple, backward) -> ex.Node:
    """Declare ``node`` an operator of ``inputs`` whose gradient is ``backward(g, node)``;
    the walk will not look inside it. ``backward`` must not hold ``node`` (nor a tensor of
    it): the walk passes it. Returns ``node``."""
    SYMBOLIC[node] = (tuple(inputs), backward)
    return node


# --- the reverse walk -------------------------------------------------------------------------


def _edges(node: ex.Node) -> tuple:
    sym = SYMBOLIC.get(node)
    if sym is not None:
        return sym[0]
    if node.kind == "leaf":
        return (node.origin[0],) if node.origin is not None else ()
    if node.kind == "map" and node.op == "stop_gradient":
        return ()  # nothing below it is differentiated (so a call there needs no rule)
    return node.children


def _order(root: ex.Node) -> list[ex.Node]:
    """Nodes reachable from ``root`` through autograd's edges, children first."""
    return ex.walk(root, _edges)


def _total(parts: list) -> ex.Node:
    total = parts[0]
    for p in parts[1:]:
        total = expr_ops.map_op("add", (total, p), total.shape)
    return total


def gradients(root: ex.Node, seed: ex.Node, wrt: list, op: str = "grad") -> list:
    """Per node of ``wrt``, the gradient of ``root`` (weighted by ``seed``, a node of
    ``root``'s shape and dtype) as a node of its shape and dtype; None where ``root`` does
    not depend on it. A node on the way without a gradient (``ax.apply``) is a
    ``TypeError`` naming ``op``."""
    order = _order(root)
    targets = {id(w) for w in wrt}
    needs: set = set()
    for node in order:  # nodes through which some wrt is reached
        if id(node) in targets or any(id(c) in needs for c in _edges(node)):
            needs.add(id(node))
    found: dict = {}
    pending: dict = {id(root): [seed]} if id(root) in needs else {}
    for node in reversed(order):
        parts = pending.pop(id(node), None)
        if parts is None:
            continue
        g = _total(parts)
        if id(node) in targets:
            found[id(node)] = g
        edges = _edges(node)
        if not edges:
            continue
        sym = SYMBOLIC.get(node)
        try:
            if sym is not None:
                grads = sym[1](g, node)
            else:
                rule = GRADIENTS.get(node.kind)
                if rule is None:
                    raise NoGradient(node.kind, f"a {node.kind} node of shape {node.shape}")
                grads = rule(node, g)
        except NoGradient as e:
            raise TypeError(
                message(
                    op,
                    f"{e.what} has no gradient",
                    e.detail,
                    "If no gradient should flow through it, pass its inputs through "
                    "ax.stop_gradient(...)",
                )
            ) from None
        for child, cg in zip(edges, grads, strict=True):
            if cg is not None and id(child) in needs:
                pending.setdefault(id(child), []).append(expr_ops.cast(cg, child.dtype))
    out = []
    for w in wrt:
        g = found.get(id(w))
        if g is not None and (g.shape != w.shape or g.dtype != w.dtype):
            raise AssertionError(f"autograd: gradient {g} does not match {w}")  # a rule bug
        out.append(g)
    return out


def zeros_like(node: ex.Node) -> ex.Node:
    """A zero gradient for ``node``."""
    return ex.Const(np.zeros((), node.dtype)[()], node.dtype, node.shape)
