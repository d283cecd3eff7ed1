"""Algebraic rewrites of an expression DAG, run once per plan before planning.

Each rule looks at a node whose children are already rewritten and returns a cheaper
equivalent, or None. Rules may only look at structure and at constants whose value is
part of the key (``ops.SPECIAL_CONSTANTS``), so a cached plan is exact for every
expression with the same key. New constants a rule makes are special too: the planner
writes them as literals, they are not run-time parameters.

- ``1 / (1 + exp(-x))`` (either order of the sum) is ``sigmoid(x)``: the math library
  evaluates the same formula with an exp specialized for it;
- ``x ** 2``, ``** 0.5``, ``** -1``, ``** 1`` are square, sqrt, reciprocal and x, as
  numpy's ``ndarray.__pow__`` computes them (``fast_scalar_power``);
- softmax, log-softmax and logsumexp written the stable way (``m = x.max(K)``, then
  ``exp(x - m)`` and its sum) read ``x`` through one ``logsumexp`` reduction (one sweep:
  the kernel finds each row's max and sums ``exp(x - max)`` while the row is in cache):
  ``e / e.sum(K)`` is ``exp(x - lse)``, ``(x - m) - log(sum(exp(x - m)))`` is
  ``x - lse``, ``m + log(sum(exp(x - m)))`` is ``lse``. Two passes over ``x`` for a
  softmax instead of four kernels and a full-size temporary. CPU only (the CUDA
  templates have no logsumexp reduction). Except where the result can hold ``e`` (by
  hand or ``ax.softmax``'s guarded form): there the planner's normalize kernel computes
  ``e`` once and stores it (``cost.stored_reduction``, the same test the planner makes),
  one exp per element against the rewrite's two (one of them float64); ``rewrite``'s
  ``dst`` says what the result is.
"""

from __future__ import annotations

import numpy as np

from ..dag.nodes import Cast, Const, Dot, Map, Node, Reduce, Remap, lazy, rebuild_dag, walk
from . import cost

__all__ = ["rewrite", "REWRITES", "CPU_REWRITES"]


def _is(node: Node, kind: str, op: str | None = None) -> bool:
    return node.kind == kind and (op is None or node.op == op)


def _special(node: Node) -> float | None:
    return node.special if node.kind == "const" else None


def sigmoid(node: Node, kids: tuple) -> Node | None:
    if node.op != "truediv" or node.dtype.kind != "f" or _special(kids[0]) != 1.0:
        return None
    den = kids[1]
    if not _is(den, "map", "add"):
        return None
    a, b = den.children
    e = b if _special(a) == 1.0 else a if _special(b) == 1.0 else None
    if e is None or not _is(e, "map", "exp") or not _is(e.children[0], "map", "neg"):
        return None
    x = e.children[0].children[0]
    return Map("sigmoid", (x,), node.dtype) if x.dtype == node.dtype else None


def fast_power(node: Node, kids: tuple) -> Node | None:
    if node.op != "pow":
        return None
    base, exponent = kids
    e, dtype = _special(exponent), node.dtype
    if e == 2.0:
        return Map("square", (base,), dtype)
    if dtype.kind != "f":
        return None
    if e == 0.5:
        return Map("sqrt", (base,), dtype)
    if e == -1.0:
        return Map("truediv", (Const(1, dtype, base.shape), base), dtype)
    if e == 1.0:
        return base
    return None


# --- logsumexp -----------------------------------------------------------------------------


def _same(a: Node, b: Node) -> bool:
    """Whether two nodes compute the same value: one object, or the same structure over
    the same parameter objects (``e`` written twice by a user)."""
    if a is b:
        return True
    if lazy(a) or lazy(b):  # a long program's node: its key would cost a walk per test
        return False
    return a.key == b.key and a.params == b.params


def _max_of(node: Node):
    """``(x, axes)`` when ``node`` is ``x.max(axes)`` (float)."""
    if _is(node, "reduce") and node.op == "max" and node.dtype.kind == "f":
        return node.arg, node.axes
    return None


