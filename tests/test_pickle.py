"""Tensors pickle and deep-copy: names, layout, values, kinds; views keep sharing their
storage with what they were pickled with; lazy graph tensors and compiled functions are
refused at dumps; a real multiprocessing pool passes tensors both ways."""

from __future__ import annotations

import copy
import multiprocessing
import pickle

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given, settings

import axesarray as ax
from axesarray.testing.strategies import tensors

rng = np.random.default_rng(19)
ROUND_TRIPS = {
    "pickle": lambda t: pickle.loads(pickle.dumps(t)),
    "deepcopy": copy.deepcopy,
}


def _plain():
    return ax.tensor(rng.standard_normal((2, 3, 4)), "N C H")


def _cases():
    x = _plain()
    img = ax.tensor(rng.standard_normal((2, 5, 3, 2)).astype(np.float32), "N C H W")
    return {
        "plain": x,
        "int": ax.tensor(np.arange(6, dtype=np.int16).reshape(2, 3), "A B"),
        "transposed": x.transpose("H N C"),
        "strided slice": x.isel(C=slice(None, None, -2), H=1),
        "broadcast": x.isel(H=0).broadcast_to((ax.Axis("K", 3), *x.isel(H=0).axes)),
        "blocked (padded C=5)": img.to_layout("NCHW4"),
        "blocked sliced": img.to_layout("NCHW4").isel(C=slice(1, 4)),
        "CHWN4": img.to_layout("CHWN4"),
        "scalar": ax.tensor(np.float64(2.5), ""),
        "empty": ax.tensor(np.zeros((0, 3)), "N C"),
    }


def _check_same(got, want):
    assert type(got) is type(want)
    assert got.axes == want.axes and got.dtype == want.dtype
    assert str(got.layout) == str(want.layout)
    assert got.is_lvalue
    assert got.kind == want.kind
    assert_close(got, want.numpy())


@pytest.mark.parametrize("how", sorted(ROUND_TRIPS))
def test_tensors_round_trip_with_names_layout_and_values(how):
    with ax.set_options(engine="numpy"):
        for name, t in _cases().items():
            got = ROUND_TRIPS[how](t)
            _check_same(got, t)
            assert not np.shares_memory(got.numpy(), t.numpy()), name
            if t.is_lvalue:  # the same view of the same storage (blocks, padding) comes back
                assert got._node.view == t._node.view, name
                assert got._node.data.shape == t._node.data.shape, name


def test_any_tensor_round_trips():
    """Views of any chain and standard layouts (hypothesis), under the numpy engine while
    drawing too (to_layout copies)."""

    @settings(max_examples=25)
    @given(tensors())
    def round_trips(case):
        t, arr = case
        for how in ROUND_TRIPS.values():
            got = how(t)
            assert got.axes == t.axes and str(got.layout) == str(t.layout)
            assert_close(got, arr)

    with ax.set_options(engine="numpy"):
        round_trips()


def test_views_pickled_together_share_storage_again():
    with ax.set_options(engine="numpy"):
        x = _plain()
        v = x.isel(N=1).transpose("H C")
        y, w = pickle.loads(pickle.dumps([x, v]))
        y[{"N": 1, "C": 0, "H": 2}] = 42.0
        assert float(w[{"C": 0, "H": 2}].item()) == 42.0  # w still reads y's storage
        assert float(v[{"C": 0, "H": 2}].item()) != 42.0  # the originals are untouched


@pytest.mark.parametrize("how", sorted(ROUND_TRIPS))
def test_graph_tensors_keep_their_kind_name_and_gradient(how):
    with ax.set_options(engine="numpy"):
        w = ax.variable(rng.standard_normal((3, 4)), "A B", name="w")
        c = ax.constant(np.arange(4.0), "B", name="c")
        p = ax.persistent_tensor(np.ones(3), "A", name="p")
        (w * c).sum().backward()
        w2, c2, p2, view = ROUND_TRIPS[how]([w, c, p, w.isel(A=1)])
        for got, want in ((w2, w), (c2, c), (p2, p)):
            _check_same(got, want)
            assert got._node.tag.name == want._node.tag.name
        assert w2.trainable and view.trainable and view.kind == "variable"
        assert_close(w2.grad, np.broadcast_to(np.arange(4.0), (3, 4)))
        assert [v is w2 for v in ax.variables((w2 * 2).sum())] == [True]
        with pytest.raises(TypeError, match="the destination is the constant 'c'"):
            c2[...] = 0.0
        # the copy trains on its own; the original does not move
        before = w.numpy().copy()
        w2.grad = None
        opt = ax.optim.SGD([w2], lr=0.5)
        ((w2 * c2).sum() + view.sum()).backward()
        opt.step()
        assert_close(w, before)
        want = before - 0.5 * (np.arange(4.0) + np.array([[0.0], [1.0], [0.0]]))
        assert_close(w2, want)


def test_a_placeholder_round_trips_unbound_and_binds_in_a_function():
    x = ax.placeholder((ax.Axis("N", 3),), "float64", name="x")
    x2 = pickle.loads(pickle.dumps(x))
    assert x2.kind == "placeholder" and x2.axes == x.axes and x2._node.tag.name == "x"
    with pytest.raises(ValueError, match="placeholder 'x' has no value"):
        x2.numpy()
    f = ax.function(x2 * 2.0, inputs=[x2])
    assert_close(f(np.arange(3.0)), np.arange(3.0) * 2)


