"""The reference engine: evaluates the DAG with one numpy call per node.

It is the oracle for the fused engine in tests and the ``engine="numpy"`` debugging mode.
Results are computed fully before anything is written, so aliasing is always safe here.
"""

from __future__ import annotations

import numpy as np

from ..core.ops import OPS, apply_map
from ..core.reductions_table import REDUCERS, REDUCTIONS
from ..core.strided import addresses
from ..dag.nodes import Leaf, Node, walk
from ..dag.reshape import merge_order
from ..errors import AxesError, message
from ..storage.devices import device_of, host_array
from ..storage.memory import leaf_array, wrap_array

__all__ = ["evaluate_array", "assign", "remap_array", "call_value"]


def remap_array(
    arr: np.ndarray, shape: tuple[int, ...], maps: tuple, compact: bool = False
) -> np.ndarray:
    """numpy version of ``strided.remap_view``: slice/index, transpose, then broadcast
    (``compact``: the dims it would broadcast are left of length 1, for numpy's own
    broadcasting to spread later)."""
    recipe = _RECIPES.get((maps, shape))
    if recipe is None:
        recipe = _remap_recipe(maps, shape)
        if len(_RECIPES) >= 4096:
            _RECIPES.clear()
        _RECIPES[(maps, shape)] = recipe
    index, order, expand = recipe
    sub = arr[index].transpose(order)[expand]
    return sub if compact else np.broadcast_to(sub, shape)


# (maps, shape) -> ``_remap_recipe``: the numpy tier remaps the same views on every call
# (~8 us a remap worked out, ~1 us applied)
_RECIPES: dict = {}


def _remap_recipe(maps: tuple, shape: tuple) -> tuple:
    """The index, transposition and expansion ``remap_array`` applies for ``maps`` onto
    ``shape`` (they depend on nothing else)."""
    index = []
    kept_src = []
    for src, start, step in maps:
        if src < 0:
            index.append(start)
            continue
        length = shape[src]
        if length == 0:
            index.append(slice(0, 0))
        else:
            stop = start + step * (length - 1) + (1 if step > 0 else -1)
            index.append(slice(start, None if stop < 0 else stop, step))
        kept_src.append(src)
    # the kept dims are in map order; move them to their result positions, add broadcast dims
    order = tuple(sorted(range(len(kept_src)), key=lambda k: kept_src[k]))
    present = set(kept_src)
    expand = tuple(slice(None) if d in present else None for d in range(len(shape)))
    return tuple(index), order, expand


def _reduce(node, x):
    # argmax/argmin reduce exactly one axis; numpy takes it as an int, not a tuple
    axis = node.axes[0] if REDUCTIONS[node.op].index else node.axes
    return np.asarray(REDUCERS[node.op](x, axis=axis), dtype=node.dtype)


def _pad(node, x):
    width = [(0, 0)] * node.ndim
    width[node.dim] = (node.before, node.after)
    return np.pad(x, width, constant_values=node.value)


def _dot(node, a, b):
    out = np.einsum(a, list(node.a_labels), b, list(node.b_labels), list(node.out_labels))
    return np.asarray(out, dtype=node.dtype)


def call_value(fn, name: str, shape: tuple, dtype: np.dtype, arrays) -> np.ndarray:
    """``fn(*arrays)`` checked against the declared shape and dtype (a ``Call`` node's value,
    for both engines). The inputs are read-only views: a function cannot edit a tensor."""
    frozen = []
    for a in arrays:
        a = a.view()
        a.flags.writeable = False
        frozen.append(a)
    out = np.asarray(fn(*frozen))
    if out.shape != tuple(shape):
        raise AxesError(
            message(
                name,
                "the function returned an array of the wrong shape",
                f"expected {tuple(shape)}, got {out.shape}",
                "Check out_axes: they name the function's trailing output dimensions",
            )
        )
    if out.dtype != dtype and not np.can_cast(out.dtype, dtype, "same_kind"):
        raise TypeError(
            message(
                name,
                f"the function returned {out.dtype}, which does not cast to the declared "
                f"{dtype} under the same_kind rule",
                None,
                f"Declare it: dtype='{out.dtype}'",
            )
        )
    return out.astype(dtype, copy=False)


def _reshape(node, x):
    if node.step[0] == "merge":  # merged dims adjacent and in order, then numpy's reshape
        x = x.transpose(merge_order(x.ndim, *node.step[1:]))
    return x.reshape(node.shape)


# One numpy call per node kind, given the node and its children's values.
# Kinds EVAL has no entry for, and why (tests/test_kinds_coverage.py).
NO_RULE = {"chunked": "a chunked leaf is computed by dask (engine.chunked), never by numpy here"}

