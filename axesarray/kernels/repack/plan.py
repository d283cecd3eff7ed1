"""Repack plans: a leaf-to-leaf copy as a few batched 2-D strided copies (no execution).

Shared by the CPU (``repack``) and CUDA (``kernels.repack.run_cuda``) kernels. Three steps, and a
fourth for the CPU:

1. ``segment``: a blocked axis (``j//x*s + j%x*inner``) is not one stride, so its index
   range is cut at block boundaries into pieces on which every side is affine: whole
   blocks become two dims ``(blocks, x)`` (three when source and destination block the
   same axis by different sizes, e.g. 4 and 32: ``(blocks, 8, 4)``), partial blocks one.
   Only logical elements are covered, so padding is neither read nor written.
2. ``canonical``: drop size-1 dims, order dims by destination stride, merge runs that are
   contiguous in both (a joint merge, as TensorIterator does), and move a contiguous run
   shared by both sides as one wider unsigned word (4 int8 channels as one uint32).
3. classify into ``RepackPlan``: batch dims plus a 2-D ``(i, j)`` problem where ``i`` is the
   destination's fastest dim and ``j`` the source's; ``i == j`` means plain rows.
4. ``fold``: when ``i`` is shorter than a vector row, a batch dim that continues it in the
   destination but not in the source (NCHW -> CHWN4: N after the 4 channels) joins it as
   its outer part: ``i`` then counts ``(k, i)`` pairs, and its source offset is
   ``(i // gi) * si2 + (i % gi) * si``; the same for a short ``j`` continued in the source
   (CHWN4 -> NCHW). The plan becomes a square transpose whose tiles cover whole lines
   (before: 4-element pieces of lines, each line touched by 4 or 16 batch iterations far
   apart in time, 3-10x slower).

Everything is in elements of the moved word; offsets are relative to the buffers.
"""

from __future__ import annotations

import functools
import math

import attrs

from ...core.strided import Block, View

__all__ = ["Copy", "RepackPlan", "segment", "canonical", "fold", "plans", "VECTOR_BYTES"]

VECTOR_BYTES = 32  # one AVX2 register: a micro tile row holds VECTOR_BYTES/width words


@attrs.frozen
class Copy:
    """``dst[dst_offset + i.dst_strides] = src[src_offset + i.src_strides]`` for all i."""

    shape: tuple[int, ...]
    src_strides: tuple[int, ...]
    dst_strides: tuple[int, ...]
    src_offset: int
    dst_offset: int


@attrs.frozen
class RepackPlan:
    """One batched 2-D copy of ``width``-byte words (see the module docstring).

    ``kind`` names the SIMD tile (``kernels.repack.simd``) and ``micro`` its lane count R; kind
    ``none`` means scalar loops.
    """

    width: int
    batch_shape: tuple[int, ...]
    batch_src: tuple[int, ...]
    batch_dst: tuple[int, ...]
    ni: int
    nj: int
    si: int
    sj: int
    di: int
    dj: int
    src_offset: int
    dst_offset: int
    micro: int = 0
    kind: str = "none"
    rows: bool = False  # i is contiguous on both sides; j is the next batch dim
    # Folded dims (step 4): i's source offset is (i // gi) * si2 + (i % gi) * si, and
    # j's destination offset (j // gj) * dj2 + (j % gj) * dj; 0 means not folded.
    gi: int = 0
    si2: int = 0
    gj: int = 0
    dj2: int = 0

    @property
    def size(self) -> int:
        return math.prod(self.batch_shape) * self.ni * self.nj


# --- 1. segmenting blocked axes -------------------------------------------------------------


