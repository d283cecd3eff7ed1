"""The fused engine: kernel counts (explain), memory order, aliasing, caching, threads.

Values are compared with numpy (the oracle) or with the reference engine; the random
expression trees of test_expressions.py already run under both engines.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given
from hypothesis import strategies as st
from strategies import axes, make_array, random_values, sources

import axesarray as ax
from axesarray.kernels import cache as kcache

N, C, H, W = ax.Axis("N", 3), ax.Axis("C", 4), ax.Axis("H", 5), ax.Axis("W", 6)
rng = np.random.default_rng(7)


def t_(shape_axes, dtype="float64"):
    """A tensor and a copy of its values (the tensor wraps its own array, zero-copy)."""
    arr = rng.standard_normal([a.length for a in shape_axes]).astype(dtype)
    return ax.tensor(arr, shape_axes), arr.copy()


@pytest.fixture(autouse=True)
def _fused():
    with ax.set_options(engine="numba"):
        yield


# --- how many kernels (explain) -------------------------------------------------------------


def test_elementwise_chain_is_one_kernel():
    """A chain of maps with broadcasting and a transposed operand fuses into one kernel."""
    a, _ = t_((N, C, H, W))
    b, _ = t_((W, H))
    plan = ax.explain(ax.sigmoid(a * 2 + b - 1) / (1 + ax.exp(-a.transpose("W ..."))))
    assert [k.kind for k in plan.kernels] == ["elementwise"]
    assert plan.temporaries == ()


def test_reduction_fuses_its_input_and_epilogue():
    """sum(a + b) and mean (sum, then a division) are each one kernel."""
    a, _ = t_((N, C, H, W))
    b, _ = t_((C,))
    assert len(ax.explain((a + b).sum("C")).kernels) == 1
    assert len(ax.explain(((a - b) ** 2).sum()).kernels) == 1
    assert [k.kind for k in ax.explain(a.mean(("H", "W"))).kernels] == ["reduction"]


@pytest.mark.parametrize("view", ["transposed", "sliced"])
def test_assignment_into_a_view_is_one_kernel(view):
    """Writing into a transposed or sliced view of storage needs no temporary."""
    a, _ = t_((N, C, H, W))
    out = ax.zeros((N, C, H, W))
    dst = out.transpose("W H C N") if view == "transposed" else out[{"H": slice(1, 4)}]
    src = a if view == "transposed" else a[{"H": slice(0, 3)}]
    plan = ax.explain(ax.exp(src) + 1, out=dst)
    assert len(plan.kernels) == 1 and plan.kernels[0].writes == "destination"
    dst[...] = ax.exp(src) + 1
    expected = np.exp(src.numpy()) + 1
    assert_close(dst, expected.transpose(3, 2, 1, 0) if view == "transposed" else expected)


def test_dot_of_an_expression_is_two_kernels():
    """dot(a + b, c): one kernel materializes a + b, then BLAS."""
    M, K, P = ax.Axis("M", 4), ax.Axis("K", 5), ax.Axis("P", 3)
    a, an = t_((M, K))
    b, bn = t_((M, K))
    c, cn = t_((K, P))
    plan = ax.explain(ax.dot(a + b, c, over="K"))
    assert [k.kind for k in plan.kernels] == ["elementwise", "blas"]
    assert_close(ax.dot(a + b, c, over="K"), (an + bn) @ cn)


def test_dot_takes_a_transposed_leaf_without_a_copy():
    """A transposed l-tensor goes to BLAS as it is: one step, no temporary."""
    M, K, P = ax.Axis("M", 4), ax.Axis("K", 5), ax.Axis("P", 3)
    a, an = t_((K, M))
    c, cn = t_((P, K))
    plan = ax.explain(ax.dot(a, c, over="K"))
    assert [k.kind for k in plan.kernels] == ["blas"] and plan.temporaries == ()
    assert_close(ax.dot(a, c, over="K"), np.einsum("km,pk->mp", an, cn))


@pytest.mark.parametrize("names", ["C", ("N", "W"), "W", ("C", "H")])
def test_reduce_over_inner_axes_of_a_scalar_first_expression(names):
    """Regression: the reduce loop took its length from the first operand's shape, which
    for ``10 * x`` is the constant's (not permuted with the reduced dims moved last)."""
    x, xn = t_((N, C, H, W))
    dims = tuple("NCHW".index(n) for n in names)
    assert_close((10 * x).max(names), (10 * xn).max(dims))
    assert_close((2.5 - x).sum(names), (2.5 - xn).sum(dims), scale=xn.size)


