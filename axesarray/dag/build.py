"""Building expression nodes for ops: numpy's dtype rules, casts, constants and folding.

Every operator and function a user writes goes through here (``map2`` for tensor op tensor,
``map_scalar`` for tensor op scalar, ``map1`` for unary functions, ``map_op`` for the
rest), so the common cases are straight-line code. Inputs are cast to numpy's loop dtypes
(NEP 50: Python scalars are weak), so each ``Map`` computes in one dtype; operations on
constants fold. Imports ``expr`` (the node classes) and ``dtypes``.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..core import dtypes
from ..core.ops import COMPARISONS, OPS, apply_map
from ..core.reductions_table import REDUCTIONS
from .nodes import LAZY_PARAMS, Cast, Const, Dot, Map, Node, Reduce, lazy
from .resize import COUNTS, counted

__all__ = [
    "cast",
    "map_op",
    "map1",
    "map2",
    "map_scalar",
    "dot",
    "rebuilt_map",
    "reduce",
    "rounded",
    "widen",
    "BUILT",
]


def cast(node: Node, dtype: np.dtype) -> Node:
    """Cast ``node`` to ``dtype``; a no-op when it already has it; folds into constants."""
    if node.dtype == dtype:
        return node
    if type(node) is Const:
        with np.errstate(all="ignore"):
            out = Const(np.array(node.value).astype(dtype)[()], dtype, node.shape)
        if COUNTS and node in COUNTS:  # a mean's count: the cast follows it
            counted(out, node, lambda n: np.array(n).astype(dtype)[()])
        return out
    try:
        memo = (node.known_key, dtype)
    except AttributeError:  # a lazy operand: built as it is
        return Cast(node, dtype)
    key = _CASTS.get(memo)
    if key is not None:  # ``Cast.__init__``'s fields, its key remembered
        out = _new(Cast)
        out.children, out.shape, out.dtype, out.key = (node,), node.shape, dtype, key
        out.params = node.params
        return out
    out = Cast(node, dtype)
    if not lazy(out):
        if len(_CASTS) >= _MEMO_MAX:
            _CASTS.clear()
        _CASTS[memo] = out.key
    return out


# (node key, dtype) -> the key of its Cast (not lazy: see ``nodes.LAZY_PARAMS``). Bounded.
_CASTS: dict = {}


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


# The same Python scalar in an expression gives the same Const node (immutable, so sharing
# is invisible): an expression rebuilt in a loop makes fewer nodes. Bounded.
_CONSTS: dict = {}
_MEMO_MAX = 4096


def _const(a, dt: np.dtype, shape: tuple) -> Const:
    """A Python scalar as a (shared) Const; zeros are told apart by their bytes (-0.0).

    Keyed by the stored value (``dt.type(a)``), so a Const rebuilt by a view
    (``dag.views.remap``) back at the original shape is the original node: a structure
    built twice then reads the same parameter, and the planner computes it once."""
    v = dt.type(a)
    k = (dt, shape, v) if v != 0 else (dt, shape, v.tobytes())  # bytes: cheaper than repr
    hit = _CONSTS.get(k)
    if hit is None:
        if len(_CONSTS) >= _MEMO_MAX:
            _CONSTS.clear()
        hit = _CONSTS[k] = Const(a, dt, shape)
    return hit


_LOOPS2: dict = {}  # (op, dtype, dtype) -> (loop dtype, loop dtype, result dtype)

# The Maps an operator built without casts, by (op, child keys...): -> (result dtype, key)
# (and the scalar's shared Const for ``map_scalar``). Child keys name their dtypes and
# shapes, so they fix the loop dtypes and the result key: building the same structure
# again (an expression rebuilt each call) skips dtype resolution and key interning and
# only checks, by identity, that the children share no param (sharing changes the key).
# Key ids are never reused, so an entry that outlives a reset of ``expr``'s key table
# still names its structure alone (at worst a plan-cache miss). Bounded.
_BUILT: dict = {}
_new = object.__new__


def _remember(memo: tuple, value: tuple) -> None:
    if len(_BUILT) >= _MEMO_MAX:
        _BUILT.clear()
    _BUILT[memo] = value


def _disjoint(pa: tuple, pb: tuple) -> bool:
    """Whether two params tuples share no object (``in`` on nodes is an identity test)."""
    if len(pa) == 1:
        return pa[0] not in pb
    if len(pb) == 1:
        return pb[0] not in pa
    return not pa or not pb or set(map(id, pa)).isdisjoint(map(id, pb))


# The straight paths read keys as ``node.known_key``, which never finishes a lazy node
# (AttributeError then): they remember keys of small nodes only. The Tensor operators read
# the memo and keys directly for their hits (a frame less per operator): the layout of the
# memo's keys and values is the contract with them.
BUILT = _BUILT


def _own_param(node: Node) -> bool:
    """Whether ``node`` is its own only param (a leaf, a constant): its ``params`` is then
    ``(node,)``, built by a property on each read; a remembered key says so for its node."""
    p = node.params
    return len(p) == 1 and p[0] is node


def _where_shared(pa: tuple, pb: tuple) -> tuple | None:
    """For each of ``pb``'s params, its position among ``pa``'s or -1: how two operands
    share params (``x - x.max(K)``: the leaf ``x`` is a param of both), which their key
    records (``nodes._combine``); None for params too many to scan per build."""
    if len(pb) == 1:  # one param (a leaf's view): no generator
        p = pb[0]
        return (pa.index(p),) if p in pa else (-1,)
    if len(pa) + len(pb) > 8:
        return None
    return tuple(pa.index(p) if p in pa else -1 for p in pb)


def _shared(memo: tuple, a: Node, b: Node) -> Node | None:
    """``map2``'s node for operands sharing params, from the key and dtype remembered for
    that structure and that sharing (``_where_shared``), or None. The params are
    ``_combine``'s: ``a``'s, then those of ``b`` that ``a`` lacks, in order."""
    pa, pb = a.params, b.params
    where = _where_shared(pa, pb)
    if not where or max(where) < 0:  # disjoint: ``map2``'s own memo
        return None
    hit = _BUILT.get(memo + (where,))
    if hit is None:
        return None
    node = _new(Map)
    node.op, node.children, node.shape, node.dtype = memo[0], (a, b), a.shape, hit[0]
    node.key = hit[1]
    node.params = pa + tuple(p for p, w in zip(pb, where, strict=True) if w < 0)
    return node


def map2(op: str, a: Node, b: Node) -> Node:
    """``op(a, b)`` for two nodes of the same shape: ``map_op``'s straight line for the
    operator users write most (a tensor op a tensor with the same axes)."""
    try:
        memo = (op, a.known_key, b.known_key)
    except AttributeError:  # a lazy operand (a long program): nothing remembered
        memo = None
    if a is b and memo is not None:  # ``x op x`` of a leaf: one param, a key of its own
        same = _BUILT.get(memo + (None,))
        if same is not None:
            node = _new(Map)
            node.op, node.children, node.shape, node.dtype = op, (a, a), a.shape, same[0]
            node.key, node.params = same[1], (a,)
            return node
    hit = _BUILT.get(memo)
    if hit is not None:
        if hit[2]:  # both are their own params (two leaves): disjoint unless the same one
            if a is not b:
                node = _new(Map)  # no __init__: its six fields, known (a frame per operator counts)
                node.op, node.children, node.shape, node.dtype = op, (a, b), a.shape, hit[0]
                node.key, node.params = hit[1], node.children  # one tuple: both are (a, b)
                return node
        else:
            pa, pb = a.params, b.params
            if pa[0] is not pb[0] if len(pa) == 1 == len(pb) else _disjoint(pa, pb):
                node = _new(Map)
                node.op, node.children, node.shape, node.dtype = op, (a, b), a.shape, hit[0]
                node.key, node.params = hit[1], pa + pb
                return node
    if memo is not None:
        shared = _shared(memo, a, b)
        if shared is not None:
            return shared
    if a.dtype.kind == "V" or b.dtype.kind == "V":  # bfloat16: computed in float32
        return _bf16(op, (a, b), a.shape, op)
    hit = _LOOPS2.get((op, a.dtype, b.dtype))
    if hit is None:
        (la, lb), out = _loop_dtypes(op, (a.dtype, b.dtype), op)
        hit = _LOOPS2[(op, a.dtype, b.dtype)] = (la, lb, out)
    la, lb, out = hit
    if a.dtype is la and b.dtype is lb and type(a) is not Const is not type(b):
        node = Map(op, (a, b), out)
        if memo is not None and not lazy(node):
            if _disjoint(a.params, b.params):
                _remember(memo, (out, node.key, _own_param(a) and _own_param(b)))
            elif a is b and _own_param(a):  # ``x op x``: found by map2's hit for two leaves
                _remember(memo + (None,), (out, node.key))
            else:
                where = _where_shared(a.params, b.params)
                if where is not None:
                    _remember(memo + (where,), (out, node.key))
        return node
    if a.dtype is not la:
        a = cast(a, la)
    if b.dtype is not lb:
        b = cast(b, lb)
    if type(a) is Const and type(b) is Const:
        return _folded(op, [a, b], out, a.shape)
    # ``x32 / n64`` built each call: the Map over the casts is remembered by their keys
    # (the call below finds no cast left to make: it does not come back here)
    plain = type(a) is not Const is not type(b) and a.dtype is la and b.dtype is lb
    if memo is not None and plain:
        return map2(op, a, b)
    return Map(op, (a, b), out)


def map1(op: str, a: Node) -> Node:
    """``op(a)`` for a node: ``map_op``'s straight line for unary functions."""
    try:
        memo = (op, a.known_key)
    except AttributeError:  # a lazy operand: nothing remembered
        memo = None
    hit = _BUILT.get(memo)
    if hit is not None:
        node = _new(Map)  # no __init__, as in map2
        node.op, node.children, node.shape, node.dtype = op, (a,), a.shape, hit[0]
        node.key, node.params = hit[1], (a,) if hit[2] else a.params
        return node
    if a.dtype.kind == "V":
        return _bf16(op, (a,), a.shape, op)
    hit = _LOOPS.get((op, (a.dtype,)))
    (la,), out = hit if hit is not None else _loop_dtypes(op, (a.dtype,), op)
    if type(a) is Const:
        return _folded(op, [cast(a, la)], out, a.shape)
    if a.dtype is la:
        node = Map(op, (a,), out)
        if memo is not None and not lazy(node):
            _remember(memo, (out, node.key, _own_param(a)))
        return node
    return Map(op, (cast(a, la),), out)


