"""Every row of the reduction table (``reductions_table.REDUCTIONS``) against numpy.

Adding a reduction is one row in ``axesarray/reductions_table.py`` plus one row in
``CASES`` here: numpy's function (the oracle), extra arguments, and the dtypes it is
checked on. The tests below check each row's method (sizes 0, 1 and more, NaN inputs,
``keepdims``), its public function, ``skipna=``, numpy's functions on tensors, both
engines, and what the table says about the kernels (init, combine, accumulator).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.core.reductions_table import KERNEL_REDUCTIONS, REDUCERS, REDUCTIONS, UFUNC_REDUCE

rng = np.random.default_rng(11)
FLOATS = ("float32", "float64")
ALL = ("float32", "float64", "int16", "uint8", "bool")

# row -> (numpy's function, extra positional arguments, dtypes)
CASES = {
    "sum": (np.sum, (), ALL),
    "prod": (np.prod, (), ALL),
    "max": (np.max, (), ALL),
    "min": (np.min, (), ALL),
    "any": (np.any, (), ALL),
    "all": (np.all, (), ALL),
    "argmax": (np.argmax, (), ALL),
    "argmin": (np.argmin, (), ALL),
    "logsumexp": (None, (), ()),  # made by rewrites only: tests/test_softmax_passes.py
    "logsumexp_guarded": (None, (), ()),  # made by rewrites only: tests/test_softmax_passes.py
    "mean": (np.mean, (), ALL),
    "var": (np.var, (), ALL),
    "std": (np.std, (), ALL),
    "nansum": (np.nansum, (), ALL),
    "nanprod": (np.nanprod, (), FLOATS),
    "nanmax": (np.nanmax, (), FLOATS + ("int16",)),
    "nanmin": (np.nanmin, (), FLOATS + ("int16",)),
    "nanmean": (np.nanmean, (), FLOATS + ("int16",)),
    "nanvar": (np.nanvar, (), FLOATS),
    "nanstd": (np.nanstd, (), FLOATS),
    "median": (np.median, (), FLOATS + ("int16",)),
    "nanmedian": (np.nanmedian, (), FLOATS),
    "quantile": (np.quantile, (0.3,), FLOATS + ("int16",)),
    "nanquantile": (np.nanquantile, (0.3,), FLOATS),
}


def quiet():
    w = warnings.catch_warnings()
    w.__enter__()
    warnings.simplefilter("ignore", RuntimeWarning)
    return w


def _array(shape, dtype, nans: bool) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = rng.uniform(-2, 2, shape)
        if nans and x.size:
            x[rng.random(shape) < 0.3] = np.nan
            x.flat[0] = np.nan
    elif dt.kind == "b":
        x = rng.integers(0, 2, shape)
    else:
        x = rng.integers(0, 5, shape)
    return x.astype(dt)


def test_every_row_has_an_oracle_row():
    assert set(CASES) == set(REDUCTIONS)


def _rows():
    return [n for n, (f, _, _) in CASES.items() if f is not None]


SHAPES = [(0, 3), (1, 3), (3, 1), (1, 1), (3, 4)]


@pytest.mark.parametrize("name", _rows())
@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_row_matches_numpy(name, engine):
    """The method over one axis, all axes and with keepdims, at sizes 0, 1 and more (the
    fused engine on fewer dtypes and shapes: each new structure compiles kernels)."""
    func, extra, dtypes = CASES[name]
    row = REDUCTIONS[name]
    fused = engine == "numba"
    for dtype in dtypes[:2] if fused else dtypes:
        for shape in [(0, 3), (1, 1), (3, 4)] if fused else SHAPES:
            arr = _array(shape, dtype, nans=True)
            t = ax.tensor(arr, "N C")
            for names, axis in (("N", 0), ("C", 1), (None, None)):
                if row.index and names is None:
                    continue  # one axis (argmax over several: tests/test_everyday.py)
                if not row.empty and (arr.size == 0 if axis is None else shape[axis] == 0):
                    with pytest.raises((ax.AxesError, ValueError)):
                        getattr(t, name)(*extra, names).numpy()
                    continue
                w = quiet()
                try:
                    expected = func(arr, *extra, axis=axis)
                finally:
                    w.__exit__(None, None, None)
                with ax.set_options(engine=engine):
                    got = getattr(t, name)(*extra, names)
                    scale = 1 + float(np.nansum(np.abs(arr.astype(float)))) ** 2
                    assert_close(got, np.asarray(expected), scale=scale,
                                 err_msg=f"{name} {dtype} {shape} axis={axis}")  # fmt: skip
                    if not row.index:
                        kept = getattr(t, name)(*extra, names, keepdims=True)
                        assert kept.names == t.names
                        w = quiet()
                        try:
                            ek = func(arr, *extra, axis=axis, keepdims=True)
                        finally:
                            w.__exit__(None, None, None)
                        assert_close(kept, np.asarray(ek), scale=scale)


@pytest.mark.parametrize("name", [n for n, r in REDUCTIONS.items() if r.function])
def test_public_function_is_the_method(name):
    func, extra, dtypes = CASES[name]
    arr = _array((3, 4), dtypes[0], nans=True)
    t = ax.tensor(arr, "N C")
    fn = getattr(ax, name)
    assert name in ax.__all__
    assert f">>> ax.{name}(x, " in fn.__doc__
    assert_close(fn(t, *extra, "C"), getattr(t, name)(*extra, "C"))
    with pytest.raises(TypeError, match=f"^{name}: takes a tensor"):
        fn(arr, *extra, "C")


@pytest.mark.parametrize("name", [n for n, r in REDUCTIONS.items() if r.numpy_functions])
def test_numpy_functions_dispatch_by_name(name):
    func, extra, dtypes = CASES[name]
    arr = _array((3, 4), dtypes[0], nans=name.startswith("nan"))
    t = ax.tensor(arr, "N C")
    for f in REDUCTIONS[name].numpy_functions:
        got = f(t, *extra, axis="C")
        assert isinstance(got, ax.Tensor) and got.names == ("N",)
        w = quiet()
        try:
            assert_close(got, np.asarray(func(arr, *extra, axis=1)), scale=10)
        finally:
            w.__exit__(None, None, None)


@pytest.mark.parametrize("name", [n for n, r in REDUCTIONS.items() if r.skipna])
def test_skipna_uses_the_nan_row(name):
    func, extra, _ = CASES[name]
    nan_func = CASES[REDUCTIONS[name].skipna][0]
    for shape in [(1, 3), (3, 4)]:
        arr = _array(shape, "float64", nans=True)
        t = ax.tensor(arr, "N C")
        w = quiet()
        try:
            assert_close(getattr(t, name)(*extra, "C", skipna=True), nan_func(arr, *extra, axis=1))
            for skip in (None, False):  # numpy's rule: NaN propagates
                assert_close(getattr(t, name)(*extra, "C", skipna=skip), func(arr, *extra, axis=1))
        finally:
            w.__exit__(None, None, None)
    ints = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = ax.tensor(ints, "N C")  # integers have no NaN: skipna changes nothing
    assert_close(getattr(t, name)(*extra, "C", skipna=True), getattr(t, name)(*extra, "C"))


def test_ufunc_reduce_comes_from_the_table():
    arr = _array((3, 4), "float64", nans=False)
    t = ax.tensor(arr, "N C")
    for ufunc, name in UFUNC_REDUCE.items():
        assert_close(getattr(np, ufunc).reduce(t, axis=1), getattr(np, ufunc).reduce(arr, axis=1))
        assert REDUCTIONS[name].is_kernel


def test_the_kernel_columns_are_what_the_kernels_use():
    """The generated kernel source is built from the rows' code (init and combine)."""
    from axesarray.kernels.cpu import _combine
    from axesarray.kernels.scalar import REDUCE_INIT, acc_dtype

    assert set(KERNEL_REDUCTIONS) == set(REDUCERS)
    assert _combine("sum", "a", "v", "0", True, True) == ["a = radd(a, v)"]
    assert _combine("max", "a", "v", "0", True) == ["a = fmax_nan(a, v)"]
    assert _combine("max", "a", "v", "0", False) == ["a = max(a, v)"]
    assert REDUCE_INIT("min", np.dtype("int8")) == "np.int8(127)"
    assert acc_dtype("sum", np.dtype("float32"), np.dtype("float32")) == np.float64
    assert acc_dtype("argmax", np.dtype("int64"), np.dtype("int8")) == np.int8


