"""CPU repack kernels: a leaf-to-leaf copy as cache-blocked, SIMD-tiled batched transposes.

``try_repack(dst, src)`` is the entry point (the fused engine calls it for plain copies):
it plans the copy (``kernels.repack.plan``), then runs one compiled kernel per plan. The kernel
is generic: storage is passed as 1-D arrays of unsigned words (the bits are moved, so
float16 travels as uint16 and 4 int8 channels as one uint32) with integer offsets and
strides, so one compile per word width (1, 2, 4, 8 bytes) serves every shape.

The work is split into tiles (``ti`` x ``tj`` elements of the 2-D problem, times the
batch; a folded plan's rows come from two strides, see ``kernels.repack.plan``); large copies
share tile ranges between the calling thread and a small pool (the kernel releases the
GIL; ``numba.get_num_threads()`` threads in all). Inside a tile, full SIMD micro tiles go
through ``kernels.repack.simd`` and the ragged edges through scalar loops; large square
transposes prefetch the next tile's source and stream their output (non-temporal stores
from an L1 staging tile).
"""

from __future__ import annotations

import ctypes
import functools

import attrs
import numba
import numpy as np
from numba import njit

from ...core.strided import has_internal_overlap, span
from ...dag.nodes import Leaf
from ...storage.devices import device_of
from ...storage.numba_private import NO_NRT
from ..threads import run_parts
from . import simd
from .plan import VECTOR_BYTES, RepackPlan, plans
from .run_cuda import try_repack_cuda

__all__ = ["try_repack", "run_repack", "tile_sizes"]

# Words by width; 16-byte words travel as complex128 (loads and stores keep the bits).
_WORD = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.complex128}
_KINDS = frozenset("biufcmM")
_PARALLEL_BYTES = 1 << 22  # below 4 MiB one thread beats waking the pool (measured)
_STREAM_BYTES = 1 << 23  # outputs from 8 MiB (past the caches) use streaming stores
# Tile shapes (see tile_sizes), measured on the benchmark shapes of docs/guide/layouts.md.
_ROW_BYTES = 8192  # destination rows up to this long are taken whole
_RUN_TILE_BYTES = 1 << 18  # a tile that writes one contiguous run
_UNPACK_ROW_BYTES = 1 << 14  # destination bytes per row of an unpack tile
_SOURCE_ROW_BYTES = 512  # source rows up to this long are read whole
_TILE_BYTES = 1 << 16  # other tiles
# Square transposes: tiles of about 8 KiB (with the next tile's source prefetched, both
# stay in L1; 32-256 KiB tiles were 1.3-1.8x slower from memory), reading whole 64-byte
# lines of each source row and writing at least 256 bytes of each destination row.
_SQUARE_TILE_BYTES = 8192
_LINE = 64
_MIN_RUN = 256
# From 8 MiB, square transposes fetch the next tile's source rows while transposing this
# one: they read many rows at once, which the hardware prefetchers follow badly (measured
# 1.2-1.9x faster); data already in the caches only pays for the instructions, and the
# pack / unpack tiles, which read few long rows, were measured slower with it.
_PREFETCH_BYTES = 1 << 23
I_INNER = None  # tests force the tile order (True: along i, False: along j)


@njit(inline="always")
def _scalar(src, dst, so, do, i0, i1, j0, j1, si, sj, di, dj):
    for j in range(j0, j1):
        sb = so + j * sj
        db = do + j * dj
        for i in range(i0, i1):
            dst[np.uint64(db + i * di)] = src[np.uint64(sb + i * si)]


# Kind codes of the SIMD tiles (``kernels.repack.simd``); 0 is scalar loops.
KINDS = {"none": 0, "square": 1, "pack": 2, "zip": 3, "unpack": 4, "unzip": 5}


