"""Where the numpy tier writes its result: the destination's storage as a numpy array (a
blocked layout's blocked dim split in two), and the copy of a value into it.

The tier's last op writes into the destination directly when it can (``target_of``); an
NCHW4 destination of whole blocks is a numpy view with C split into ``(C // 4, 4)``, and a
value of the logical shape is written into it reshaped (``write``), block lanes one at a
time when the blocks are narrow.
"""

from __future__ import annotations

import numpy as np

from ..dag.nodes import Leaf, Node, walk
from ..storage.memory import leaf_array

__all__ = [
    "target_of",
    "may_refuse",
    "split",
    "same_view",
    "write",
    "write_blocked",
    "narrow_lanes",
]


def target_of(dst: Leaf, root: Node, refuse: bool | None = None) -> np.ndarray | None:
    """``dst``'s storage as a numpy array the last op (or each slab's) writes into
    directly: of ``root``'s shape, or for a layout with one blocked dim past the first
    (NCHW4, whole blocks) of that shape with the blocked dim split in two (``split``);
    None otherwise (other layouts, device storage, and results numpy may refuse midway:
    computed first, then written). ``refuse``: ``may_refuse(root)`` when known."""
    if type(dst.data) is not np.ndarray or tuple(dst.view.shape) != tuple(root.shape):
        return None
    if dst.dtype.kind not in "fc" and (may_refuse(root) if refuse is None else refuse):
        return None  # an integer power numpy refuses midway: nothing written until the end
    if dst.view.blocks is None:
        return leaf_array(dst.data, dst.view)
    return split(dst.data, dst.view)


def may_refuse(root: Node) -> bool:
    """Whether numpy may raise on some values of ``root``'s operands: an integer power
    (a negative exponent). Other refusals are of dtypes, raised before a slab writes."""
    return any(n.kind == "map" and n.op == "pow" and n.dtype.kind in "iub" for n in walk(root))