def test_nan_reductions_fuse():
    """nansum and nanmean are fused reductions (their where and count fuse in)."""
    arr = _array((64, 32), "float32", nans=True)
    t = ax.tensor(arr, "N C")
    with ax.set_options(engine="numba"):
        assert len(ax.explain(ax.nansum(t, "C")).kernels) == 1
        assert [k.kind for k in ax.explain(ax.nanmean(t, "C")).kernels] == ["reduction"] * 2
        assert_close(ax.nanmean(t, "C"), np.nanmean(arr, axis=1))


def test_nanmean_gradient_is_the_mask_over_the_count():
    arr = _array((3, 4), "float64", nans=True)
    w = ax.variable(arr, "N C")
    gw = ax.grad(ax.nanmean(w, "C").sum(), wrt=[w])[0]
    valid = ~np.isnan(arr)
    assert_close(gw, np.where(valid, 1.0, 0.0) / valid.sum(axis=1, keepdims=True))


def test_nan_reductions_on_chunked_tensors():
    pytest.importorskip("dask")
    arr = _array((6, 4), "float64", nans=True)
    t = ax.tensor(arr, "N C").chunk({"N": 2})
    assert_close(ax.nansum(t, "N").compute(), np.nansum(arr, axis=0))
    assert_close(ax.nanmax(t, "N").compute(), np.nanmax(arr, axis=0))
    assert_close(t.median("C").compute(), np.median(arr, axis=1))