@njit(inline="always")
def _micro(src, so, si, dst, do, dj, r, kind):
    # One literal intrinsic per branch: each is a fixed shuffle network (square tiles,
    # kind 1, are called by ``_tile`` directly).
    if kind == 2:
        if r == 2:
            simd.pack2(src, so, si, dst, do, dj)
        elif r == 4:
            simd.pack4(src, so, si, dst, do, dj)
        elif r == 8:
            simd.pack8(src, so, si, dst, do, dj)
        else:
            simd.pack16(src, so, si, dst, do, dj)
    elif kind == 3:
        if r == 2:
            simd.zip2(src, so, si, dst, do, dj)
        elif r == 4:
            simd.zip4(src, so, si, dst, do, dj)
        elif r == 8:
            simd.zip8(src, so, si, dst, do, dj)
        else:
            simd.zip16(src, so, si, dst, do, dj)
    elif kind == 4:
        if r == 2:
            simd.unpack2(src, so, si, dst, do, dj)
        elif r == 4:
            simd.unpack4(src, so, si, dst, do, dj)
        elif r == 8:
            simd.unpack8(src, so, si, dst, do, dj)
        else:
            simd.unpack16(src, so, si, dst, do, dj)
    else:
        if r == 2:
            simd.unzip2(src, so, si, dst, do, dj)
        elif r == 4:
            simd.unzip4(src, so, si, dst, do, dj)
        elif r == 8:
            simd.unzip8(src, so, si, dst, do, dj)
        else:
            simd.unzip16(src, so, si, dst, do, dj)


