"""View math in elements: a strided (optionally blocked) view over 1-D storage.

Owns ``View`` and ``Block`` and every pure function on them: permute, remap (transpose,
slice, index and broadcast in one), split, merge (``None`` when not expressible), span and
overlap tests. Positions and integers
only: no axis names, no numpy arrays except in ``addresses`` (a test/reference helper).

A plain axis ``k`` contributes ``i * strides[k]`` to the address. A *blocked* axis (how NCHWx
stores C) contributes ``(j // b) * strides[k] + (j % b) * inner`` with ``j = phase + step * i``:
the logical index is split into a block number and a position inside the block.
"""

from __future__ import annotations

import math

import attrs

__all__ = [
    "Block",
    "View",
    "contiguous_strides",
    "contiguous",
    "permute",
    "remap_view",
    "split_dim",
    "merge_dims",
    "span",
    "has_internal_overlap",
    "addresses",
    "is_contiguous",
]


@attrs.frozen
class Block:
    """How a blocked logical axis is laid out: ``j = phase + step * i`` split by ``size``."""

    size: int  # elements per block (the x of NCHWx)
    inner: int  # stride, in elements, of the position inside the block
    phase: int = 0  # 0 <= j_min < size after normalisation
    step: int = 1


@attrs.frozen
class View:
    """Shape, strides and offset in elements over a 1-D storage; ``blocks`` per axis or None.

    >>> v = contiguous((2, 3))
    >>> v.strides, v.offset
    ((3, 1), 0)
    >>> permute(v, (1, 0)).strides
    (1, 3)
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    blocks: tuple[Block | None, ...] | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order strides in elements."""
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def contiguous(shape: tuple[int, ...], offset: int = 0) -> View:
    return View(tuple(shape), contiguous_strides(tuple(shape)), offset)


def _with_blocks(blocks: list) -> tuple | None:
    return tuple(blocks) if any(b is not None for b in blocks) else None


def _blocks(v: View) -> list:
    return list(v.blocks) if v.blocks is not None else [None] * len(v.shape)