def test_quantile_list_gives_a_quantile_axis():
    arr = _array((3, 5), "float64", nans=False)
    t = ax.tensor(arr, "N C")
    q = t.quantile([0.1, 0.5, 0.9], "C", method="nearest")
    assert q.names == ("quantile", "N")
    assert_close(q, np.quantile(arr, [0.1, 0.5, 0.9], axis=1, method="nearest"))
    kept = t.quantile([0.5], "C", keepdims=True)
    assert kept.names == ("quantile", "N", "C")
    assert_close(kept, np.quantile(arr, [0.5], axis=1, keepdims=True))


def test_quantile_errors():
    t = ax.tensor(np.zeros((2, 3)), "N C")
    msg = "quantile: q must be a number or a list of numbers in [0, 1] (got 1.5). "
    with pytest.raises(ValueError, match="^" + re.escape(msg)):
        t.quantile(1.5, "C")
    # the hint, followed literally, runs
    assert t.quantile([0.25, 0.75], "C").names == ("quantile", "N")
    with pytest.raises(ax.AxesError, match="^median: unknown axis 'Q'"):
        t.median("Q")


def test_nanmax_of_an_empty_axis_is_refused_before_running():
    t = ax.tensor(np.zeros((0, 3)), "N C")
    with pytest.raises(ax.AxesError, match="^max: cannot reduce over an empty axis"):
        ax.nanmax(t, "N")


def test_a_new_row_is_all_it_takes(monkeypatch):
    """A composed reduction added as one row gets its method, skipna and numpy function."""
    import axesarray.tensors.reducing as reductions
    from axesarray.core.reductions_table import Reduction

    def _range(x, names=None, keepdims=False):
        return x.max(names, keepdims) - x.min(names, keepdims)

    row = Reduction("ptp_demo", np.ptp, "Peak to peak.", build=_range)
    monkeypatch.setitem(REDUCTIONS, row.name, row)
    monkeypatch.setattr(ax.Tensor, row.name, reductions._method(row), raising=False)
    arr = _array((3, 4), "float64", nans=False)
    assert_close(ax.tensor(arr, "N C").ptp_demo("C"), np.ptp(arr, axis=1))
