"""xarray wrapping lazy axesarray arrays (``ax.array_api``): arithmetic, reductions, isel,
where and transpose stay lazy; ``.values`` runs the chain as fused kernels, as many as the
same expression written in axesarray directly; xarray's duck-array expectations hold.
Values are compared with xarray on numpy (the oracle)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
import axesarray.array_api as xp

xr = pytest.importorskip("xarray")

DIMS = ("time", "y", "x")


def data(shape=(12, 4, 3), seed=0, nan=False):
    a = np.random.default_rng(seed).standard_normal(shape)
    if nan:
        a[2, 1, 0] = a[5, 0, 2] = np.nan
    return a


def pair(a):
    """The same values as a lazy DataArray and as a plain (numpy) one."""
    return xr.DataArray(xp.asarray(a), dims=DIMS), xr.DataArray(a, dims=DIMS)


def pending(da) -> bool:
    """Whether the DataArray holds an Array whose value is not computed yet."""
    return isinstance(da.data, xp.Array) and not da.data.tensor.is_lvalue


def kernels(da) -> int:
    return len(ax.explain(da.data.tensor).kernels)


@pytest.mark.parametrize("nan", [False, True])
def test_standardize_is_lazy_and_matches_xarray_on_numpy(nan):
    a = data(nan=nan)
    lazy, plain = pair(a)
    r = (lazy - lazy.mean("time")) / lazy.std("time")
    assert pending(r) and r.dims == DIMS
    assert_close(r.values, ((plain - plain.mean("time")) / plain.std("time")).values)
    assert not pending(r)  # .values computed (and kept) the value


def test_same_kernels_as_axesarray_directly_without_skipna():
    a = data()
    lazy, _ = pair(a)
    r = (lazy - lazy.mean("time", skipna=False)) / lazy.std("time", skipna=False)
    x = ax.tensor(a, "time y x")
    direct = (x - x.mean("time")) / x.std("time")
    assert kernels(r) == len(ax.explain(direct).kernels) == 1  # (a normalize kernel)


def test_same_kernels_as_axesarray_directly_with_skipna():
    """xarray's default on floats skips NaN (``np.nanmean``/``np.nanstd``, lazy here): the
    same as the NaN-skipping formula written with axesarray (sum and count of the non-NaN
    values, then the squared deviations): one kernel more than without skipna."""
    a = data(nan=True)
    lazy, plain = pair(a)
    r = (lazy - lazy.mean("time")) / lazy.std("time")
    x = ax.tensor(a, "time y x")
    ok = ~ax.isnan(x)
    n = ok.astype("float64").sum("time")
    m = ax.where(ok, x, 0.0).sum("time") / n
    d = ax.where(ok, x - m, 0.0)
    direct = (x - m) / ax.sqrt((d * d).sum("time") / n)
    assert kernels(r) == len(ax.explain(direct).kernels) == 4
    assert_close(r.values, direct.numpy())
    assert_close(r.values, ((plain - plain.mean("time")) / plain.std("time")).values)


def test_isel_where_transpose_reductions_stay_lazy():
    a = data(nan=True)
    lazy, plain = pair(a)
    cases = [
        (lambda d: (d * 2).isel(time=slice(2, 8), x=1)),
        (lambda d: (d + 1).where(d > 0)),
        (lambda d: (d - 1).transpose("x", "time", "y")),
        (lambda d: (d * d).sum("time")),
        (lambda d: abs(d).max(("y", "x"))),
        (lambda d: (d - d.min()).mean()),
        (lambda d: np.exp(d).isel(y=[0, 2])),
        (lambda d: xr.where(d > 0, d, -d).std("x", ddof=1)),
    ]
    for f in cases:
        got = f(lazy)
        assert pending(got), f
        want = f(plain)
        assert got.dims == want.dims
        assert_close(got.values, want.values)


def test_duck_array_expectations():
    a = data().astype("float32")
    lazy, plain = pair(a)
    arr = lazy.data
    assert arr.shape == a.shape and arr.ndim == 3 and arr.dtype == np.float32 and arr.size == a.size
    assert arr.__array_namespace__() is xp
    assert lazy.astype("float64").dtype == np.float64 and pending(lazy.astype("float64"))
    assert_close(np.asarray(arr[1:3, 0, ::2]), a[1:3, 0, ::2])
    assert_close(lazy[0, :, 1].values, plain[0, :, 1].values)
    assert "float32" in repr(lazy) and "time" in repr(lazy)  # printing computes
    assert float(lazy.sum()) == pytest.approx(float(plain.sum()), rel=1e-5)


def test_to_xarray_lazy_and_eager():
    a = data()
    t = ax.tensor(a, "time y x")
    da = ax.to_xarray(t * 2)
    assert da.dims == DIMS and pending(da)
    assert_close(da.mean("y").values, (a * 2).mean(1))
    eager = ax.to_xarray(t, lazy=False)
    assert isinstance(eager.data, np.ndarray) and np.shares_memory(eager.data, a)
    with_coords = ax.to_xarray(t, coords={"x": [10, 20, 30]}, name="v")
    assert list(with_coords.x.values) == [10, 20, 30] and with_coords.name == "v"


def test_compute_keeps_the_array_lazy_values_compute():
    """xarray's ``.compute()`` computes only chunked (dask) arrays: on an Array it returns
    the same lazy data; ``.values`` (or ``np.asarray``) runs it."""
    a = data()
    lazy, plain = pair(a)
    r = (lazy - lazy.mean("time")).compute()
    assert pending(r)
    assert_close(np.asarray(r), (plain - plain.mean("time")).values)
