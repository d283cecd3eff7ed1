"""Everyday operations against numpy: var/std, keepdims, cumsum/cumprod, sort/argsort,
argmax/argmin over several axes, any/all, stack, einsum, isel with lists, masks and index
tensors, ``where``, ``apply``; and the ``call`` node in both engines.

Broad property tests run on the reference engine (their subject is the operation, not
the fused kernels); a few fused-engine tests cover the kernels and steps these add.
"""

from __future__ import annotations

import contextlib
import re
import warnings

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given
from hypothesis import strategies as st
from strategies import axes, numpy_tensors

import axesarray as ax
import axesarray.engine.executor as executor
from axesarray.engine.reference import evaluate_array

N, C, H, W = ax.Axis("N", 2), ax.Axis("C", 3), ax.Axis("H", 4), ax.Axis("W", 5)
rng = np.random.default_rng(7)


@pytest.fixture
def reference():
    with ax.set_options(engine="numpy"):
        yield


def raises(exc, text: str):
    """``pytest.raises`` matching the start of the message literally."""
    return pytest.raises(exc, match="^" + re.escape(text))


def sample(shape=(2, 3, 4), dtype="float64"):
    arr = rng.standard_normal(shape).astype(dtype)
    return ax.tensor(arr, "N C H"[: 2 * len(shape) - 1]), arr


@st.composite
def cases(draw, dtypes=("float32", "float64", "int16", "uint8", "bool"), min_rank=1):
    """(tensor, array, names of a random subset of axes, their positions)."""
    a = draw(axes(min_rank=min_rank, max_rank=4, max_len=4))
    t, arr, _ = draw(numpy_tensors(a, draw(st.sampled_from(dtypes))))
    names = draw(st.lists(st.sampled_from(t.names), unique=True)) if t.names else []
    return t, arr, tuple(names), tuple(t.names.index(n) for n in names)


