"""Interop: numpy (``__array__``, ufuncs, ``__array_function__``), DLPack (numpy, torch when
installed), the CUDA array interface, xarray, ``len``/iteration, ``axesarray.testing``.

Round trips are checked for values, names and shared memory.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given
from hypothesis import strategies as st
from strategies import tensors

import axesarray as ax
from axesarray.tensors.interop import cuda_interface
from axesarray.testing import assert_named, assert_shares_memory

xr = pytest.importorskip("xarray")

rng = np.random.default_rng(5)


def raises(exc, text: str):
    return pytest.raises(exc, match="^" + re.escape(text))


@pytest.fixture
def reference():
    with ax.set_options(engine="numpy"):
        yield


@contextlib.contextmanager
def quiet():
    """numpy warns on empty means and ddof >= n; the engines do not warn (design.md)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def sample():
    arr = rng.standard_normal((2, 3, 4))
    return ax.tensor(arr, "N C H"), arr


# --- __array__ -------------------------------------------------------------------------------


def test_array_is_zero_copy_in_logical_order():
    x, arr = sample()
    t = x.transpose("H N C")
    out = np.asarray(t)
    assert out.strides == arr.transpose(2, 0, 1).strides
    assert_shares_memory(out, arr)
    copied = np.array(t, copy=True)
    assert not np.shares_memory(copied, arr)
    assert_close(copied, arr.transpose(2, 0, 1))
    assert np.asarray(t, dtype="float32").dtype == np.float32
    assert_shares_memory(np.asarray(t, copy=False), arr)


def test_array_copies_what_memory_cannot_describe():
    x, arr = sample()
    assert_close(np.asarray(x + 1), arr + 1)
    blocked = ax.tensor(np.ones((1, 3, 2, 2)), "N C H W").to_layout("NCHW4")
    assert_close(np.asarray(blocked), np.ones((1, 3, 2, 2)))
    with raises(ValueError, "__array__: cannot share memory: an r-tensor must be computed"):
        np.asarray(x + 1, copy=False)
    with raises(ValueError, "__array__: cannot share memory: a blocked layout has no strides"):
        np.asarray(blocked, copy=False)
    with raises(ValueError, "__array__: cannot share memory: the dtype differs (float64 -> "):
        np.asarray(x, dtype="float32", copy=False)


@given(tensors())
def test_array_of_any_view_or_layout_has_the_values(reference, case):
    t, arr = case
    assert_close(np.asarray(t), arr)


# --- DLPack with numpy -------------------------------------------------------------------------


def test_dlpack_to_numpy_shares_memory_with_strides():
    x, arr = sample()
    t = x.transpose("C H N")
    assert t.__dlpack_device__() == (1, 0)
    out = np.from_dlpack(t)
    assert out.strides == arr.transpose(1, 2, 0).strides
    assert_shares_memory(out, arr)
    view = np.from_dlpack(x.broadcast_to([ax.Axis("K", 2), *x.axes]))  # read-only, stride 0
    assert view.strides[0] == 0 and not view.flags.writeable
    assert_shares_memory(view, arr)


def test_dlpack_copies_negative_strides_and_r_tensors():
    x, arr = sample()
    rev = x.isel(C=slice(None, None, -1))
    out = np.from_dlpack(rev)
    assert min(out.strides) > 0 and not np.shares_memory(out, arr)
    assert_close(out, arr[:, ::-1])
    assert_close(np.from_dlpack(x * 2), arr * 2)
    with raises(BufferError, "__dlpack__: cannot share memory: negative strides"):
        rev.__dlpack__(copy=False)
    with raises(BufferError, "__dlpack__: cannot share memory: an r-tensor must be computed"):
        (x * 2).__dlpack__(copy=False)
    with raises(BufferError, "__dlpack__: cannot share memory: read-only memory (DLPack < 1.0)"):
        x.broadcast_to([ax.Axis("K", 2), *x.axes]).__dlpack__(copy=False)
    legacy = x.broadcast_to([ax.Axis("K", 2), *x.axes]).__dlpack__()  # a copy instead
    assert type(legacy).__name__ == "PyCapsule"


