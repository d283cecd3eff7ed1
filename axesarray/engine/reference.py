"""The reference engine: evaluates the DAG with one numpy call per node.

It is the oracle for the fused engine in tests and the ``engine="numpy"`` debugging mode.
Results are computed fully before anything is written, so aliasing is always safe here.
"""

from __future__ import annotations

import numpy as np

from ..expr import Cast, Concat, Const, Dot, Leaf, Map, Node, Pad, Reduce, Remap, walk
from ..ops import REDUCERS, apply_map
from ..storage import leaf_array
from ..strided import addresses

__all__ = ["evaluate_array", "assign", "remap_array"]


def remap_array(arr: np.ndarray, shape: tuple[int, ...], maps: tuple) -> np.ndarray:
    """numpy version of ``strided.remap_view``: slice/index, transpose, then broadcast."""
    index = []
    kept_src = []
    for (src, start, step), n in zip(maps, arr.shape, strict=True):
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
        del n
    sub = arr[tuple(index)]
    # sub's dims are in map order; move them to their result positions, add broadcast dims.
    order = sorted(range(len(kept_src)), key=lambda k: kept_src[k])
    sub = sub.transpose(order)
    present = sorted(kept_src)
    expand = tuple(slice(None) if d in present else None for d in range(len(shape)))
    return np.broadcast_to(sub[expand], shape)


def _eval_node(node: Node, vals: dict) -> np.ndarray:
    if isinstance(node, Leaf):
        return leaf_array(node.data, node.view, node.writeable)
    if isinstance(node, Const):
        return np.broadcast_to(np.asarray(node.value, node.dtype), node.shape)
    args = [vals[id(c)] for c in node.children]
    if isinstance(node, Map):
        return apply_map(node.op, args, node.dtype)
    if isinstance(node, Cast):
        return args[0].astype(node.dtype)
    if isinstance(node, Reduce):
        # argmax/argmin reduce exactly one axis; numpy takes it as an int, not a tuple
        axis = node.axes[0] if node.op in ("argmax", "argmin") else node.axes
        return np.asarray(REDUCERS[node.op](args[0], axis=axis), dtype=node.dtype)
    if isinstance(node, Remap):
        return remap_array(args[0], node.shape, node.maps)
    if isinstance(node, Pad):
        width = [(0, 0)] * node.ndim
        width[node.dim] = (node.before, node.after)
        return np.pad(args[0], width, constant_values=node.value)
    if isinstance(node, Concat):
        return np.concatenate(args, axis=node.dim)
    if isinstance(node, Dot):
        out = np.einsum(
            args[0], list(node.a_labels), args[1], list(node.b_labels), list(node.out_labels)
        )
        return np.asarray(out, dtype=node.dtype)
    raise TypeError(f"reference engine: unknown node {node!r}")


def evaluate_array(root: Node) -> np.ndarray:
    """The value of ``root`` as a numpy array in logical dim order (a view for leaves)."""
    vals: dict[int, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for node in walk(root):
            vals[id(node)] = _eval_node(node, vals)
    return vals[id(root)]


def assign(dst: Leaf, root: Node) -> None:
    """Write ``root`` (same shape as ``dst``) into ``dst``; evaluates fully first."""
    value = evaluate_array(root)
    if not isinstance(dst.data, np.ndarray):  # device storage: edit a host copy
        from ..devices import host, write_host

        staged = host(dst.data)
        assign(Leaf(staged, dst.view), Leaf(*_as_leaf(value)))
        write_host(dst.data, staged)
        return
    if dst.view.blocks is not None:
        with np.errstate(all="ignore"):
            dst.data[addresses(dst.view)] = value.astype(dst.dtype, copy=False)
        return
    target = leaf_array(dst.data, dst.view)
    with np.errstate(all="ignore"):
        np.copyto(target, value, casting="unsafe")


def _as_leaf(value: np.ndarray):
    from ..storage import wrap_array

    wrapped = wrap_array(np.ascontiguousarray(value))
    return wrapped
