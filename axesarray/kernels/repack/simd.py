"""SIMD micro tiles for the CPU repack: small transposes written as LLVM vector shuffles.

LLVM does not turn a scalar transpose loop into shuffles (one side is always strided), so
``repack`` calls these intrinsics on its full tiles. V = ``VECTOR_BYTES / width`` lanes
(8 for 32-bit words, 32 for bytes). A tile moves a matrix whose rows are contiguous in the
source into rows contiguous in the destination. Arguments, in elements:
``(src, src_offset, src_row_stride, dst, dst_offset, dst_row_stride)``; ``square`` also
takes int64 arrays of row offsets in place of the strides (rows of folded plans).

- ``square``: V x V. Words of 4 bytes or more use one butterfly; narrower ones are a
  transpose of 32-bit words (8 x 8) followed by a transpose inside each word, because a
  32 x 32 byte butterfly needs 32 live registers and spills.
- ``pack{R}``: R source rows of V lanes -> V destination rows of R lanes (NCHW -> NCHW4);
  ``zip{R}`` is the same when the destination rows are back to back (full-vector stores).
- ``unpack{R}``: V source rows of R lanes -> R destination rows of V lanes (NCHW4 ->
  NCHW); ``unzip{R}`` when the source rows are back to back (full-vector loads).

A butterfly stage b swaps the off-diagonal b x b blocks of every 2b x 2b block, lane-wise
in R-lane chunks, so log2(R) stages transpose every R x R chunk. Loads and stores are
unaligned. A tile that does not fit the word width (R > V) compiles to nothing; the
planner never asks for one.
"""

from __future__ import annotations

import platform

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ...storage.numba_private import for_range
from .plan import VECTOR_BYTES

MICRO_SIZES = (2, 4, 8, 16, 32)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)

__all__ = ["MICRO_SIZES", "square", "stream", "store_fence"] + [
    f"{k}{r}" for k in ("pack", "unpack", "zip", "unzip") for r in MICRO_SIZES
]


def _mask(indices) -> ir.Constant:
    idx = list(indices)
    return ir.Constant(ir.VectorType(_I32, len(idx)), [ir.Constant(_I32, k) for k in idx])


def _butterfly(builder, vecs: list, r: int, v: int) -> list:
    """Transpose each r x r chunk of the r vectors (v lanes each)."""
    vecs = list(vecs)
    b = r // 2
    while b >= 1:
        low = _mask(v + c - b if c & b else c for c in range(v))
        high = _mask(v + c if c & b else c + b for c in range(v))
        for k in range(r):
            if not k & b:
                x, y = vecs[k], vecs[k + b]
                vecs[k] = builder.shuffle_vector(x, y, low)
                vecs[k + b] = builder.shuffle_vector(x, y, high)
        b //= 2
    return vecs


