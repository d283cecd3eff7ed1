"""Views share memory: zero-copy ``ax.tensor``, numpy's byte strides, writes both ways.

The sources hold their own element ids (``np.arange`` over the parent buffer), so a view's
values say which storage element each index reads: equal values mean equal addresses.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import example, given
from hypothesis import strategies as st
from strategies import Source, apply_view_op, axes, make_array, shadow_view_op, sources, view_ops

import axesarray as ax

N, C, H, W = ax.Axis("N", 2), ax.Axis("C", 3), ax.Axis("H", 4), ax.Axis("W", 5)


def ids(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int64)


def expressible(arr: np.ndarray) -> bool:
    """Whether the ids in ``arr`` are ``offset + sum(i_k * s_k)``: one strided view."""
    if arr.size == 0:
        return True
    for d in range(arr.ndim):
        if arr.shape[d] > 1:
            diffs = np.diff(arr, axis=d)
            if not (diffs == diffs.flat[0]).all():
                return False
    return True


def assert_strides_from_ids(t: ax.Tensor, shadow: np.ndarray) -> None:
    """Byte strides of every dim longer than 1 equal the id step times the item size."""
    if shadow.size == 0:
        return
    for d, (n, s) in enumerate(zip(shadow.shape, t.strides, strict=True)):
        if n > 1:
            step = np.take(shadow, 1, axis=d).flat[0] - np.take(shadow, 0, axis=d).flat[0]
            assert s == step * shadow.itemsize, f"dim {d}: stride {s}, numpy's {step * 8}"


@st.composite
def chains(draw):
    a = draw(axes(max_rank=4))
    src = draw(sources(a.shape))
    ops = draw(view_ops(a))
    return a, src, ops


@given(chains())
@example(  # flatten in an order other than memory order must copy into that order
    (
        ax.Axes([ax.Axis("H", 2), ax.Axis("W", 3)]),
        Source.contiguous((2, 3)),
        (("flatten", ("W", "H"), "S"),),
    )
)
def test_view_chains_match_numpy(chain):
    """Any chain of view ops gives numpy's values; a view shares memory and has its strides."""
    a, src, ops = chain
    arr, parent = make_array(src, ids)
    t = ax.tensor(arr, a)
    shadow, names = arr, list(a.names)
    is_view = True
    for op in ops:
        t = apply_view_op(t, op)
        shadow, names = shadow_view_op(shadow, names, op)
        assert list(t.names) == names, op
        if op[0] == "flatten" and is_view:
            # A view exactly when one stride can express the merged index.
            is_view = expressible(shadow)
            assert t.is_lvalue
        np.testing.assert_array_equal(t.numpy(), shadow, err_msg=str(op))
    assert t.shape == shadow.shape
    assert t.is_lvalue, "views of l-tensors are l-tensors"
    if is_view and shadow.size:
        assert np.shares_memory(t.numpy(), parent)
        assert_strides_from_ids(t, shadow)
        if np.shares_memory(shadow, parent):
            for n, s, ns in zip(shadow.shape, t.strides, shadow.strides, strict=True):
                if n > 1:
                    assert s == ns


@given(chains())
def test_writes_through_views_reach_the_source(chain):
    """Assigning through a writeable view changes exactly the viewed source elements."""
    a, src, ops = chain
    arr, parent = make_array(src, ids)
    t = ax.tensor(arr, a)
    shadow, names = arr, list(a.names)
    for op in ops:
        t = apply_view_op(t, op)
        shadow, names = shadow_view_op(shadow, names, op)
    if t.description.read_only or t.size == 0 or not np.shares_memory(t.numpy(), parent):
        return  # broadcast (read-only), empty, or a flatten that had to copy
    targets = np.array(shadow, copy=True)
    expected = parent.copy()
    expected.reshape(-1)[targets.ravel()] = -(targets.ravel() + 1)  # parent is contiguous
    t[...] = ax.tensor(-(targets + 1), t.names)
    np.testing.assert_array_equal(parent, expected)
    # ...and back: numpy writes are visible through the tensor.
    parent[...] = parent * 3
    np.testing.assert_array_equal(t.numpy(), -(targets + 1) * 3)


# --- ax.tensor ----------------------------------------------------------------------------