def map_scalar(op: str, a: Node, value, reflected: bool, opname: str | None = None) -> Node:
    """``op(a, value)`` (or ``op(value, a)``) for a node and a Python scalar: the next most
    common operator (``x * 2``, ``1 + x``). ``opname``: the name errors give (``op``'s
    by default; ``ax.clip`` builds its ``clip_lo``/``clip_hi`` rows here)."""
    t = type(value)
    # Zeros by repr (-0.0 is not 0.0); NaN equals nothing, so it is never remembered.
    try:
        memo = (op, a.known_key, t, reflected, value if value else repr(value))
    except AttributeError:  # a lazy operand: nothing remembered
        memo = None
    hit = _BUILT.get(memo)
    if hit is not None:
        # The shared Const may already be one of a's params (``1 / (1 + x)``): the key
        # records where, so the remembered keys go by its position (-1: not there).
        c, out, keys, own = hit
        pa = (a,) if own else a.params
        if c not in pa:
            key = keys.get(-1)
            params = (c,) + pa if reflected else pa + (c,)
        else:
            pos = pa.index(c)
            key = keys.get(pos)
            params = (c,) + pa[:pos] + pa[pos + 1 :] if reflected else pa
        if key is not None:
            node = _new(Map)  # no __init__, as in map2
            node.op, node.children = op, (c, a) if reflected else (a, c)
            node.shape, node.dtype, node.key, node.params = a.shape, out, key, params
            return node
    if a.dtype.kind == "V":
        return _bf16(op, (value, a) if reflected else (a, value), a.shape, op)
    types = (t, a.dtype) if reflected else (a.dtype, t)
    hit = _LOOPS.get((op, types))
    loops, out = hit if hit is not None else _loop_dtypes(op, types, opname or op)
    if op in COMPARISONS and t is int:
        folded = _compare_out_of_range(op, (value, a) if reflected else (a, value), a.shape)
        if folded is not None:
            return folded
    la, lc = (loops[1], loops[0]) if reflected else loops
    if t is int and lc.kind in "iu":
        dtypes.check_weak_scalar(value, lc, opname or op)
    c = _const(value, lc, a.shape)
    if a.dtype is la and type(a) is not Const:
        node = Map(op, (c, a) if reflected else (a, c), out)
        if value == value and memo is not None and not lazy(node):
            pa = a.params
            old = _BUILT.get(memo)
            keys = old[2] if old is not None and old[0] is c else {}
            keys[pa.index(c) if c in pa else -1] = node.key
            _remember(memo, (c, out, keys, _own_param(a)))
        return node
    if a.dtype is not la:
        a = cast(a, la)
    if type(a) is Const:
        return _folded(op, [c, a] if reflected else [a, c], out, a.shape)
    return Map(op, (c, a) if reflected else (a, c), out)


