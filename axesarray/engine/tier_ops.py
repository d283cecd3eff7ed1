"""The numpy tier's ops: one node's value with numpy, for ``tier_eval``'s evaluation.

``compute`` computes a node from its operands' values: elementwise ops as numpy ufuncs into
a given buffer (``out``), float32 chains in float64 from their first transcendental op on
(``WIDE_OPS``, ``is_wide``) and rounded once, overflowing where the kernels' float32 would
(``_OVERFLOWS``); the math library's float32 functions as loops once loaded
(``kernels.tier_math``); a dot as one ``np.matmul``; moves as numpy views (``_view``).
"""

from __future__ import annotations

import math

import numpy as np

from ..core.ops import OPS, apply_map
from ..core.reductions_table import REDUCERS, REDUCTIONS
from ..dag.nodes import Node
from ..kernels import tier_math
from ..kernels.threads import blas_ran
from .reference import EVAL, remap_array

__all__ = ["WIDE_OPS", "F64", "compute", "view", "computes_wide"]

_NARROW = (np.dtype(np.float32), np.dtype(np.float16))
_F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
_MOVES = ("remap", "pad", "concat", "reshape")
# Ops whose numpy float32 loop is not correctly rounded (numpy's float32 ``log`` is 4 ulp
# off, ``1/(1+exp(-x))`` loses its subnormal results): from one on, a float32 chain is
# computed in float64 and rounded once. Division, square root and the floor/remainder ops
# are correctly rounded in float32, in numpy as in the kernels: they stay float32 (a
# layer norm's ``xc / sqrt(var)`` in float64 moved twice the bytes, at half numpy's speed).
WIDE_OPS = frozenset(k for k, v in OPS.items() if v.expensive) - {
    "truediv",
    "floordiv",
    "mod",
    "sqrt",
}


def computes_wide(node: Node, wide: dict) -> bool:
    """Whether the tier computes ``node`` (float32/float16) in float64: from its first
    ``WIDE_OPS`` op on, and on through every elementwise op, move and sum that reads such
    a value, so that the chain is rounded once where it ends. A float32 op of the math
    library's loops (``tier_math``, once loaded) over float32 operands is the kernels' own
    function instead: float32, within the library's bound."""
    if node.dtype not in _NARROW:
        return False
    kind = node.kind
    if kind == "map":
        if any(wide.get(id(c), False) for c in node.children):
            return True
        if node.op in tier_math.LOOP_OPS and node.dtype == node.children[0].dtype == _F32:
            if node.op in tier_math.LOOPS:
                return False
            tier_math.WANTED.add(node.op)  # loaded in the background (``engine.tiers``)
        return node.op in WIDE_OPS
    if kind == "reduce" and not REDUCTIONS[node.op].index:
        return wide.get(id(node.children[0]), False)
    return kind in _MOVES and wide.get(id(node.children[0]), False)


def _stable_sigmoid(x: np.ndarray) -> np.ndarray:
    # 1 / (1 + exp(-x)) overflows exp below -709 (float64) and loses the subnormal
    # results the kernels keep: exp(x) / (1 + exp(x)) there.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _bound(node: Node, kids: list):
    """The scalar bound of a clip against a constant that is neither NaN nor zero, or None.
    numpy's maximum/minimum then give the op's value (NaN in x propagates; a tie keeps x's
    value, and only a signed zero could tell the two apart). ``kids``: the operands'
    values (a constant's as a 0-d array)."""
    if node.children[1].kind != "const":
        return None
    value = kids[1]
    return None if value.ndim or np.isnan(value) or value == 0 else value


_CLIP = {"clip_lo": np.maximum, "clip_hi": np.minimum}


def _map(node: Node, kids: list, is_wide: bool, wide: dict, out, shape) -> np.ndarray:
    if not is_wide and node.dtype == _F32 and node.op in tier_math.LOOPS:
        # (``computes_wide`` saw the loop and a float32 operand: the kernels' function)
        return tier_math.run_loop(node.op, kids[0], out)
    row = OPS[node.op]
    kids = [
        # a constant as a 0-d array: numpy's scalar loops and fast paths (its value is the
        # operand's, not the node's: a kept ``tier_eval.Program`` binds constants per call)
        v.reshape(())
        if c.kind == "const"
        else v.astype(c.dtype)  # a wide operand is rounded to its own dtype where it is read
        if not is_wide and wide.get(id(c))
        else v
        for c, v in zip(node.children, kids, strict=True)
    ]
    ufunc = getattr(np, row.ufunc) if row.reference is None else None
    if node.op in _CLIP and _bound(node, kids) is not None:
        ufunc = _CLIP[node.op]
    if ufunc is not None and out is not None:
        try:
            if is_wide:
                return ufunc(*kids, out=out, dtype=F64, casting="unsafe")
            return ufunc(*kids, out=out, casting="unsafe")
        except TypeError:  # no loop for these dtypes with this output: the general path
            pass
    if is_wide:
        kids = [v.astype(F64) if v.dtype in _NARROW else v for v in kids]
    dtype = F64 if is_wide else node.dtype
    if node.op == "sigmoid" and is_wide:
        # float32 computed in float64: 1 / (1 + exp(-x)) overflows only below -709, where
        # the float32 result is 0 anyway (4 ufunc passes instead of the stable form's 8)
        value = np.negative(kids[0], dtype=F64)
        np.exp(value, out=value)
        value += 1.0
        np.reciprocal(value, out=value)
    elif node.op == "sigmoid":
        value = _stable_sigmoid(kids[0]).astype(dtype, copy=False)
    else:
        value = apply_map(node.op, kids, dtype)
    return value  # compact (length-1 dims) when its operands are: the consumers broadcast


