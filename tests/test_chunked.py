"""Chunked tensors (dask.array): the same names and results as in memory.

Broad property tests run each chunk with the reference engine (their subject is the
lowering to dask, not the kernels); a few fused-engine tests check that one assignment is
one blockwise layer whose tasks each run one fused kernel.
"""

from __future__ import annotations

import gc
import weakref

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import axesarray as ax
from tests.conftest import assert_close

N, C, H = ax.Axis("N", 6), ax.Axis("C", 5), ax.Axis("H", 4)


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="threads"):
        yield


@st.composite
def chunking(draw, axes):
    """name -> chunk sizes (tuples, including length-1 chunks and uneven last chunks)."""
    out = {}
    for a in axes:
        sizes, left = [], a.length
        while left:
            k = draw(st.integers(1, left))
            sizes.append(k)
            left -= k
        out[a.name] = tuple(sizes) or (0,)
    return out


def _data(seed, shape, dtype="float64"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@given(ch=chunking((N, C, H)), seed=st.integers(0, 3))
def test_elementwise_reductions_and_views_match_memory(ch, seed):
    x = ax.tensor(_data(seed, (6, 5, 4)), "N C H")
    b = ax.tensor(_data(seed + 1, (5,)), "C")
    with ax.set_options(engine="numpy"):
        c = x.chunk(ch)
        assert c.chunks == ch
        cases = [
            lambda t: ax.sigmoid(t * 2 + b),
            lambda t: (t - b).sum("N"),
            lambda t: t.max(("N", "H")),
            lambda t: (t * t).mean(),
            lambda t: t.argmax("C"),
            lambda t: t.argmin("N"),
            lambda t: t.transpose("H ...").isel(C=slice(4, 0, -2), N=1) + 1,
            lambda t: ax.where(t > 0, t, b),
            lambda t: t.astype("float32").prod("H"),
            lambda t: ax.pad(t, H=(1, 2), value=3.0),
            lambda t: ax.concat([t, x.isel(N=slice(0, 2))], "N"),
            lambda t: t.flatten(("C", "H"), "S"),
            lambda t: (t > 0).any("C") & (t < 5).all("C"),
        ]
        for k, f in enumerate(cases):
            assert_close(f(c).numpy(), f(x).numpy(), err_msg=f"case {k}")
            assert f(c).names == f(x).names


@given(ch=chunking((N, C)), seed=st.integers(0, 3))
def test_dot_and_broadcasting_by_name(ch, seed):
    a = ax.tensor(_data(seed, (6, 5)), "N C")
    w = ax.tensor(_data(seed + 1, (5, 3)), "C K")
    with ax.set_options(engine="numpy"):
        c = a.chunk(ch)
        assert_close(ax.dot(c, w, "C").numpy(), ax.dot(a, w, "C").numpy())
        assert_close(
            ax.dot(c, c.rename(N="M"), "C").numpy(), ax.dot(a, a.rename(N="M"), "C").numpy()
        )
        k = ax.tensor(_data(seed + 2, (3,)), "K")
        assert_close((c + k).numpy(), (a + k).numpy())  # a new axis from an in-memory operand


def test_chunks_to_dask_compute():
    x = ax.tensor(np.arange(30.0).reshape(6, 5), "N C")
    c = x.chunk({"N": 4})
    assert c.chunks == {"N": (4, 2), "C": (5,)}
    assert x.chunks is None
    arr = (c * 2).to_dask()
    assert isinstance(arr, da.Array) and arr.chunks == ((4, 2), (5,))
    m = (c * 2).compute()
    assert m.is_lvalue and m.names == ("N", "C")
    assert_close(m, x.numpy() * 2)
    t = ax.from_dask(da.from_array(x.numpy(), chunks=(1, 5)).T, "C N")
    assert t.chunks == {"C": (5,), "N": (1,) * 6}
    assert_close(t.sum("N"), x.numpy().sum(0))
    assert (c + 1).eval().chunks == c.chunks  # eval of a chunked expression stays lazy
    out = ax.zeros(x.axes)
    out[...] = c + out  # assignment into memory reads the destination before writing
    assert_close(out, x.numpy())


def test_mixed_chunkings_are_rechunked_and_explained():
    x = ax.tensor(np.ones((8, 6)), "N C")
    a, b = x.chunk({"N": 4}), x.chunk({"N": 2, "C": 3}).rename(N="N")
    with ax.set_options(engine="numpy"):
        e = a + b.isel(N=slice(None))
        assert_close(e, np.full((8, 6), 2.0))
        text = str(ax.explain(e))
    assert "rechunk: 0 tasks; operand 1 aligned along N: 4 x 2 -> 2 x 4" in text, text


def test_one_blockwise_layer_of_fused_kernels():
    """sigmoid(a * 2 + b) over 8 chunks is 8 kernel tasks plus dask's input tasks, and a
    reduction's chunk step is the same fused kernel with the sum."""
    rng = np.random.default_rng(0)
    a = ax.tensor(rng.random((8, 16), "float32"), "N C")
    b = ax.tensor(rng.random(16, "float32"), "C")
    c = a.chunk({"N": 1})
    e = ax.sigmoid(c * 2 + b)
    plan = ax.explain(e)
    assert [(s.kind, s.tasks) for s in plan.steps] == [("blockwise", 8)]
    assert "elementwise kernel" in plan.steps[0].kernels[0]
    graph = dict(e.to_dask().__dask_graph__())
    ours = [k for k in graph if isinstance(k, tuple) and k[0].startswith("axesarray-region")]
    assert len(ours) == 8
    assert_close(e, 1 / (1 + np.exp(-(a.numpy() * 2 + b.numpy()))))
    s = (c * 2 + b).sum("N")
    steps = ax.explain(s).steps
    # cheap ops reduced along an outer dim: one fused reduction kernel per chunk
    assert steps[0].kind == "blockwise" and "reduction kernel" in steps[0].kernels[0]
    assert len(steps[0].kernels) == 1
    # the partials of the 8 chunks along N: one combine task, no tree
    assert (steps[1].kind, steps[1].tasks) == ("reduction", 1)
    assert_close(s, (a.numpy() * 2 + b.numpy()).sum(0))


def test_chunk_tasks_plan_once_per_block_signature_and_run_serial(monkeypatch):
    """Each block signature (shapes, strides, dtypes) is planned once: later chunks bind
    their blocks to that plan (no region rebuild, no plan lookup), and a layer of several
    chunks runs every kernel's serial variant (dask already runs one task per core)."""
    from axesarray.engine import executor, runner

    kinds = []
    real = runner.kernel_for

    def spy(step, device, kind):
        kinds.append(kind)
        return real(step, device, kind)

    monkeypatch.setattr(runner, "kernel_for", spy)
    x = np.random.default_rng(2).random((26, 3), "float32")
    c = ax.tensor(x, "N C").chunk({"N": 3})  # 8 chunks of 3, one of 2: two signatures
    before = sum(executor.PLAN_STATS.values())
    with ax.set_options(serial_threshold=1):  # every kernel counts as big
        got = ((c * 3 - 0.5) * c).numpy()
        total = (c * 3 - 0.5).sum("C").numpy()
    assert sum(executor.PLAN_STATS.values()) - before == 4  # 2 signatures x 2 expressions
    assert kinds and set(kinds) == {"serial"}
    assert_close(got, (x * 3 - 0.5) * x)
    assert_close(total, (x * 3 - 0.5).sum(1))
    # a reduction over axes each chunk holds whole: one task per chunk, no tree
    plan = ax.explain((c * 3 - 0.5).sum("C"))
    assert [(s.kind, s.tasks) for s in plan.steps] == [("blockwise", 9)]
    assert "serial kernels: dask runs the chunks in parallel" in str(plan)
    assert "(one chunk)" in str(ax.explain(ax.tensor(x, "N C").chunk() * 3))


def test_fused_chunks_of_any_strides_broadcasts_and_reductions():
    """Blocks that are not C-contiguous (a transposed dask array), an in-memory operand
    broadcast along N, a scalar; elementwise, whole-row and partial reductions, argmax."""
    rng = np.random.default_rng(3)
    x = rng.random((6, 5), "float32")
    c = ax.from_dask(da.from_array(x.T.copy(), chunks=(5, 2)).T, "N C")
    b = ax.tensor(rng.random(5, "float32"), "C")
    bn = b.numpy()
    assert_close(c * b + 1, x * bn + 1)
    assert_close((c * b).sum("C"), (x * bn).sum(1))
    assert_close((c * b).sum("N"), (x * bn).sum(0))
    assert_close((c - b).argmax("C"), (x - bn).argmax(1))
    assert_close((c - b).argmax("N"), (x - bn).argmax(0))


def test_compute_writes_chunks_into_the_result_and_combines_partials_once(monkeypatch):
    """On a local scheduler, an elementwise result is computed into one array (each task's
    kernel writes its chunk there: no per-chunk result, no concatenation); the partials
    of a reduction along chunked axes are combined by one task, or by da.reduction's tree
    when too many."""
    from axesarray.engine.chunked import lowering
    from axesarray.engine.chunked import tasks as chunk_run

    calls = []
    real = chunk_run.IntoFunction.__call__

    def spy(self, *args):
        calls.append(args[-1])
        return real(self, *args)

    monkeypatch.setattr(chunk_run.IntoFunction, "__call__", spy)
    monkeypatch.setattr(lowering, "_INTO_MIN_BYTES", 1)  # small arrays are gathered
    rng = np.random.default_rng(4)
    x = rng.random((7, 6), "float32")
    c = ax.tensor(x, "N C").chunk({"N": 3, "C": 4})  # 3 x 2 chunks, uneven last ones
    b = ax.tensor(rng.random(6, "float32"), "C")
    for scheduler in ("threads", "sync"):
        calls.clear()
        with dask.config.set(scheduler=scheduler):
            assert_close((c * 2 - b).numpy(), x * 2 - b.numpy())
        assert len(calls) == 6 and len({id(t) for t in calls}) == 1
    with ax.set_options(engine="numpy"):  # the reference engine; a 0-d result
        calls.clear()
        assert_close((c * 2 - b).numpy(), x * 2 - b.numpy())
        assert_close(((c * 2 - b).sum() + 1).numpy(), (x * 2 - b.numpy()).sum() + 1)
        assert len(calls) == 7
    monkeypatch.setattr(lowering, "_INTO_MIN_BYTES", x.nbytes + 1)
    calls.clear()
    assert_close((c * 2 - b).numpy(), x * 2 - b.numpy())
    assert not calls
    # an expensive op: the region into scratch, then the reduction (two kernels per chunk)
    e = ax.exp(c * 2 - b)
    want = np.exp(x * 2 - b.numpy()).max(0)
    plan = ax.explain(e.max("N"))
    assert [(s.kind, s.tasks) for s in plan.steps] == [("blockwise", 6), ("reduction", 2)]
    assert "into this thread's scratch" in str(plan) and len(plan.steps[0].kernels) == 2
    # a cheap op reduced along a middle dim: two kernels too (a bool scratch here)
    x3 = rng.standard_normal((5, 4, 3)).astype("float32")
    c3 = ax.tensor(x3, "N C W").chunk({"N": 2})
    assert "scratch" in str(ax.explain((c3 > 0).any("C")))
    assert_close((c3 > 0).any("C"), (x3 > 0).any(1))
    assert_close(e.max("N"), want)
    monkeypatch.setattr(lowering, "_COMBINE_MAX_PARTS", 2)
    assert "in a tree" in str(ax.explain(e.max("N")))
    assert_close(e.max("N"), want)


def test_chunk_programs_keep_no_block_alive():
    """The plan kept per block signature holds no chunk's data once a compute is done."""
    made = []

    def block(block_info=None):
        arr = np.full((3, 4), 2.0, "float32")
        made.append(weakref.ref(arr))
        return arr

    src = da.map_blocks(block, chunks=((3, 3), (4,)), meta=np.empty((0, 0), "float32"))
    assert_close((ax.from_dask(src, "N C") * 5 + 1).numpy(), np.full((6, 4), 11.0, "float32"))
    gc.collect()
    assert made and all(r() is None for r in made)


def test_layouts_on_chunks_hold_whole_blocks():
    x = np.random.default_rng(1).random((2, 40, 3, 2), "float32")
    t = ax.tensor(x, "N C H W").chunk({"C": 20, "H": 1})
    y = t.to_layout("NCHW32")
    assert y.layout == ax.Layout.parse("NCHW32") and y.chunks["C"] == (32, 8)
    phys = y.physical
    assert phys.chunks[1] == (1, 1) and phys.chunks[4] == (32,)
    ref = ax.tensor(x, "N C H W").to_layout("NCHW32").physical
    np.testing.assert_array_equal(phys.compute(), ref)  # padding included (zero)
    assert_close(y.compute().physical, ref)
    assert_close((y * 2).sum("C"), (x * 2).sum(1))
    z = y.to_layout("CHWN4")
    assert_close(z, x)
    with pytest.raises(ax.AxesError, match=r"chunk: chunks of 'C' split the 32-element blocks"):
        y.chunk({"C": 20})


def test_chunk_errors():
    x = ax.zeros((N, C))
    with pytest.raises(ax.AxesError, match="chunk: the chunks of 'N' do not add up"):
        x.chunk({"N": (2, 2)})
    with pytest.raises(ax.AxesError, match="must be a positive integer"):
        x.chunk({"C": 0})
    with pytest.raises(ax.AxesError, match="chunk: .*'K'"):
        x.chunk({"K": 2})
    with pytest.raises(ax.AxesError, match="from_dask: the array has 2 dimensions but 1 axes"):
        ax.from_dask(da.zeros((2, 3)), "N")
    with pytest.raises(TypeError, match="from_dask: expected a dask array"):
        ax.from_dask(np.zeros(3), "N")
    arr = da.zeros(4)
    with pytest.raises(ax.AxesError, match="unknown chunk sizes"):
        ax.from_dask(arr[arr > 0], "N")
    c = x.chunk({"N": 2})
    with pytest.raises(TypeError, match="assign: the destination must be an l-tensor"):
        c[...] = 1.0
    with pytest.raises(ax.LayoutError, match="physical: a chunked tensor has a physical"):
        c.physical  # noqa: B018


def test_repr_does_not_compute():
    c = ax.ones((N, C)).chunk({"N": 2})
    text = repr(c + 1)
    assert "z0: chunked float64" in text and "not computed" in text
    assert "Chunked plan (dask)" in text
