"""``axesarray.array_api`` against numpy (the oracle): positional broadcasting, reductions,
views, indexing, manipulation, sorting, linear algebra, dtypes; laziness and kernel
counts; every error path. The standard's own suite (data-apis/array-api-tests) is run
separately (docs/guide/interop.md); its known failures are in tests/array_api_xfails.txt.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given
from hypothesis import strategies as st

import axesarray as ax
import axesarray.array_api as xp

DTYPES = ["bool", "int8", "int32", "int64", "uint8", "uint64", "float32", "float64"]


def raises(exc, text: str):
    return pytest.raises(exc, match="^" + re.escape(text))


@st.composite
def shapes(draw, min_dims=0, max_dims=3):
    return tuple(draw(st.lists(st.integers(0, 3), min_size=min_dims, max_size=max_dims)))


@st.composite
def broadcastable(draw):
    """Two shapes that broadcast (numpy's rule: trailing-aligned, length 1 stretches)."""
    out = draw(shapes(max_dims=4))
    a, b = [], []
    for n in out:
        a.append(draw(st.sampled_from([n, 1])))
        b.append(draw(st.sampled_from([n, 1])))
    return tuple(a[draw(st.integers(0, len(a))) :]), tuple(b[draw(st.integers(0, len(b))) :])


def values(shape, dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(1, 9, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture
def reference():
    """Broad property tests run on the reference engine: their subject is the positional
    mapping, not the kernels (which the kernel-count tests below cover)."""
    with ax.set_options(engine="numpy"):
        yield


def lazy(a: xp.Array) -> bool:
    return not a.tensor.is_lvalue


# --- broadcasting and elementwise ---------------------------------------------------------


@given(
    broadcastable(),
    st.sampled_from(
        ["add", "subtract", "multiply", "divide", "maximum", "less", "equal", "atan2", "logaddexp"]
    ),
)
def test_binary_broadcasts_like_numpy(reference, pair, name):
    sa, sb = pair
    a, b = values(sa), values(sb, seed=1)
    np_name = {"atan2": "arctan2"}.get(name, name)
    out = getattr(xp, name)(xp.asarray(a), xp.asarray(b))
    assert out.shape == np.broadcast_shapes(sa, sb)
    assert_close(np.asarray(out), getattr(np, np_name)(a, b))


@given(broadcastable())
def test_operators_and_scalars(reference, pair):
    sa, sb = pair
    a, b = values(sa, "int64"), values(sb, "int64", seed=2)
    x, y = xp.asarray(a), xp.asarray(b)
    for got, want in [
        (x + y, a + b),
        (x * 2, a * 2),
        (3 - x, 3 - a),
        (x // y, a // b),
        (x % y, a % b),
        (x & y, a & b),
        (x << 1, a << 1),
        (-x, -a),
        (x**2, a**2),
        (x >= y, a >= b),
        (x / 2, a / 2),
        (abs(-x), a),
    ]:
        assert_close(np.asarray(got), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_functions_keep_numpy_dtypes(dtype):
    a = values((2, 3), dtype)
    x = xp.asarray(a)
    assert x.dtype == np.dtype(dtype)
    if dtype != "bool":
        assert_close(np.asarray(xp.abs(x)), np.abs(a))
        assert_close(np.asarray(xp.sign(x)), np.sign(a))
    if np.dtype(dtype).kind == "f":
        for name, np_name in [
            ("exp", "exp"),
            ("tan", "tan"),
            ("asinh", "arcsinh"),
            ("trunc", "trunc"),
            ("sqrt", "sqrt"),
            ("log10", "log10"),
        ]:
            with np.errstate(all="ignore"):
                want = getattr(np, np_name)(a)
            assert_close(np.asarray(getattr(xp, name)(x)), want)


def test_elementwise_chains_stay_lazy_and_fuse():
    a = values((64, 32))
    x = xp.asarray(a)
    y = xp.exp(-(x - xp.mean(x, axis=0))) / (1 + x * x)
    assert lazy(y)
    plan = ax.explain(y.tensor)
    assert len(plan.kernels) == len(
        ax.explain(
            (lambda t: ax.exp(-(t - t.mean("N"))) / (1 + t * t))(ax.tensor(a, "N C"))
        ).kernels
    )
    assert_close(np.asarray(y), np.exp(-(a - a.mean(0))) / (1 + a * a))
    assert not lazy(y)  # the value replaced the expression


def test_length_one_axes_broadcast_without_copies():
    a, b = values((3, 1)), values((1, 4), seed=1)
    out = xp.asarray(a) * xp.asarray(b)
    assert out.shape == (3, 4) and lazy(out)
    assert len(ax.explain(out.tensor).kernels) == 1
    assert_close(np.asarray(out), a * b)


# --- reductions ------------------------------------------------------------------------------


@given(shapes(min_dims=1), st.data())
def test_reductions_match_numpy(reference, shape, data):
    a = values(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    keep = data.draw(st.booleans())
    x = xp.asarray(a)
    for name in ["sum", "prod", "mean", "std", "var", "any", "all"]:
        if name in ("mean", "std", "var") and (
            a.size == 0 or (axis is not None and shape[axis] == 0)
        ):
            continue
        got = getattr(xp, name)(x, axis=axis, keepdims=keep)
        with np.errstate(all="ignore"):
            want = getattr(np, name)(a, axis=axis, keepdims=keep)
        assert got.shape == np.shape(want)
        assert_close(np.asarray(got), want, scale=10)
    if a.size and (axis is None or shape[axis]):
        assert_close(
            np.asarray(xp.max(x, axis=axis, keepdims=keep)), np.max(a, axis=axis, keepdims=keep)
        )
        assert_close(
            np.asarray(xp.argmax(x, axis=axis, keepdims=keep)),
            np.argmax(a, axis=axis, keepdims=keep),
        )


def test_sum_dtypes_and_correction():
    a = values((4, 3), "int32")
    assert xp.sum(xp.asarray(a)).dtype == np.int64
    assert xp.sum(xp.asarray(a.astype("uint8"))).dtype == np.uint64
    f = values((5, 2))
    assert_close(np.asarray(xp.var(xp.asarray(f), axis=0, correction=1)), np.var(f, axis=0, ddof=1))


def test_cumulative_sum_include_initial():
    a = values((3, 4), "int64")
    got = xp.cumulative_sum(xp.asarray(a), axis=1, include_initial=True)
    assert_close(np.asarray(got), np.concatenate([np.zeros((3, 1), "int64"), np.cumsum(a, 1)], 1))


# --- indexing ---------------------------------------------------------------------------------


@given(shapes(min_dims=1), st.data())
def test_basic_indexing_is_a_view_like_numpy(reference, shape, data):
    a = values(shape)
    key = []
    for n in shape:
        kind = data.draw(st.sampled_from(["int", "slice", "none", "all"]))
        if kind == "int" and n:
            key.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = data.draw(st.one_of(st.none(), st.integers(-4, 4)))
            step = data.draw(st.sampled_from([None, 1, 2, -1, -2]))
            key.append(slice(start, None, step))
        elif kind == "none":
            key.append(None)
            key.append(slice(None))
        else:
            key.append(slice(None))
    key = tuple(key)
    x = xp.asarray(a)
    got = x[key]
    assert got.shape == a[key].shape
    assert got.tensor.is_lvalue  # a view of the same memory
    assert_close(np.asarray(got), a[key])
    assert_close(np.asarray(x[..., None]), a[..., None])


def test_advanced_indexing_and_setitem():
    a = values((4, 5))
    x = xp.asarray(a.copy())
    mask = xp.asarray(a > 0)
    assert_close(np.asarray(x[mask]), a[a > 0])
    assert_close(np.asarray(x[xp.asarray([0, 2]), 1]), a[[0, 2], 1])
    x[1:3, 0] = 7.0
    b = a.copy()
    b[1:3, 0] = 7.0
    assert_close(np.asarray(x), b)
    y = x + 1  # lazy; a write computes it first
    y[0] = xp.asarray(np.zeros(5))
    assert_close(np.asarray(y), np.concatenate([np.zeros((1, 5)), b[1:] + 1]))


# --- manipulation -------------------------------------------------------------------------------


@given(shapes(min_dims=1, max_dims=4), st.data())
def test_permute_reshape_flip_match_numpy(reference, shape, data):
    a = values(shape)
    x = xp.asarray(a)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    assert_close(np.asarray(xp.permute_dims(x, perm)), np.transpose(a, perm))
    assert_close(np.asarray(xp.permute_dims(x + 1, perm)), np.transpose(a + 1, perm))
    target = data.draw(st.sampled_from([(-1,), (a.size,), (1, a.size), (a.size, 1, 1)]))
    assert_close(np.asarray(xp.reshape(x * 2, target)), np.reshape(a * 2, target))
    assert_close(
        np.asarray(xp.reshape(xp.permute_dims(x, perm), (-1,))), np.transpose(a, perm).reshape(-1)
    )
    assert_close(np.asarray(xp.flip(x, axis=0)), np.flip(a, 0))


def test_concat_stack_expand_squeeze_broadcast():
    a, b = values((2, 3)), values((2, 3), seed=1)
    x, y = xp.asarray(a), xp.asarray(b)
    assert_close(np.asarray(xp.concat([x, y], axis=1)), np.concatenate([a, b], 1))
    assert_close(np.asarray(xp.concat([x, y], axis=None)), np.concatenate([a.ravel(), b.ravel()]))
    assert_close(np.asarray(xp.stack([x, y], axis=-1)), np.stack([a, b], -1))
    assert xp.expand_dims(x, axis=(0, 3)).shape == (1, 2, 3, 1)
    assert xp.squeeze(xp.expand_dims(x, axis=1), axis=1).shape == (2, 3)
    assert_close(
        np.asarray(xp.broadcast_to(x[:, :1], (4, 2, 3))), np.broadcast_to(a[:, :1], (4, 2, 3))
    )
    assert_close(np.asarray(xp.moveaxis(x, 0, -1)), np.moveaxis(a, 0, -1))
    assert [u.shape for u in xp.unstack(x, axis=1)] == [(2,)] * 3
    g = xp.meshgrid(xp.arange(3), xp.arange(2))
    want = np.meshgrid(np.arange(3), np.arange(2))
    for got, w in zip(g, want, strict=True):
        assert_close(np.asarray(got), w)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_argsort_are_stable(descending):
    a = np.array([[3, 1, 3, 2, 1], [0, 0, 5, 5, 1]])
    x = xp.asarray(a)
    idx = np.argsort(-a if descending else a, axis=1, stable=True)
    assert_close(np.asarray(xp.argsort(x, axis=1, descending=descending)), idx)
    assert_close(
        np.asarray(xp.sort(x, axis=1, descending=descending)), np.take_along_axis(a, idx, 1)
    )


def test_set_and_searching_functions():
    a = np.array([3, 1, 3, 2, 1, 1])
    x = xp.asarray(a)
    v, c = xp.unique_counts(x)
    assert_close(np.asarray(v), np.unique(a))
    assert_close(np.asarray(c), np.unique(a, return_counts=True)[1])
    assert_close(np.asarray(xp.nonzero(x > 1)[0]), np.nonzero(a > 1)[0])
    assert_close(
        np.asarray(xp.searchsorted(xp.asarray([1, 2, 3]), x)), np.searchsorted([1, 2, 3], a)
    )
    assert_close(np.asarray(xp.count_nonzero(x - 1)), np.int64(np.count_nonzero(a - 1)))
    assert_close(np.asarray(xp.where(x > 1, x, -x)), np.where(a > 1, a, -a))


# --- linear algebra ----------------------------------------------------------------------------


@given(
    st.sampled_from(
        [
            ((3,), (3,)),
            ((2, 3), (3,)),
            ((3,), (3, 4)),
            ((2, 3), (3, 4)),
            ((5, 2, 3), (3, 4)),
            ((1, 2, 3), (4, 3, 2)),
            ((0, 3), (3, 2)),
        ]
    )
)
def test_matmul_matches_numpy(reference, pair):
    a, b = values(pair[0]), values(pair[1], seed=1)
    assert_close(np.asarray(xp.asarray(a) @ xp.asarray(b)), a @ b, scale=10)


def test_tensordot_vecdot():
    a, b = values((2, 3, 4)), values((3, 4, 5), seed=1)
    x, y = xp.asarray(a), xp.asarray(b)
    assert_close(np.asarray(xp.tensordot(x, y, axes=2)), np.tensordot(a, b, 2), scale=10)
    assert_close(
        np.asarray(xp.tensordot(x, y, axes=([1], [0]))), np.tensordot(a, b, ([1], [0])), scale=10
    )
    c = values((5, 4), seed=2)
    assert_close(np.asarray(xp.vecdot(x, xp.asarray(c[:1]))), np.sum(a * c[:1], -1), scale=10)


# --- dtypes, creation, conversions -------------------------------------------------------------


def test_dtype_functions_and_info():
    assert xp.__array_api_version__ == "2024.12"
    assert xp.isdtype(xp.int8, "signed integer") and not xp.isdtype(
        xp.uint8, ("real floating", "bool")
    )
    assert xp.result_type(xp.int8, xp.uint8) == np.int16
    assert xp.can_cast(xp.int8, xp.int16) and not xp.can_cast(xp.float64, xp.int64)
    assert xp.finfo(xp.float32).eps == np.finfo(np.float32).eps
    info = xp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == np.float64
    assert set(info.dtypes(kind="integral")) == {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
    }
    x = xp.asarray([1.5, 2.5])
    assert x.__array_namespace__() is xp
    assert_close(np.asarray(xp.astype(x, xp.int32)), np.array([1, 2], "int32"))
    assert float(xp.sum(x)) == 4.0 and int(xp.asarray(3)) == 3 and bool(xp.asarray(True))


def test_creation_functions():
    assert_close(np.asarray(xp.arange(1, 7, 2)), np.arange(1, 7, 2))
    assert_close(np.asarray(xp.linspace(0, 1, 5)), np.linspace(0, 1, 5))
    assert_close(np.asarray(xp.eye(3, k=1)), np.eye(3, k=1))
    assert_close(np.asarray(xp.full((2,), 3, dtype=xp.int8)), np.full(2, 3, "int8"))
    assert_close(np.asarray(xp.tril(xp.ones((3, 3)))), np.tril(np.ones((3, 3))))
    assert xp.zeros_like(xp.ones((2, 2), dtype=xp.int16)).dtype == np.int16


def test_asarray_shares_memory_and_copies_on_request():
    a = np.arange(4.0)
    x = xp.asarray(a)
    assert np.shares_memory(np.asarray(x), a)
    assert not np.shares_memory(np.asarray(xp.asarray(a, copy=True)), a)
    assert np.from_dlpack(x)[2] == 2.0


def test_complex_arrays_run_numpy():
    z = xp.asarray([1 + 2j, 3 - 1j])
    assert z.dtype == xp.complex128
    assert_close(np.asarray(xp.sum(z * z)), np.sum(np.array([1 + 2j, 3 - 1j]) ** 2))
    assert_close(np.asarray(xp.real(z)), np.array([1.0, 3.0]))


def test_numpy_functions_and_ufuncs_stay_lazy():
    a = values((6, 4))
    a[1, 2] = np.nan
    x = xp.asarray(a)
    for got, want in [
        (np.exp(x), np.exp(a)),
        (np.nanmean(x, axis=0), np.nanmean(a, axis=0)),
        (np.nanstd(x, axis=0, ddof=1), np.nanstd(a, axis=0, ddof=1)),
        (np.nanvar(x, axis=1, keepdims=True), np.nanvar(a, axis=1, keepdims=True)),
        (np.nansum(x), np.nansum(a)),
        (np.nanmax(x, axis=0), np.nanmax(a, axis=0)),
        (np.nanmin(x), np.nanmin(a)),
    ]:
        assert isinstance(got, xp.Array) and lazy(got)
        assert_close(np.asarray(got), want)
    t = np.transpose(x)
    assert isinstance(t, xp.Array) and np.shares_memory(np.asarray(t), a)  # a view
    assert_close(np.asarray(np.median(x, axis=0)), np.median(a, axis=0))  # computed by numpy


# --- errors ----------------------------------------------------------------------------------

x2 = xp.asarray(np.zeros((2, 3)))


@pytest.mark.parametrize(
    "call, exc, text",
    [
        (
            lambda: x2 + xp.ones((4,)),
            ValueError,
            "__add__: shapes do not broadcast ((2, 3) and (4,)).",
        ),
        (lambda: xp.Array(), TypeError, "Array: Arrays are made by the namespace's functions"),
        (lambda: xp.ones(3).T, ValueError, "T: only for 2-D arrays (ndim=1)."),
        (
            lambda: float(x2),
            TypeError,
            "__float__: only a 0-d array converts to a Python scalar (shape (2, 3)).",
        ),
        (
            lambda: xp.asarray(x2).__index__(),
            TypeError,
            "__index__: only integer arrays are indices",
        ),
        (
            lambda: xp.astype(x2, "float16"),
            TypeError,
            "astype: not an array API dtype of axesarray (got float16).",
        ),
        (
            lambda: xp.permute_dims(x2, (0, 0)),
            ValueError,
            "permute_dims: axes must be a permutation",
        ),
        (lambda: xp.reshape(x2, (4,)), ValueError, "reshape: the sizes differ ((2, 3) -> (4,))."),
        (lambda: xp.squeeze(x2, 0), ValueError, "squeeze: axis 0 has length 2"),
        (
            lambda: xp.matmul(x2, x2),
            ValueError,
            "matmul: the contracted lengths differ ((2, 3) @ (2, 3)).",
        ),
        (
            lambda: xp.matmul(xp.asarray(1.0), x2),
            ValueError,
            "matmul: 0-d arrays cannot be multiplied as matrices",
        ),
        (
            lambda: xp.vecdot(x2, x2, axis=0),
            ValueError,
            "vecdot: axis must be negative and within both arrays (0).",
        ),
        (
            lambda: xp.concat([x2, xp.ones(3)]),
            ValueError,
            "concat: arrays must have the same number of dimensions",
        ),
        (lambda: xp.sum(x2, axis=2), IndexError, "sum: axis 2 is out of range (ndim=2)."),
        (lambda: xp.sum(x2, axis=(0, 0)), ValueError, "sum: an axis is repeated ((0, 0))."),
        (lambda: x2[0, 0, 0], IndexError, "__getitem__: too many indices (3 for 2 dimensions)."),
        (lambda: x2[5], IndexError, "__getitem__: index 5 is out of range for axis 0 (length 2)."),
        (lambda: x2[..., ...], IndexError, "__getitem__: more than one ellipsis"),
        (
            lambda: xp.cumulative_sum(x2),
            ValueError,
            "cumulative_sum: axis is required for more than one dimension (ndim=2).",
        ),
        (lambda: xp.isdtype(xp.int8, "whole"), ValueError, "isdtype: unknown kind ('whole')."),
        (
            lambda: xp.meshgrid(xp.ones(2), indexing="ji"),
            ValueError,
            "meshgrid: indexing must be 'xy' or 'ij' ('ji').",
        ),
        (
            lambda: -xp.asarray([True]),
            TypeError,
            "__neg__: negative of a boolean array. Use ~x (logical not).",
        ),
        (lambda: xp.nonzero(xp.asarray(1)), ValueError, "nonzero: a 0-d array has no positions"),
        (
            lambda: xp.asarray(np.float16(1.0), copy=False, dtype=xp.float32),
            ValueError,
            "asarray: the data cannot be used without a copy",
        ),
        (
            lambda: xp.asarray(xp.ones(2), copy=False, dtype=xp.float32),
            ValueError,
            "asarray: a dtype change needs a copy",
        ),
        (
            lambda: np.asarray(x2 + 1, copy=False),
            ValueError,
            "__array__: a lazy array is computed into new memory",
        ),
        (lambda: xp.sum([1, 2]), TypeError, "sum: expected an Array (list). Use asarray(x) first."),
        (lambda: ax.to_xarray(np.zeros(2)), TypeError, "to_xarray: expected a Tensor (ndarray)."),
        (
            lambda: ax.to_xarray(ax.ones((ax.Axis("N", 2),)), "yes"),
            TypeError,
            "to_xarray: lazy must be True or False (got 'yes').",
        ),
        (lambda: xp.asarray([1j]).tensor, TypeError, "tensor: a complex array has no named tensor"),
    ],
)
def test_errors(call, exc, text):
    with raises(exc, text):
        call()


def test_inplace_shape_change_is_refused_and_hints_work():
    x = xp.ones((1, 3))
    with raises(
        ValueError, "__iadd__: an in-place result must keep the array's shape ((1, 3) -> (2, 3))."
    ):
        x += xp.ones((2, 3))
    x += xp.ones((1, 3))  # same shape: fine, dtype kept
    assert_close(np.asarray(x), np.full((1, 3), 2.0))
    assert_close(
        np.asarray(xp.sum(xp.asarray([1, 2]))), np.int64(3)
    )  # the hint of "expected an Array"
    assert np.asarray(x2 + 1, copy=None).shape == (2, 3)  # the hint of __array__
    assert float(xp.sum(x2)) == 0.0 and float(x2[0, 0]) == 0.0  # index one element first


def test_the_xfails_file_gives_a_reason_for_every_test():
    """tests/array_api_xfails.txt (the standard suite's --xfails-file): every test id is
    under a ``# reason`` line of its block, and no id is listed twice."""
    from pathlib import Path

    lines = (Path(__file__).parent / "array_api_xfails.txt").read_text().splitlines()
    ids, reason = [], False
    for line in lines:
        if not line.strip():
            reason = False
        elif line.startswith("#"):
            reason = True
        else:
            assert reason, f"no reason above {line}"
            assert line.startswith("array_api_tests/"), line
            ids.append(line)
    assert ids and len(ids) == len(set(ids))


def test_complex_zero_d_operators_stay_arrays():
    z = xp.asarray(1 + 2j)
    for got, want in [(+z, 1 + 2j), (-z, -1 - 2j), (abs(z), 5**0.5), (z * 2, 2 + 4j)]:
        assert isinstance(got, xp.Array) and got.shape == ()
        assert_close(np.asarray(got), np.asarray(want))
