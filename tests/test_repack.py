"""Repack kernels: plans (segmenting blocked axes, canonical form, the SIMD tile chosen) and
``try_repack`` against numpy on strided and blocked views. Storage is 1-D; views are
``strided.View``s; ``strided.addresses`` is the oracle for blocked views."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from axesarray.core.strided import Block, View, addresses, contiguous, permute
from axesarray.dag.nodes import Leaf
from axesarray.kernels.repack import run_cpu as rp
from axesarray.kernels.repack.plan import VECTOR_BYTES, canonical, plans, segment
from axesarray.storage.memory import wrap_array

WIDTHS = {1: "uint8", 2: "float16", 4: "float32", 8: "float64"}


def leaf_of(arr: np.ndarray) -> Leaf:
    base, view = wrap_array(arr)
    return Leaf(base, view)


def fresh_like(shape, dtype, order) -> tuple[np.ndarray, Leaf]:
    """A C-contiguous buffer whose physical dim order is ``order``; returns (buffer, leaf)."""
    phys = contiguous(tuple(shape[d] for d in order))
    strides = [0] * len(shape)
    for p, d in enumerate(order):
        strides[d] = phys.strides[p]
    buf = np.full(max(1, int(np.prod(shape))), 99, dtype)
    return buf, Leaf(buf, View(tuple(shape), tuple(strides), 0))


def run_and_check(dst: Leaf, src_arr: np.ndarray, src: Leaf) -> None:
    assert rp.try_repack(dst, src)
    got = dst.data[addresses(dst.view)]
    np.testing.assert_array_equal(got, src_arr, strict=True)


# --- plans ------------------------------------------------------------------------------------


def nchwx_view(shape, x, chwn=False) -> View:
    """The logical (N, C, H, W) view of a fresh NCHWx (or CHWN4) buffer."""
    n, c, h, w = shape
    cb = -(-c // x)
    if chwn:
        return View(shape, (x, h * w * n * x, w * n * x, n * x), 0, (None, Block(x, 1), None, None))
    return View(shape, (cb * h * w * x, h * w * x, w * x, x), 0, (None, Block(x, 1), None, None))


def only_plan(shape, src, dst, itemsize):
    ps = plans(shape, src, dst, itemsize)
    assert len(ps) == 1
    return ps[0]


def test_layout_conversions_are_batched_transposes():
    # layouts.md §4C: (b, m, n, c) -> (b, n, m, c).
    s = (8, 64, 7, 5)
    nchw, nhwc = contiguous(s), permute(contiguous((8, 7, 5, 64)), (0, 3, 1, 2))
    p = only_plan(s, nchw, nhwc, 4)
    assert (p.batch_shape, p.ni, p.nj, p.si, p.dj, p.kind) == ((8,), 64, 35, 35, 64, "square")
    p = only_plan(s, nhwc, nchw, 4)
    assert (p.batch_shape, p.ni, p.nj, p.kind) == ((8,), 35, 64, "square")
    p = only_plan(s, nchw, nchwx_view(s, 4), 4)
    assert (p.batch_shape, p.ni, p.nj, p.kind, p.micro) == ((128,), 4, 35, "zip", 4)
    p = only_plan(s, nchwx_view(s, 4), nchw, 4)
    assert (p.batch_shape, p.ni, p.nj, p.kind, p.micro) == ((128,), 35, 4, "unzip", 4)
    p = only_plan(s, nchwx_view(s, 4), nchwx_view(s, 4, chwn=True), 1)
    assert (p.width, p.batch_shape, p.ni, p.nj, p.kind) == (4, (), 8, 16 * 35, "square")
    p = only_plan(s, nchw, nchwx_view(s, 32), 1)
    assert (p.batch_shape, p.ni, p.nj, p.kind) == ((16,), 32, 35, "square")
    p = only_plan(s, nchwx_view(s, 4), nchwx_view(s, 32), 2)  # NCHW4 -> NCHW32: (b, 8, n, 4)
    assert (p.width, p.batch_shape, p.ni, p.nj, p.kind) == (8, (16,), 8, 35, "square")


def test_chwn_conversions_fold_n_into_the_transpose():
    # NCHW -> CHWN4: N continues the 4 channels in the destination only; folded into i,
    # a tile writes whole (N, 4) destination lines (before: 4-element pieces, N a batch
    # dim). CHWN4 -> NCHW: the same on the source side, folded into j.
    s = (32, 64, 7, 5)
    nchw, chwn4 = contiguous(s), nchwx_view(s, 4, chwn=True)
    for width in (1, 4):
        v = VECTOR_BYTES // width
        p = plans(s, nchw, chwn4, width, fold=True)[0]
        assert (p.kind, p.micro, p.batch_shape) == ("square", v, (16,))
        assert (p.ni, p.gi, p.si, p.si2, p.nj, p.dj) == (128, 4, 35, 64 * 35, 35, 128)
        p = plans(s, chwn4, nchw, width, fold=True)[0]
        assert (p.kind, p.micro, p.batch_shape) == ("square", v, (16,))
        assert (p.nj, p.gj, p.dj, p.dj2, p.ni, p.si) == (128, 4, 35, 64 * 35, 35, 128)
    # Unfolded plans (the CUDA kernels') keep N as a batch dim.
    p = only_plan(s, nchw, chwn4, 1)
    assert (p.kind, p.gi, p.gj, p.batch_shape) == ("pack", 0, 0, (16, 32))


def test_fold_only_when_groups_fit_the_micro_tile():
    s = (32, 6, 7, 5)
    nchw = contiguous(s)
    p = plans(s, nchw, nchwx_view(s, 3, chwn=True), 4, fold=True)[0]  # 3 does not divide 8
    assert (p.gi, p.batch_shape) == (0, (2, 32))
    p = plans(s, nchw, nchwx_view(s, 2, chwn=True), 4, fold=True)[0]
    assert (p.gi, p.ni, p.kind) == (2, 64, "square")
    s = (2, 64, 7, 5)  # (N, 4) = 8 rows: fewer than 32 bytes, no square tile: not folded
    p = plans(s, contiguous(s), nchwx_view(s, 4, chwn=True), 1, fold=True)[0]
    assert (p.gi, p.kind) == (0, "pack")
    s = (4, 64, 7, 5)  # 32 float32 channels fill whole vectors already: not folded
    p = plans(s, contiguous(s), nchwx_view(s, 32, chwn=True), 4, fold=True)[0]
    assert (p.gi, p.ni, p.kind, p.batch_shape) == (0, 32, "square", (2, 4))
    p = plans(s, nchwx_view(s, 4, chwn=True), nchwx_view(s, 4), 4, fold=True)[0]
    assert (p.gi, p.gj, p.width) == (0, 0, 16)  # CHWN4 -> NCHW4: 16-byte words, no fold


def test_padded_channels_are_a_separate_piece():
    s = (2, 6, 3, 3)  # C = 6 into blocks of 4: one whole block, then 2 channels
    copies = segment(s, contiguous(s), nchwx_view(s, 4))
    assert sorted(c.shape for c in copies) == [(2, 1, 4, 3, 3), (2, 2, 3, 3)]
    total = sum(int(np.prod(c.shape)) for c in copies)
    assert total == int(np.prod(s))


def test_canonical_drops_unit_dims_and_merges_jointly():
    from axesarray.kernels.repack.plan import Copy

    c = Copy((1, 4, 5, 1), (99, 5, 1, 7), (99, 5, 1, 3), 0, 0)
    p = canonical(c, 4, widen=False)
    assert (p.width, p.ni, p.nj, p.batch_shape, p.rows) == (4, 20, 1, (), True)
    # A contiguous run shared by both sides moves as wider words: 80 bytes, 5 of 16.
    assert (canonical(c, 4).width, canonical(c, 4).ni) == (16, 5)
    c = Copy((3, 4), (4, 1), (1, 3), 0, 0)  # a transpose: nothing shared, no widening
    assert canonical(c, 1).width == 1
    c = Copy((3, 5, 4), (20, 4, 1), (4, 12, 1), 0, 0)  # runs of 4 bytes -> uint32 words
    p = canonical(c, 1)
    assert (p.width, p.ni, p.nj) == (4, 3, 5)
    assert canonical(c, 1, src_addr=2).width == 2  # only 2-byte aligned
    p = canonical(c, 1, src_addr=1)  # a misaligned buffer keeps bytes
    assert p.width == 1


# --- try_repack against numpy ------------------------------------------------------------------


@st.composite
def strided_pairs(draw):
    """A random strided source view of random data, and a fresh destination order."""
    rank = draw(st.integers(1, 4))
    shape = tuple(
        draw(
            st.lists(
                st.sampled_from([0, 1, 2, 3, 5, 8, 9, 16, 17, 33]), min_size=rank, max_size=rank
            )
        )
    )
    width = draw(st.sampled_from(sorted(WIDTHS)))
    dtype = np.dtype(WIDTHS[width])
    big = tuple(n * draw(st.sampled_from([1, 1, 2])) + draw(st.integers(0, 2)) for n in shape)
    base = np.random.default_rng(draw(st.integers(0, 9))).integers(0, 100, big).astype(dtype)
    index = []
    for n, m in zip(shape, big, strict=True):
        step = draw(st.sampled_from([1, 1, 2, -1])) if n else 1
        if n and (n - 1) * abs(step) + 1 > m:
            step = 1
        index.append(
            slice(0, n, 1)
            if step == 1
            else slice((n - 1) * step, None, step)
            if step > 0
            else slice(n - 1, None, -1)
            if n
            else slice(0, 0)
        )
    src = base[tuple(index)]
    src = src.transpose(draw(st.permutations(range(rank))))
    order = tuple(draw(st.permutations(range(rank))))
    return src, order


@given(strided_pairs())
def test_try_repack_strided(pair):
    src, order = pair
    buf, dst = fresh_like(src.shape, src.dtype, order)
    run_and_check(dst, src, leaf_of(src))


def transpose_case(ni, nj, width, src_dense=True, dst_dense=True):
    """dst[j, i] = src[i, j]: source rows along j, destination rows along i."""
    dtype = WIDTHS[width]
    big = np.random.default_rng(0).integers(0, 100, (ni, nj + 2)).astype(dtype)
    src = np.ascontiguousarray(big[:, :nj]) if src_dense else big[:, :nj]
    dj = ni if dst_dense else ni + 3
    dst = Leaf(np.full(nj * dj, 99, dtype), View((ni, nj), (1, dj), 0))
    return src, dst


@pytest.mark.parametrize("width", [1, 2, 4, 8])
def test_every_simd_tile(width):
    v = VECTOR_BYTES // width
    cases = [  # (ni, nj, src rows back to back, dst rows back to back)
        (v, v, True, True),
        (v + 1, 2 * v - 1, True, True),
        (3 * v, v, False, False),
        (4, v + 3, True, True),
        (4, 2 * v, True, False),
        (3, v, True, True),
        (2, v, True, True),
        (v, 4, True, True),
        (v, 4, False, True),
        (v + 5, 2, True, True),
        (v + 5, 3, False, False),
        (1, v, True, True),
        (v - 1, v - 1, True, True),
    ]
    expected = (
        {"square", "zip", "pack", "unzip", "unpack", "none"}
        if v > 4
        else {"square", "none"} | ({"zip", "pack", "unzip", "unpack"} if v == 4 else set())
    )
    seen = set()
    for ni, nj, src_dense, dst_dense in cases:
        src, dst = transpose_case(ni, nj, width, src_dense, dst_dense)
        p = only_plan((ni, nj), leaf_of(src).view, dst.view, width)
        seen.add(p.kind)
        run_and_check(dst, src, leaf_of(src))
        rows = dst.data.reshape(nj, -1)
        np.testing.assert_array_equal(rows[:, ni:], 99)  # gaps in dst rows are not written
    assert seen == expected


def test_unzip_needs_back_to_back_source_rows():
    # NCHW4 -> NCHW: the source rows of 4 channels are back to back: full-vector loads.
    s = (2, 8, 5, 7)
    src_view = nchwx_view(s, 4)
    p = only_plan(s, src_view, contiguous(s), 1)
    assert (p.kind, p.micro) == ("unzip", 4)


@st.composite
def blocked_pairs(draw):
    """Random blocked views (any block, phase and step) over padded buffers."""
    c = draw(st.integers(1, 40))
    h = draw(st.integers(1, 3))

    def side():
        x = draw(st.sampled_from([None, 2, 3, 4, 8, 32]))
        if x is None:
            return View((c, h), (h, 1), 0), c * h
        step = draw(st.sampled_from([1, 1, 1, 2, -1]))
        phase = draw(st.integers(0, x - 1)) + (x * c if step < 0 else 0)
        last = max(phase, phase + step * (c - 1))
        blocks = last // x + 1
        return View((c, h), (h * x, x), 0, (Block(x, 1, phase, step), None)), blocks * h * x

    return side(), side()


@given(blocked_pairs(), st.sampled_from([1, 2, 4]))
def test_try_repack_blocked_views(pair, width):
    (sv, sn), (dv, dn) = pair
    dtype = WIDTHS[width]
    sbuf = np.random.default_rng(0).integers(0, 100, sn).astype(dtype)
    dbuf = np.full(dn, 99, dtype)
    src_vals = sbuf[addresses(sv)]
    if segment(sv.shape, sv, dv) is None:  # too irregular: left to the engine, untouched
        assert not rp.try_repack(Leaf(dbuf, dv), Leaf(sbuf, sv))
        np.testing.assert_array_equal(dbuf, 99)
        return
    run_and_check(Leaf(dbuf, dv), src_vals, Leaf(sbuf, sv))
    untouched = np.ones(dn, bool)
    untouched[addresses(dv).reshape(-1)] = False
    np.testing.assert_array_equal(dbuf[untouched], 99)  # padding is never written


@st.composite
def chwn_cases(draw):
    """NCHW (or NHWC) <-> CHWNx with N x and H W around the micro tile: tails, size 0 and
    1, padded C (C % x != 0) and blocks that do not fold (x = 3)."""
    width = draw(st.sampled_from([1, 2, 4, 8]))
    x = draw(st.sampled_from([2, 3, 4, 4, 8, 32]))
    v = VECTOR_BYTES // width
    n = draw(st.integers(0, 3 * v // x + 2))
    c = draw(st.sampled_from([1, 3, 4, 5, 8, 12, 17, 33]))
    h, w = draw(st.integers(1, 3)), draw(st.integers(1, 2 * v + 3))
    return (n, c, h, w), x, width, draw(st.booleans())


def check_chwn_round_trip(shape, x, width, nhwc, stream) -> None:
    """NCHW (NHWC) -> CHWNx -> NCHW (NHWC) through try_repack, exact bytes, padding of
    the CHWNx buffer never written."""
    n, c, h, w = shape
    dtype = WIDTHS[width]
    logical = np.random.default_rng(n + c).integers(0, 100, shape).astype(dtype)
    plain = np.ascontiguousarray(logical.transpose(0, 2, 3, 1) if nhwc else logical)
    plain_view = permute(contiguous((n, h, w, c)), (0, 3, 1, 2)) if nhwc else contiguous(shape)
    size = -(-c // x) * h * w * n * x
    old = rp._STREAM_BYTES, rp._PREFETCH_BYTES
    if stream:  # streamed stores, and the next tile prefetched
        rp._STREAM_BYTES = rp._PREFETCH_BYTES = 0
    try:
        chwn = Leaf(np.full(max(size, 1), 99, dtype), nchwx_view(shape, x, chwn=True))
        run_and_check(chwn, logical, Leaf(plain.reshape(-1), plain_view))
        untouched = np.ones(chwn.data.size, bool)
        untouched[addresses(chwn.view).reshape(-1)] = False
        np.testing.assert_array_equal(chwn.data[untouched], 99)  # padding is never written
        back = Leaf(np.full(max(logical.size, 1), 99, dtype), plain_view)
        run_and_check(back, logical, chwn)
    finally:
        rp._STREAM_BYTES, rp._PREFETCH_BYTES = old


@given(chwn_cases(), st.booleans())
def test_chwn_repacks_exact_bytes(case, stream):
    shape, x, width, nhwc = case
    check_chwn_round_trip(shape, x, width, nhwc, stream)


@pytest.mark.parametrize("width", [1, 2, 4, 8])
@pytest.mark.parametrize("x", [2, 4])
def test_folded_tiles_with_tails(width, x):
    """Folded plans with a ragged (N, x) edge, a ragged H W edge and a padded block."""
    v = VECTOR_BYTES // width
    shape = (3 * max(1, v // x) + 1, 2 * x + 1, 3, v + 3)
    whole = (shape[0], 2 * x, *shape[2:])  # the piece of whole blocks
    to, back = (
        plans(whole, a, b, width, fold=True)[0]
        for a, b in [
            (contiguous(whole), nchwx_view(whole, x, chwn=True)),
            (nchwx_view(whole, x, chwn=True), contiguous(whole)),
        ]
    )
    folded = x if x < v else 0  # x 8-byte words fill a vector row: nothing to fold
    assert (to.kind, to.gi, back.kind, back.gj) == ("square", folded, "square", folded)
    for stream in (False, True):
        check_chwn_round_trip(shape, x, width, False, stream)


def test_large_copies_use_the_kernel_threads(monkeypatch):
    """The calling thread and the kernels' helper thread share the tile ranges."""
    import threading

    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread only")
    from axesarray.kernels import threads

    monkeypatch.setattr(rp, "_PARALLEL_BYTES", 1 << 16)
    monkeypatch.setattr(threads, "_SPIN_UNTIL", [0.0])  # no BLAS call just before
    ranges, who = [], set()
    real_kernel = rp._kernel
    helper_ran = threading.Event()

    def counting_kernel(*args):
        ranges.append(args[-2:])
        who.add(threading.get_ident())
        if threading.get_ident() in threads._HELPERS:
            helper_ran.set()
        else:
            helper_ran.wait(10)  # the caller leaves the helper a range
        return real_kernel(*args)

    monkeypatch.setattr(rp, "_kernel", counting_kernel)
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        src = np.random.default_rng(0).integers(0, 100, (8, 96, 33, 35)).astype("int8")
        buf, dst = fresh_like(src.shape, src.dtype, (0, 2, 3, 1))
        run_and_check(dst, src, leaf_of(src))
    finally:
        numba.set_num_threads(before)
    assert len(who) == 2  # one helper beside the calling thread
    assert len(ranges) > 2 and sorted(ranges)[0][0] == 0  # each range run once, in full
    assert all(a[1] == b[0] for a, b in zip(sorted(ranges), sorted(ranges)[1:], strict=False))


