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

from ..expr import Leaf
from .repack_plan import Plan, plans

__all__ = ["try_repack_cuda", "on_device", "TILE", "ROWS"]

TILE = 32
ROWS = 8
_MAX_BLOCKS = 4096
_WORD = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_KERNELS: dict = {}
cuda = None  # numba.cuda, imported on first use


def on_device(data) -> bool:
    """A CUDA array: anything with ``__cuda_array_interface__``, or a simulator array."""
    return hasattr(data, "__cuda_array_interface__") or type(data).__module__.startswith(
        "numba.cuda.simulator"
    )


def _kernels(width: int):
    if width in _KERNELS:
        return _KERNELS[width]
    import numba
    from numba import cuda as module

    # The kernels must see ``cuda`` as a module global: the simulator swaps globals.
    global cuda
    cuda = module
    word = numba.from_dtype(np.dtype(_WORD[width]))

    @cuda.jit(device=True)
    def batch_offsets(b, bshape, bsrc, bdst, soff, doff):
        """Source and destination offsets of batch ``b`` (row-major over ``bshape``)."""
        so = soff
        do = doff
        for k in range(bshape.size - 1, -1, -1):
            idx = b % bshape[k]
            b //= bshape[k]
            so += idx * bsrc[k]
            do += idx * bdst[k]
        return so, do

    @cuda.jit
    def transpose(src, dst, soff, doff, bshape, bsrc, bdst, nbatch, ni, nj, si, sj, di, dj):
        tile = cuda.shared.array(shape=(TILE, TILE + 1), dtype=word)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        nti = (ni + TILE - 1) // TILE
        ntj = (nj + TILE - 1) // TILE
        per_batch = nti * ntj
        for t in range(cuda.blockIdx.x, nbatch * per_batch, cuda.gridDim.x):
            b = t // per_batch
            rest = t - b * per_batch
            i0 = (rest // ntj) * TILE
            j0 = (rest - (rest // ntj) * ntj) * TILE
            so, do = batch_offsets(b, bshape, bsrc, bdst, soff, doff)
            for k in range(0, TILE, ROWS):  # read along j: the source's contiguous dim
                i = i0 + ty + k
                j = j0 + tx
                if i < ni and j < nj:
                    tile[ty + k, tx] = src[so + i * si + j * sj]
            cuda.syncthreads()
            for k in range(0, TILE, ROWS):  # write along i: the destination's
                i = i0 + tx
                j = j0 + ty + k
                if i < ni and j < nj:
                    dst[do + j * dj + i * di] = tile[tx, ty + k]
            cuda.syncthreads()

    @cuda.jit
    def rows(src, dst, soff, doff, bshape, bsrc, bdst, total, ni, nj, si, sj, di, dj):
        start = cuda.grid(1)
        step = cuda.gridsize(1)
        for f in range(start, total, step):
            i = f % ni
            q = f // ni
            j = q % nj
            so, do = batch_offsets(q // nj, bshape, bsrc, bdst, soff, doff)
            dst[do + j * dj + i * di] = src[so + j * sj + i * si]

    _KERNELS[width] = (transpose, rows)
    return _KERNELS[width]


def run_plan_cuda(p: Plan, src, dst) -> None:
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


def _pointer_range(data) -> tuple[int, int] | None:
    cai = getattr(data, "__cuda_array_interface__", None)
    if cai is None:
        return None
    return cai["data"][0], cai["data"][0] + data.size * data.dtype.itemsize


def try_repack_cuda(dst: Leaf, src: Leaf) -> bool:
    """``try_repack`` for device arrays; False (nothing written) when not handled."""
    width = dst.dtype.itemsize
    if width not in _WORD or dst.dtype != src.dtype:
        return False
    if dst.data is src.data:
        return False
    a, b = _pointer_range(dst.data), _pointer_range(src.data)
    if a and b and a[0] < b[1] and b[0] < a[1]:
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