@given(axes(max_rank=4), st.data())
def test_tensor_is_zero_copy_with_numpys_strides(a, data):
    """``ax.tensor`` wraps transposed, sliced and reversed arrays without copying."""
    src = data.draw(sources(a.shape))
    dtype = data.draw(st.sampled_from(["int8", "float16", "float32", "int64", "bool"]))
    arr, parent = make_array(src, lambda n: np.arange(n).astype(dtype))
    t = ax.tensor(arr, a)
    assert t.strides == arr.strides
    assert t.dtype == arr.dtype
    np.testing.assert_array_equal(t.numpy(), arr)
    if arr.size:
        assert np.shares_memory(t.numpy(), parent)
        assert t.numpy().strides == arr.strides


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(12.0).reshape(3, 4),
        lambda: np.arange(12.0).reshape(3, 4).T,
        lambda: np.arange(12.0).reshape(3, 4)[::-1, ::-2],
        lambda: np.arange(24.0).reshape(2, 3, 4)[1, :, 1:3],
        lambda: np.broadcast_to(np.arange(4.0), (3, 4)),
        lambda: np.zeros((0, 4)),
        lambda: np.zeros((1, 1)),
    ],
    ids=["contiguous", "transposed", "negative", "sliced", "broadcast", "empty", "ones"],
)
def test_tensor_wraps_numpy_views(make):
    """Every strided numpy array is wrapped in place with the same strides and values."""
    arr = make()
    t = ax.tensor(arr, "A B")
    assert t.strides == arr.strides
    assert t.description.read_only == (not arr.flags.writeable)
    np.testing.assert_array_equal(t.numpy(), arr)
    if arr.size:
        assert np.shares_memory(t.numpy(), arr)


def test_tensor_writes_both_ways():
    """A write through the tensor shows in the array, and a write to the array in the tensor."""
    a = np.zeros((2, 3))[:, ::-1]
    x = ax.tensor(a, "N C")
    x[{"C": 0}] = 5.0
    np.testing.assert_array_equal(a[:, 0], [5.0, 5.0])
    a[1, 2] = 7.0
    assert float(x[{"N": 1, "C": 2}]) == 7.0


def test_tensor_copies_when_needed():
    """Lists, dtype changes, ``copy=True`` and odd byte strides give a copy."""
    a = np.arange(6.0).reshape(2, 3)
    assert not np.shares_memory(ax.tensor(a, "N C", copy=True).numpy(), a)
    assert not np.shares_memory(ax.tensor(a, "N C", dtype="float32").numpy(), a)
    assert ax.tensor([[1, 2], [3, 4]], "N C").dtype == np.int64
    rec = np.zeros(3, dtype=[("a", "i4"), ("b", "f8")])
    b = rec["b"]  # strides of 12 bytes: not a multiple of the item size
    b[:] = [1.0, 2.0, 3.0]
    t = ax.tensor(b, "N")
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0, 3.0])
    assert t.strides == (8,)


def test_tensor_of_scalar_and_names_only():
    """A 0-d array takes no axes; names take lengths from the data."""
    t = ax.tensor(np.float32(2.5), "")
    assert t.axes == ax.Axes() and t.dtype == np.float32 and float(t) == 2.5
    assert ax.tensor(np.zeros((2, 3)), ["N", C]).axes == ax.Axes([N, C])


def test_read_only_source_gives_read_only_tensor():
    """A non-writeable array wraps as a read-only l-tensor; assignment refuses."""
    a = np.arange(3.0)
    a.flags.writeable = False
    t = ax.tensor(a, "N")
    assert t.description.read_only
    with pytest.raises(ValueError, match="read-only"):
        t[...] = 1.0


# --- numpy() and __array__ ----------------------------------------------------------------


def test_numpy_is_logical_order_view():
    """``numpy()`` of a transposed view is numpy's transpose, sharing memory."""
    a = np.arange(24.0).reshape(2, 3, 4)
    x = ax.tensor(a, "N C H").transpose("H N C")
    out = x.numpy()
    np.testing.assert_array_equal(out, a.transpose(2, 0, 1))
    assert np.shares_memory(out, a)
    assert out.strides == a.transpose(2, 0, 1).strides


def test_array_protocol():
    """``np.asarray`` works on l- and r-tensors; dtype and copy are honoured."""
    a = np.arange(6.0).reshape(2, 3)
    x = ax.tensor(a, "N C")
    np.testing.assert_array_equal(np.asarray(x), a)
    assert np.asarray(x, dtype=np.float32).dtype == np.float32
    assert not np.shares_memory(np.array(x, copy=True), a)
    assert_close(np.asarray(x * 2), a * 2)
    with pytest.raises(ValueError, match="r-tensor must be computed"):
        np.array(x * 2, copy=False)


# --- specific views ------------------------------------------------------------------------


def test_transpose_ellipsis():
    """``...`` stands for the unlisted axes in their order, anywhere in the list."""
    x = ax.zeros((N, C, H, W))
    assert x.transpose("W ...").names == ("W", "N", "C", "H")
    assert x.transpose("... N").names == ("C", "H", "W", "N")
    assert x.transpose("C ... N").names == ("C", "H", "W", "N")
    assert x.transpose("N C H W ...").names == ("N", "C", "H", "W")
    assert x.transpose(W, H, C, N).names == ("W", "H", "C", "N")