def _operand(a, dt: np.dtype, shape: tuple, opname: str) -> Node:
    if isinstance(a, Node):
        return a if a.dtype is dt or a.dtype == dt else cast(a, dt)
    if type(a) is int and dt.kind in "iu":
        dtypes.check_weak_scalar(a, dt, opname)
    return _const(a, dt, shape)


def _folded(op: str, nodes: list, out: np.dtype, shape) -> Node:
    with np.errstate(all="ignore"):
        value = apply_map(op, [np.asarray(n.value) for n in nodes], out)
    folded = Const(value[()], out, shape)
    if COUNTS:
        counts = [k for k, n in enumerate(nodes) if n in COUNTS]
        if len(counts) == 1:  # folded from a mean's count: recomputed with a new count
            (k,) = counts
            values = [np.asarray(n.value) for n in nodes]

            def fn(c, k=k, values=values):
                with np.errstate(all="ignore"):
                    args = values[:k] + [np.asarray(c, values[k].dtype)] + values[k + 1 :]
                    return apply_map(op, args, out)[()]

            counted(folded, nodes[k], fn)
    return folded


def map_op(op: str, args: tuple, shape: tuple[int, ...], opname: str | None = None) -> Node:
    """Build ``op(*args)`` where args are nodes of ``shape`` or weak Python scalars.

    Inputs are cast to numpy's loop dtypes, so each Map computes in one dtype. This runs
    for every operator a user writes, so it avoids all work a cache can do.
    """
    opname = opname or op
    memo = _nary_memo(op, args) if len(args) > 2 else None
    if memo is not None:
        hit = _BUILT.get(memo)
        if hit is not None:  # no cast to make; each scalar's shared Const, remembered
            out, consts = hit
            kids = tuple(a if c is None else c for a, c in zip(args, consts, strict=True))
            return Map(op, kids, out)
    if any(isinstance(a, Node) and a.dtype.kind == "V" for a in args):
        return _bf16(op, args, shape, opname)
    if op in COMPARISONS:
        folded = _compare_out_of_range(op, args, shape)
        if folded is not None:
            return folded
    if len(args) == 1 and isinstance(args[0], Node) and type(args[0]) is not Const:
        a = args[0]
        hit = _LOOPS.get((op, (a.dtype,)))
        (la,), out = hit if hit is not None else _loop_dtypes(op, (a.dtype,), opname)
        return Map(op, (a if a.dtype is la else cast(a, la),), out)
    if len(args) == 2:
        a, b = args
        types = (
            a.dtype if isinstance(a, Node) else type(a),
            b.dtype if isinstance(b, Node) else type(b),
        )
        hit = _LOOPS.get((op, types))
        (la, lb), out = hit if hit is not None else _loop_dtypes(op, types, opname)
        a = _operand(a, la, shape, opname)
        b = _operand(b, lb, shape, opname)
        if type(a) is Const and type(b) is Const:
            return _folded(op, [a, b], out, shape)
        return Map(op, (a, b), out)
    types = tuple(a.dtype if isinstance(a, Node) else type(a) for a in args)
    hit = _LOOPS.get((op, types))
    loop, out = hit if hit is not None else _loop_dtypes(op, types, opname)
    nodes = [_operand(a, dt, shape, opname) for a, dt in zip(args, loop, strict=True)]
    if all(type(n) is Const for n in nodes):
        return _folded(op, nodes, out, shape)
    pairs = tuple(zip(args, nodes, strict=True))
    if memo is not None and all(n is a for a, n in pairs if isinstance(a, Node)):
        _remember(memo, (out, tuple(None if isinstance(a, Node) else n for a, n in pairs)))
    return Map(op, tuple(nodes), out)