@contextlib.contextmanager
def quiet():
    """numpy warns on empty means and ddof >= n; the engines do not warn (design.md)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


# --- var / std / keepdims ------------------------------------------------------------------


@given(
    cases(dtypes=("float16", "float32", "float64", "int8", "int64", "bool")),
    st.sampled_from([0, 1, 2]),
    st.booleans(),
)
def test_var_std_match_numpy(reference, case, ddof, keepdims):
    t, arr, names, dims = case
    with quiet():
        var = np.var(arr, axis=dims, ddof=ddof, keepdims=keepdims)
        std = np.std(arr, axis=dims, ddof=ddof, keepdims=keepdims)
    scale = 1.0 + float(np.max(np.abs(arr), initial=0)) ** 2
    assert_close(t.var(names, ddof=ddof, keepdims=keepdims), var, scale=scale)
    assert_close(t.std(names, ddof=ddof, keepdims=keepdims), std, scale=scale)


def test_var_fuses_into_two_reductions_and_matches_on_the_fused_engine():
    x, arr = sample()
    with ax.set_options(engine="numba"):
        v = x.var(("N", "H"), ddof=1)
        plan = ax.explain(v)
        assert [k.kind for k in plan.kernels] == ["reduction", "reduction"]
        assert_close(v, arr.var(axis=(0, 2), ddof=1))


def test_var_sizes_zero_and_one(reference):
    for shape in [(0, 3), (1, 3), (1, 1)]:
        arr = np.ones(shape)
        t = ax.tensor(arr, "N C")
        with quiet():
            assert_close(t.var("N"), np.var(arr, axis=0))
            assert_close(t.std("N", ddof=1), np.std(arr, axis=0, ddof=1))
            assert_close(t.var(), np.var(arr))


def test_var_errors():
    x, _ = sample()
    with raises(TypeError, "var: ddof must be a number (got 'a')."):
        x.var("N", ddof="a")
    with raises(ax.AxesError, "var: unknown axis 'Q'"):
        x.var("Q")


REDUCERS = ["sum", "prod", "max", "min", "mean", "any", "all"]


@given(cases(), st.sampled_from(REDUCERS))
def test_keepdims_matches_numpy(reference, case, op):
    t, arr, names, dims = case
    if op in ("max", "min") and any(arr.shape[d] == 0 for d in dims or range(arr.ndim)):
        return  # no identity: an error (tested in test_errors)
    if op == "prod" and arr.dtype.kind == "f" and arr.size > 16:
        return  # numpy rounds a float product at every step: its error grows with the size
    with quiet():
        expected = getattr(np, op)(arr, axis=dims or None, keepdims=True)
    result = getattr(t, op)(names or None, keepdims=True)
    assert result.names == t.names
    assert_close(result, expected, scale=1 + float(np.sum(np.abs(arr.astype(float)))))


def test_keepdims_stays_one_fused_kernel():
    x, arr = sample()
    with ax.set_options(engine="numba"):
        e = (x * 2).sum(("N", "H"), keepdims=True)
        assert e.axes == ax.Axes([ax.Axis("N", 1), C, ax.Axis("H", 1)])
        assert len(ax.explain(e).kernels) == 1
        assert_close(e, (arr * 2).sum(axis=(0, 2), keepdims=True))


# --- any / all ----------------------------------------------------------------------------------


@given(cases(dtypes=("bool", "int8", "float32")), st.booleans())
def test_any_all_match_numpy(reference, case, keepdims):
    t, arr, names, dims = case
    for op in ("any", "all"):
        expected = getattr(np, op)(arr, axis=dims or None, keepdims=keepdims)
        assert_close(getattr(t, op)(names or None, keepdims=keepdims), expected)


# --- cumsum / cumprod / sort / argsort --------------------------------------------------------


@given(
    cases(dtypes=("float16", "float32", "float64", "int8", "uint16", "int64", "bool")),
    st.sampled_from(["cumsum", "cumprod", "sort", "argsort"]),
    st.data(),
)
def test_along_an_axis_matches_numpy(reference, case, op, data):
    t, arr, _, _ = case
    name = data.draw(st.sampled_from(t.names))
    d = t.names.index(name)
    kwargs = {"kind": "stable"} if op in ("sort", "argsort") else {}
    with np.errstate(all="ignore"):
        expected = getattr(np, op)(arr, axis=d, **kwargs)
    result = getattr(t, op)(name)
    assert result.axes == t.axes
    assert_close(result, expected, scale=1 + float(np.sum(np.abs(arr.astype(float)))))


def test_sort_puts_nan_last_and_argsort_is_stable(engine):
    arr = np.array([3.0, np.nan, 1.0, 3.0, 1.0])
    x = ax.tensor(arr, "N")
    assert_close(x.sort(), np.sort(arr))
    assert_close(x.argsort(), np.argsort(arr, kind="stable"))
    assert_close(x.cumsum(), np.cumsum(arr))


def test_scans_fuse_around_their_step():
    x, arr = sample()
    with ax.set_options(engine="numba"):
        e = (x * 2).cumsum("C").sum("H") + 1
        kinds = [k.kind for k in ax.explain(e).kernels]
        assert kinds == ["elementwise", "scan", "reduction"]  # a compiled loop (float)
        assert_close(e, np.cumsum(arr * 2, axis=1).sum(axis=2) + 1)


def test_along_errors():
    x, _ = sample()
    with raises(ax.AxesError, "cumsum: name the axis to work along (N=2, C=3, H=4)."):
        x.cumsum()
    with raises(ax.AxesError, "sort: unknown axis 'Q'"):
        x.sort("Q")


# --- argmax / argmin over several axes -------------------------------------------------------


def _np_arg_several(op, arr, dims):
    kept = [d for d in range(arr.ndim) if d not in dims]
    moved = arr.transpose(kept + list(dims))
    n = int(np.prod([arr.shape[d] for d in dims]))
    flat = getattr(np, op)(moved.reshape(moved.shape[: len(kept)] + (n,)), axis=-1)
    return np.unravel_index(flat, [arr.shape[d] for d in dims])


@given(cases(dtypes=("float64", "int8", "bool"), min_rank=1), st.sampled_from(["argmax", "argmin"]))
def test_arg_over_several_axes_matches_numpy(reference, case, op):
    t, arr, names, dims = case
    if not names or any(arr.shape[d] == 0 for d in dims):
        return
    index = getattr(t, op)(list(names))
    assert list(index) == list(names)
    for name, expected in zip(names, _np_arg_several(op, arr, dims), strict=True):
        assert_close(index[name], np.asarray(expected, dtype=np.int64))
    picked = t.isel(index)  # the dict indexes the extremes directly
    best = getattr(np, "max" if op == "argmax" else "min")(arr, axis=dims)
    assert_close(picked, best)


def test_arg_over_several_axes_fused_view_and_numpy_call():
    arr = rng.standard_normal((2, 3, 4))
    x = ax.tensor(arr, "N C H")
    with ax.set_options(engine="numba"):
        view = x.argmax(["C", "H"])  # adjacent axes: one fused reduction over a merged view
        assert [k.kind for k in ax.explain(view["C"]).kernels] == ["reduction"]
        copy = x.argmax(["H", "N"])  # not mergeable as a view: a numpy call
        assert "numpy" in [k.kind for k in ax.explain(copy["H"]).kernels]
        for names, got in ((("C", "H"), view), (("H", "N"), copy)):
            dims = [x.names.index(n) for n in names]
            for n, e in zip(names, _np_arg_several("argmax", arr, dims), strict=True):
                assert_close(got[n], np.asarray(e, dtype=np.int64))
        kept = x.argmin(["H", "N"], keepdims=True)
        assert kept["N"].axes == ax.Axes([ax.Axis("N", 1), C, ax.Axis("H", 1)])
        flat = np.argmin(arr.transpose(1, 2, 0).reshape(3, -1), axis=1)
        assert_close(kept["H"].numpy()[0, :, 0], flat // 2)


def test_arg_errors():
    x, _ = sample()
    with raises(ax.AxesError, "argmax: name at least one axis (N=2, C=3, H=4)."):
        x.argmax([])
    with raises(ax.AxesError, "argmin: cannot reduce over an empty axis"):
        ax.zeros((N, ax.Axis("C", 0))).argmin(["N", "C"])


# --- stack ---------------------------------------------------------------------------------------


@given(st.data(), st.integers(1, 3))
def test_stack_matches_numpy(reference, data, k):
    a = data.draw(axes(max_rank=3, max_len=3, names=tuple("ABCDE")))
    tensors, arrays = [], []
    for _ in range(k):
        order = data.draw(st.permutations(list(a)))
        t, arr, _ = data.draw(numpy_tensors(ax.Axes(order), "float32"))
        tensors.append(t)
        arrays.append(arr)
    first = tensors[0].names  # the result keeps the first tensor's order
    aligned = [
        arr.transpose([t.names.index(n) for n in first])
        for t, arr in zip(tensors, arrays, strict=True)
    ]
    position = data.draw(st.integers(0, len(a)))
    new = data.draw(st.sampled_from(["K", ax.Axis("K", k)]))
    s = ax.stack(tensors, new, position)
    assert s.names == first[:position] + ("K",) + first[position:]
    assert_close(s, np.stack(aligned, axis=position))


def test_stack_is_one_fused_kernel():
    x, arr = sample()
    with ax.set_options(engine="numba"):
        s = ax.stack([x, x.transpose("H N C") * 2], "K")
        assert len(ax.explain(s).kernels) == 1
        assert_close(s, np.stack([arr, arr * 2]))


def test_stack_errors():
    x, _ = sample()
    with raises(ValueError, "stack: needs at least one tensor."):
        ax.stack([], "K")
    with raises(ax.AxesError, "stack: the new axis has length 3 but 2 tensors were given"):
        ax.stack([x, x], ax.Axis("K", 3))
    with raises(ax.AxesError, "stack: the new axis 'C' is already an axis of the tensors"):
        ax.stack([x, x], "C")
    with raises(ax.AxesError, "stack: all tensors must have the same axes"):
        ax.stack([x, x.sum("C")], "K")
    with raises(TypeError, "stack: expects a sequence of tensors (Tensor)."):
        ax.stack(x, "K")


# --- einsum --------------------------------------------------------------------------------------


@given(st.data(), st.integers(1, 3))
def test_einsum_matches_numpy(reference, data, k):
    lengths = {n: data.draw(st.integers(0, 3)) for n in "ABCDE"}
    ops, arrays = [], []
    for _ in range(k):
        names = data.draw(st.lists(st.sampled_from("ABCDE"), min_size=1, max_size=3, unique=True))
        dtype = data.draw(st.sampled_from(["float64", "int64"]))
        t, arr, _ = data.draw(numpy_tensors(ax.Axes(ax.Axis(n, lengths[n]) for n in names), dtype))
        ops.append(t)
        arrays.append((arr, names))
    present = sorted({n for t in ops for n in t.names})
    out = data.draw(st.permutations(data.draw(st.lists(st.sampled_from(present), unique=True))))
    args = []
    for arr, names in arrays:
        args += [arr, ["ABCDE".index(n) for n in names]]
    expected = np.einsum(*args, ["ABCDE".index(n) for n in out])
    result = ax.einsum(*ops, out=list(out))
    assert result.names == tuple(out)
    assert_close(result, expected)


def test_einsum_uses_blas_and_defaults_to_the_unshared_axes():
    a = rng.standard_normal((2, 3))
    b = rng.standard_normal((3, 4))
    x, y = ax.tensor(a, "M K"), ax.tensor(b, "K N")
    with ax.set_options(engine="numba"):
        e = ax.einsum(x, y)
        assert e.names == ("M", "N")
        assert "blas" in [k.kind for k in ax.explain(e).kernels]
        assert_close(e, a @ b)
        assert_close(ax.einsum(x, y, x, out="K"), np.einsum("mk,kn,mk->k", a, b, a))


def test_einsum_errors():
    x, _ = sample()
    with raises(ax.AxesError, "einsum: out names axes no operand has: 'Q'"):
        ax.einsum(x, out="N Q")
    with raises(ax.AxesError, "einsum: axis 'C' has length 3 in the left operand and 5"):
        ax.einsum(x, ax.zeros((ax.Axis("C", 5),)))
    with raises(ValueError, "einsum: needs at least one tensor."):
        ax.einsum()


@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool", "int16"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_einsum_of_integers_sums_in_int64_as_sum_does(dtype, k):
    """numpy's einsum wraps in int8; einsum follows ``sum`` (int64, uint64 for unsigned) on
    every path (one operand, ``dot``, a chain), whatever is contracted."""
    arrays = [np.full((2, 3), 100 if dtype != "bool" else 1, dtype),
              np.full((3, 4), 3 if dtype != "bool" else 1, dtype),
              np.full((4,), 2 if dtype != "bool" else 1, dtype)][:k]
    names = ["M K", "K N", "N"][:k]
    ops = [ax.tensor(a, n) for a, n in zip(arrays, names, strict=True)]
    want = np.sum(np.zeros(1, dtype)).dtype
    wide = [a.astype(want) for a in arrays]
    spec = ["mk", "kn", "n"][:k]
    for out in ["M", "", "M K" if k == 1 else "M N"]:
        expected = np.einsum(",".join(spec) + "->" + out.replace(" ", "").lower(), *wide)
        result = ax.einsum(*ops, out=out)
        assert result.dtype == want, (out, result.dtype)
        np.testing.assert_array_equal(result.numpy(), expected, strict=True)


# --- isel with lists, masks and index tensors ------------------------------------------------


@given(st.data())
def test_isel_lists_and_masks_match_numpy(reference, data):
    t, arr, _ = data.draw(numpy_tensors(data.draw(axes(min_rank=1, max_rank=3)), "int32"))
    name = data.draw(st.sampled_from(t.names))
    d, n = t.names.index(name), t.axes[name].length
    if data.draw(st.booleans()) or n == 0:
        key = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
        index = np.flatnonzero(key)
        mask = np.array(key, bool)
        key = data.draw(st.sampled_from([key, mask, ax.tensor(mask, [name])]))
    else:
        index = data.draw(st.lists(st.integers(-n, n - 1), max_size=5))
        key = data.draw(st.sampled_from([index, np.array(index, np.int16)]))
    r = t.isel({name: key})
    assert r.names == t.names and not r.is_lvalue
    assert_close(r, np.take(arr, np.asarray(index, dtype=np.int64), axis=d))


@given(st.data())
def test_isel_index_tensors_match_numpy(reference, data):
    """Vectorized indexing: the index axes take the indexed axis' place; an index axis
    named like a kept axis of x is read pointwise along it."""
    a = data.draw(axes(min_rank=1, max_rank=3, min_len=1))
    t, arr, _ = data.draw(numpy_tensors(a, "float64"))
    name = data.draw(st.sampled_from(t.names))
    d, n = t.names.index(name), t.axes[name].length
    kept = [x for x in t.axes if x.name != name]
    shared = data.draw(st.lists(st.sampled_from(kept), unique=True, max_size=1)) if kept else []
    fresh = data.draw(st.lists(st.sampled_from(["i_a", "i_b"]), unique=True, max_size=2))
    new = [ax.Axis(x, data.draw(st.integers(0, 3))) for x in fresh]
    idx_axes = ax.Axes(data.draw(st.permutations(shared + new)))
    values = rng.integers(-n, n, idx_axes.shape)
    r = t.isel({name: ax.tensor(values, idx_axes)})
    before = [x.name for x in t.axes[:d] if x.name != name]
    after = [x.name for x in t.axes[d + 1 :]]
    assert r.names == tuple(before + [x.name for x in idx_axes if x.name in fresh] + after)
    # numpy: every dim of x indexed by an array laid out over the result's axes
    grids = []
    for x in t.axes:
        if x.name == name:
            sub = values.transpose([idx_axes.names.index(m) for m in r.names if m in idx_axes])
            grids.append(sub.reshape([r.axes[m].length if m in idx_axes else 1 for m in r.names]))
        else:
            shape = [x.length if m == x.name else 1 for m in r.names]
            grids.append(np.arange(x.length).reshape(shape))
    assert_close(r, arr[tuple(grids)])


def test_isel_gathers_on_the_fused_engine_and_mixes_with_slices():
    arr = rng.standard_normal((2, 3, 4))
    x = ax.tensor(arr, "N C H")
    idx = ax.tensor(np.array([[2, 0], [-1, 1]]), "K H")  # H is shared with x: pointwise
    with ax.set_options(engine="numba"):
        r = x.isel(C=idx, H=slice(0, 2))
        assert r.names == ("N", "K", "H")
        expected = arr[:, :, :2][
            np.arange(2)[:, None, None], np.array([[2, 0], [-1, 1]]), np.arange(2)
        ]
        assert_close(r, expected)
        transposed = ax.tensor(np.array([[2, 0], [-1, 1]]).T.copy(), "H K")  # same, H first
        assert_close(x.isel(C=transposed, H=slice(0, 2)), expected)
        assert_close((x.isel(C=[0, 2, 2]) * 2).sum("N"), (arr[:, [0, 2, 2]] * 2).sum(0))
        outer = x.isel(C=[1, 0], H=[3])  # two lists: orthogonal indexing, as xarray's
        assert_close(outer, arr[:, [1, 0]][:, :, [3]])
        assert_close(x.isel(N=0, C=[2]), arr[0, [2]])


def test_isel_errors_leave_the_destination_unchanged(engine):
    x, _ = sample()
    with raises(
        IndexError, "isel: index 3 is out of range for axis 'C' (C=3). Use -3 <= index < 3."
    ):
        x.isel(C=[0, 3])
    bad = ax.tensor(np.array([0, 7]), "K")
    out = ax.zeros((N, ax.Axis("K", 2), H))
    with raises(IndexError, "isel: index 7 is out of range for axis 'C' (C=3)."):
        out[...] = x.isel(C=bad)
    assert not out.numpy().any()
    with raises(TypeError, "isel: the index tensor for axis 'C' must hold integers or booleans"):
        x.isel(C=ax.tensor(np.zeros(2), "K"))
    with raises(ax.AxesError, "isel: a boolean mask for axis 'C' must have exactly that axis"):
        x.isel(C=ax.tensor(np.array([True, False, True]), "K"))
    with raises(IndexError, "isel: the boolean mask for axis 'C' has the wrong length"):
        x.isel(C=[True, False])
    with raises(ax.AxesError, "isel: a numpy index array has no axis names (shape (2, 2))."):
        x.isel(C=np.zeros((2, 2), int))
    with raises(TypeError, "isel: axis 'C' takes a slice, an integer, a list of integers"):
        x.isel(C=[0.5])
    with raises(ax.AxesError, "isel: index axis 'N' has length 3, but the tensor's axis 'N' has"):
        x.isel(C=ax.tensor(np.zeros(3, int), "N"))


# --- where -----------------------------------------------------------------------------------


def test_gathers_write_their_source_and_masks_go_through_where():
    x, arr = sample()
    x[{"C": [0, 2]}] = 1.0  # index assignment (more in tests/test_idioms.py)
    arr[:, [0, 2]] = 1.0
    assert_close(x, arr)
    mask = ax.tensor(np.array([True, False, True]), "C")
    x[...] = x.where(~mask, 0.0)  # numpy's a[:, mask] = 0
    arr[:, [True, False, True]] = 0.0
    assert_close(x, arr)


def test_where_method(reference):
    x, arr = sample()
    assert_close(x.where(x > 0), np.where(arr > 0, arr, np.nan))
    for n in (0, 1):
        a = np.arange(float(n))
        t = ax.tensor(a, "N")
        assert_close(t.where(t > 0, -1.0), np.where(a > 0, a, -1.0))
    ints = ax.tensor(np.arange(4), "N")
    assert_close(ints.where(ints > 1, -1), np.where(np.arange(4) > 1, np.arange(4), -1))
    assert_close(ints.where(ints > 1), np.where(np.arange(4) > 1, np.arange(4), np.nan))


# --- apply ---------------------------------------------------------------------------------------


def test_apply_moves_core_axes_last_and_names_outputs(engine):
    arr = rng.standard_normal((3, 2, 4))
    x = ax.tensor(arr, "T N C")
    med = ax.apply(np.median, x, core="T", out_axes=(), kwargs={"axis": -1})
    assert med.names == ("N", "C")
    assert_close(med, np.median(arr, axis=0))
    spec = ax.apply(lambda a: np.abs(np.fft.rfft(a)), x, core="T", out_axes=ax.Axis("F", 2))
    assert spec.names == ("N", "C", "F")
    assert_close(spec, np.abs(np.fft.rfft(arr.transpose(1, 2, 0))))
    same = ax.apply(np.sort, x, core="C T")  # default out: the first input's core axes
    assert same.names == ("N", "C", "T")
    assert_close(same, np.sort(arr.transpose(1, 2, 0), axis=-1))


def test_apply_broadcasts_loop_axes_and_vectorizes(engine):
    a = rng.standard_normal((2, 3))
    b = rng.standard_normal((4, 3))
    x, y = ax.tensor(a, "N C"), ax.tensor(b, "M C")
    r = ax.apply(lambda u, v: (u * v).sum(-1), x, y, core="C", out_axes=())
    assert r.names == ("N", "M")
    assert_close(r, a @ b.T)
    z = ax.tensor(rng.standard_normal(5), "K")
    r = ax.apply(
        lambda u, k: u.max() - k.min(), x, z, core=[("C",), ("K",)], out_axes=(), vectorize=True
    )
    assert_close(r, a.max(axis=1) - z.numpy().min())
    for shape in [(0, 2), (2, 0), (1, 1)]:
        a = np.ones(shape)
        r = ax.apply(np.cumsum, ax.tensor(a, "N C"), core="C", kwargs={"axis": -1})
        assert_close(r, np.cumsum(a, axis=-1))


def test_apply_plans_are_reused_for_the_same_function():
    x, _ = sample()
    fn = np.cumsum
    with ax.set_options(engine="numba"):
        ax.apply(fn, x, core="C", kwargs={"axis": -1}).numpy()
        assert ax.explain(ax.apply(fn, x, core="C", kwargs={"axis": -1})).cached
        fresh = ax.apply(lambda a: np.cumsum(a, -1), x, core="C")  # another function object
        assert not ax.explain(fresh).cached


def test_apply_cannot_edit_its_inputs():
    x, arr = sample()
    before = arr.copy()

    def sneaky(a):
        a[...] = 0
        return a

    with pytest.raises(ValueError, match="read-only"):
        ax.apply(sneaky, x, core="C").numpy()
    np.testing.assert_array_equal(arr, before)


def test_apply_errors():
    x, _ = sample()
    with raises(ax.AxesError, "apply: the length of output axis 'F' is unknown"):
        ax.apply(np.abs, x, core="C", out_axes="F")
    with raises(ax.AxesError, "apply: an output axis has the name of a loop axis: 'N'"):
        ax.apply(np.abs, x, core="C", out_axes=[ax.Axis("N", 2)])
    with raises(ax.AxesError, "apply: an axis is a core axis of one tensor and a loop axis"):
        ax.apply(np.add, x, x.sum("C"), core=[("C",), ("H",)])
    with raises(ax.AxesError, "apply: give one core spec per tensor (1 specs for 2 tensors)."):
        ax.apply(np.add, x, x, core=[("C",)])
    with raises(ax.AxesError, "apply: unknown axis 'Q'"):
        ax.apply(np.abs, x, core="Q")
    with raises(TypeError, "apply: fn must be callable (int)."):
        ax.apply(3, x)
    with raises(ax.AxesError, "absolute: the function returned an array of the wrong shape"):
        ax.apply(np.abs, x, core="C", out_axes=()).numpy()
    with raises(TypeError, "<lambda>: the function returned float64, which does not cast"):
        ax.apply(lambda a: a * 0.5, x.astype("int64"), core="C").numpy()
    with raises(TypeError, "apply: dtype complex128 is not supported"):
        ax.apply(np.abs, x, dtype="complex128")


# --- the call node ---------------------------------------------------------------------------


def test_call_nodes_agree_between_engines_and_alias_safely(engine):
    arr = rng.standard_normal((3, 4))
    x = ax.tensor(arr.copy(), "N C")
    x[...] = x.cumsum("C").transpose("C N").sort("N")  # reads x through a numpy call
    assert_close(x, np.sort(np.cumsum(arr, axis=1), axis=0))


def test_call_nodes_on_chunked_tensors():
    pytest.importorskip("dask")
    arr = rng.standard_normal((4, 6))
    x = ax.tensor(arr, "N C").chunk({"N": 2})
    e = (x.cumsum("C") * 2).sum("N")
    assert "numpy call" in str(ax.explain(e))
    assert_close(e, (np.cumsum(arr, axis=1) * 2).sum(0))
    assert_close(x.isel(C=[5, 0]), arr[:, [5, 0]])


def test_reference_and_fused_values_of_a_call_graph():
    x, arr = sample()
    e = ax.exp(x.isel(C=[2, 0]).cumsum("H")) + x.sum("C").argsort("N")
    expected = evaluate_array(e._node)
    with ax.set_options(engine="numba"):
        assert_close(e, expected)
    before = executor.PLAN_STATS["hits"]
    with ax.set_options(engine="numba"):
        e.numpy()
    assert executor.PLAN_STATS["hits"] == before + 1