def test_from_dlpack_round_trip_keeps_names_and_memory():
    x, arr = sample()
    back = ax.from_dlpack(x.transpose("H C N"), "H C N")
    assert_named(back, "H C N")
    assert_shares_memory(back, arr)
    back[{"H": 0, "C": 0, "N": 0}] = 42.0
    assert arr[0, 0, 0] == 42.0
    assert_close(ax.from_dlpack(np.arange(3.0), "K"), np.arange(3.0))


def test_from_dlpack_errors():
    with raises(TypeError, "from_dlpack: the object does not implement DLPack (__dlpack__) (list)"):
        ax.from_dlpack([1, 2], "N")

    class OnDevice:
        def __dlpack__(self, **kwargs):
            raise AssertionError("not read")

        def __dlpack_device__(self):
            return (2, 0)

    with raises(BufferError, "from_dlpack: only host memory can be wrapped (DLPack device (2, 0))"):
        ax.from_dlpack(OnDevice(), "N")
    with raises(ax.AxesError, "tensor: the data has 1 dimensions but 2 axes were given"):
        ax.from_dlpack(np.zeros(3), "N C")


# --- torch (optional: skipped when torch is not installed) -------------------------------------


def test_torch_round_trip_shares_memory():
    torch = pytest.importorskip("torch")
    x, arr = sample()
    t = torch.from_dlpack(x.transpose("C N H"))
    assert t.shape == (3, 2, 4) and t.stride() == (4, 12, 1)
    assert t.data_ptr() == arr.ctypes.data
    t[0, 0, 0] = -7.0  # a write through torch is seen by the tensor
    assert x.numpy()[0, 0, 0] == -7.0
    assert torch.as_tensor(x).shape == (2, 3, 4)
    reversed_ = torch.from_dlpack(x.isel(H=slice(None, None, -1)))  # copied, no abort
    assert torch.equal(reversed_, torch.from_numpy(arr[:, :, ::-1].copy()))
    source = torch.arange(12.0).reshape(3, 4)
    back = ax.from_dlpack(source, "A B")
    assert_named(back, "A B")
    assert back.numpy().__array_interface__["data"][0] == source.data_ptr()
    assert torch.from_dlpack(back).data_ptr() == source.data_ptr()


# --- the CUDA array interface ------------------------------------------------------------------


def test_cuda_array_interface_is_absent_on_the_host():
    x, _ = sample()
    assert not hasattr(x, "__cuda_array_interface__")
    with raises(AttributeError, "__cuda_array_interface__: the tensor is in host memory"):
        x.__cuda_array_interface__  # noqa: B018
    with raises(AttributeError, "__cuda_array_interface__: an r-tensor has no memory"):
        (x + 1).__cuda_array_interface__  # noqa: B018


@pytest.mark.cuda
@pytest.mark.skipif(not ax.Device("cuda").available(), reason="no CUDA device and no simulator")
def test_cuda_array_interface_on_the_simulator_is_absent():
    d = ax.tensor(np.ones((2, 3)), "N C").to("cuda")
    if d.device.backend != "simulator":
        pytest.skip("a real GPU: covered by test_cuda_array_interface_on_a_gpu")
    assert d.__dlpack_device__() == (2, 0)
    with raises(AttributeError, "__cuda_array_interface__: numba's CUDA simulator has no"):
        d.__cuda_array_interface__  # noqa: B018
    with raises(BufferError, "__dlpack__: device tensors go out through DLPack only as CuPy"):
        d.__dlpack__()


@pytest.mark.gpu
def test_cuda_array_interface_on_a_gpu():
    if not ax.Device("cuda").available() or ax.Device("cuda").backend == "simulator":
        pytest.skip("needs a real CUDA GPU")
    arr = np.arange(12.0).reshape(3, 4)
    d = ax.tensor(arr, "N C").to("cuda").transpose("C N")
    cai = d.__cuda_array_interface__
    assert cai["shape"] == (4, 3) and cai["strides"] == (8, 32)
    from numba import cuda

    np.testing.assert_array_equal(cuda.as_cuda_array(d).copy_to_host(), arr.T)