def test_a_lazy_tensor_pickles_as_its_value():
    with ax.set_options(engine="numpy"):
        x = _plain()
        e = (x * 2).sum("C")
        got = pickle.loads(pickle.dumps(e))
        assert got.is_lvalue and got.axes == e.axes
        assert_close(got, x.numpy().sum(1) * 2)
        packed = ax.tensor(rng.standard_normal((1, 5, 2, 2)), "N C H W").to_layout("NCHW4")
        got = copy.deepcopy(packed * 2.0)
        assert got.is_lvalue and str(got.layout) == "NCHW4"
        assert_close(got, packed.numpy() * 2)


@pytest.mark.parametrize("how", sorted(ROUND_TRIPS))
def test_a_lazy_graph_tensor_is_refused_at_dumps(how):
    """A lazy tensor reading a variable (or a placeholder...) would lose its graph as a
    value (torch refuses a non-leaf tensor that requires grad the same way); following
    the hint pickles the value."""
    w = ax.variable(np.arange(3.0), "K", name="w")
    x = ax.placeholder((ax.Axis("K", 3),), "float64", name="x")
    msg = r"pickle: a lazy tensor reading variable 'w' is not pickled \(K=3\)\. Pickle "
    with pytest.raises(TypeError, match=msg):
        ROUND_TRIPS[how](w * 2.0)
    with pytest.raises(TypeError, match=r"reading variable 'w', placeholder 'x' is not pickled"):
        ROUND_TRIPS[how](w * x)
    got = ROUND_TRIPS[how]((w * 2.0).eval())  # the hint
    assert_close(got, np.arange(3.0) * 2)


def test_a_function_is_refused_at_dumps_and_rebuilt_from_its_tensors():
    w = ax.variable(np.arange(3.0), "K", name="w")
    x = ax.placeholder((ax.Axis("K", 3),), "float64", name="x")
    f = ax.function((w * x).sum(), inputs=[x])
    msg = r"function: a compiled function is not pickled \(inputs: placeholder 'x'\)\. "
    with pytest.raises(TypeError, match=msg):
        pickle.dumps(f)
    with pytest.raises(TypeError, match=msg):
        copy.deepcopy(f)
    w2, x2 = pickle.loads(pickle.dumps([w, x]))  # the hint: the tensors, then ax.function
    f2 = ax.function((w2 * x2).sum(), inputs=[x2])
    assert_close(f2(np.ones(3)), f(np.ones(3)).numpy())


def test_chunked_tensors_round_trip_lazily():
    pytest.importorskip("dask")
    with ax.set_options(engine="numpy"):
        x = _plain().chunk({"N": 1})
        packed = ax.tensor(rng.standard_normal((2, 5, 2, 2)), "N C H W").chunk({"N": 1})
        packed = packed.to_layout("NCHW4")
        for how in ROUND_TRIPS.values():
            for t in (x, x.transpose("C H N"), (x * 2).sum("H"), packed):
                got = how(t)
                assert got.chunks == t.chunks and str(got.layout) == str(t.layout)
                assert got.axes == t.axes
                assert_close(got.compute(), t.compute().numpy())


def test_a_multiprocessing_pool_passes_tensors_both_ways():
    """Spawned workers (a fresh interpreter: nothing inherited) get tensors of every kind
    and send tensors back; a tensor that did not unpickle hung the pool forever."""
    import pickle_worker

    x = _plain()
    w = ax.variable(np.arange(4.0), "B", name="w")
    packed = ax.tensor(rng.standard_normal((1, 5, 2, 2)), "N C H W").to_layout("NCHW4")
    items = [x, x.transpose("C N H"), w, packed]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.map_async(pickle_worker.describe, items).get(timeout=240)
    for t, (names, kind, layout, total, back, doubled) in zip(items, results, strict=True):
        assert names == t.names and kind == t.kind
        assert layout == (None if t.layout is None else str(t.layout))
        assert total == pytest.approx(float(t.numpy().sum()))
        _check_same(back, t)
        assert_close(doubled, t.numpy() * 2)


def test_expression_nodes_are_refused_at_dumps():
    """A node's key belongs to one process: refused when written, never unreadable."""
    x = _plain()
    with pytest.raises(TypeError, match=r"pickle: a map node is not pickled \(<Map float64"):
        pickle.dumps((x * 2)._node)
    leaf = pickle.loads(pickle.dumps(x._node))  # storage leaves are, with a key of this process
    assert leaf.key == x._node.key


def test_device_tensors_round_trip_on_their_device():
    """Device storage goes as a host copy and is uploaded again when loaded (under numba's
    CUDA simulator without a GPU); tensors pickled together still share it."""
    x = _plain()
    d = x.to("cuda")
    for how in ROUND_TRIPS.values():
        got, view = how([d, d.transpose("H C N")])
        assert got.device == d.device and got.axes == d.axes
        assert view._node.data is got._node.data
        assert_close(got.to("cpu"), x.numpy())
        assert_close(view.to("cpu"), x.numpy().transpose(2, 1, 0))
