"""What numpy, xarray and PyTorch users reach for (DESIGN §14), against numpy: 0-d tensors
as numbers, shapes by name (``T``, ``transpose()``, ``sizes``, ``values``, ``tolist``,
``equals``, ``allclose``, ``reshape``, ``@``, no ``sel``), masks and index assignment,
``flip``/``roll``/``diff``/``topk``. Sizes 0 and 1 throughout; every error path checks
its type and message, and hints are followed literally.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.testing import assert_shares_memory

rng = np.random.default_rng(5)


def raises(exc, text: str):
    return pytest.raises(exc, match="^" + re.escape(text))


def sample(shape=(2, 3, 4), names="N C H", dtype="float64"):
    arr = rng.standard_normal(shape).astype(dtype)
    return ax.tensor(arr, names), arr


# --- a 0-d tensor is a number -------------------------------------------------------------


@pytest.mark.parametrize("value", [0.0, 1.23456, -2.5, 2.5, float("nan"), float("inf")])
def test_zero_d_tensor_formats_rounds_and_truncates_like_a_float(value):
    t = ax.tensor(np.array([value, 0.0]), "N").max() if value == value else None
    t = ax.tensor(np.array([value]), "N").sum()  # a tensor without axes
    assert t.axes == ax.Axes()
    for spec in (".4f", ".2e", "g", "10.3f", ""):
        expected = format(value, spec) if spec else None
        if spec:
            assert format(t, spec) == expected
            assert f"{t:{spec}}" == expected
    assert f"{t}" == str(t)
    if math.isfinite(value):
        assert round(t) == round(value) and type(round(t)) is int
        assert round(t, 2) == round(value, 2) and type(round(t, 2)) is float
        assert math.floor(t) == math.floor(value)
        assert math.ceil(t) == math.ceil(value)
        assert math.trunc(t) == math.trunc(value)
        assert int(t) == int(value)
    assert bool(t > 1.0) == (value > 1.0)
    hit = "yes" if t < 0.5 else "no"  # a comparison in an ``if``
    assert hit == ("yes" if value < 0.5 else "no")


def test_item_reads_the_one_element_wherever_it_sits():
    """``item``/``float``/``int`` of a computed value, a leaf's view at an offset, a
    blocked layout, a chunked value and integer and bool dtypes: numpy's Python scalar."""
    arr = rng.standard_normal((4, 8)).astype(np.float32)
    x = ax.tensor(arr, "N C")
    cases = [
        (x.max(), arr.max()),
        ((x * 2).sum(), (arr * 2).astype(np.float64).sum()),
        (x.isel(N=2, C=5), arr[2, 5]),  # a view at offset 21 of the storage
        (x.isel(N=slice(3, 4), C=slice(7, 8)), arr[3, 7]),
        (ax.tensor(np.arange(8, dtype=np.int16), "C").isel(C=6), 6),
        ((x > 100).any(), False),
    ]
    for t, want in cases:
        got = t.item()
        assert type(got) is type(np.asarray(want).item())
        assert got == pytest.approx(want, rel=1e-6)
        assert float(t) == pytest.approx(float(want), rel=1e-6)
    img = ax.tensor(rng.standard_normal((1, 3, 1, 1)).astype(np.float32), "N C H W")
    blocked = img.to_layout("NCHW4").isel(C=2)
    assert blocked.item() == img.numpy()[0, 2, 0, 0]
    chunked = ax.tensor(arr, "N C").chunk(N=2).sum()
    assert float(chunked) == pytest.approx(float(arr.astype(np.float64).sum()), rel=1e-5)


def test_round_of_a_tensor_with_axes_is_elementwise():
    t, arr = sample((3, 1), "N C")
    assert_close(round(t, 2), np.round(arr, 2))
    assert_close(round(t), np.round(arr))


def test_number_errors():
    t, _ = sample((2, 3), "N C")
    with raises(TypeError, "format: only a tensor of one element formats with '.3f' (N=2, C=3)."):
        f"{t:.3f}"
    with raises(TypeError, "math.floor: only a tensor of one element converts to a Python int"):
        math.floor(t)
    assert_close(ax.floor(t), np.floor(t.numpy()))  # the hint: ax.floor(x)
    with raises(TypeError, "math.trunc: only a tensor of one element"):
        math.trunc(t)
    e, _ = sample((0,), "N")
    with raises(TypeError, "format: only a tensor of one element"):
        format(e, ".2f")


