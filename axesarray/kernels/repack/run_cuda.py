"""CUDA repack kernels: the CPU's plans run as a padded shared-memory tile transpose.

A transpose plan (``i`` contiguous in the destination, ``j`` in the source) is moved in
32 x 32 tiles by 32 x 8 threads: each block reads rows along ``j`` (coalesced), stores
them in ``tile[32][33]`` (the extra column puts a column walk on 32 different banks),
syncs, and writes rows along ``i`` (coalesced). Row plans (contiguous on both sides) use a
grid-stride copy. Both loop over tiles, so any grid size is correct. Storage is viewed as
unsigned words of the element width (bits are moved); one kernel per width.

Tested under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, set before numba is
imported); nothing here imports ``numba.cuda`` until a device array is seen.
"""

from __future__ import annotations

import numpy as np

from ...dag.nodes import Leaf
from ...storage.devices import device_of
from .plan import RepackPlan, plans

__all__ = ["try_repack_cuda", "TILE", "ROWS"]

TILE = 32
ROWS = 8

_MAX_BLOCKS = 4096
_WORD = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_KERNELS: dict = {}


def _kernels(width: int):
    hit = _KERNELS.get(width)
    if hit is None:
        from .cuda_source import build

        hit = _KERNELS[width] = build(_WORD[width], TILE, ROWS)
    return hit


def run_plan_cuda(p: RepackPlan, src, dst) -> None:
    """Launch one plan on 1-D device arrays of ``p.width``-byte words."""
    transpose, rows = _kernels(p.width)
    # A dummy batch dim keeps the small index arrays non-empty.
    bshape = np.array(p.batch_shape or (1,), np.int64)
    bsrc = np.array(p.batch_src or (0,), np.int64)
    bdst = np.array(p.batch_dst or (0,), np.int64)
    nbatch = int(np.prod(bshape))
    args = (p.ni, p.nj, p.si, p.sj, p.di, p.dj)
    if p.rows:
        total = nbatch * p.ni * p.nj
        blocks = max(1, min(_MAX_BLOCKS, -(-total // 256)))
        rows[blocks, 256](src, dst, p.src_offset, p.dst_offset, bshape, bsrc, bdst, total, *args)
    else:
        tiles = nbatch * -(-p.ni // TILE) * -(-p.nj // TILE)
        blocks = max(1, min(_MAX_BLOCKS, tiles))
        transpose[blocks, (TILE, ROWS)](
            src, dst, p.src_offset, p.dst_offset, bshape, bsrc, bdst, nbatch, *args
        )


def _pointer_range(data) -> tuple[int, int]:
    lo = device_of(data).pointer(data)
    return lo, lo + data.size * data.dtype.itemsize


def try_repack_cuda(dst: Leaf, src: Leaf) -> bool:
    """``try_repack`` for device arrays; False (nothing written) when not handled."""
    width = dst.dtype.itemsize
    if width not in _WORD or dst.dtype != src.dtype:
        return False
    if dst.data is src.data:
        return False
    a, b = _pointer_range(dst.data), _pointer_range(src.data)
    if a[0] < b[1] and b[0] < a[1]:
        return False  # views of one allocation: let the engine handle aliasing
    work = plans(dst.shape, src.view, dst.view, width, widen=False)
    if work is None:
        return False
    word = _WORD[width]
    s = src.data.view(word) if src.dtype != word else src.data
    d = dst.data.view(word) if dst.dtype != word else dst.data
    for p in work:
        run_plan_cuda(p, s, d)
    return True