def test_read_only_sources_work():
    src = np.arange(60, dtype="float32").reshape(3, 4, 5)
    src.flags.writeable = False
    buf, dst = fresh_like(src.shape, src.dtype, (2, 0, 1))
    run_and_check(dst, src, Leaf(*wrap_array(src), writeable=False))


def test_cases_left_to_the_engine():
    a = np.arange(12.0)
    dst = Leaf(a, contiguous((3, 4)))
    assert not rp.try_repack(dst, Leaf(a, permute(contiguous((4, 3)), (1, 0))))  # overlap
    assert not rp.try_repack(dst, Leaf(np.arange(12, dtype="float32"), contiguous((3, 4))))
    assert not rp.try_repack(
        Leaf(np.zeros(12), contiguous((3, 4)), writeable=False), Leaf(a, contiguous((3, 4)))
    )
    assert not rp.try_repack(
        Leaf(np.zeros(4), View((3, 4), (0, 1), 0)),  # dst broadcast
        Leaf(a, contiguous((3, 4))),
    )
    np.testing.assert_array_equal(a, np.arange(12.0))


@pytest.mark.parametrize("width", [1, 4])
@pytest.mark.parametrize("i_inner", [False, True])
def test_many_small_tiles_in_either_order(monkeypatch, width, i_inner):
    """Tiles of one or two micro tiles (ragged at the edges), taken along i or along j,
    streamed and prefetched or not: every element once, gaps in dst rows untouched."""
    v = VECTOR_BYTES // width
    monkeypatch.setattr(rp, "I_INNER", i_inner)
    monkeypatch.setattr(rp, "tile_sizes", lambda p: (v, 2 * v) if p.kind == "square" else (1, 1))
    for stream in (False, True):
        monkeypatch.setattr(rp, "_STREAM_BYTES", 0 if stream else 1 << 60)
        monkeypatch.setattr(rp, "_PREFETCH_BYTES", 0 if stream else 1 << 60)
        rp._launch.cache_clear()  # launch arguments are cached per plan
        monkeypatch.setattr(rp, "_launch", rp._launch)  # (cleared again on teardown)
        src, dst = transpose_case(3 * v + 5, 5 * v + 3, width, dst_dense=False)
        assert only_plan((3 * v + 5, 5 * v + 3), leaf_of(src).view, dst.view, width).kind == (
            "square"
        )
        run_and_check(dst, src, leaf_of(src))
        np.testing.assert_array_equal(dst.data.reshape(5 * v + 3, -1)[:, 3 * v + 5 :], 99)
        check_chwn_round_trip((2 * v + 1, 8, 3, v + 5), 4, width, False, stream)