def _nary_memo(op: str, args: tuple) -> tuple | None:
    """``map_op``'s memo key for three or more operands (``where(m, x, 0.0)`` built each
    call): the nodes' keys and the scalars (zeros by repr: -0.0 is not 0.0; NaN equals
    nothing, so it is never found), or None for a lazy operand."""
    try:
        return ("n", op) + tuple(
            a.known_key if isinstance(a, Node) else (type(a), a if a else repr(a)) for a in args
        )
    except AttributeError:
        return None


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
    if node.dtype.kind == "V":  # bfloat16: reduce the float32 values, round the result once
        r = reduce(op, widen(node), axes)
        return rounded(r) if r.dtype.kind == "f" else r
    try:
        memo = (op, node.known_key, axes)
    except AttributeError:  # a lazy operand: nothing remembered
        memo = None
    hit = _REDUCED.get(memo)
    if hit is not None:  # as map1: the child's key fixes dtype, shape and the result key
        r = _new(Reduce)
        r.op, r.children, r.axes, r.shape, r.dtype = op, (node,), hit[0], hit[1], hit[2]
        r.key, r.params = hit[3], node.params
        return r
    out = dtypes.reduce_dtype(op, node.dtype)
    arg = cast(node, out) if REDUCTIONS[op].convert else node
    r = Reduce(op, arg, tuple(sorted(axes)), out)
    if memo is not None and arg is node and not lazy(r):
        if len(_REDUCED) >= _MEMO_MAX:
            _REDUCED.clear()
        _REDUCED[memo] = (r.axes, r.shape, out, r.key)
    return r