def split(data: np.ndarray, view) -> np.ndarray | None:
    """A view with one blocked dim ``d > 0`` of whole blocks (NCHW4 with C a multiple of 4:
    ``c -> (c // 4, c % 4)``) as a numpy view of shape ``shape[:d] + (blocks, size) +
    shape[d + 1:]``: a value of the logical shape is written into it reshaped, slab by slab
    along dim 0 while the slab is in cache (the whole value first, then a strided copy of
    it, was the slowest step of a quantize into NCHW4). None for other layouts."""
    blocked = [d for d, b in enumerate(view.blocks) if b is not None]
    if len(blocked) != 1 or blocked[0] == 0:
        return None
    d = blocked[0]
    blk = view.blocks[d]
    if blk.phase != 0 or blk.step != 1 or view.shape[d] % blk.size:
        return None
    shape = view.shape[:d] + (view.shape[d] // blk.size, blk.size) + view.shape[d + 1 :]
    strides = view.strides[:d] + (view.strides[d], blk.inner) + view.strides[d + 1 :]
    item = data.itemsize
    return np.ndarray(
        shape,
        data.dtype,
        buffer=data,
        offset=view.offset * item,
        strides=tuple(x * item for x in strides),
    )


def same_view(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two numpy arrays view the same elements in the same order."""
    return (
        a.shape == b.shape
        and a.strides == b.strides
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


def write(target: np.ndarray, value: np.ndarray, shape: tuple) -> None:
    """``target[...] = value`` for a value of the logical ``shape`` (maybe compact), into
    a target of that shape or a split one (``split``).

    >>> store = np.zeros((1, 2, 3, 1, 4), np.int8)  # NCHW4 storage of N=1 C=8 H=3 W=1
    >>> x = np.arange(24.0).reshape(1, 8, 3, 1)  # a value of the logical shape
    >>> write(store.transpose(0, 1, 4, 2, 3), x, x.shape)  # (N, C // 4, 4, H, W)
    >>> store[0, 1, :, 0].tolist()  # channels 4 to 7 at each H
    [[12, 15, 18, 21], [13, 16, 19, 22], [14, 17, 20, 23]]
    """
    if target.shape != shape:
        if value.shape != shape:
            value = np.broadcast_to(value, shape)
        value = value.reshape(target.shape)
        lane = narrow_lanes(target, shape)
        if lane is not None:
            for k in range(target.shape[lane]):
                at = (slice(None),) * lane + (k,)
                np.copyto(target[at], value[at], casting="unsafe")
            return
    np.copyto(target, value, casting="unsafe")


def write_blocked(data: np.ndarray, view, value: np.ndarray) -> bool:
    """Write ``value`` into a view with one blocked dim (NCHW4: ``j -> (j // 4, j % 4)``)
    as strided copies: the whole blocks as one view with the dim split in two, the last
    partial block as another (the reference engine computes every element's address: an
    int64 array as big as the value, 3x the copy's time). False for other layouts."""
    blocked = [d for d, b in enumerate(view.blocks) if b is not None]
    if len(blocked) != 1:
        return False
    d = blocked[0]
    blk = view.blocks[d]
    if blk.phase != 0 or blk.step != 1:
        return False
    item = data.itemsize
    shape, strides = list(view.shape), list(view.strides)
    full, rest = divmod(shape[d], blk.size)
    cut = (slice(None),) * d

    def over(shp, st, offset):
        return np.ndarray(
            tuple(shp),
            data.dtype,
            buffer=data,
            offset=offset * item,
            strides=tuple(x * item for x in st),
        )

    with np.errstate(all="ignore"):
        if full:  # as ``split`` views them, written by ``write`` (narrow blocks by lanes)
            shp = shape[:d] + [full, blk.size] + shape[d + 1 :]
            st = strides[:d] + [strides[d], blk.inner] + strides[d + 1 :]
            whole = tuple(shape[:d]) + (full * blk.size,) + tuple(shape[d + 1 :])
            write(over(shp, st, view.offset), value[(*cut, slice(0, whole[d]))], whole)
        if rest:
            shp = shape[:d] + [rest] + shape[d + 1 :]
            st = strides[:d] + [blk.inner] + strides[d + 1 :]
            part = value[(*cut, slice(full * blk.size, None))]
            np.copyto(over(shp, st, view.offset + full * strides[d]), part, casting="unsafe")
    return True


# Elements of the biggest node in one slab, and at least a slab per thread (``_slabs``).
# A slab pays Python work per node (~25 us a node with the caches full of its data, 5x its
# warm time) and, on two threads, a hand-over of the GIL around each numpy call: fewer
# slabs pay both fewer times. Measured with ``benchmarks/bench_tier.py`` (its "2**18 slabs"
# column; 2 cores, 2 MiB of L2 a core): 2**20 as fast as 2**18 or faster on every slabbed
# row but Adam, by up to 1.3x (masked mean 1.16-1.28 -> 1.48-1.61x numpy, ``exp(x).sum``
# 1.14-1.25 -> 1.44-1.54x); 2**21 no faster (one-off scripts). On an older machine
# (issue 18's first measures) 2**18 beat 2**17.


# numpy copies with the destination's smallest stride innermost: into NCHW4 that is a
# block's 4 lanes, an inner loop of 4 elements per call, where the call costs more than the
# copy. Block by block of at most this many bytes, one copy per lane runs the long dim (W)
# innermost instead: 2.3x faster for float32 -> int8 NCHW4 (35 against 81 us for 2x16x56x56,
# 587 against 1370 for 8x64x56x56), 1.4-5x for 2 to 8 lanes of 1-4 bytes. Wider blocks
# (16 float32 lanes, 64 bytes) copy faster whole: each lane's pass would touch every line.
LANE_BYTES = 16
LANES = 8


def narrow_lanes(target: np.ndarray, shape: tuple) -> int | None:
    """The dim of a split ``target`` (``split``) holding a block's lanes, when its blocks
    are narrow enough (``LANES``, ``LANE_BYTES``) to copy lane by lane; else None."""
    # (any dim copied slice by slice gives the same values: only the speed depends on it)
    pairs = zip(target.shape, shape, strict=False)  # the target has one dim more
    d = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
    if d is None or d + 1 >= target.ndim or target.size == 0:
        return None
    lanes = target.shape[d + 1]
    if lanes > LANES or lanes * target.itemsize > LANE_BYTES:
        return None
    if abs(target.strides[d + 1]) != min(abs(s) for s in target.strides):
        return None  # the lanes are not innermost in memory: numpy's order is another
    return d + 1