def _normalize_block(offset: int, stride: int, length: int, blk: Block):
    """Fold whole blocks into the offset; turn a block into a plain axis when it is one."""
    if blk.inner * blk.size == stride:
        # j//b*s + j%b*inner == j*inner: an ordinary axis in disguise.
        return offset + blk.phase * blk.inner, blk.step * blk.inner, None
    if length <= 1:
        j = blk.phase
        return offset + (j // blk.size) * stride + (j % blk.size) * blk.inner, 0, None
    j_min = blk.phase + min(0, blk.step * (length - 1))
    shift = j_min // blk.size
    return offset + shift * stride, stride, attrs.evolve(blk, phase=blk.phase - shift * blk.size)


def permute(v: View, perm: tuple[int, ...]) -> View:
    shape = tuple(v.shape[p] for p in perm)
    strides = tuple(v.strides[p] for p in perm)
    blocks = tuple(v.blocks[p] for p in perm) if v.blocks is not None else None
    return View(shape, strides, v.offset, blocks)


def remap_view(v: View, shape: tuple[int, ...], maps: tuple) -> View | None:
    """Compose an index remap with a view; None if the result is not one strided view.

    ``maps[k] = (src, start, step)`` says how dim ``k`` of ``v`` is indexed from the result:
    ``start + step * out[src]``, or the constant ``start`` when ``src`` is -1. Result dims
    no map refers to are broadcast (stride 0). This one function expresses transpose,
    slicing with any step, integer indexing and broadcasting.

    >>> remap_view(contiguous((2, 3)), (3, 2), ((1, 0, 1), (0, 0, 1))).strides  # transpose
    (1, 3)
    >>> remap_view(contiguous((4,)), (2,), ((0, 3, -2),))  # x[3::-2]
    View(shape=(2,), strides=(-2,), offset=3, blocks=None)
    """
    offset = v.offset
    strides = [0] * len(shape)
    blocks: list = [None] * len(shape)
    src_blocks = v.blocks or (None,) * v.ndim
    users = [0] * len(shape)
    for src, _, _ in maps:
        if src >= 0:
            users[src] += 1
    for (src, start, step), s, blk in zip(maps, v.strides, src_blocks, strict=True):
        if blk is None:
            # numpy's convention, which tests compare against: the stride is kept even for
            # slices of length 0 or 1.
            offset += start * s
            if src >= 0:
                strides[src] += step * s
        elif src < 0:
            j = blk.phase + blk.step * start
            offset += (j // blk.size) * s + (j % blk.size) * blk.inner
        else:
            if users[src] != 1:
                return None  # a blocked axis cannot share a result dim (a diagonal)
            moved = attrs.evolve(blk, phase=blk.phase + blk.step * start, step=blk.step * step)
            offset, strides[src], blocks[src] = _normalize_block(offset, s, shape[src], moved)
    return View(tuple(shape), tuple(strides), offset, _with_blocks(blocks))


def split_dim(v: View, d: int, lengths: tuple[int, ...]) -> View | None:
    """Unflatten dim ``d`` into ``lengths`` (row-major); None when it cannot be a view."""
    if v.blocks is not None and v.blocks[d] is not None:
        return None
    s = v.strides[d]
    new_strides = tuple(s * n for n in contiguous_strides(lengths)) if s else (0,) * len(lengths)
    blocks = None
    if v.blocks is not None:
        blocks = v.blocks[:d] + (None,) * len(lengths) + v.blocks[d + 1 :]
    return View(
        v.shape[:d] + tuple(lengths) + v.shape[d + 1 :],
        v.strides[:d] + new_strides + v.strides[d + 1 :],
        v.offset,
        blocks,
    )


def merge_dims(v: View, dims: tuple[int, ...], pos: int) -> View | None:
    """Merge ``dims`` (major to minor) into one dim placed at ``pos`` among the rest.

    Returns None when no single stride can express the merged index.
    """
    if v.blocks is not None and any(v.blocks[d] is not None for d in dims):
        return None
    length = math.prod(v.shape[d] for d in dims)
    stride = 0
    if length > 1:
        live = [d for d in dims if v.shape[d] != 1]
        # An empty view addresses nothing, so any stride expresses it (numpy agrees:
        # reshaping an empty array is always a view).
        if 0 not in v.shape:
            for outer, inner in zip(live, live[1:], strict=False):
                if v.strides[outer] != v.strides[inner] * v.shape[inner]:
                    return None
        stride = v.strides[live[-1]]
    rest = [d for d in range(v.ndim) if d not in dims]
    shape = [v.shape[d] for d in rest]
    strides = [v.strides[d] for d in rest]
    blocks = [v.blocks[d] for d in rest] if v.blocks is not None else [None] * len(rest)
    shape.insert(pos, length)
    strides.insert(pos, stride)
    blocks.insert(pos, None)
    return View(tuple(shape), tuple(strides), v.offset, _with_blocks(blocks))


def _axis_extent(n: int, s: int, blk: Block | None) -> tuple[int, int]:
    """(min, max) address contribution of one axis of length n > 0."""
    if blk is None:
        last = (n - 1) * s
        return min(0, last), max(0, last)
    lo = blk.phase + min(0, blk.step * (n - 1))
    hi = blk.phase + max(0, blk.step * (n - 1))
    if hi - lo + 1 >= blk.size or lo // blk.size != hi // blk.size:
        # Spans more than one block: bound with whole blocks.
        outer = (lo // blk.size * s, hi // blk.size * s)
        inner = (0, (blk.size - 1) * blk.inner)
    else:
        outer = (lo // blk.size * s,) * 2
        inner = ((lo % blk.size) * blk.inner, (hi % blk.size) * blk.inner)
    return min(outer) + min(inner), max(outer) + max(inner)


def span(v: View) -> tuple[int, int] | None:
    """Half-open range ``[lo, hi)`` of element addresses a view may touch; None if empty."""
    if 0 in v.shape:
        return None
    lo = hi = v.offset
    blocks = v.blocks or (None,) * v.ndim
    for n, s, blk in zip(v.shape, v.strides, blocks, strict=True):
        a, b = _axis_extent(n, s, blk)
        lo += a
        hi += b
    return lo, hi + 1


def has_internal_overlap(v: View) -> bool:
    """Whether two indices may share an address (conservative: may say True wrongly).

    A broadcast axis (stride 0, length > 1) always overlaps; an empty view never does.
    """
    if 0 in v.shape:
        return False
    dims = [(abs(s), n) for n, s in zip(v.shape, v.strides, strict=True) if n > 1]
    if v.blocks is not None and any(b is not None for b in v.blocks):
        # Blocked axes tile disjoint blocks by construction; check the plain ones only.
        dims = [
            (abs(s), n)
            for n, s, b in zip(v.shape, v.strides, v.blocks, strict=True)
            if n > 1 and b is None
        ]
    if any(s == 0 for s, _ in dims):
        return True
    dims.sort()
    extent = 0  # max address reachable by the smaller-stride dims
    for s, n in dims:
        if s <= extent:
            return True
        extent += s * (n - 1)
    return False


def is_contiguous(v: View) -> bool:
    """Whether the view is exactly C-order contiguous (size-1 dims ignored)."""
    if v.blocks is not None:
        return False
    if 0 in v.shape:
        return True  # nothing is addressed; numpy flags empty arrays C-contiguous too
    expected = 1
    for n, s in zip(reversed(v.shape), reversed(v.strides), strict=True):
        if n == 1:
            continue
        if s != expected:
            return False
        expected *= n
    return True


def addresses(v: View):
    """Element addresses of every index, as an int64 numpy array of ``v.shape``."""
    import numpy as np

    out = np.full(v.shape, v.offset, dtype=np.int64)
    blocks = v.blocks or (None,) * v.ndim
    for d, (n, s, blk) in enumerate(zip(v.shape, v.strides, blocks, strict=True)):
        i = np.arange(n, dtype=np.int64)
        if blk is None:
            term = i * s
        else:
            j = blk.phase + blk.step * i
            term = (j // blk.size) * s + (j % blk.size) * blk.inner
        out += term.reshape((1,) * d + (n,) + (1,) * (v.ndim - d - 1))
    return out