def _broadcast_back(node: Node, reduced: Node) -> bool:
    """Whether ``node`` is ``reduced`` (a Reduce) broadcast back over its reduced axes:
    each kept dim in place, the reduced ones spread."""
    if not _is(node, "remap") or not _same(node.arg, reduced):
        return False
    kept = [d for d in range(reduced.arg.ndim) if d not in reduced.axes]
    return node.shape == reduced.arg.shape and node.maps == tuple((d, 0, 1) for d in kept)


def _unguard(node: Node):
    """``m`` when ``node`` is ``where(isfinite(m), m, 0.0)``, in ``stop_gradient`` or not:
    the shift of ``ax.softmax``, ``log_softmax`` and ``logsumexp`` (a max that is not
    finite is replaced by 0); else None."""
    if _is(node, "map", "stop_gradient"):
        node = node.children[0]
    if not _is(node, "map", "where"):
        return None
    cond, m, zero = node.children
    if _special(zero) != 0.0 or not _is(cond, "map", "isfinite"):
        return None
    return m if _same(cond.children[0], m) else None


def _shifted(node: Node, guarded: bool = False):
    """``(x, max node)`` when ``node`` is ``x - x.max(axes)`` broadcast back (``guarded``:
    ``x - where(isfinite(m), m, 0)`` with ``m`` that max broadcast back)."""
    if not _is(node, "map", "sub"):
        return None
    x, back = node.children
    if guarded:
        back = _unguard(back)
    if back is None or not _is(back, "remap"):
        return None
    found = _max_of(back.arg)
    if found is None or not _same(found[0], x) or not _broadcast_back(back, back.arg):
        return None
    return x, back.arg


def _sum_exp_shifted(node: Node, guarded: bool = False):
    """``(x, max node, shifted node)`` when ``node`` is ``sum(exp(x - x.max(A)), A)``
    (``guarded``: the max replaced by 0 where it is not finite)."""
    if not (_is(node, "reduce") and node.op == "sum" and _is(node.arg, "map", "exp")):
        return None
    shifted = node.arg.children[0]
    found = _shifted(shifted, guarded)
    if found is None or found[1].axes != node.axes:
        return None
    return found[0], found[1], shifted


def _lse(x: Node, axes: tuple, dtype, op: str = "logsumexp") -> Node:
    return Reduce(op, x, axes, dtype)


def _lse_back(x: Node, mx: Node, op: str = "logsumexp") -> Node:
    """logsumexp over ``mx``'s axes, broadcast back like ``mx`` was."""
    kept = [d for d in range(x.ndim) if d not in mx.axes]
    return Remap(_lse(x, mx.axes, mx.dtype, op), x.shape, tuple((d, 0, 1) for d in kept))


def softmax(node: Node, kids: tuple) -> Node | None:
    """``e / e.sum(A)`` with ``e = exp(x - x.max(A))`` is ``exp(x - logsumexp(x, A))``."""
    if node.op != "truediv":
        return None
    e, back = kids
    if not (_is(e, "map", "exp") and _is(back, "remap")):
        return None
    found = _sum_exp_shifted(back.arg)
    if found is None or not _same(back.arg.arg, e) or not _broadcast_back(back, back.arg):
        return None
    x, mx, _ = found
    if mx.dtype != node.dtype:
        return None
    return Map("exp", (Map("sub", (x, _lse_back(x, mx)), node.dtype),), node.dtype)


def log_softmax(node: Node, kids: tuple) -> Node | None:
    """``(x - m) - log(sum(exp(x - m)))`` (the log broadcast back) is ``x - lse``."""
    if node.op != "sub":
        return None
    d, back = kids
    if not (_is(back, "remap") and _is(back.arg, "map", "log")):
        return None
    found = _shifted(d)
    total = back.arg.children[0]
    inner = _sum_exp_shifted(total)
    if found is None or inner is None or not _same(inner[2], d):
        return None
    x, mx = found
    kept = [k for k in range(x.ndim) if k not in mx.axes]
    if back.maps != tuple((k, 0, 1) for k in kept) or mx.dtype != node.dtype:
        return None
    return Map("sub", (x, _lse_back(x, mx)), node.dtype)