# --- shapes by name ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 4), (0, 3, 1), (1, 1, 1)])
def test_T_and_transpose_reverse_as_views(shape):
    t, arr = sample(shape)
    for v in (t.T, t.transpose()):
        assert v.names == ("H", "C", "N")
        assert v.strides == arr.T.strides
        assert_close(v, arr.T)
        if arr.size:
            assert_shares_memory(v, t)
    assert ax.tensor(np.float64(3.0), ()).T.names == ()


@pytest.mark.parametrize("shape", [(2, 3), (0, 1), (1, 1)])
def test_sizes_values_tolist(shape):
    t, arr = sample(shape, "N C")
    assert dict(t.sizes) == {"N": shape[0], "C": shape[1]}
    assert list(t.sizes) == ["N", "C"]
    with pytest.raises(TypeError):
        t.sizes["N"] = 5  # read-only, as xarray's
    assert np.array_equal(t.values, arr)
    assert t.T.tolist() == arr.T.tolist()
    assert t.sum().tolist() == arr.sum().tolist()


def test_equals_by_name():
    t, arr = sample((2, 3), "N C")
    t[{"N": 0, "C": 1}] = np.nan
    arr[0, 1] = np.nan
    assert t.equals(ax.tensor(arr.T.copy(), "C N"))  # any order, NaN equal to NaN
    i = ax.tensor(np.arange(6).reshape(2, 3), "N C")
    assert i.equals(i.astype("float32"))  # dtypes may differ
    assert not t.equals(t + 1)
    assert not t.equals(t.rename(C="K"))
    assert not t.equals(t.isel(C=slice(0, 2)))
    assert not t.equals(arr)  # not a tensor
    e, _ = sample((0, 1), "N C")
    assert e.equals(e.T)


@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_allclose_match_numpy(equal_nan):
    a = np.array([[1.0, np.nan, np.inf, -np.inf, 1e-9], [2.0, 0.0, 1.0, np.inf, 3.0]])
    b = np.array([[1.0 + 1e-7, np.nan, np.inf, np.inf, 0.0], [2.1, 1e-9, 1.0, np.inf, 3.0]])
    ta, tb = ax.tensor(a, "N C"), ax.tensor(b.T.copy(), "C N")
    assert_close(ax.isclose(ta, tb, equal_nan=equal_nan), np.isclose(a, b, equal_nan=equal_nan))
    assert ax.allclose(ta, tb, equal_nan=equal_nan) == np.allclose(a, b, equal_nan=equal_nan)
    assert ax.allclose(ta[{"C": [1, 2]}], tb[{"C": [1, 2]}], equal_nan=True)
    assert not ax.allclose(ta[{"C": [1, 2]}], tb[{"C": [1, 2]}])
    ints = ax.tensor(np.array([0, 255], np.uint8), "N")
    assert_close(ax.isclose(ints, ints - 1), np.isclose(np.array([0, 255]), np.array([-1, 254])))


def test_numpy_comparisons_follow_one_rule():
    """Tensors match by name; an array beside a tensor is read in its logical order."""
    t, arr = sample((2, 3), "N C")
    assert np.allclose(t, t.T) and np.allclose(t, arr) and not np.allclose(t, arr + 1)
    assert np.array_equal(t, t.T) and np.array_equal(t, arr)
    assert not np.array_equal(t, t.rename(C="K"))
    assert_close(np.isclose(t, arr), np.ones((2, 3), bool))
    np.testing.assert_allclose(t, arr)  # through np.asarray: the logical order
    msg = "allclose: an array beside a tensor is read in the tensor's axis order and needs its"
    with raises(ax.AxesError, msg):
        ax.allclose(t, arr.T)
    assert ax.allclose(t, ax.tensor(arr.T, "C N"))  # the hint: name the array's axes
    with raises(ax.AxesError, "allclose: axis 'C' has length 3 in the left operand and 2"):
        ax.allclose(t, t.isel(C=slice(0, 2)))