def test_softmax_materializes_the_broadcast_reduction():
    """The max and the sum of exp are broadcast back: softmax written out is one normalize
    kernel (the max a first sweep, one value per output; exp stored in the result, summed,
    divided); separately built copies of the same subexpression are recognized as one
    (structurally equal)."""
    a, an = t_((N, C, H))
    e = ax.exp(a - a.max("C")) / ax.exp(a - a.max("C")).sum("C")
    plan = ax.explain(e)
    kinds = [k.kind for k in plan.kernels]
    assert kinds == ["reduction"] and plan.temporary_bytes == 0, str(plan)
    ex = np.exp(an - an.max(1, keepdims=True))
    assert_close(e, ex / ex.sum(1, keepdims=True))


def test_expensive_value_broadcast_along_a_new_axis_is_computed_once():
    """exp(z) broadcast along N is materialized (C elements) instead of recomputed N times."""
    a, an = t_((N, C))
    z, zn = t_((C,))
    plan = ax.explain(a + ax.exp(z))
    assert len(plan.kernels) == 2
    assert plan.temporaries[0][1] == (4,)
    assert_close(a + ax.exp(z), an + np.exp(zn))


def test_explain_reads_well():
    a, _ = t_((N, C, H, W))
    text = str(ax.explain((a * 2).sum("C")))
    assert "1 kernel," in text and "reduction kernel -> result" in text
    assert "loops" in text and "C=" in text and "r0" not in text  # the reduced axis by name


def test_plan_cache_hit_and_kernel_state():
    """The second explain of the same structure reports a cached plan; after a run the
    kernel is in memory."""
    a, _ = t_((N, C))
    b, _ = t_((N, C))
    e = ax.tanh(a) * b
    ax.explain(e)
    assert ax.explain(ax.tanh(a) * b).cached
    e.eval()
    assert ax.explain(ax.tanh(a) * b).kernels[0].cache in ("in memory", "on disk")


# --- memory order of fresh results ----------------------------------------------------------


def test_fresh_result_follows_the_dominant_input():
    """A broadcast against a transposed big operand keeps the big operand's memory order."""
    big = ax.tensor(np.ascontiguousarray(rng.standard_normal((6, 5, 4, 3))), "W H C N")
    big = big.transpose("N C H W")
    small, _ = t_((C,))
    out = (big + small).eval()
    order = np.argsort([-s for s in out.strides])
    assert [out.names[i] for i in order] == ["W", "H", "C", "N"]
    assert "order from input t0" in str(ax.explain(big + small))


# --- aliasing (DESIGN §3): numpy's result whatever the overlap ------------------------------


def test_transpose_onto_itself():
    """Swapping the names transposes the data; assignment aligns by name, so this writes
    x.T into x (a plain x.transpose("B A") would align back to x itself)."""
    S1, S2 = ax.Axis("A", 7), ax.Axis("B", 7)
    x, xn = t_((S1, S2))
    x[...] = x.rename(A="B", B="A") + 1
    assert_close(x, xn.T + 1)
    y, yn = t_((S1, S2))
    y[...] = y.transpose("B A") + 1
    assert_close(y, yn + 1)


@pytest.mark.parametrize("shift", [1, -1, 3, -3])
def test_shifted_slices(shift):
    L = ax.Axis("L", 10)
    x, xn = t_((L,))
    expected = xn.copy()
    if shift > 0:
        expected[shift:] = xn[:-shift] * 2
        x[{"L": slice(shift, None)}] = x[{"L": slice(None, -shift)}] * 2
    else:
        expected[:shift] = xn[-shift:] * 2
        x[{"L": slice(None, shift)}] = x[{"L": slice(-shift, None)}] * 2
    assert_close(x, expected)


def test_reduction_into_a_view_of_its_own_input():
    x, xn = t_((N, C))
    expected = xn.copy()
    expected[:, 0] = xn.sum(1)
    x[{"C": 0}] = x.sum("C")
    assert_close(x, expected)


def test_reversed_view_onto_itself():
    L = ax.Axis("L", 9)
    x, xn = t_((L,))
    x[...] = x[{"L": slice(None, None, -1)}] - x
    assert_close(x, xn[::-1] - xn)