def test_cuda_interface_arithmetic_matches_numpys_interface():
    """The dict is built from pointer, view and dtype: check it against numpy's own
    ``__array_interface__`` of the same strided view of host memory."""
    x, arr = sample()
    v = x.transpose("H N C").isel(C=slice(2, 0, -1))
    node = v._node
    cai = cuda_interface(node.data.ctypes.data, node.view, node.dtype, True)
    want = arr.transpose(2, 0, 1)[:, :, 2:0:-1].__array_interface__
    assert (cai["shape"], cai["strides"], cai["typestr"]) == (
        want["shape"],
        want["strides"],
        want["typestr"],
    )
    assert cai["data"] == (want["data"][0], True) and cai["version"] == 3


# --- xarray ------------------------------------------------------------------------------------


def test_to_xarray_keeps_names_and_memory():
    x, arr = sample()
    da = x.transpose("H N C").to_xarray(coords={"H": np.arange(4) * 10}, name="v")
    assert da.dims == ("H", "N", "C") and da.name == "v"
    assert list(da.coords["H"].values) == [0, 10, 20, 30]
    assert_shares_memory(da.data, arr)
    assert_close(da.values, arr.transpose(2, 0, 1))
    blocked = ax.tensor(np.arange(12.0).reshape(1, 3, 2, 2), "N C H W").to_layout("CHWN4")
    assert_close(blocked.to_xarray().values, np.arange(12.0).reshape(1, 3, 2, 2))
    assert_close((x * 2).to_xarray().values, arr * 2)


def test_from_xarray_round_trip_drops_coordinates():
    arr = rng.standard_normal((3, 2))
    da = xr.DataArray(arr, dims=("lat", "lon"), coords={"lat": [1, 2, 3]}, name="t")
    t = ax.from_xarray(da)
    assert_named(t, "lat lon")
    assert_shares_memory(t, arr)
    back = t.to_xarray(coords=da.coords, name=da.name)
    xr.testing.assert_identical(back, da)
    assert_close(ax.from_xarray(da.transpose()), arr.T)


def test_xarray_wraps_a_tensor_by_name():
    """``xr.DataArray(t)`` takes its dims from ``t.dims`` and reads the values through
    ``__array__`` (a tensor is not a positional duck array, so it is not kept wrapped)."""
    x, arr = sample()
    da = xr.DataArray(x.transpose("C H N"))
    assert da.dims == ("C", "H", "N") and type(da.data) is np.ndarray
    assert_shares_memory(da.data, arr)
    assert_close(da.isel(N=1).values, arr[1])


def test_chunked_tensors_go_to_and_from_xarray_lazily():
    pytest.importorskip("dask")
    arr = rng.standard_normal((4, 3))
    t = ax.tensor(arr, "N C").chunk({"N": 2})
    da = (t * 2).to_xarray()
    assert da.dims == ("N", "C") and da.chunks == ((2, 2), (3,))
    assert_close(da.values, arr * 2)
    back = ax.from_xarray(da)
    assert back.chunks == {"N": (2, 2), "C": (3,)}
    assert_close(back.sum("N"), (arr * 2).sum(0))


def test_from_xarray_errors():
    with raises(TypeError, "from_xarray: a Dataset holds several arrays (a). Pick one"):
        ax.from_xarray(xr.Dataset({"a": ("x", [1.0])}))
    with raises(ax.AxesError, "from_xarray: every dim must be a string to become an axis name"):
        ax.from_xarray(xr.DataArray([1.0], dims=(0,)))
    with raises(TypeError, "from_xarray: expected an xarray.DataArray (ndarray)."):
        ax.from_xarray(np.zeros(2))


# --- numpy ufuncs --------------------------------------------------------------------------------