def _contribution(stride: int, blk: Block | None):
    """Address contribution of logical index i along one axis of one side."""
    if blk is None:
        return lambda i: i * stride

    def f(i: int) -> int:
        j = blk.phase + blk.step * i
        return (j // blk.size) * stride + (j % blk.size) * blk.inner

    return f


def _axis_pieces(length: int, sides) -> list[tuple[int, tuple, tuple]] | None:
    """Cut ``[0, length)`` into pieces on which every side is affine.

    A piece is ``(start, dims, steps)``: logical indices ``start + sum(k_d * steps[d])``.
    ``sides`` is ``[(stride, Block|None), ...]``; None when the pattern is too irregular.
    """
    blocked = [b for _, b in sides if b is not None]
    if not blocked or length <= 1:
        return [(0, (length,), (1,))]
    nested = _nested_pieces(length, blocked)
    return nested if nested is not None else _periodic_pieces(length, blocked)


def _nested_pieces(length: int, blocked: list[Block]):
    """Blocks whose sizes divide each other and agree on boundaries: few, big pieces."""
    if any(b.step != 1 for b in blocked):
        return None
    blocked = sorted(blocked, key=lambda b: -b.size)
    for b in blocked[1:]:
        if blocked[0].size % b.size or (blocked[0].phase - b.phase) % b.size:
            return None
    sizes = sorted({b.size for b in blocked}, reverse=True)
    base = blocked[0].phase  # coordinate g = base + i; every side is aligned where g % x == 0
    pieces: list[tuple[int, tuple[int, ...]]] = []

    def split(lo: int, hi: int, levels: list[int]) -> None:
        if lo >= hi:
            return
        if not levels:
            pieces.append((lo - base, (hi - lo,), (1,)))
            return
        x, rest = levels[0], levels[1:]
        a = -(-lo // x) * x
        b = hi // x * x
        if a >= b:
            if lo < a < hi:
                split(lo, a, rest)
                split(a, hi, rest)
            else:
                split(lo, hi, rest)
            return
        split(lo, a, rest)
        dims = [(b - a) // x]
        prev = x
        for y in rest:
            dims.append(prev // y)
            prev = y
        dims.append(prev)
        steps = tuple(math.prod(dims[k + 1 :]) for k in range(len(dims)))
        pieces.append((a - base, tuple(dims), steps))
        split(b, hi, rest)

    split(base, base + length, sizes)
    return pieces


_MAX_PERIOD = 4096
_MAX_PATTERN = 64


def _cuts(b: Block, upto: int) -> list[int]:
    """Indices i in [1, upto] where the block number changes between i - 1 and i."""
    out = []
    prev = b.phase // b.size
    for i in range(1, upto + 1):
        cur = (b.phase + b.step * i) // b.size
        if cur != prev:
            out.append(i)
        prev = cur
    return out


def _periodic_pieces(length: int, blocked: list[Block]):
    """Any blocks: the run boundaries repeat with period P; each run repeated is 2 dims."""
    period = 1
    for b in blocked:
        period = math.lcm(period, math.lcm(b.size, abs(b.step) or 1) // (abs(b.step) or 1))
    if period > _MAX_PERIOD:
        return None
    cuts = sorted(set().union(*(_cuts(b, 2 * period) for b in blocked)))
    if not cuts:
        return [(0, (length,), (1,))]
    c0 = cuts[0]
    pattern = [c for c in cuts if c0 <= c < c0 + period]
    if len(pattern) > _MAX_PATTERN:
        return None
    pieces = [(0, (min(c0, length),), (1,))]
    if c0 >= length:
        return pieces
    whole = (length - c0) // period
    for m, c in enumerate(pattern):
        run = (pattern[m + 1] if m + 1 < len(pattern) else c0 + period) - c
        count = whole + (1 if c + whole * period + run <= length else 0)
        if count:
            pieces.append((c, (count, run), (period, 1)))
        start = c + count * period
        if start < length:
            pieces.append((start, (length - start,), (1,)))
    return pieces


def segment(shape: tuple[int, ...], src: View, dst: View) -> list[Copy] | None:
    """The copy ``dst[i] = src[i]`` as plain strided copies; None if not expressible."""
    if 0 in shape:
        return []
    sblocks = src.blocks or (None,) * len(shape)
    dblocks = dst.blocks or (None,) * len(shape)
    per_axis = []
    for d, n in enumerate(shape):
        sides = ((src.strides[d], sblocks[d]), (dst.strides[d], dblocks[d]))
        pieces = _axis_pieces(n, sides)
        if pieces is None:
            return None
        fs = [_contribution(s, b) for s, b in sides]
        options = []
        for start, dims, units in pieces:
            # Every side is affine on the piece: a dim's stride is one step's difference.
            steps = tuple(zip(units, dims, strict=True))
            strides = tuple(
                tuple(f(start + u) - f(start) if m > 1 else 0 for u, m in steps) for f in fs
            )
            options.append((dims, strides, fs[0](start), fs[1](start)))
        per_axis.append(options)
    copies = []
    for combo in _product(per_axis):
        shp, ss, ds = [], [], []
        so, do = src.offset, dst.offset
        for dims, (s_str, d_str), s_off, d_off in combo:
            shp.extend(dims)
            ss.extend(s_str)
            ds.extend(d_str)
            so += s_off
            do += d_off
        copies.append(Copy(tuple(shp), tuple(ss), tuple(ds), so, do))
    return copies


def _product(options: list[list]):
    if not options:
        yield ()
        return
    for head in options[0]:
        for tail in _product(options[1:]):
            yield (head, *tail)


# --- 2. canonical form ---------------------------------------------------------------------


def canonical(
    c: Copy, itemsize: int, src_addr: int = 0, dst_addr: int = 0, widen: bool = True
) -> RepackPlan:
    """Classify one copy; ``*_addr`` (byte addresses of the buffers) gate the wide words."""
    dims = [
        (n, s, d) for n, s, d in zip(c.shape, c.src_strides, c.dst_strides, strict=True) if n != 1
    ]
    so, do = c.src_offset, c.dst_offset
    flipped = []
    for n, s, d in dims:
        if d < 0:  # walk the destination forwards; the source may go backwards
            so += (n - 1) * s
            do += (n - 1) * d
            s, d = -s, -d
        flipped.append((n, s, d))
    flipped.sort(key=lambda t: (-abs(t[2]), -abs(t[1])))
    merged: list[tuple[int, int, int]] = []
    for n, s, d in flipped:
        if merged:
            n0, s0, d0 = merged[-1]
            if s0 == s * n and d0 == d * n:
                merged[-1] = (n0 * n, s, d)
                continue
        merged.append((n, s, d))
    width = itemsize
    if widen and merged and merged[-1][1] == 1 and merged[-1][2] == 1:
        width, merged, so, do = _widen(merged, itemsize, so, do, src_addr, dst_addr)
    return _classify(merged, width, so, do)


def _widen(dims, itemsize, so, do, src_addr, dst_addr):
    """Move a contiguous run shared by both sides as words of up to 16 bytes."""
    run = dims[-1][0] * itemsize
    for w in (16, 8, 4, 2):
        if w <= itemsize or run % w:
            continue
        values = [s * itemsize for _, s, _ in dims[:-1]] + [d * itemsize for _, _, d in dims[:-1]]
        values += [src_addr, dst_addr, so * itemsize, do * itemsize]
        if any(v % w for v in values):
            continue
        k = w // itemsize
        out = [(n, s // k, d // k) for n, s, d in dims[:-1]]
        if run // w > 1:
            out.append((run // w, 1, 1))
        return w, out, so // k, do // k
    return itemsize, dims, so, do


def _plan(width, rest, inner_i, inner_j, so, do, *more, **kw) -> RepackPlan:
    """A RepackPlan from the batch dims ``rest`` and the two tile dims, all ``(n, src, dst)``."""
    (ni, si, di), (nj, sj, dj) = inner_i, inner_j
    return RepackPlan(
        width,
        tuple(n for n, _, _ in rest),
        tuple(s for _, s, _ in rest),
        tuple(d for _, _, d in rest),
        ni,
        nj,
        si,
        sj,
        di,
        dj,
        so,
        do,
        *more,
        **kw,
    )


def _classify(dims, width: int, so: int, do: int) -> RepackPlan:
    if not dims:
        return RepackPlan(width, (), (), (), 1, 1, 1, 1, 1, 1, so, do, rows=True)
    i = len(dims) - 1  # smallest destination stride (dims are ordered by it)
    j = min(range(len(dims)), key=lambda k: (abs(dims[k][1]), k != i))
    if j == i:
        rest = dims[:i]
        inner_j = (1, 0, 0)
        if rest:  # rows: the innermost batch dim becomes j (fewer unravels per row)
            inner_j = rest[-1]
            rest = rest[:-1]
        return _plan(width, rest, dims[i], inner_j, so, do, rows=True)
    (ni, si, di), (nj, sj, dj) = dims[i], dims[j]
    rest = [t for k, t in enumerate(dims) if k not in (i, j)]
    micro, kind = _micro(width, ni, nj, si, sj, di, dj)
    return _plan(width, rest, dims[i], dims[j], so, do, micro, kind)


def _micro(width: int, ni: int, nj: int, si: int, sj: int, di: int, dj: int):
    """The SIMD tile (R, kind) for a transpose whose i rows are dst-contiguous and j rows
    src-contiguous: V x V square, R x V pack, V x R unpack (zip/unzip when dense)."""
    if sj != 1 or di != 1:
        return 0, "none"
    v = VECTOR_BYTES // width
    if ni >= v and nj >= v:
        return v, "square"
    if nj >= v and ni >= 2 and v > 2:
        r = 1 << (ni.bit_length() - 1)
        return r, "zip" if ni == r == dj else "pack"
    if ni >= v and nj >= 2 and v > 2:
        r = 1 << (nj.bit_length() - 1)
        return r, "unzip" if nj == r == si else "unpack"
    return 0, "none"


# --- 4. folding a batch dim into i or j ---------------------------------------------------


def fold(p: RepackPlan) -> RepackPlan:
    """Fold a batch dim into ``i`` and/or ``j`` (module docstring, step 4) where that dim is
    shorter than a vector row and the result is a square SIMD transpose whose micro tiles
    never straddle a group."""
    if p.rows or p.sj != 1 or p.di != 1 or p.gi or p.gj:
        return p
    v = VECTOR_BYTES // p.width
    batch = list(zip(p.batch_shape, p.batch_src, p.batch_dst, strict=True))
    ni, si2, gi = _fold_one(batch, p.ni, lambda d: d[2] == p.ni, lambda d: d[1], v)
    nj, dj2, gj = _fold_one(batch, p.nj, lambda d: d[1] == p.nj, lambda d: d[2], v)
    if not (gi or gj) or _micro(p.width, ni, nj, p.si, 1, 1, p.dj)[1] != "square":
        return p
    return attrs.evolve(
        p,
        batch_shape=tuple(n for n, _, _ in batch),
        batch_src=tuple(s for _, s, _ in batch),
        batch_dst=tuple(d for _, _, d in batch),
        ni=ni,
        nj=nj,
        micro=v,
        kind="square",
        gi=gi,
        si2=si2,
        gj=gj,
        dj2=dj2,
    )


def _fold_one(batch: list, n: int, continues, outer_stride, v: int):
    """Remove from ``batch`` the innermost dim that ``continues`` a dim of length n, if that
    dim is shorter than a vector row and its groups fit the micro tile (n divides v):
    ``(n * k, stride, n)``. A longer dim already fills whole vectors, and folding it costs
    more (table loads, a division per micro tile row) than it saves (measured)."""
    if n >= v or v % n:
        return n, 0, 0
    for k in range(len(batch) - 1, -1, -1):
        if batch[k][0] > 1 and continues(batch[k]):
            dim = batch.pop(k)
            return n * dim[0], outer_stride(dim), n
    return n, 0, 0


def plans(
    shape,
    src: View,
    dst: View,
    itemsize: int,
    src_addr: int = 0,
    dst_addr: int = 0,
    widen: bool = True,
    fold: bool = False,
) -> list[RepackPlan] | None:
    """Segment then canonicalize (and ``fold``, for the CPU kernels): the kernels' whole
    work list, or None (use the engine).

    Cached: only the buffers' alignment (modulo the widest word) enters the plan.
    """
    work = _plans(tuple(shape), src, dst, itemsize, src_addr % 16, dst_addr % 16, widen, fold)
    return None if work is None else list(work)


@functools.lru_cache(maxsize=512)
def _plans(shape, src, dst, itemsize, src_mod, dst_mod, widen, folding):
    copies = segment(shape, src, dst)
    if copies is None:
        return None
    work = (canonical(c, itemsize, src_mod, dst_mod, widen) for c in copies)
    return tuple(fold(p) if folding else p for p in work)