EVAL = {
    "leaf": lambda node: host_array(node.data, node.view, node.writeable),
    "const": lambda node: np.broadcast_to(np.asarray(node.value, node.dtype), node.shape),
    "map": lambda node, *args: apply_map(node.op, list(args), node.dtype),
    "cast": lambda node, x: x.astype(node.dtype),
    "reduce": _reduce,
    "remap": lambda node, x: remap_array(x, node.shape, node.maps),
    "pad": _pad,
    "concat": lambda node, *args: np.concatenate(args, axis=node.dim),
    "dot": _dot,
    "call": lambda node, *args: call_value(node.fn, node.name, node.shape, node.dtype, args),
    "reshape": _reshape,
}


_NARROW = (np.dtype(np.float32), np.dtype(np.float16))
_F64 = np.dtype(np.float64)
# Nodes that only move values: a wide (float64) value passes through them unrounded.
_MOVES = ("remap", "pad", "concat", "reshape")


def _widen(node: Node, kids: list, wide: dict) -> bool:
    """Whether the numpy tier computes ``node`` (float32/float16) in float64: from its first
    transcendental op on (numpy's float32 ``log`` is 4 ulp off, ``1/(1+exp(-x))`` loses its
    subnormal results) and on through every elementwise op that reads such a value, so
    that the chain is rounded once; plain arithmetic on float32 inputs stays float32
    (numpy rounds each op correctly, as the kernels do, and at numpy's speed)."""
    if node.dtype not in _NARROW:
        return False
    if node.kind == "map":
        return OPS[node.op].expensive or any(wide.get(id(c), False) for c in node.children)
    if node.kind == "reduce" and not REDUCTIONS[node.op].index:
        return wide.get(id(node.children[0]), False)
    return node.kind in _MOVES and wide.get(id(node.children[0]), False)


def evaluate_array(root: Node, wide: bool = False) -> np.ndarray:
    """The value of ``root`` as a numpy array in logical dim order (a view for leaves).

    ``wide`` (the numpy tier): float32 chains from their first transcendental op on are
    computed in float64 and rounded once where they end (``_widen``). Each node is
    evaluated once, and a value is dropped after its last reader (numpy reuses the
    memory for the next temporary)."""
    order = walk(root)
    last: dict[int, int] = {}
    for k, node in enumerate(order):
        for c in node.children:
            last[id(c)] = k
    vals: dict[int, np.ndarray] = {}
    is_wide: dict[int, bool] = {}
    with np.errstate(all="ignore"):
        for k, node in enumerate(order):
            kids = [vals[id(c)] for c in node.children]
            if wide and node.children:
                if _widen(node, kids, is_wide):
                    is_wide[id(node)] = True
                    value = _wide_value(node, kids)
                else:  # a wide child is rounded to its own dtype where it is read
                    kids = [
                        v.astype(c.dtype) if is_wide.get(id(c)) else v
                        for c, v in zip(node.children, kids, strict=True)
                    ]
                    value = EVAL[node.kind](node, *kids)
            else:
                value = EVAL[node.kind](node, *kids)
            vals[id(node)] = value
            for c in node.children:
                if last.get(id(c)) == k and c is not root:
                    vals.pop(id(c), None)
    out = vals[id(root)]
    if is_wide.get(id(root)):
        out = out.astype(root.dtype)
    return out


def _wide_value(node: Node, kids: list) -> np.ndarray:
    if node.kind == "map":
        args = [v.astype(_F64) if v.dtype in _NARROW else v for v in kids]
        return apply_map(node.op, args, _F64)
    if node.kind == "reduce":
        return np.asarray(REDUCERS[node.op](kids[0], axis=node.axes), dtype=_F64)
    return EVAL[node.kind](node, *kids)  # a move: the value stays float64


def assign(dst: Leaf, root: Node, wide: bool = False) -> None:
    """Write ``root`` (same shape as ``dst``) into ``dst``; evaluates fully first (``wide``:
    see ``evaluate_array``)."""
    value = evaluate_array(root, wide)
    device = device_of(dst.data)
    if not device.is_cpu:  # device storage: edit a host copy
        staged = device.to_host(dst.data)
        assign(Leaf(staged, dst.view), Leaf(*wrap_array(np.ascontiguousarray(value))))
        device.write_host(dst.data, staged)
        return
    if dst.view.blocks is not None:
        with np.errstate(all="ignore"):
            dst.data[addresses(dst.view)] = value.astype(dst.dtype, copy=False)
        return
    target = leaf_array(dst.data, dst.view)
    with np.errstate(all="ignore"):
        np.copyto(target, value, casting="unsafe")