@pytest.mark.parametrize("width", [1, 2, 4, 8])
def test_streaming_stores(monkeypatch, width):
    """Large outputs are staged and streamed (and the next tile prefetched); force it on
    small ones, misaligned too."""
    monkeypatch.setattr(rp, "_STREAM_BYTES", 0)
    monkeypatch.setattr(rp, "_PREFETCH_BYTES", 0)
    v = VECTOR_BYTES // width
    for ni, nj, src_dense, dst_dense in [
        (v + 3, 2 * v + 1, True, True),
        (4, 3 * v, True, True),
        (2 * v, 4, True, True),
        (v, v, False, False),
    ]:
        for shift in (0, 1):  # a destination that does not start on a vector boundary
            src, dst = transpose_case(ni, nj, width, src_dense, dst_dense)
            shifted = Leaf(
                np.full(dst.data.size + 1, 99, dst.data.dtype)[shift:][: dst.data.size], dst.view
            )
            run_and_check(shifted, src, leaf_of(src))
            np.testing.assert_array_equal(shifted.data.reshape(nj, -1)[:, ni:], 99)


def test_ctrl_c_during_the_first_repack_leaves_numba_usable(tmp_path):
    """Ctrl-C while the first layout conversion imports numba and compiles the repack
    kernel: the caller gets KeyboardInterrupt (held until numba's import ends), and the
    next conversion works (a cut import left a half-initialized module behind)."""
    import textwrap

    from conftest import ctrl_c_outcomes

    script = textwrap.dedent(
        """
        import os, signal, sys, threading, time
        import numpy as np, axesarray as ax
        x = ax.tensor(np.random.rand(4, 64, 28, 28).astype(np.float32), "N C H W")
        threading.Timer(float(sys.argv[1]), os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            x.to_layout("NHWC")
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
        print(np.array_equal(x.to_layout("NHWC").numpy(), x.numpy()))
        time.sleep(0.5)
        """
    )
    assert "interrupted" in ctrl_c_outcomes(script, (0.02, 0.1), tmp_path)
