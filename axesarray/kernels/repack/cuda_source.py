"""The CUDA repack kernels themselves, built per word width (see ``kernels.repack.run_cuda``).

A module of its own because it imports ``numba.cuda`` at the top: the kernels must see
``cuda`` as a module global (numba's simulator replaces that global while it runs a
kernel), and ``kernels.repack.run_cuda`` imports this module only when a device array is seen.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import cuda

__all__ = ["build"]


def build(word: np.dtype, TILE: int, ROWS: int):  # noqa: N803 - constants in the kernels
    """The (transpose, rows) kernels moving words of dtype ``word`` in TILE x TILE tiles
    by TILE x ROWS threads (closure constants, frozen into the kernels)."""
    word = numba.from_dtype(np.dtype(word))

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

    return transpose, rows