@njit(inline="always")
def _goff(x, g, s1, s2):
    """Offset of index x of a folded dim (outer stride s2 every g, inner stride s1)."""
    if g == 0:
        return x * s1
    return (x // g) * s2 + (x % g) * s1


@njit(inline="always")
def _split(x, g):
    """(x // g, x % g) of a folded dim's index (0, x when not folded)."""
    if g == 0:
        return 0, x
    return x // g, x % g


@njit(inline="always")
def _advance(q, r, dq, dr, g):
    """The split of x + step from that of x, with (dq, dr) the split of the step: no
    division in the loops (it costs as much as a whole micro tile)."""
    r += dr
    q += dq
    if g != 0 and r >= g:
        r -= g
        q += 1
    return q, r


@njit(inline="always")
def _scalar_folded(src, dst, so, do, i0, i1, j0, j1, si, sj, di, dj, gi, si2, gj, dj2):
    for j in range(j0, j1):
        sb = so + j * sj
        db = do + _goff(j, gj, dj, dj2)
        for i in range(i0, i1):
            dst[np.uint64(db + i * di)] = src[np.uint64(sb + _goff(i, gi, si, si2))]


@njit(inline="always")
def _edges(src, dst, so, do, i0, i1, j0, j1, si, sj, di, dj, gi, si2, gj, dj2):
    if i0 >= i1 or j0 >= j1:  # most tiles have no ragged edge: skip the empty loops
        return
    if gi or gj:
        _scalar_folded(src, dst, so, do, i0, i1, j0, j1, si, sj, di, dj, gi, si2, gj, dj2)
    else:
        _scalar(src, dst, so, do, i0, i1, j0, j1, si, sj, di, dj)


@njit(nogil=True, **NO_NRT)
def _tile(src, dst, so, do, i0, i1, j0, j1, p, srows, drows):
    """The tile [i0, i1) x [j0, j1); ``p`` holds the plan's strides and micro tile:
    (si, sj, di, dj, r, kind, step_i, step_j, gi, si2, gj, dj2). Square micro tiles of
    folded plans take their row offsets from ``srows`` and ``drows``.

    Not inlined: ``_kernel`` and ``_staged_tile`` share one compiled copy (the shuffle
    networks make it large; one call per tile costs nothing measurable)."""
    si, sj, di, dj, r, kind, step_i, step_j, gi, si2, gj, dj2 = p
    if kind == 0:
        _scalar(src, dst, so, do, i0, i1, j0, j1, si, sj, di, dj)
        return
    ie = i0 + (i1 - i0) // step_i * step_i
    je = j0 + (j1 - j0) // step_j * step_j
    for ii in range(i0, ie, step_i):
        if kind == 1 and gi == 0 and gj == 0:  # strides: no table loads (V = 2 or 4 too)
            for jj in range(j0, je, step_j):
                simd.square(src, so + ii * si + jj, si, dst, do + jj * dj + ii, dj)
        elif kind == 1:  # folded: sj == di == 1; only i's source and j's destination fold
            sb = so + _goff(ii, gi, si, si2)
            q, rr = _split(j0, gj)
            dq, dr = _split(step_j, gj)
            for jj in range(j0, je, step_j):
                simd.square(src, sb + jj, srows, dst, do + q * dj2 + rr * dj + ii, drows)
                q, rr = _advance(q, rr, dq, dr, gj)
        else:
            for jj in range(j0, je, step_j):
                _micro(src, so + ii * si + jj, si, dst, do + jj * dj + ii, dj, r, kind)
    _edges(src, dst, so, do, ie, i1, j0, j1, si, sj, di, dj, gi, si2, gj, dj2)
    _edges(src, dst, so, do, i0, ie, je, j1, si, sj, di, dj, gi, si2, gj, dj2)


@njit(nogil=True, **NO_NRT)
def _staged_tile(src, dst, stage, so, do, i0, i1, j0, j1, ti, p, srows, stage_rows, lanes, dst_mod):
    """Transpose one tile into ``stage`` (rows ``ti`` apart), then stream it out (as one
    run when the rows are back to back in both).

    Not inlined on purpose: keeping the staging buffer out of ``_kernel`` keeps numba's
    reference counting out of its hot loops (it costs 6x there).
    """
    si, sj, di, dj, r, kind, step_i, step_j, gi, si2, gj, dj2 = p
    staged = (si, sj, 1, ti, r, kind, step_i, step_j, gi, si2, 0, 0)
    _tile(src, stage, so, -j0 * ti - i0, i0, i1, j0, j1, staged, srows, stage_rows)
    width = i1 - i0
    if gj == 0 and dj == width and width == ti:  # rows back to back on both sides
        _emit(stage, 0, dst, do + j0 * dj + i0, (j1 - j0) * width, lanes, dst_mod)
        return
    q, r = _split(j0, gj)
    for j in range(j0, j1):
        _emit(stage, (j - j0) * ti, dst, do + q * dj2 + r * dj + i0, width, lanes, dst_mod)
        q, r = _advance(q, r, 0, 1, gj)


@njit(inline="always")
def _origin(u, soff, doff, bshape, bsrc, bdst, ni, nj, ti, tj, nti, ntj, i_inner):
    """Source and destination offsets and index ranges of tile u (tiles along j follow
    each other, or along i with ``i_inner``)."""
    per_batch = nti * ntj
    b = u // per_batch
    rest = u - b * per_batch
    if i_inner:
        bj = rest // nti
        bi = rest - bj * nti
    else:
        bi = rest // ntj
        bj = rest - bi * ntj
    so = soff
    do = doff
    q = b
    for k in range(bshape.size - 1, -1, -1):
        idx = q % bshape[k]
        q //= bshape[k]
        so += idx * bsrc[k]
        do += idx * bdst[k]
    i0 = bi * ti
    j0 = bj * tj
    return so, do, i0, min(i0 + ti, ni), j0, min(j0 + tj, nj)


@njit(cache=True, nogil=True, **NO_NRT)
def _kernel(src, dst, stage, geo, batch, srows, drows, stage_rows, dst_mod, lo, hi):
    """Tiles ``lo..hi`` of the batched 2-D copy; threads split the tile range.

    ``geo`` holds the plan and its tiling (``_GEO`` names the fields), ``batch`` the
    batch dims' (shape, source strides, destination strides). With ``stream``, each tile
    goes through ``stage`` (``ti * tj`` elements) and is written with non-temporal stores
    where 32-byte aligned (``dst_mod`` is the buffer's misalignment in elements). With
    ``prefetch``, the next tile's source rows are fetched while this one is transposed.
    """
    soff, doff, ni, nj, ti, tj, lanes, stream, prefetch, i_inner = geo[:10]
    p = (geo[10], geo[11], geo[12], geo[13], geo[14], geo[15])
    p = p + (geo[16], geo[17], geo[18], geo[19], geo[20], geo[21])
    si, sj, di, dj, r, kind, step_i, step_j, gi, si2, gj, dj2 = p
    bshape, bsrc, bdst = batch[0], batch[1], batch[2]
    nti = (ni + ti - 1) // ti
    ntj = (nj + tj - 1) // tj
    for u in range(lo, hi):
        so, do, i0, i1, j0, j1 = _origin(
            u, soff, doff, bshape, bsrc, bdst, ni, nj, ti, tj, nti, ntj, i_inner
        )
        if prefetch and u + 1 < hi:
            pso, _, pi0, pi1, pj0, pj1 = _origin(
                u + 1, soff, doff, bshape, bsrc, bdst, ni, nj, ti, tj, nti, ntj, i_inner
            )
            if gi == 0 and si == pj1 - pj0:  # the rows are back to back: one span
                simd.prefetch_span(src, pso + pi0 * si + pj0, (pi1 - pi0) * si)
                pi1 = pi0
            q, r = _split(pi0, gi)
            for _ in range(pi0, pi1):
                simd.prefetch_span(src, pso + q * si2 + r * si + pj0 * sj, pj1 - pj0)
                q, r = _advance(q, r, 0, 1, gi)
        if stream:
            _staged_tile(
                src, dst, stage, so, do, i0, i1, j0, j1, ti, p, srows, stage_rows, lanes, dst_mod
            )
        else:
            _tile(src, dst, so, do, i0, i1, j0, j1, p, srows, drows)
    if stream:
        simd.store_fence()


@njit(inline="always")
def _emit(stage, s0, dst, d0, n, lanes, dst_mod):
    """Copy n staged elements to dst[d0:]: streaming stores on the aligned middle."""
    head = (lanes - (dst_mod + d0) % lanes) % lanes
    if head > n:
        head = n
    for k in range(head):
        dst[np.uint64(d0 + k)] = stage[np.uint64(s0 + k)]
    vectors = (n - head) // lanes
    if vectors:
        simd.stream(stage, s0 + head, dst, d0 + head, vectors)
    for k in range(head + vectors * lanes, n):
        dst[np.uint64(d0 + k)] = stage[np.uint64(s0 + k)]


def tile_sizes(p: RepackPlan) -> tuple[int, int]:
    """Tile extents (ti, tj), multiples of the micro tile; ``i`` is the destination's
    contiguous dim. Chosen by measurement on the benchmark shapes (docs/guide/layouts.md),
    with the next tile prefetched (square tiles, large copies):

    - square, whole destination rows back to back (NCHW -> NHWC, NCHWx, CHWN4; also
      CHWN4 -> NCHW, whose rows are back to back within each N): all of them, and about
      8 KiB per tile, but at least one line of each source row (two past 2 KiB rows);
    - square, destination rows far apart (NHWC -> NCHW with long rows, NCHWx -> NCHW):
      two lines of each source row and 256 bytes or more of each destination row, about
      16 KiB per tile, tiles taken along i (``_i_inner``);
    - pack / zip, rows back to back (NCHW -> NCHW4): all rows, about 256 KiB per tile;
    - short source rows (unpack, NCHW4 -> NCHW): 16 KiB of each destination row;
    - otherwise: whole source rows up to 512 bytes, about 64 KiB per tile.
    """
    if p.kind == "none":
        ti = max(1, min(p.ni, 65536 // p.width))
        tj = max(1, min(p.nj, 65536 // (ti * p.width)))
        return ti, tj
    step_i, step_j = _steps(p)
    full_i = _round_up(p.ni, step_i)
    full_j = _round_up(p.nj, step_j)
    w = p.width
    if p.kind == "square" and p.dj == p.ni and p.ni * w <= _ROW_BYTES:  # folded j too
        ti = full_i
        # Rows past 2 KiB make a tile past L1 anyway: read 2 lines of each source row.
        lines = 2 if ti * w > 2048 and not p.gj else 1
        tj = _round_up(max(_SQUARE_TILE_BYTES // (ti * w), lines * _LINE // w), step_j)
    elif p.kind == "square":
        tj = min(_round_up(2 * _LINE // w, step_j), full_j)
        ti = _round_up(max(2 * _SQUARE_TILE_BYTES // (tj * w), _MIN_RUN // w), step_i)
    elif _one_run(p):
        ti = full_i
        tj = _round_up(max(1, _RUN_TILE_BYTES // (ti * p.width)), step_j)
    elif p.kind in ("unpack", "unzip"):
        ti = _round_up(_UNPACK_ROW_BYTES // p.width, step_i)
        tj = step_j
    else:
        tj = (
            full_j
            if p.nj * p.width <= _SOURCE_ROW_BYTES
            else _round_up(_SOURCE_ROW_BYTES // p.width, step_j)
        )
        ti = _round_up(max(1, _TILE_BYTES // (tj * p.width)), step_i)
    return min(ti, full_i), min(tj, full_j)


def _steps(p: RepackPlan) -> tuple[int, int]:
    """Micro tile extent along i and j: V x V (square), R x V (pack), V x R (unpack)."""
    lanes = VECTOR_BYTES // p.width
    step_i = lanes if p.kind in ("square", "unpack", "unzip") else p.micro
    step_j = lanes if p.kind in ("square", "pack", "zip") else p.micro
    return step_i, step_j


def _i_inner(p: RepackPlan) -> bool:
    """Whether consecutive tiles go along i: for square transposes whose destination rows
    are far apart, each row is then written on in the next tile (measured 1.2x faster)."""
    if I_INNER is not None:
        return I_INNER
    return p.kind == "square" and not (p.dj == p.ni and p.ni * p.width <= _ROW_BYTES)


def _one_run(p: RepackPlan) -> bool:
    """Whether a tile of whole destination rows writes one contiguous run."""
    return p.dj == p.ni and not p.gj and p.ni * p.width <= _ROW_BYTES


def _folded(x: np.ndarray, g: int, s1: int, s2: int) -> np.ndarray:
    """Offsets of indices ``x`` of a dim folded every g (``_goff``)."""
    return x * s1 if g == 0 else x // g * s2 + x % g * s1


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


_GEO = (
    *("src_offset", "dst_offset", "ni", "nj", "ti", "tj", "lanes", "stream", "prefetch"),
    "i_inner",
    *("si", "sj", "di", "dj", "micro", "kind", "step_i", "step_j", "gi", "si2", "gj", "dj2"),
)


@functools.lru_cache(maxsize=256)
def _launch(p: RepackPlan, stream_bytes: int, prefetch_bytes: int):
    """The kernel's arguments for plan ``p`` (cached; the module's thresholds are passed
    in so that changing them takes effect): stage size, tile count, and the arrays
    ``geo``, ``batch`` and the micro tiles' row offsets."""
    ti, tj = tile_sizes(p)
    units = int(np.prod(p.batch_shape, dtype=np.int64)) * -(-p.ni // ti) * -(-p.nj // tj)
    lanes = VECTOR_BYTES // p.width
    # Streaming stores pay off when the output is much larger than the caches, for tiles
    # that write one run or whole rows of a square transpose (measured slower otherwise).
    stream = int(
        p.size * p.width >= stream_bytes
        and p.di == 1
        and ((p.kind != "none" and _one_run(p) and ti >= p.ni) or p.kind == "square")
    )
    step_i, step_j = _steps(p)
    fields = dict(attrs.asdict(p), ti=ti, tj=tj, lanes=lanes, stream=stream)
    prefetch = p.kind == "square" and p.size * p.width >= prefetch_bytes
    fields.update(prefetch=int(prefetch), kind=KINDS[p.kind])
    fields.update(step_i=step_i, step_j=step_j, i_inner=int(_i_inner(p)))
    geo = np.array([fields[k] for k in _GEO], np.int64)
    batch = np.array([p.batch_shape, p.batch_src, p.batch_dst], np.int64).reshape(3, -1)
    rows = np.arange(lanes, dtype=np.int64)
    tables = (_folded(rows, p.gi, p.si, p.si2), _folded(rows, p.gj, p.dj, p.dj2), rows * ti)
    return ti * tj if stream else 1, units, geo, batch, tables


def run_repack(p: RepackPlan, src_words: np.ndarray, dst_words: np.ndarray) -> None:
    """Run one plan on 1-D word arrays of width ``p.width``.

    Large copies are split into a few tile ranges per thread, taken in turn by the calling
    thread and the kernels' helper threads (``threads.run_parts``; the kernel releases the
    GIL): a helper that starts late, its core busy with something else, leaves more ranges
    to the others instead of stalling the copy, and Ctrl-C returns once no range runs.
    """
    stage_size, units, geo, batch, tables = _launch(p, _STREAM_BYTES, _PREFETCH_BYTES)
    dst_mod = (dst_words.ctypes.data % VECTOR_BYTES) // p.width
    args = (geo, batch, *tables, dst_mod)
    threads = numba.get_num_threads()
    if threads == 1 or p.size * p.width < _PARALLEL_BYTES or units < 2:
        stage = np.empty(stage_size, dst_words.dtype)
        _kernel(src_words, dst_words, stage, *args, 0, units)
        return

    def part(lo: int, hi: int) -> None:
        stage = np.empty(stage_size, dst_words.dtype)  # a staging tile per range
        _kernel(src_words, dst_words, stage, *args, lo, hi)

    run_parts(part, units, (), threads)


def _words(data: np.ndarray, width: int) -> np.ndarray:
    """The buffer as 1-D ``width``-byte words; a read-only buffer is viewed writeable
    (the kernel signature is then the same; it never writes its source)."""
    raw = np.asarray(data).view(np.uint8)
    raw = raw[: raw.size - raw.size % width]
    if not raw.flags.writeable and raw.size:
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * raw.size).from_address(raw.ctypes.data))
    return raw.view(_WORD[width])


def _usable(data) -> bool:
    return (
        data.ndim == 1
        and data.flags.c_contiguous
        and data.flags.aligned
        and data.dtype.kind in _KINDS
        and data.dtype.itemsize in _WORD
    )


def _overlap(dst: Leaf, src: Leaf) -> bool:
    if not np.may_share_memory(dst.data, src.data):
        return False
    a, b = span(dst.view), span(src.view)
    if a is None or b is None:
        return False
    size = dst.dtype.itemsize
    a0 = dst.data.ctypes.data + a[0] * size
    b0 = src.data.ctypes.data + b[0] * size
    return a0 < b0 + (b[1] - b[0]) * size and b0 < a0 + (a[1] - a[0]) * size


def try_repack(dst: Leaf, src: Leaf) -> bool:
    """Copy ``src`` into ``dst`` (same dtype and shape) with the repack kernels.

    Returns False, having written nothing, when the case is not handled (different
    dtypes, overlapping buffers, a block pattern too irregular, other devices); the caller
    then uses the general engine. Padding of ``dst`` is never written.

    >>> import numpy as np
    >>> from axesarray.core.strided import contiguous, permute
    >>> a = np.arange(6.0); b = np.zeros(6)
    >>> try_repack(Leaf(b, contiguous((2, 3))), Leaf(a, permute(contiguous((3, 2)), (1, 0))))
    True
    >>> b
    array([0., 2., 4., 1., 3., 5.])
    """
    if dst.dtype != src.dtype or dst.shape != src.shape or not dst.writeable:
        return False
    devices = (device_of(dst.data), device_of(src.data))
    if not all(d.is_cpu for d in devices):
        return devices[0] == devices[1] and try_repack_cuda(dst, src)
    if not (_usable(dst.data) and _usable(src.data)):
        return False
    if has_internal_overlap(dst.view) or _overlap(dst, src):
        return False
    size = dst.dtype.itemsize
    work = plans(
        dst.shape, src.view, dst.view, size, src.data.ctypes.data, dst.data.ctypes.data, fold=True
    )
    if work is None:
        return False
    words: dict = {}
    for p in work:
        if p.width not in words:
            words[p.width] = (_words(src.data, p.width), _words(dst.data, p.width))
        run_repack(p, *words[p.width])
    return True