# Wide ops whose value can pass the node's own dtype's range where its inputs are in it.
# The kernels compute them in that dtype, where they overflow to inf (and then ``inf * 0``
# is NaN, ``inf / inf`` NaN): the tier's float64 value is made inf there too, so special
# values are the kernels' (``ax.softmax`` of a row holding +inf and 100.0: NaN, not 0).
_OVERFLOWS = frozenset({"exp", "expm1", "pow", "hypot"})
# exp and expm1 (increasing) pass the range only above log(max) of it: no operand above
# that bound, no overflow (NaN operands compare false and give NaN, not an overflow)
_OVERFLOW_ABOVE = {
    op: {dt: math.log(float(np.finfo(dt).max)) for dt in _NARROW} for op in ("exp", "expm1")
}


def _overflow_as_narrow(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``value`` (float64) with what passes ``dtype``'s range made +-inf: two reductions over
    a slab in cache, the write only where something overflowed."""
    big = float(np.finfo(dtype).max)
    flat = value.reshape(-1)  # fmax/fmin skip NaN (max would return it)
    if flat.size and (np.fmax.reduce(flat) > big or np.fmin.reduce(flat) < -big):
        np.copyto(value, np.copysign(np.inf, value), where=np.abs(value) > big)
    return value


def view(node: Node, kids: list, shape: tuple) -> np.ndarray:
    """A leaf, constant or remap as a numpy view, compact: the dims it broadcasts have length
    1, and numpy's ufuncs spread them (a mask ``pos < lens`` over ``B T D`` is computed at
    ``B T 1``, a constant is one value). ``shape``: the node's (a slab's) shape; ``kids``:
    the operands in full."""
    if node.kind == "const":
        return np.asarray(node.value, node.dtype).reshape((1,) * len(shape))
    if node.kind == "remap":
        return remap_array(kids[0], shape, node.maps, compact=True)
    value = EVAL[node.kind](node, *kids)
    if node.kind == "leaf" and 0 in value.strides:  # a leaf's own broadcast dims too
        value = value[tuple(slice(0, 1) if st == 0 else slice(None) for st in value.strides)]
    return value


def compute(node: Node, kids: list, is_wide: bool, wide: dict, out, shape) -> np.ndarray:
    kind = node.kind
    if kind == "map":
        value = _map(node, kids, is_wide, wide, out, shape)
        if is_wide and node.op in _OVERFLOWS and value.flags.writeable:
            if node.op in _OVERFLOW_ABOVE:  # overflows only past a bound on its operand:
                # one pass over the (narrower, often compact) operand instead of two
                bound = _OVERFLOW_ABOVE[node.op][node.dtype]
                if not np.fmax.reduce(kids[0], axis=None, initial=-np.inf) > bound:
                    return value
            return _overflow_as_narrow(value, node.dtype)
        return value
    if kind in ("remap", "const", "leaf"):
        return view(node, kids, shape)
    if kind == "cast" and out is not None:
        np.copyto(out, kids[0], casting="unsafe")
        return out
    if kind == "dot":
        a, b = (
            v.astype(c.dtype) if wide.get(id(c)) else v
            for c, v in zip(node.children, kids, strict=True)
        )
        return _dot(node, a, b)
    if kind == "reduce" and node.op == "logsumexp" and kids[0].dtype.kind == "f":
        return _logsumexp(kids[0], node.axes, F64 if is_wide else node.dtype)
    if kind == "reduce" and is_wide:
        value = _rows(node, kids[0])
        if value is not None:
            return value
        return np.asarray(REDUCERS[node.op](kids[0], axis=node.axes), dtype=F64)
    if not is_wide and node.children and kind not in _MOVES:
        kids = [
            v.astype(c.dtype) if wide.get(id(c)) else v
            for c, v in zip(node.children, kids, strict=True)
        ]
    if kind == "reduce" and kids[0].dtype == node.dtype:
        value = _rows(node, kids[0], out)
        if value is not None:
            return value
    return EVAL[kind](node, *kids)


def _rows(node: Node, x: np.ndarray, out=None) -> np.ndarray | None:
    """A max, min or sum over ``x``'s last dims by the math library's row loop
    (``tier_math``; into ``out`` when it fits), or None (numpy's way: another reduction,
    other dims, another dtype, no loop yet)."""
    if node.op not in tier_math.ROW_OPS:
        return None
    k = tier_math.trailing(node.axes, x.ndim)
    return tier_math.run_rows(node.op, x, k, out) if k else None


def _dot(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A dot as one ``np.matmul`` (BLAS for floats) with its result in C order: batch
    labels first, then the free labels in the output's order (``np.einsum`` alone loops
    in C; with ``optimize`` its result can come back in F order, and the next op over it
    crosses memory: 18 ms instead of 0.5 for 1M float32)."""
    key = (node.a_labels, node.b_labels, node.out_labels, a.shape, b.shape)
    recipe = _DOTS.get(key)
    if recipe is None:
        recipe = _dot_recipe(*key)
        if len(_DOTS) >= 1024:
            _DOTS.clear()
        _DOTS[key] = recipe
    if recipe is None:
        la, lb, lo = node.a_labels, node.b_labels, node.out_labels
        value = np.ascontiguousarray(np.einsum(a, list(la), b, list(lb), list(lo), optimize=True))
        return np.asarray(value, dtype=node.dtype)
    swap, perm_a, shape_a, perm_b, shape_b, mnk = recipe
    if swap:
        a, b = b, a
    value = np.matmul(a.transpose(perm_a).reshape(shape_a), b.transpose(perm_b).reshape(shape_b))
    value = value.reshape(node.shape)
    if value.dtype.kind in "fc":
        # its threads may now hold the other cores: the slabs that follow leave them be
        # (two slab threads beside a spinning BLAS thread ran 20-50x slower)
        blas_ran(*mnk)
    return np.asarray(value, dtype=node.dtype)