def test_isel_negative_steps_and_integers():
    """isel takes numpy's slices (any step) and integers (which drop the axis)."""
    a = np.arange(60).reshape(3, 4, 5)
    x = ax.tensor(a, "N C W")
    v = x.isel(N=-1, C=slice(None, None, -2), W=slice(4, 0, -3))
    np.testing.assert_array_equal(v.numpy(), a[-1, ::-2, 4:0:-3])
    assert v.names == ("C", "W")
    assert v.strides == a[-1, ::-2, 4:0:-3].strides
    assert x[{"N": 0, "C": 0, "W": 0}].shape == ()
    d = x.isel(C=slice(1, None))  # an axis kept whole is the same Axis; a cut one is interned
    assert d.axes[0] is x.axes[0] and d.axes[2] is x.axes[2]
    assert d.axes[1] is ax.Axis("C", 3) and ax.Axis._known("C", 3) is d.axes[1]
    assert ax.Axis._known("Q", 7) == ax.Axis("Q", 7)


def test_flatten_view_copy_and_copy_false():
    """flatten is a view when strides allow, else a copy; copy=False refuses to copy."""
    a = np.arange(24.0).reshape(2, 3, 4)
    x = ax.tensor(a, "N H W")
    v = x.flatten(("H", "W"), "S")
    assert np.shares_memory(v.numpy(), a)
    np.testing.assert_array_equal(v.numpy(), a.reshape(2, 12))
    t = x.transpose("N W H")
    c = t.flatten(("W", "H"), "S")
    assert not np.shares_memory(c.numpy(), a)
    np.testing.assert_array_equal(c.numpy(), a.transpose(0, 2, 1).reshape(2, 12))
    with pytest.raises(ax.AxesError, match="cannot be a view"):
        t.flatten(("W", "H"), "S", copy=False)
    assert t.flatten(("H", "W"), "S", copy=False).names == ("N", "S")  # memory order
    c2 = x.flatten(("H", "W"), "S", copy=True)
    assert not np.shares_memory(c2.numpy(), a)
    np.testing.assert_array_equal(c2.numpy(), a.reshape(2, 12))


def test_flatten_reorders_and_gathers_axes():
    """Merged axes need not be adjacent or in memory order; the result is numpy's reshape."""
    a = np.arange(24).reshape(2, 3, 4)
    x = ax.tensor(a, "N H W")
    np.testing.assert_array_equal(
        x.flatten(("W", "N"), "S").numpy(), a.transpose(2, 0, 1).reshape(8, 3)
    )
    np.testing.assert_array_equal(
        x.flatten(("W", "H"), "S").numpy(), a.transpose(0, 2, 1).reshape(2, 12)
    )
    assert x.flatten(("W", "N"), "S").names == ("S", "H")


def test_split_is_a_view():
    """split unflattens one axis row-major, sharing memory, with numpy's strides."""
    a = np.arange(24.0).reshape(2, 12)[:, ::-2]
    x = ax.tensor(a, "N C")
    s = x.split("C", (ax.Axis("Co", 3), ax.Axis("ci", 2)))
    np.testing.assert_array_equal(s.numpy(), a.reshape(2, 3, 2))
    assert np.shares_memory(s.numpy(), a)
    assert s.strides == a.reshape(2, 3, 2).strides


def test_broadcast_to_is_read_only_stride_zero():
    """broadcast_to gives stride 0 on new axes and a read-only view."""
    a = np.arange(3.0)
    x = ax.tensor(a, "C").broadcast_to((N, C))
    assert x.strides == (0, 8)
    assert x.description.read_only
    np.testing.assert_array_equal(x.numpy(), np.broadcast_to(a, (2, 3)))
    with pytest.raises(ValueError, match="read-only"):
        x[...] = 1.0
    np.testing.assert_array_equal(a, [0.0, 1.0, 2.0])


def test_squeeze_and_expand_dims():
    """squeeze drops length-1 axes; expand_dims adds length-1 (by name) or broadcast axes."""
    a = np.arange(3.0).reshape(1, 3, 1)
    x = ax.tensor(a, "A C B")
    assert x.squeeze().names == ("C",)
    assert x.squeeze("B").names == ("A", "C")
    e = x.squeeze().expand_dims("K", 1)
    assert e.axes == ax.Axes([C, ax.Axis("K", 1)])
    assert not e.description.read_only  # no element repeats: stays writeable
    b = x.squeeze().expand_dims(ax.Axis("K", 2), -1)
    np.testing.assert_array_equal(b.numpy(), np.broadcast_to(a.reshape(3, 1), (3, 2)))
    assert np.shares_memory(b.numpy(), a)


def test_rename_is_a_view():
    """rename keeps the data and the strides."""
    a = np.arange(6.0).reshape(2, 3)
    y = ax.tensor(a, "N C").rename(C="K")
    assert y.names == ("N", "K") and y.strides == a.strides
    assert np.shares_memory(y.numpy(), a)