def logsumexp(node: Node, kids: tuple) -> Node | None:
    """``m + log(sum(exp(x - m)))`` (either order) with ``m = x.max(A)`` is one
    ``logsumexp`` reduction."""
    if node.op != "add":
        return None
    for m, lg in (kids, kids[::-1]):
        if _max_of(m) is None or not _is(lg, "map", "log"):
            continue
        inner = _sum_exp_shifted(lg.children[0])
        if inner is not None and _same(inner[1], m) and m.dtype == node.dtype:
            return _lse(inner[0], m.axes, node.dtype)
    return None


# ``ax.softmax``, ``ax.log_softmax`` and ``ax.logsumexp`` shift by ``where(isfinite(m), m,
# 0)``: a row of -inf gives logsumexp -inf (not NaN), a row holding +inf gives +inf. The
# ``logsumexp_guarded`` reduction computes that formula in one kernel: ``L = m + log(sum(
# exp(x - m)))`` where ``m`` is finite, else ``m`` itself, which equals ``0 + log(sum(exp(
# x)))`` there (+inf, -inf or NaN).


def _guarded_lse(node: Node):
    """``(x, max node)`` when ``node`` is ``g + log(sum(exp(x - G), A))`` (either order)
    with ``g`` the guarded max and ``G`` the same broadcast back (``ax.logsumexp``)."""
    if not _is(node, "map", "add"):
        return None
    for g, lg in (node.children, node.children[::-1]):
        m = _unguard(g)
        if m is None or _max_of(m) is None or not _is(lg, "map", "log"):
            continue
        inner = _sum_exp_shifted(lg.children[0], guarded=True)
        if inner is not None and _same(inner[1], m) and m.dtype == node.dtype:
            return inner[0], m
    return None


def logsumexp_guarded(node: Node, kids: tuple) -> Node | None:
    """``ax.logsumexp``'s formula is one ``logsumexp_guarded`` reduction."""
    found = _guarded_lse(node)
    return None if found is None else _lse(found[0], found[1].axes, node.dtype, _GUARDED)


def log_softmax_guarded(node: Node, kids: tuple) -> Node | None:
    """``ax.log_softmax``: ``x - L`` broadcast back, ``L`` as in ``logsumexp_guarded``."""
    if node.op != "sub" or not _is(kids[1], "remap"):
        return None
    x, back = kids
    found = _guarded_lse(back.arg)
    if found is None or not _same(found[0], x) or found[1].dtype != node.dtype:
        return None
    kept = [d for d in range(x.ndim) if d not in found[1].axes]
    if back.shape != x.shape or back.maps != tuple((d, 0, 1) for d in kept):
        return None
    return Map("sub", (x, _lse_back(x, found[1], _GUARDED)), node.dtype)


def softmax_guarded(node: Node, kids: tuple) -> Node | None:
    """``ax.softmax``: ``e / e.sum(A)`` with ``e = exp(x - where(isfinite(m), m, 0))`` is
    ``exp(x - where(isfinite(L), L, 0)) * where(isfinite(L), 1, where(L > 0, 0, -L))``:
    ``exp(x - L)`` where L is finite; where it is not, the values ``e / s`` has (``s`` is
    ``exp(L)``: +inf gives 0, or NaN where ``exp(x)`` overflows; -inf and NaN give NaN)."""
    if node.op != "truediv":
        return None
    e, back = kids
    if not (_is(e, "map", "exp") and _is(back, "remap")):
        return None
    found = _sum_exp_shifted(back.arg, guarded=True)
    if found is None or not _same(back.arg.arg, e) or not _broadcast_back(back, back.arg):
        return None
    x, mx, _ = found
    dt = node.dtype
    if mx.dtype != dt:
        return None
    lse = _lse_back(x, mx, _GUARDED)
    shape = x.shape
    finite = Map("isfinite", (lse,), np.dtype(bool))
    zero, one = Const(0.0, dt, shape), Const(1.0, dt, shape)
    shift = Map("where", (finite, lse, zero), dt)
    pos = Map("gt", (lse, zero), np.dtype(bool))
    scale = Map("where", (finite, one, Map("where", (pos, zero, Map("neg", (lse,), dt)), dt)), dt)
    return Map("mul", (Map("exp", (Map("sub", (x, shift), dt),), dt), scale), dt)