def test_in_place_update_of_the_identical_view():
    """x += f(x) reads each element where it writes it: done in place, and correct."""
    x, xn = t_((N, C, H))
    x += ax.exp(x) * 2
    assert_close(x, xn + np.exp(xn) * 2)


def test_overlap_through_a_separately_wrapped_array():
    """Two tensors wrapping the same numpy memory are recognized as overlapping."""
    arr = rng.standard_normal(12)
    a = ax.tensor(arr, "L")
    b = ax.tensor(arr[::-1], "L")
    expected = arr[::-1] + 1
    a[...] = b + 1
    assert_close(a, expected)


# --- the kernel cache ------------------------------------------------------------------------


def test_one_compile_serves_every_size():
    """Shapes and strides are run-time arguments: new sizes reuse the compiled kernel."""
    before = dict(kcache.STATS)
    for n in (10, 1000, 37):
        L = ax.Axis("L", n)
        x = ax.tensor(np.linspace(-1, 1, n), (L,))
        assert_close(ax.tanh(x) * 3 - x, np.tanh(x.numpy()) * 3 - x.numpy())
    compiled = kcache.STATS["compiled"] - before["compiled"]
    loaded = kcache.STATS["disk_hits"] - before["disk_hits"]
    assert compiled + loaded <= 1


def test_parallel_and_serial_variants_agree(parallel_kernels):
    x, xn = t_((ax.Axis("L", 5000),))
    with ax.set_options(serial_threshold=0):
        par = (ax.sigmoid(x) * x).sum().numpy()
        m = x.argmax("L").numpy()
    with ax.set_options(serial_threshold=10**9):
        ser = (ax.sigmoid(x) * x).sum().numpy()
    assert_close(par, ser)
    assert int(m) == int(np.argmax(xn))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8"])
def test_argmax_and_argmin_in_two_passes_keep_numpys_first_index(dtype):
    """A row's argmax/argmin runs in two vectorized passes (``cpu._arg_two_pass``: the
    extreme, then the first index holding it): numpy's first index on ties, the first NaN
    when there is one, -0.0 and 0.0 tied, a row of -inf at 0; serial and on threads; a
    computed child too."""
    rng = np.random.default_rng(5)
    if np.dtype(dtype).kind == "f":
        pool = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5], dtype)
    else:
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, 1, 2], dtype)
    rows = rng.choice(pool, (40, 33))
    rows[0] = pool[5] if np.dtype(dtype).kind == "f" else pool[0]  # all -inf (or all min)
    x = ax.tensor(rows, "N K")
    ops = [("argmax", "K", lambda a: a.argmax(-1)), ("argmin", "K", lambda a: a.argmin(-1))]
    with ax.set_options(tiered=False):
        for op, name, want in ops:
            np.testing.assert_array_equal(getattr(x, op)(name).numpy(), want(rows))
            big = np.tile(rows.reshape(-1), 40)  # 52,800 elements: chunks on threads
            t = ax.tensor(big, "L")
            with ax.set_options(serial_threshold=0):
                assert int(getattr(t, op)("L").numpy()) == int(getattr(big, op)())
        if np.dtype(dtype).kind == "f":
            np.testing.assert_array_equal((x * 2).argmin("K").numpy(), (rows * 2).argmin(-1))
    from axesarray.engine import executor
    from axesarray.engine.dispatch import source_for

    plan, _ = executor.schedule_for(x.argmax("K").node, None)
    source, _ = source_for(plan.steps[0], plan.device, "serial")
    assert "ai = min(ai, i1 if" in source and "break" not in source


def test_concurrent_evaluation_from_threads():
    """Several threads building and evaluating expressions at once all get right answers."""
    arrays = [rng.standard_normal((40, 30)) for _ in range(6)]
    errors = []

    def work(k):
        try:
            x = ax.tensor(arrays[k], "A B")
            for _ in range(5):
                e = (ax.tanh(x) * k + x.sum("B")).max("A")
                expected = (np.tanh(arrays[k]) * k + arrays[k].sum(1, keepdims=True)).max(0)
                assert_close(e, expected)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_debug_levels_print_schedule_and_source(capsys, monkeypatch):
    """Level 3 prints the plan and each kernel's source as it is compiled: the kernels'
    path, also in the suite's tiered pass (where the tier would answer without one)."""
    monkeypatch.setenv("AXESARRAY_DEBUG", "3")
    x, _ = t_((ax.Axis("Q", 17),))
    with ax.set_options(tiered=False):
        (ax.log1p(ax.abs(x)) * 5.5 - 2).eval()
    err = capsys.readouterr().err
    assert "[axesarray] Plan:" in err and "def kernel(" in err