# (labels, operand shapes) -> ``_dot_recipe``: a kept tier program calls the same dots
_DOTS: dict = {}


def _dot_recipe(la: tuple, lb: tuple, lo: tuple, shape_a: tuple, shape_b: tuple):
    """How ``_dot`` calls ``np.matmul`` for these labels and shapes: ``(swap, perm_a,
    shape_a, perm_b, shape_b, (m, n, k))`` (each operand transposed to batch, rows,
    contracted / batch, contracted, columns and reshaped to 3-D), or None (einsum)."""
    la, lb, lo = list(la), list(lb), list(lo)
    batch = [x for x in lo if x in la and x in lb]
    contracted = [x for x in la if x in lb and x not in lo]
    free_a = [x for x in lo if x in la and x not in lb]
    free_b = [x for x in lo if x in lb and x not in la]
    simple = (
        len(set(la)) == len(la)
        and len(set(lb)) == len(lb)
        and set(la) == set(batch + contracted + free_a)
        and set(lb) == set(batch + contracted + free_b)
    )
    if not simple or lo not in (batch + free_a + free_b, batch + free_b + free_a):
        return None
    swap = lo != batch + free_a + free_b
    if swap:
        la, free_a, lb, free_b = lb, free_b, la, free_a
        shape_a, shape_b = shape_b, shape_a
    size = dict(zip(la, shape_a, strict=True))
    size.update(zip(lb, shape_b, strict=True))

    def count(labels):
        return math.prod(size[x] for x in labels)

    nb, m, k, n = count(batch), count(free_a), count(contracted), count(free_b)
    return (
        swap,
        tuple(la.index(t) for t in batch + free_a + contracted),
        (nb, m, k),
        tuple(lb.index(t) for t in batch + contracted + free_b),
        (nb, k, n),
        (m, n, k),
    )


def _logsumexp(x: np.ndarray, axes: tuple, dtype: np.dtype) -> np.ndarray:
    """The reference's logsumexp (``reductions_table``: float64 from the max on) with two
    full-size passes fewer: the max in ``x``'s own dtype (exact), the shifted values
    written once in float64 and exponentiated in place."""
    k = tier_math.trailing(axes, x.ndim)
    m = tier_math.run_rows("max", x, k) if k else None  # a row loop's, when loaded
    if m is not None:
        m = m.reshape(m.shape + (1,) * len(axes))
    else:
        m = np.max(x, axis=axes, keepdims=True, initial=-np.inf)
    t = np.subtract(x, m, dtype=F64)
    np.exp(t, out=t)
    s = np.sum(t, axis=axes, keepdims=True)
    out = np.log(s, out=s)
    out += m
    return np.squeeze(out, axis=axes).astype(dtype, copy=False)