def test_ufuncs_stay_lazy_and_named(reference):
    x, arr = sample()
    e = np.exp(x.transpose("H N C"))
    assert not e.is_lvalue and e.names == ("H", "N", "C")
    assert_close(e, np.exp(arr.transpose(2, 0, 1)))
    assert_close(np.add(x, 1.5, dtype="float32"), (arr + 1.5).astype("float32"))
    assert_close(np.maximum(2.0, x), np.maximum(2.0, arr))


def test_ufunc_out_is_written_and_returned(engine):
    x, arr = sample()
    out = ax.zeros(x.axes)
    assert np.multiply(x, 2, out=out) is out
    assert_close(out, arr * 2)
    plain = np.empty((2, 3, 4))
    assert np.sin(x, out=plain) is plain
    assert_close(plain, np.sin(arr))
    y = ax.tensor(arr.copy(), "N C H")
    np.negative(y.transpose("H C N"), out=y.transpose("H C N"))  # in place, aliased views
    assert_close(y, -arr)


def test_ufunc_methods_with_a_named_meaning(reference):
    x, arr = sample()
    assert_close(np.add.reduce(x, axis="C"), arr.sum(1))
    assert_close(np.maximum.reduce(x, axis=(0, -1)), arr.max((0, 2)))
    assert_close(np.multiply.reduce(x), arr.prod(0))
    assert_close(np.add.accumulate(x, axis="H"), np.add.accumulate(arr, axis=2))
    assert_close(
        np.logical_or.reduce(x > 0, axis=1, keepdims=True), (arr > 0).any(1, keepdims=True)
    )


def test_ufunc_errors():
    x, _ = sample()
    with raises(TypeError, "numpy.matmul: has no named meaning for tensors. Use ax.apply"):
        np.matmul(x, x)
    with raises(TypeError, "numpy.add.outer: has no named meaning for tensors"):
        np.add.outer(x, x)
    with raises(TypeError, "numpy.exp: unsupported argument(s): where. Leave them out."):
        np.exp(x, where=True)
    with raises(ax.AxesError, "numpy.exp: the out array does not have the result's shape"):
        np.exp(x, out=np.empty((4, 3, 2)))
    with raises(ax.AxesError, "add: a numpy array has no axis names (shape (2, 3, 4))."):
        np.add(x, np.ones((2, 3, 4)))


# --- numpy functions (__array_function__) -----------------------------------------------------

REDUCTIONS = ["sum", "prod", "mean", "max", "min", "std", "var", "any", "all", "amax", "amin"]


@given(tensors(dtype="float64", layouts=False), st.sampled_from(REDUCTIONS), st.data())
def test_numpy_reductions_take_positions_or_names(reference, case, fn, data):
    t, arr = case
    if t.ndim == 0:
        return
    positions = data.draw(
        st.lists(st.integers(-t.ndim, t.ndim - 1), unique_by=lambda p: p % t.ndim)
    )
    if fn in ("max", "min", "amax", "amin") and any(
        arr.shape[p] == 0 for p in positions or range(t.ndim)
    ):
        return
    by_name = data.draw(st.booleans())
    axis = tuple(t.names[p] if by_name else p for p in positions) or None
    keepdims = data.draw(st.booleans())
    kwargs = {"ddof": 1} if fn in ("std", "var") else {}
    with quiet():
        expected = getattr(np, fn)(arr, axis=tuple(positions) or None, keepdims=keepdims, **kwargs)
        result = getattr(np, fn)(t, axis=axis, keepdims=keepdims, **kwargs)
    assert isinstance(result, ax.Tensor)
    assert_close(result, expected, scale=1 + float(np.abs(arr).sum()))