# --- accuracy ------------------------------------------------------------------------------


def test_float32_sum_is_at_least_as_accurate_as_numpy():
    """Sums of float32 accumulate in float64: closer to the exact sum than numpy's."""
    x = (rng.random(2_000_003) * 1000).astype(np.float32)
    exact = float(np.sum(x.astype(np.float64)))
    ours = float(ax.tensor(x, "L").sum())
    theirs = float(np.sum(x))
    assert abs(ours - exact) <= abs(theirs - exact)
    L2 = ax.Axis("L", 1000)
    y = x[: 1000 * 2000].reshape(2000, 1000)
    exact_rows = y.astype(np.float64).sum(0)
    ours_rows = ax.tensor(y, ("R", L2)).sum("R").numpy().astype(np.float64)
    theirs_rows = y.sum(0).astype(np.float64)
    assert np.abs(ours_rows - exact_rows).max() <= np.abs(theirs_rows - exact_rows).max()


def test_mixing_devices_is_an_error():
    pytest.importorskip("numba")
    if not ax.Device("cuda").available():
        pytest.skip("no CUDA and no simulator")
    a = ax.zeros((N,)).to("cuda")
    b = ax.zeros((N,))
    with pytest.raises(ValueError, match=r"evaluate: the operands are on different devices"):
        (a + b).eval()


# --- variants, patterns and memory behaviour -----------------------------------------------


def test_streaming_variant_writes_what_the_parallel_one_does(monkeypatch):
    """Big contiguous outputs use streaming stores; misaligned starts, tails and float16
    outputs must come out exactly as with plain stores."""
    from axesarray.engine import dispatch

    monkeypatch.setattr(dispatch, "STREAM_MIN_BYTES", 1 << 12)
    n = 70_001
    xn = rng.integers(-40, 40, n).astype(np.float32)  # x * 3 + 1 is exact, FMA or not
    x = ax.tensor(xn.copy(), "L")
    for dtype in ("float32", "float16", "int8", "float64"):
        out_np = np.zeros(n + 1, dtype)[1:]  # starts one element past an aligned address
        out = ax.tensor(out_np, "L")
        out[...] = (x * 3 + 1).astype(dtype)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(out_np, (xn * 3 + 1).astype(dtype))
    R, S = ax.Axis("R", 3), ax.Axis("S", 40_000)
    y, yn = t_((R, S), "float32")
    o = ax.zeros((R, S), "float32")
    o[...] = ax.sigmoid(y)
    assert_close(o, (1 / (1 + np.exp(-yn.astype(np.float64)))).astype(np.float32))


def test_written_out_sigmoid_runs_as_sigmoid():
    """1 / (1 + exp(-x)) is planned as the library's sigmoid; other constants are not."""
    x, xn = t_((ax.Axis("L", 50),), "float32")
    for e, ref in [
        (1 / (1 + ax.exp(-x)), 1 / (1 + np.exp(-xn))),
        (1 / (ax.exp(-x) + 1), 1 / (1 + np.exp(-xn))),
        (2 / (1 + ax.exp(-x)), 2 / (1 + np.exp(-xn))),
        (1 / (3 + ax.exp(-x)), 1 / (3 + np.exp(-xn))),
    ]:
        assert_close(e, ref)


def test_results_are_freed_without_the_cycle_collector():
    """Leaves hold no reference to themselves: a dropped result frees its storage at once
    (with gc disabled), so loops over big arrays do not accumulate them."""
    import gc
    import weakref

    x, _ = t_((ax.Axis("L", 1000),))
    gc.disable()
    try:
        y = (x * 2).eval()
        ref = weakref.ref(y._node)
        del y
        assert ref() is None
    finally:
        gc.enable()


def test_layout_follows_astype_and_reductions():
    x, _ = t_((N, C, H, W), "float32")
    p = x.to_layout("NCHW4")
    assert str(p.astype("int8").eval().layout) == "NCHW4"
    assert str((p * 2).sum("H").eval().layout) == "NCW4"
    assert p.sum("C").eval().layout.blocks == ()