@pytest.mark.parametrize("shape", [(2, 6, 4), (1, 6, 1), (0, 6, 4)])
def test_reshape_by_names(shape):
    t, arr = sample(shape)
    y = t.reshape({"C": (("G", 2), "Cg"), ("N", "H"): "S"})
    assert y.names == ("S", "G", "Cg")
    expected = arr.reshape(shape[0], 2, 3, shape[2]).transpose(0, 3, 1, 2)
    assert_close(y, expected.reshape(shape[0] * shape[2], 2, 3))
    split = t.reshape(C=(ax.Axis("G", 3), "Cg"))
    assert split.axes["Cg"].length == 2
    assert_close(split, arr.reshape(shape[0], 3, 2, shape[2]))
    if arr.size:
        assert_shares_memory(split, t)  # a view
    merged = t.reshape({("C", "H"): "F"})
    assert_close(merged, arr.reshape(shape[0], shape[1] * shape[2]))
    if arr.size:
        assert_shares_memory(merged, t)


def test_reshape_copies_when_strides_do_not_allow_a_view():
    t, arr = sample((2, 3, 4))
    y = t.T.reshape({("C", "N"): "F"})  # C then N, from memory order N C
    assert_close(y, arr.transpose(2, 1, 0).reshape(4, 6))


def test_reshape_errors_and_hints():
    t, arr = sample((2, 6, 4))
    with raises(TypeError, "reshape: reshape takes a mapping of axis names, not a shape"):
        t.reshape((12, 4))
    assert t.reshape({"C": ("G", ("Cg", 3))}).names == ("N", "G", "Cg", "H")  # the hint
    with raises(ax.AxesError, "reshape: only one part of 'C' may leave its length out"):
        t.reshape({"C": ("G", "Cg")})
    assert t.reshape({"C": (("G", 2), "Cg")}).shape == (2, 2, 3, 4)  # the hint, followed
    with raises(ax.AxesError, "reshape: the given lengths do not divide C=6"):
        t.reshape({"C": (("G", 4), "Cg")})
    with raises(ax.AxesError, "reshape: unknown axis 'Q'"):
        t.reshape({"Q": ("a", "b")})
    with raises(TypeError, "reshape: each entry splits a name into parts or merges names"):
        t.reshape({("N", "C"): 3})


@pytest.mark.parametrize("k", [0, 1, 5])
def test_matmul_contracts_the_one_shared_name(k):
    a = rng.standard_normal((3, k))
    b = rng.standard_normal((k, 2))
    ta, tb = ax.tensor(a, "M K"), ax.tensor(b.T.copy(), "N K")
    assert (ta @ tb).names == ("M", "N")
    assert_close(ta @ tb, a @ b)
    v = ax.tensor(rng.standard_normal(k), "K")
    assert_close(ta @ v, a @ v.numpy())


def test_matmul_errors_and_hints():
    a = ax.tensor(np.ones((2, 3)), "M K")
    b = ax.tensor(np.ones((3, 4)), "Q N")
    msg = "matmul: the operands share no axis name (left: M=2, K=3; right: Q=3, N=4). "
    with raises(ax.AxesError, msg + "Rename an axis so both have it: a @ b.rename(Q='K')."):
        a @ b
    assert (a @ b.rename(Q="K")).names == ("M", "N")  # the hint, followed
    c = ax.tensor(np.ones((2, 3)), "M K")
    msg = "matmul: the operands share several axis names ('M', 'K')"
    with raises(ax.AxesError, msg):
        a @ c
    assert_close(ax.dot(a, c, over="K"), np.full(2, 3.0))  # the hint: M batches
    with pytest.raises(TypeError):
        a @ np.ones(3)


def test_sel_is_not_there_and_names_isel():
    t, _ = sample()
    assert not hasattr(t, "sel")
    with raises(AttributeError, "sel: tensors have axes, not coordinate labels"):
        t.sel(C=1)
    with pytest.raises(AttributeError, match="isel"):
        t.sel  # noqa: B018
    assert t.isel(C=1).names == ("N", "H")  # the hint


# --- masks and scatter ---------------------------------------------------------------------


@pytest.mark.parametrize("over", ["N C", "C H", "N H", "C", "H C"])
@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 1, 1), (0, 3, 4)])
def test_mask_selects_into_one_new_axis(over, shape):
    t, arr = sample(shape)
    names = over.split()
    m_arr = rng.random([t.axes[n].length for n in names]) < 0.5
    mask = ax.tensor(m_arr, names)
    in_order = [n for n in t.names if n in names]
    full = mask.transpose(in_order).numpy()
    moved = arr.transpose([t.names.index(n) for n in in_order]
                          + [d for d, n in enumerate(t.names) if n not in names])  # fmt: skip
    expected = moved[full]  # numpy: the masked dims lead, row-major in t's order
    y = t[mask]
    assert y.names[[*y.names].index("_".join(in_order))] == "_".join(in_order)
    first = min(t.names.index(n) for n in names)
    rest = [n for n in t.names if n not in names]
    assert y.names == (*rest[:first], "_".join(in_order), *rest[first:])
    pos = y.names.index("_".join(in_order))
    assert_close(y, np.moveaxis(expected, 0, pos))
    assert t[mask, "K"].names == (*rest[:first], "K", *rest[first:])