# Reductions built without a cast, by (op, child key, axes): -> (sorted axes, shape,
# dtype, key), as ``_BUILT`` for Maps. Bounded.
_REDUCED: dict = {}


def dot(a: Node, b: Node, a_labels, b_labels, out_labels, shape, dtype: np.dtype) -> Node:
    """``Dot(a, b, ...)`` (operands in their loop dtypes); as ``map2`` for Maps, the key
    of a Dot over distinct operands that share no param is remembered by (labels, dtype,
    child keys), which fix its shape and structure, so a contraction rebuilt each call
    skips the key's interning. Bounded."""
    try:
        memo = (a_labels, b_labels, out_labels, dtype, a.known_key, b.known_key)
    except AttributeError:  # a lazy operand: nothing remembered
        memo = None
    hit = _DOTS.get(memo)
    if hit is not None and a is not b:
        own = hit[1]  # both are their own params (leaves, constants)
        if own or _disjoint(a.params, b.params):
            node = _new(Dot)  # no __init__, as in map2
            node.children, node.a_labels, node.b_labels = (a, b), a_labels, b_labels
            node.out_labels, node.shape, node.dtype, node.key = out_labels, shape, dtype, hit[0]
            node.params = node.children if own else a.params + b.params
            return node
    node = Dot(a, b, a_labels, b_labels, out_labels, shape, dtype)
    if memo is not None and a is not b and not lazy(node) and _disjoint(a.params, b.params):
        if len(_DOTS) >= _MEMO_MAX:
            _DOTS.clear()
        _DOTS[memo] = (node.key, _own_param(a) and _own_param(b))
    return node