def test_big_plain_copies_use_the_repack_kernels(monkeypatch):
    from axesarray.kernels.repack import run_cpu as repack

    calls = []
    real = repack.try_repack

    def spy(dst, src):
        calls.append(src.shape)
        return real(dst, src)

    monkeypatch.setattr(repack, "try_repack", spy)
    big, bign = t_((ax.Axis("A", 400), ax.Axis("B", 200)), "float32")  # 320 KB
    out = ax.zeros((ax.Axis("B", 200), ax.Axis("A", 400)), "float32")
    out[...] = big
    assert calls == [(200, 400)]
    assert_close(out, bign.T)
    small, _ = t_((ax.Axis("A", 3), ax.Axis("B", 2)))
    ax.zeros((ax.Axis("B", 2), ax.Axis("A", 3)))[...] = small
    assert len(calls) == 1  # small copies stay on the fused copy kernel


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "any", "all", "mean"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int16", "bool"])
def test_rows_first_reductions(op, dtype):
    """Reducing over an outer axis (``x.sum("N")`` of a row-major ``N F``) runs the
    rows-first template: blocks of 512 outputs, rows unrolled by 4. Row counts and
    output lengths that are not multiples of those, several reduce axes, an outer output
    axis and an epilogue reading another input all match numpy."""
    from axesarray.kernels.cpu import _rows_first

    rng = np.random.default_rng(11)
    # R=7, S=3 reduced; F=1030 kept. Products stay in float16's range at every step (numpy
    # multiplies float16 in float16; the kernels accumulate in float64).
    scale, shift = (1.0, 0.5) if op == "prod" else (3.0, 0.0)
    a = (rng.random((7, 3, 1030)) * scale + shift).astype(dtype)
    b = rng.random(1030).astype("float32")
    x = ax.tensor(a, "R S F")
    got = getattr(x, op)(("R", "S"))
    expected = getattr(a, op)(axis=(0, 1))
    assert_close(got, expected, scale=21.0)
    y = ax.tensor(np.ascontiguousarray(a.transpose(1, 0, 2)), "S R F")
    assert_close(
        getattr(y, op)("R"),
        getattr(a, op)(axis=0).transpose() if False else getattr(a.transpose(1, 0, 2), op)(axis=1),
        scale=7.0,
    )
    if dtype == "float32" and op == "sum":
        e = x.sum(("R", "S")) * ax.tensor(b, "F") + 1
        assert_close(e, a.sum((0, 1)) * b + 1, scale=21.0)
        from axesarray.engine import executor
        from axesarray.engine.binder import lowered

        plan, _ = executor.schedule_for(x.sum(("R", "S"))._node, None)
        assert _rows_first(lowered(plan.steps[0]))


def test_a_masked_reduction_over_an_outer_axis_runs_rows_first():
    """A masked mean over ``T`` of ``x`` over ``B T D`` (the mask ``pos < lens`` over ``B T``
    reads ``T`` contiguously but one value per row of ``D``) runs rows-first: the inner
    loop along ``D``, in memory order (the mask made ``T`` the inner loop, one cache line
    per element of ``x``: 3.5x slower at 1.3e5 elements); an operand varying along both,
    ``T`` contiguous, keeps ``T`` inner. Values as numpy's."""
    from axesarray.engine import executor
    from axesarray.engine.binder import lowered
    from axesarray.kernels.cpu import _rows_first

    rng = np.random.default_rng(63)
    b, t, d = 3, 37, 70
    xn = rng.standard_normal((b, t, d))
    lens_n = np.array([37, 5, 0])
    x = ax.tensor(xn, "B T D")
    pos = ax.tensor(np.arange(t), "T")
    lens = ax.tensor(lens_n, "B")
    e = ax.where(pos < lens, x, 0.0).sum("T")
    want = np.where(np.arange(t)[None, :, None] < lens_n[:, None, None], xn, 0.0).sum(1)
    assert_close(e, want)
    plan, _ = executor.schedule_for(e._node, None)
    assert _rows_first(lowered(plan.steps[0]))
    tn = ax.tensor(np.ascontiguousarray(xn.transpose(0, 2, 1)), "B D T")  # T contiguous
    e2 = ax.where(pos < lens, tn, 0.0).sum("T")
    assert_close(e2, want)
    plan2, _ = executor.schedule_for(e2._node, None)
    assert not _rows_first(lowered(plan2.steps[0]))