def test_numpy_functions_with_a_named_meaning(reference):
    x, arr = sample()
    assert_close(np.argmax(x), np.argmax(arr))
    assert_close(np.argmin(x, axis=-1), np.argmin(arr, axis=-1))
    assert_close(np.cumsum(x, axis="C"), np.cumsum(arr, axis=1))
    assert_close(np.cumprod(x, 0, dtype="float32"), np.cumprod(arr, 0, dtype="float32"))
    assert_close(np.sort(x), np.sort(arr))
    assert_close(np.argsort(x, axis=0, kind="stable"), np.argsort(arr, axis=0, kind="stable"))
    assert_close(np.where(x > 0, x, 0.0), np.where(arr > 0, arr, 0.0))
    assert_close(np.concatenate([x, x], axis=-1), np.concatenate([arr, arr], axis=-1))
    assert_close(np.concatenate([x, x], axis="N"), np.concatenate([arr, arr]))
    assert np.stack([x, x], axis="K").names == ("K", "N", "C", "H")
    assert_close(np.clip(x, -0.5, 0.5), np.clip(arr, -0.5, 0.5))
    assert_close(np.clip(x, max=0.1), np.clip(arr, None, 0.1))
    assert_close(np.transpose(x), arr.T)
    assert np.transpose(x, (1, "H", 0)).names == ("C", "H", "N")
    assert_close(np.round(x, 2), np.round(arr, 2))
    assert np.shape(x) == (2, 3, 4) and np.ndim(x) == 3 and np.size(x) == 24
    assert np.size(x, "C") == 3 and np.size(x, -1) == 4
    c = np.copy(x)
    assert c.is_lvalue and not np.shares_memory(c.numpy(), arr)
    assert np.squeeze(ax.zeros((ax.Axis("N", 1), ax.Axis("C", 2)))).names == ("C",)
    out = ax.zeros(x.axes[:2])
    assert np.sum(x, axis="H", out=out) is out
    assert_close(out, arr.sum(2))


def test_numpy_function_errors():
    x, _ = sample()
    with raises(AttributeError, "__array_function__: numpy finds it on the type"):
        x.__array_function__  # noqa: B018
    with raises(TypeError, "numpy.ptp: has no named meaning for tensors. Use ax.apply(fn"):
        np.ptp(x)
    with raises(TypeError, "numpy.linalg.inv: has no named meaning for tensors"):
        np.linalg.inv(x)
    with raises(ax.AxesError, "numpy.sum: axis 3 is out of range (axes: N=2, C=3, H=4)."):
        np.sum(x, axis=3)
    with raises(TypeError, "numpy.sum: unsupported argument(s): initial. Leave them out."):
        np.sum(x, initial=1.0)
    with raises(ax.AxesError, "numpy.cumsum: flattening first has no named meaning"):
        np.cumsum(x)
    with raises(ax.AxesError, "numpy.concatenate: flattening first has no named meaning"):
        np.concatenate([x, x], axis=None)
    with raises(TypeError, "numpy.stack: the new axis needs a name (got axis=0)."):
        np.stack([x, x])
    with raises(TypeError, "numpy.where: where(cond) gives positions, which have no named"):
        np.where(x > 0)
    with raises(ax.AxesError, "numpy.argmax: takes exactly one axis (got (0, 1))."):
        np.argmax(x, axis=(0, 1))
    with raises(TypeError, "numpy.sort: unsupported argument(s): order."):
        np.sort(x, order="a")


# --- len and iteration ---------------------------------------------------------------------------


def test_len_and_iteration_are_refused():
    x, _ = sample()
    with raises(TypeError, "len: a tensor has no length by position (N=2, C=3, H=4)."):
        len(x)
    with raises(TypeError, "iter: tensors are not iterable by position (N=2, C=3, H=4)."):
        iter(x)


# --- axesarray.testing ---------------------------------------------------------------------------


def test_importing_axesarray_does_not_import_hypothesis():
    code = "import sys, axesarray, axesarray.testing; sys.exit('hypothesis' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_testing_helpers_fail_loudly():
    x, arr = sample()
    with pytest.raises(AssertionError, match="do not share memory"):
        assert_shares_memory(x.copy(), arr)
    with pytest.raises(AssertionError, match="an r-tensor has no memory"):
        assert_shares_memory(x + 1, arr)
    with pytest.raises(AssertionError, match=re.escape("axes ('N', 'C', 'H') != ('N', 'H')")):
        assert_named(x, "N H")
    with pytest.raises(AssertionError, match="dtype float64 != numpy's float32"):
        assert_close(x, arr.astype("float32"))