_GUARDED = "logsumexp_guarded"


# --- contractions --------------------------------------------------------------------------

# ``(a * b).sum(k)`` runs on BLAS when the product has a free dim on each side (a matrix
# product) and at least this many multiply-adds; below, the fused reduction is as fast.
CONTRACT_MIN_WORK = 1 << 15


def _spread(node: Node) -> tuple[bool, ...] | None:
    """Per dim, whether a leaf operand really varies along it (False: broadcast, stride 0,
    or length 1); None when ``node`` is not a plain leaf."""
    if node.kind != "leaf" or node.view.blocks is not None:
        return None
    return tuple(s != 0 and n > 1 for n, s in zip(node.shape, node.view.strides, strict=True))


_OPERAND_NODES = 64  # a computed operand bigger than this is left to the fused reduction


def _varies(node: Node, memo: dict) -> tuple[bool, ...] | None:
    """Per dim, whether ``node``'s value may vary along it (True when unsure), for a leaf
    or an elementwise expression of leaves, constants and broadcast computed values
    (``relu(x @ w)`` broadcast against ``w2``); None for other nodes or past
    ``_OPERAND_NODES``."""
    hit = memo.get(id(node))
    if hit is not None or id(node) in memo:
        return hit
    if len(memo) > _OPERAND_NODES:
        return None
    # Marked before its children are visited, so the bound counts the nodes entered: a
    # long chain (an unrolled recurrence) stops at the bound instead of recursing down it.
    memo[id(node)] = None
    kind = node.kind
    if kind == "leaf":
        out = _spread(node)
    elif kind == "const":
        out = (False,) * node.ndim
    elif kind == "remap":
        flags = [False] * node.ndim
        for i, (d, _, _) in enumerate(node.maps):
            if d >= 0 and node.arg.shape[i] > 1:
                flags[d] = True
        out = tuple(flags)
    elif kind in ("map", "cast"):
        kids = [_varies(c, memo) for c in node.children]
        out = None if any(k is None for k in kids) else tuple(map(any, zip(*kids, strict=True)))
    else:
        out = None
    memo[id(node)] = out
    return out


def _compacted(node: Node, dims: list, memo: dict) -> Node:
    """``node`` without the dims not in ``dims`` (it does not vary along them: ``_varies``),
    rebuilt at the smaller shape: leaves and constants are read through a remap (a view,
    a scalar), a broadcast computed value through its remap, maps and casts rebuilt."""
    hit = memo.get(id(node))
    if hit is not None:
        return hit
    shape = tuple(node.shape[d] for d in dims)
    kind = node.kind
    if kind in ("leaf", "const"):
        maps = tuple((dims.index(d), 0, 1) if d in dims else (-1, 0, 1) for d in range(node.ndim))
        out = Remap(node, shape, maps)
    elif kind == "remap":
        maps = tuple(
            ((dims.index(d) if d in dims else -1), off, step) for d, off, step in node.maps
        )
        identity = tuple((i, 0, 1) for i in range(node.arg.ndim))
        same = maps == identity and shape == node.arg.shape
        out = node.arg if same else Remap(node.arg, shape, maps)  # (the value itself)
    elif kind == "map":
        out = Map(node.op, tuple(_compacted(c, dims, memo) for c in node.children), node.dtype)
    else:  # cast (``_varies`` admits no other kind)
        out = Cast(_compacted(node.arg, dims, memo), node.dtype)
    memo[id(node)] = out
    return out