_DOTS: dict = {}  # (labels, dtype, child keys) -> (key, both own params), see ``dot``


def rebuilt_map(node: Map, kids: tuple) -> Node:
    """``node.rebuild(kids)`` (a view pushed through an expression, ``dag.views.remap``),
    its key remembered by (op, dtype, child keys) for one child or two sharing no param,
    where ``Map`` interns exactly that (and is not lazy: see ``nodes.LAZY_PARAMS``)."""
    try:
        memo = (node.op, node.dtype.char) + tuple(k.known_key for k in kids)
    except AttributeError:  # a lazy child: the node is lazy too
        return node.rebuild(kids)
    if len(kids) == 1:
        params = kids[0].params
    elif len(kids) == 2:
        pa, pb = kids[0].params, kids[1].params
        if kids[0] is kids[1] or not _disjoint(pa, pb):
            return node.rebuild(kids)
        params = pa + pb
    else:
        return node.rebuild(kids)
    key = _REBUILT.get(memo)
    if key is None or len(params) > LAZY_PARAMS:
        out = node.rebuild(kids)
        if not lazy(out):
            if len(_REBUILT) >= _MEMO_MAX:
                _REBUILT.clear()
            _REBUILT[memo] = out.key
        return out
    out = _new(Map)
    out.op, out.children, out.shape, out.dtype = node.op, kids, kids[0].shape, node.dtype
    out.key, out.params = key, params
    return out


_REBUILT: dict = {}  # (op, dtype char, child keys) -> key, see ``rebuilt_map``


# --- bfloat16: storage only, float32 arithmetic ------------------------------------------
#
# No op computes in bfloat16. An op with a bfloat16 operand computes in float32 and its
# result is cast to bfloat16 (when no operand was a wider float: those promote as float32
# would, as in torch). That cast is marked: an op reading a marked cast reads the float32
# value under it, so a formula rounds once, where it is stored (evaluated, assigned or
# materialized), and the reference engine and the kernels see the same DAG. A user's
# ``astype("bfloat16")`` is an ordinary cast and always rounds.

_ROUND_ONCE: weakref.WeakSet = weakref.WeakSet()
_F32 = np.dtype(np.float32)


def rounded(node: Node) -> Node:
    """``node`` (float32 or wider) cast to bfloat16, marked so later ops read ``node``."""
    out = cast(node, dtypes.bfloat16())
    if isinstance(out, Cast):  # a lazy Cast is of a subclass (nodes._defer)
        _ROUND_ONCE.add(out)
    return out


def widen(node: Node) -> Node:
    """The float32 value of a bfloat16 node: under a marked cast, else an exact cast."""
    if node in _ROUND_ONCE:
        return node.children[0]
    return cast(node, _F32)


def _bf16(op: str, args: tuple, shape: tuple, opname: str) -> Node:
    wider = any(isinstance(a, Node) and a.dtype.kind == "f" for a in args)
    f32 = tuple(widen(a) if isinstance(a, Node) and a.dtype.kind == "V" else a for a in args)
    node = map_op(op, f32, shape, opname)
    return node if wider or node.dtype.kind != "f" else rounded(node)