def test_mask_assignment_writes_in_place():
    t, arr = sample((2, 3, 4))
    m_arr = arr.sum(axis=2) > 0
    mask = ax.tensor(m_arr, "N C")
    t[mask] = -1.0
    arr[m_arr] = -1.0
    assert_close(t, arr)
    t[mask] = t[mask] * 2 + 1  # reads what it writes: aliasing-safe
    arr[m_arr] = arr[m_arr] * 2 + 1
    assert_close(t, arr)
    h = ax.tensor(np.arange(4.0), "H")  # a value over the other axes broadcasts by name
    t[mask] = h
    arr[m_arr] = np.arange(4.0)
    assert_close(t, arr)
    t[ax.tensor(np.zeros((2, 3), bool), "N C")] = 7.0  # nothing selected: nothing written
    assert_close(t, arr)


def test_list_assignment_writes_in_place():
    t, arr = sample((2, 3, 4))
    t[{"C": [0, 2]}] = ax.tensor(np.array([10.0, 20.0]), "C")
    arr[:, [0, 2]] = np.array([10.0, 20.0])[None, :, None]
    assert_close(t, arr)
    t.isel(C=[2, 2], H=[-1])[...] = ax.tensor(np.array([1.0, 2.0]), "C")  # last one wins
    arr[np.ix_([0, 1], [2, 2], [3])] = np.array([1.0, 2.0])[None, :, None]
    assert_close(t, arr)
    t[{"C": [1], "N": 0}] = 5.0  # with an integer: a view, then the list
    arr[0, [1]] = 5.0
    assert_close(t, arr)
    t.isel(C=np.array([True, False, True]))[...] = t.isel(C=[1, 0])  # reads what it writes
    arr[:, [0, 2]] = arr[:, [1, 0]]
    assert_close(t, arr)


def test_index_assignment_errors_leave_the_tensor_unchanged():
    t, arr = sample((2, 3, 4))
    before = arr.copy()
    msg = "setitem: the value's axes must be axes of the selection, with the same lengths"
    with raises(ax.AxesError, msg):
        t[{"C": [0, 2]}] = ax.tensor(np.ones(3), "C")
    with raises(TypeError, "assign: cannot cast float64 to int64 under the same_kind rule"):
        ax.tensor(np.zeros((2, 3), np.int64), "N C")[{"C": [0]}] = 1.5
    i = ax.tensor(np.arange(2), "K")
    msg = "setitem: this selection cannot be written: only lists, masks and 1-D index"
    with raises(TypeError, msg):
        t[{"C": ax.tensor(np.zeros((2, 2), np.int64), "K L")}] = 0.0
    with raises(TypeError, msg):
        (t * 2).isel(C=[0])[...] = 0.0
    c = ax.constant(arr, "N C H")
    with raises(TypeError, "assign: the destination is the constant"):
        c[{"C": [0]}] = 0.0
    assert_close(t, before)
    t.isel(C=i)[...] = 3.0  # a 1-D index tensor writes too
    before[:, [0, 1]] = 3.0
    assert_close(t, before)


def test_mask_errors_do_not_print_the_mask():
    t, _ = sample((2, 3, 4))
    big = ax.tensor(np.ones((1000, 3), bool), "Q C")
    msg = (
        "getitem: the mask's axes must be axes of the tensor, with the same lengths "
        "(tensor: N=2, C=3, H=4; mask: Q=1000, C=3). "
    )
    with raises(ax.AxesError, msg):
        t[big]
    with raises(ax.AxesError, "getitem: positional indexing is not supported (got a float64"):
        t[ax.tensor(np.ones(1000), "Q")]
    with raises(TypeError, "getitem: a mask is a boolean tensor (got a float64 tensor (C=3))"):
        t.masked(ax.tensor(np.ones(3), "C"))
    assert t.masked(ax.tensor(np.ones(3), "C") > 0).names == ("N", "C", "H")  # the hint
    with raises(ax.AxesError, "getitem: a mask without axes selects no axis"):
        t[ax.tensor(np.array(True), ())]