def contraction(node: Node, kids: tuple) -> Node | None:
    """``(a * b).sum(K)`` over two float operands broadcast against each other (``a`` with
    dims ``b`` lacks and the other way round) is ``dot(a, b)`` over ``K``: BLAS instead of
    a reduction over the joint index space (as torchdim does). An operand is a leaf (read
    through a view without its broadcast dims) or an elementwise expression (computed once
    at its own size, then BLAS: ``(relu(x @ w1 + b) * w2).sum("H")``)."""
    if node.kind != "reduce" or node.op != "sum" or node.dtype.kind != "f":
        return None
    prod = kids[0]
    if not _is(prod, "map", "mul") or prod.dtype != node.dtype:
        return None
    a, b = prod.children
    if a.dtype != node.dtype or b.dtype != node.dtype:
        return None
    sa, sb = _varies(a, {}), _varies(b, {})
    if sa is None or sb is None:
        return None
    shape = prod.shape
    red = set(node.axes)
    if any(shape[d] != 1 and not (sa[d] and sb[d]) for d in red):
        return None  # a reduced dim only one side has: not a contraction
    kept = [d for d in range(len(shape)) if d not in red]
    if any(shape[d] != 1 and not (sa[d] or sb[d]) for d in kept):
        return None  # an output dim neither side has (broadcast in the result)
    free_a = [d for d in kept if sa[d] and not sb[d]]
    free_b = [d for d in kept if sb[d] and not sa[d]]
    work = 1
    for n in shape:
        work *= n
    if not free_a or not free_b or work < CONTRACT_MIN_WORK:
        return None
    n = len(shape)
    # contracted dims on both sides; a length-1 output dim neither side varies along is a
    # free dim (of length 1) of ``a``
    a_dims = [d for d in range(n) if d in red or sa[d] or (shape[d] == 1 and not sb[d])]
    b_dims = [d for d in range(n) if d in red or sb[d]]

    return Dot(
        _compacted(a, a_dims, {}),
        _compacted(b, b_dims, {}),
        tuple(a_dims),
        tuple(b_dims),
        tuple(kept),
        node.shape,
        node.dtype,
    )


REWRITES = (sigmoid, fast_power, contraction)
CPU_REWRITES = REWRITES + (
    softmax,
    log_softmax,
    logsumexp,
    softmax_guarded,
    log_softmax_guarded,
    logsumexp_guarded,
)


def _value_key(node: Node):
    """Equal for nodes computing the same value (``_same``'s test, as a dict key)."""
    return id(node) if lazy(node) else (node.key, tuple(map(id, node.params)))


def _stored_softmax(root: Node, dst) -> set[int]:
    """Ids of the nodes the ``softmax`` rule leaves alone: those reading the reduction the
    planner's normalize kernel will store in the result (``cost.stored_reduction`` and
    ``cost.can_hold``, the planner's own test; ``dst``: the destination's ``(view,
    dtype)``, or None for a fresh result)."""
    if root.kind not in ("map", "cast"):
        return set()
    order = walk(root)
    work = cost.dag_work(order)
    by_id = {id(n): n for n in order}

    def cost_of(value):
        w, _, ids = work[id(value)]
        inputs = 0
        if ids is not None:
            inputs = sum(by_id[i].dtype.itemsize for i in ids if by_id[i].kind in cost.BOUNDARY)
        return w, inputs

    result = (None, root.dtype) if dst is None else dst
    site = cost.stored_reduction(root, result, _value_key, cost_of)
    if site is None:
        return set()
    back = site[0]
    return {id(n) for n in order if n.kind == "map" and any(c is back for c in n.children)}


def _stored_softmaxes(root: Node, dst) -> set[int]:
    """``_stored_softmax`` of the root and of each elementwise operand of a dot, which the
    planner stores in a temporary for BLAS (attention's softmax between its products)."""
    kept = _stored_softmax(root, dst)
    for node in walk(root):
        if node.kind == "dot":
            for c in node.children:
                if c.kind in ("map", "cast"):
                    kept |= _stored_softmax(c, None)
    return kept


def rewrite(root: Node, rules: tuple = REWRITES, dst=None) -> Node:
    """``root`` with every rule applied bottom-up (shared subtrees stay shared). ``dst``:
    the destination's ``(view, dtype)`` (None: a fresh result), for the ``softmax`` rule
    (see ``_stored_softmaxes``)."""
    use = softmax in rules or softmax_guarded in rules
    kept = _stored_softmaxes(root, dst) if use else set()

    def apply(node: Node, kids: tuple) -> Node | None:
        if node.kind != "map" and node.kind != "reduce":
            return None
        for rule in rules:
            if (rule is softmax or rule is softmax_guarded) and id(node) in kept:
                continue
            out = rule(node, kids)
            if out is not None:
                return out
        return None

    return rebuild_dag(root, apply)