@pytest.mark.parametrize("threads", [False, True])
@pytest.mark.parametrize("w", [5, 2100, 4300])  # rows shorter than a stage, and crossing it
def test_a_strided_output_is_computed_in_stages_then_stored(w, threads, request):
    """A map kernel writing its inner loop with a stride (int8 ``NCHW4``: every 4th byte;
    a strided destination view, one merged loop) computes each row into a buffer first, a
    contiguous loop that vectorizes, then stores it (``cpu._staged``): values as numpy's,
    serial and on threads; a plain strided copy and a contiguous output are not staged."""
    from axesarray.engine import executor
    from axesarray.engine.binder import lowered
    from axesarray.kernels.cpu import _staged

    if threads:
        request.getfixturevalue("parallel_kernels")
    rng = np.random.default_rng(64)
    n, c, h = 2, 8, 3
    xn = (rng.standard_normal((n, c, h, w)) * 60).astype("float32")
    x = ax.tensor(xn, "N C H W")
    axes = ax.Axes([ax.Axis("N", n), ax.Axis("C", c), ax.Axis("H", h), ax.Axis("W", w)])
    want = np.clip(np.round(xn / 0.5), -128, 127).astype(np.int8)
    # the kernels' path, also in the suite's tiered pass (the tier would answer alone)
    with ax.set_options(serial_threshold=0 if threads else 1 << 30, tiered=False):
        out = ax.empty_like_layout(axes, "int8", ax.Layout.parse("NCHW4"))
        e = ax.clip(ax.round(x / 0.5), -128, 127).astype("int8")
        out[...] = e
        np.testing.assert_array_equal(out.numpy(), want)
        plan, _ = executor.schedule_for(e._node, out._node)
        assert _staged(lowered(plan.steps[0]))
        dst_n = np.zeros((n, c, h, 2 * w), "float32")
        dst = ax.tensor(dst_n, "N C H W2")[{"W2": slice(None, None, 2)}]
        e2 = ax.exp(x * 0.01).rename(W="W2")  # one loop of stride 2 (dims merged)
        dst[...] = e2
        assert_close(dst_n[..., ::2], np.exp(xn * np.float32(0.01)))
        assert not dst_n[..., 1::2].any()
        plan2, _ = executor.schedule_for(e2._node, dst._node)
        assert plan2.steps[0].nest.rank == 1 and _staged(lowered(plan2.steps[0]))
        for p in (plan, plan2):  # the variant that ran was compiled (plans are shared)
            assert ("cpu", "parallel" if threads else "serial") in p.steps[0].compiled.kernels
    copy = ax.empty_like_layout(axes, "float32", ax.Layout.parse("NCHW4"))
    copy[...] = x
    np.testing.assert_array_equal(copy.numpy(), xn)
    plan3, _ = executor.schedule_for(x._node, copy._node)
    assert not _staged(lowered(plan3.steps[0]))
    plain = ax.tensor(np.zeros((n, c, h, w), "float32"), "N C H W")
    plan4, _ = executor.schedule_for((x * 2)._node, plain._node)
    assert not _staged(lowered(plan4.steps[0]))


@given(st.data())
def test_computed_values_into_drawn_destinations(data):
    """A computed value assigned into drawn destinations (strided, flipped, transposed
    views of a padded parent: the staged kernels where the inner stride is not 1) gives
    numpy's values and leaves the rest of the parent alone."""
    a = data.draw(axes(min_rank=1, max_rank=3, max_len=6))
    dtype = data.draw(st.sampled_from(["float32", "int8", "float64", "uint16"]))
    src = data.draw(sources(a.shape))
    dst, parent = make_array(src, lambda n: np.zeros(n, dtype))
    where, _ = make_array(src, lambda n: np.arange(n))  # the parent's elements in view
    values, _ = make_array(src, random_values("float32", 3, False))
    x = ax.tensor(np.ascontiguousarray(values), a)
    out = ax.tensor(dst, a)
    out[...] = (ax.round(x * 8) + 1).astype(dtype)
    want = (np.round(values * np.float32(8)) + 1).astype(dtype)
    np.testing.assert_array_equal(dst, want)
    outside = np.ones(parent.size, bool)
    outside[where.reshape(-1)] = False
    assert not parent.reshape(-1)[outside].any()