def _zip(builder, vecs: list, v: int) -> list:
    """Interleave r vectors: lane j of vector k goes to flat position j*r + k."""
    r = len(vecs)
    lo = _mask(x for j in range(v // 2) for x in (j, v + j))
    hi = _mask(x for j in range(v // 2, v) for x in (j, v + j))
    while r > 1 and vecs:
        half = len(vecs) // 2
        out = []
        for k in range(half):
            out += [builder.shuffle_vector(vecs[k], vecs[k + half], m) for m in (lo, hi)]
        vecs = out
        r //= 2
    return vecs


def _unzip(builder, vecs: list, v: int) -> list:
    """Inverse of ``_zip``: vector q gets the flat positions congruent to q modulo r."""
    r = len(vecs)
    even = _mask(range(0, 2 * v, 2))
    odd = _mask(range(1, 2 * v, 2))
    for _ in range(r.bit_length() - 1):
        half = r // 2
        out = [None] * r
        for k in range(half):
            x, y = vecs[2 * k], vecs[2 * k + 1]
            out[k] = builder.shuffle_vector(x, y, even)
            out[k + half] = builder.shuffle_vector(x, y, odd)
        vecs = out
    return vecs


class _Tile:
    """IR helpers for one intrinsic call: typed pointers into src and dst.

    A row argument is either a stride (row k at ``offset + k * stride``) or a 1-D int64
    array of row offsets (row k at ``offset + rows[k]``: folded plans, ``kernels.repack.plan``).
    """

    def __init__(self, context, builder, signature, args):
        self.b = builder
        sty, dty = signature.args[0], signature.args[3]
        self.width = context.get_abi_sizeof(context.get_data_type(sty.dtype))
        self.elem = ir.IntType(8 * self.width)
        self.v = VECTOR_BYTES // self.width
        self.src = context.make_array(sty)(context, builder, args[0]).data
        self.dst = context.make_array(dty)(context, builder, args[3]).data
        self.s_off, self.d_off = args[1], args[4]
        self.s_str, self.d_str = (
            context.make_array(ty)(context, builder, arg).data
            if isinstance(ty, types.Array)
            else arg
            for ty, arg in ((signature.args[2], args[2]), (signature.args[5], args[5]))
        )

    def _ptr(self, data, off, row, stride, lanes, elem=None):
        b = self.b
        if isinstance(stride.type, ir.PointerType):  # a table of row offsets
            step = b.load(b.gep(stride, [ir.Constant(_I64, row)]))
        else:
            step = b.mul(ir.Constant(_I64, row), stride)
        p = b.gep(data, [b.add(off, step)])
        return b.bitcast(p, ir.VectorType(elem or self.elem, lanes).as_pointer())

    def load(self, row, lanes, elem=None):
        return self.b.load(self._ptr(self.src, self.s_off, row, self.s_str, lanes, elem), align=1)

    def store(self, value, row, lanes, elem=None):
        ptr = self._ptr(self.dst, self.d_off, row, self.d_str, lanes, elem)
        self.b.store(value, ptr, align=1)

    def flat_load(self, k, lanes):
        """Vector k of the source block read as one contiguous run from src_offset."""
        b = self.b
        p = b.gep(self.src, [b.add(self.s_off, ir.Constant(_I64, k * lanes))])
        return b.load(b.bitcast(p, ir.VectorType(self.elem, lanes).as_pointer()), align=1)

    def flat_store(self, value, k, lanes):
        b = self.b
        p = b.gep(self.dst, [b.add(self.d_off, ir.Constant(_I64, k * lanes))])
        b.store(value, b.bitcast(p, ir.VectorType(self.elem, lanes).as_pointer()), align=1)


def _square(t: _Tile) -> None:
    v = t.v
    if t.width == 16:  # two 16-byte words per vector: swap the 128-bit halves
        r0, r1 = (t.load(k, 4, _I64) for k in range(2))
        t.store(t.b.shuffle_vector(r0, r1, _mask((0, 1, 4, 5))), 0, 4, _I64)
        t.store(t.b.shuffle_vector(r0, r1, _mask((2, 3, 6, 7))), 1, 4, _I64)
        return
    if t.width >= 4:
        rows = _butterfly(t.b, [t.load(k, v) for k in range(v)], v, v)
        for k in range(v):
            t.store(rows[k], k, v)
        return
    # Narrow words (g = 4 / width lanes per 32-bit word), in-lane unpacks only: the rows
    # of each block of g rows are interleaved into 32-bit words (one column each), then
    # for each word slot m an 8 x 8 transpose of words, finished by a 128-bit lane swap.
    g = 4 // t.width
    blocks = [_interleave(t, [t.load(g * a + e, v) for e in range(g)]) for a in range(8)]
    half = v // 2  # lanes per 128-bit half
    for m in range(g):
        for q, (low, high) in enumerate(_words8x8([blk[m] for blk in blocks], t.b)):
            t.store(t.b.bitcast(low, ir.VectorType(t.elem, v)), 4 * m + q, v)
            t.store(t.b.bitcast(high, ir.VectorType(t.elem, v)), half + 4 * m + q, v)


def _unpack_mask(lanes: int, unit: int, high: bool) -> ir.Constant:
    """``punpck{l,h}`` on ``lanes``-lane vectors: per 128-bit half, the low (high) units
    of x and y interleaved (``unit`` lanes per half)."""
    base = unit // 2 if high else 0
    idx = []
    for h in range(lanes // unit):
        for p in range(unit // 2):
            idx += [h * unit + base + p, lanes + h * unit + base + p]
    return _mask(idx)


def _interleave(t: _Tile, rows: list) -> list:
    """g rows -> g vectors of 32-bit words; word q of half h of vector m holds column
    ``h * V/2 + 4m + q`` of the g rows (row 0 in the lowest byte)."""
    b = t.b
    if t.width == 1:  # bytes of rows 0,1 and 2,3 into 16-bit pairs first
        r0, r1, r2, r3 = rows
        lo, hi = (_unpack_mask(32, 16, h) for h in (False, True))
        i16 = ir.VectorType(ir.IntType(16), 16)
        t0, t1 = (b.bitcast(b.shuffle_vector(r0, r1, m), i16) for m in (lo, hi))
        t2, t3 = (b.bitcast(b.shuffle_vector(r2, r3, m), i16) for m in (lo, hi))
        pairs = [(t0, t2), (t1, t3)]
    else:
        pairs = [tuple(rows)]
    lo, hi = (_unpack_mask(16, 8, h) for h in (False, True))
    i32 = ir.VectorType(_I32, 8)
    return [b.bitcast(b.shuffle_vector(x, y, m), i32) for x, y in pairs for m in (lo, hi)]


def _words8x8(x: list, b) -> list:
    """8 x 8 transpose of 32-bit words by halves: returns 4 pairs (low, high) where pair q
    holds word q of each half of every vector, the low half's in ``low``."""
    lo32, hi32 = _unpack_mask(8, 4, False), _unpack_mask(8, 4, True)
    lo64, hi64 = _mask((0, 1, 8, 9, 4, 5, 12, 13)), _mask((2, 3, 10, 11, 6, 7, 14, 15))
    p = [[b.shuffle_vector(x[k], x[k + 1], m) for m in (lo32, hi32)] for k in range(0, 8, 2)]
    # q[h][n]: word n of each half of vectors 4h .. 4h + 3
    q = [
        [b.shuffle_vector(p[h][n // 2], p[h + 1][n // 2], (lo64, hi64)[n % 2]) for n in range(4)]
        for h in (0, 2)
    ]
    low, high = _mask((0, 1, 2, 3, 8, 9, 10, 11)), _mask((4, 5, 6, 7, 12, 13, 14, 15))
    return [tuple(b.shuffle_vector(q[0][n], q[1][n], m) for m in (low, high)) for n in range(4)]


def _pack(t: _Tile, r: int, dense: bool) -> None:
    v = t.v
    rows = [t.load(k, v) for k in range(r)]
    if dense:
        for k, vecv in enumerate(_zip(t.b, rows, v)):
            t.flat_store(vecv, k, v)
        return
    rows = _butterfly(t.b, rows, r, v)
    for k in range(r):
        for g in range(v // r):
            chunk = t.b.shuffle_vector(rows[k], rows[k], _mask(range(g * r, g * r + r)))
            t.store(chunk, g * r + k, r)


def _unpack(t: _Tile, r: int, dense: bool) -> None:
    v = t.v
    if dense:
        rows = _unzip(t.b, [t.flat_load(k, v) for k in range(r)], v)
    else:
        rows = []
        for q in range(r):
            parts = [t.load(g * r + q, r) for g in range(v // r)]
            while len(parts) > 1:  # concatenate pairwise into one v-lane vector
                n = parts[0].type.count
                parts = [
                    t.b.shuffle_vector(parts[k], parts[k + 1], _mask(range(2 * n)))
                    for k in range(0, len(parts), 2)
                ]
            rows.append(parts[0])
        rows = _butterfly(t.b, rows, r, v)
    for q in range(r):
        t.store(rows[q], q, v)


def _make(kind: str, r: int):
    @intrinsic
    def micro(typingctx, src, src_off, src_stride, dst, dst_off, dst_stride):
        if not (isinstance(src, types.Array) and isinstance(dst, types.Array)):
            return None
        tables = [isinstance(a, types.Array) for a in (src_stride, dst_stride)]
        if any(tables) and (kind != "square" or not all(tables)):
            return None
        sig = types.void(src, src_off, src_stride, dst, dst_off, dst_stride)

        def codegen(context, builder, signature, args):
            t = _Tile(context, builder, signature, args)
            if kind == "square":
                _square(t)
            elif r < t.v:
                if kind in ("pack", "zip"):
                    _pack(t, r, kind == "zip")
                else:
                    _unpack(t, r, kind == "unzip")
            return context.get_dummy_value()

        return sig, codegen

    micro.__name__ = f"{kind}{r if kind != 'square' else ''}"
    return micro


square = _make("square", 0)
pack2, pack4, pack8, pack16, pack32 = (_make("pack", r) for r in MICRO_SIZES)
unpack2, unpack4, unpack8, unpack16, unpack32 = (_make("unpack", r) for r in MICRO_SIZES)
zip2, zip4, zip8, zip16, zip32 = (_make("zip", r) for r in MICRO_SIZES)
unzip2, unzip4, unzip8, unzip16, unzip32 = (_make("unzip", r) for r in MICRO_SIZES)


# --- streaming stores ----------------------------------------------------------------------
# A large output is written with non-temporal stores: they skip the read-for-ownership of
# each destination line, so a repack moves 2 bytes per byte instead of 3 (np.copyto does 3).
# They need 32-byte aligned addresses and whole lines, so tiles are first transposed into
# an L1 staging buffer, then each finished destination row is streamed out.


@intrinsic
def stream(typingctx, src, src_off, dst, dst_off, count):
    """Copy ``count`` 32-byte vectors from ``src`` (any alignment) to 32-byte aligned
    ``dst`` with non-temporal stores; offsets in elements."""
    if not (isinstance(src, types.Array) and isinstance(dst, types.Array)):
        return None
    sig = types.void(src, src_off, dst, dst_off, count)

    def codegen(context, builder, signature, args):
        sty, dty = signature.args[0], signature.args[2]
        width = context.get_abi_sizeof(context.get_data_type(sty.dtype))
        lanes = VECTOR_BYTES // width
        vec = ir.VectorType(ir.IntType(8 * width), lanes)
        s_data = context.make_array(sty)(context, builder, args[0]).data
        d_data = context.make_array(dty)(context, builder, args[2]).data
        flag = builder.module.add_metadata([ir.Constant(_I32, 1)])
        with for_range(builder, args[4]) as loop:
            step = builder.mul(loop.index, ir.Constant(_I64, lanes))
            sp = builder.gep(s_data, [builder.add(args[1], step)])
            dp = builder.gep(d_data, [builder.add(args[3], step)])
            value = builder.load(builder.bitcast(sp, vec.as_pointer()), align=1)
            st = builder.store(value, builder.bitcast(dp, vec.as_pointer()), align=VECTOR_BYTES)
            st.set_metadata("nontemporal", flag)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def prefetch_span(typingctx, src, src_off, count):
    """Prefetch into L2 the ``count`` elements from ``src[src_off]``, one line at a time
    in address order (a sequential stream the memory system serves at full rate)."""
    if not isinstance(src, types.Array):
        return None
    sig = types.void(src, src_off, count)

    def codegen(context, builder, signature, args):
        sty = signature.args[0]
        width = context.get_abi_sizeof(context.get_data_type(sty.dtype))
        data = context.make_array(sty)(context, builder, args[0]).data
        i8p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i8p, _I32, _I32, _I32])
        fn = builder.module.globals.get("llvm.prefetch.p0i8")
        if fn is None:
            fn = ir.Function(builder.module, fnty, name="llvm.prefetch.p0i8")
        base = builder.bitcast(builder.gep(data, [args[1]]), i8p)
        nbytes = builder.mul(args[2], ir.Constant(_I64, width))
        lines = builder.udiv(builder.add(nbytes, ir.Constant(_I64, 63)), ir.Constant(_I64, 64))
        read, to_l2, data_cache = (ir.Constant(_I32, k) for k in (0, 2, 1))
        with for_range(builder, lines) as loop:
            ptr = builder.gep(base, [builder.mul(loop.index, ir.Constant(_I64, 64))])
            builder.call(fn, [ptr, read, to_l2, data_cache])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def store_fence(typingctx):
    """``sfence``: order the streaming stores before the kernel returns."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
            builder.fence("seq_cst")
            return context.get_dummy_value()
        name = "llvm.x86.sse.sfence"
        fn = builder.module.globals.get(name)
        if fn is None:
            fn = ir.Function(builder.module, ir.FunctionType(ir.VoidType(), []), name=name)
        builder.call(fn, [])
        return context.get_dummy_value()

    return sig, codegen