# --- flip, roll, diff, topk ----------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 5), (0, 3), (1, 1)])
def test_flip_roll_diff_match_numpy(shape):
    t, arr = sample(shape, "N C")
    assert_close(t.flip("C"), np.flip(arr, 1))
    assert_close(t.flip(), np.flip(arr))
    if arr.size:
        assert_shares_memory(t.flip("N"), t)
    for shift in (-7, -1, 0, 1, 2, 6):
        assert_close(t.roll(C=shift), np.roll(arr, shift, axis=1))
        assert_close(t.roll({"N": shift, "C": 1}), np.roll(arr, (shift, 1), axis=(0, 1)))
    for n in (0, 1, 2, 7):
        assert_close(t.diff("C", n), np.diff(arr, n, axis=1))
    b = arr > 0
    assert_close(ax.tensor(b, "N C").diff("C"), np.diff(b, axis=1))
    i = arr.astype(np.int8)
    assert_close(ax.tensor(i, "N C").diff("N"), np.diff(i, axis=0))


def test_roll_and_diff_fuse():
    t, arr = sample((64, 64), "N C")
    with ax.set_options(engine="numba"):
        for e, expected in (
            (t.roll(C=3) - t, np.roll(arr, 3, axis=1) - arr),
            (ax.exp(t).diff("N", 2), np.diff(np.exp(arr), 2, axis=0)),
        ):
            assert len(ax.explain(e).kernels) == 1
            assert_close(e, expected)


def test_flip_roll_diff_errors():
    t, _ = sample((2, 3), "N C")
    with raises(ax.AxesError, "flip: unknown axis 'Q'"):
        t.flip("Q")
    with raises(TypeError, "roll: the shift of 'C' must be an integer (got 1.5). e.g. x.roll(C=1)"):
        t.roll(C=1.5)
    assert t.roll(C=1).names == ("N", "C")  # the hint
    with raises(ValueError, "diff: n must be a non-negative integer (got -1)."):
        t.diff("C", -1)


@pytest.mark.parametrize("shape", [(3, 6), (2, 1), (0, 4)])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_torch_semantics(shape, largest):
    t, arr = sample(shape, "N C")
    arr[..., :1] = 0.5  # ties
    t = ax.tensor(arr, "N C")
    for k in range(shape[1] + 1):
        values, indices = t.topk(k, "C", "K", largest=largest)
        assert values.names == indices.names == ("N", "K")
        order = np.argsort(-arr if largest else arr, axis=1, kind="stable")[:, :k]
        assert_close(indices, order)
        assert_close(values, np.take_along_axis(arr, order, axis=1))
    same = t.topk(1, "C")[0]
    assert same.names == ("N", "C")


def test_topk_nan_is_largest_and_errors():
    t = ax.tensor(np.array([1.0, np.nan, 3.0]), "N")
    values, indices = t.topk(2)
    assert_close(indices, np.array([1, 2]))
    assert np.isnan(values.numpy()[0])
    msg = "topk: k must be an integer from 0 to the length of 'N' (N=3; got k=4)."
    with raises(ValueError, msg):
        t.topk(4, "N")
    assert t.topk(1, "N")[1].numpy().tolist() == [1]  # the hint
    with raises(ax.AxesError, "topk: name the axis to work along"):
        ax.tensor(np.zeros((2, 2)), "N C").topk(1)


def test_topk_gradient_scatters_to_the_picked_elements():
    arr = rng.standard_normal((3, 5))
    w = ax.variable(arr, "N C")
    values, _ = w.topk(2, "C", "K")
    gw = ax.grad((values * ax.tensor(np.array([1.0, 10.0]), "K")).sum(), wrt=[w])[0]
    expected = np.zeros_like(arr)
    order = np.argsort(-arr, axis=1, kind="stable")[:, :2]
    np.put_along_axis(expected, order, np.array([[1.0, 10.0]]), axis=1)
    assert_close(gw, expected)


def test_median_has_no_gradient_and_says_so():
    w = ax.variable(rng.standard_normal((3, 5)), "N C")
    with pytest.raises(TypeError, match="median"):
        ax.grad(w.median("C").sum(), wrt=[w])
