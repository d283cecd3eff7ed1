"""Tensors born in a layout (issue 20): ``ax.empty/zeros/ones/full(..., layout=)`` and
``ax.empty_like_layout(tensor)``. The oracle is numpy's ``zeros/ones/full`` laid out by
``to_layout`` (the physical array, padding included, must be the same)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import axesarray as ax

LAYOUTS = ["NCHW", "NHWC", "NCHW4", "NCHW32", "CHWN4"]
SHAPES = [(2, 5, 3, 2), (1, 1, 1, 1), (0, 3, 2, 2), (2, 0, 1, 1), (1, 33, 1, 2)]


def raises(exc, text: str):
    return pytest.raises(exc, match="^" + re.escape(text))


def _axes(shape):
    return tuple(ax.Axis(n, k) for n, k in zip("NCHW", shape, strict=True))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "make, value",
    [
        (lambda a, d, lay: ax.zeros(a, d, layout=lay), 0),
        (lambda a, d, lay: ax.ones(a, d, layout=lay), 1),
        (lambda a, d, lay: ax.full(a, -3, d, layout=lay), -3),
    ],
)
def test_born_in_layout_matches_to_layout(make, value, layout, shape):
    for dtype in ("int8", "float32"):
        t = make(_axes(shape), dtype, layout)
        expected = np.full(shape, value, dtype)
        assert str(t.layout) == layout and t.dtype == np.dtype(dtype) and t.is_lvalue
        np.testing.assert_array_equal(t.numpy(), expected)
        oracle = ax.tensor(expected, "N C H W").to_layout(layout).physical
        assert t.physical.shape == oracle.shape
        np.testing.assert_array_equal(t.physical, oracle)  # padding lanes are zero


@pytest.mark.parametrize("layout", LAYOUTS)
def test_empty_in_layout_is_writable_and_padding_zero(layout):
    shape = (2, 5, 3, 2)
    t = ax.empty(_axes(shape), "float32", layout=layout)
    arr = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    t[...] = ax.tensor(arr, "N C H W")
    np.testing.assert_array_equal(t.numpy(), arr)
    np.testing.assert_array_equal(t.physical, ax.tensor(arr, "N C H W").to_layout(layout).physical)


def test_roles_and_layout_objects():
    b, f, y, x = ax.Axis("b", 2), ax.Axis("f", 6), ax.Axis("y", 3), ax.Axis("x", 1)
    t = ax.ones((b, f, y, x), "int8", layout="NCHW4", N="b", C="f", H="y", W="x")
    assert t.physical.shape == (2, 2, 3, 1, 4)
    assert t.physical[:, 1, :, :, 2:].sum() == 0 and t.numpy().sum() == 2 * 6 * 3
    two = ax.full((ax.Axis("N", 3), ax.Axis("C", 5)), 2.5, layout=ax.Layout("N C", {"C": 4}))
    assert two.dtype == np.float64 and two.physical.shape == (3, 2, 4)
    np.testing.assert_array_equal(two.numpy(), np.full((3, 5), 2.5))


@pytest.mark.parametrize("layout", [None, "NHWC", "NCHW32"])
def test_empty_like_layout_takes_a_tensor(layout):
    src = ax.tensor(np.arange(24, dtype=np.int8).reshape(1, 3, 2, 4), "N C H W")
    src = src if layout is None else src.to_layout(layout)
    out = ax.empty_like_layout(src)
    assert (
        out.axes == src.axes
        and out.dtype == src.dtype
        and out.layout == (src.layout or ax.Layout("N C H W"))
    )
    out[...] = src
    np.testing.assert_array_equal(out.numpy(), src.numpy())
    wide = ax.empty_like_layout(src, "float32", "NCHW4")
    assert wide.dtype == np.float32 and str(wide.layout) == "NCHW4"
    assert wide.physical.shape == (1, 1, 2, 4, 4)


def test_errors():
    a = _axes((1, 3, 2, 2))
    with raises(
        TypeError,
        "zeros: role keywords map a layout's letters to axis names; no layout was given "
        "(N='b'). Add layout=, e.g. layout='NHWC'.",
    ):
        ax.zeros(a, N="b")
    with raises(ax.LayoutError, "ones: the tensor has no 'H', 'W' (layout NCHW4; axes: N=1, C=3)."):
        ax.ones(a[:2], "int8", layout="NCHW4")
    axes = (ax.Axis("b", 2), ax.Axis("f", 6), ax.Axis("y", 3), ax.Axis("x", 1))
    with raises(ax.LayoutError, "zeros: the tensor has no 'N', 'H', 'W', 'C'") as e:
        ax.zeros(axes, layout="NHWC")
    hint = str(e.value).split("order): ")[1][:-1]
    assert hint == "ax.zeros(axes, layout='NHWC', N='b', C='f', H='y', W='x')"
    assert eval(hint, {"ax": ax, "axes": axes}).physical.shape == (2, 3, 1, 6)
    with raises(ax.LayoutError, "layout: unknown layout"):
        ax.empty(a, layout="NCHWz")
    with raises(
        TypeError,
        "empty_like_layout: dtype and layout needed for axes (only a tensor gives them) "
        "(N=1, C=3, H=2, W=2). Pass them",
    ):
        ax.empty_like_layout(ax.Axes(a))
    assert ax.empty_like_layout(ax.Axes(a), "float32", "NCHW4").physical.shape == (1, 1, 2, 2, 4)


@pytest.mark.parametrize("layout", ["NCHW4", "NCHW32"])
@pytest.mark.parametrize("shape", [(2, 5, 3, 4), (1, 1, 1, 1), (0, 3, 2, 2)])
def test_quantization_is_one_kernel(layout, shape):
    """The layouts guide's int8 quantization: one kernel into a tensor born in the layout,
    equal to numpy's round/clip/astype element for element."""
    arr = np.random.default_rng(2).standard_normal(shape).astype(np.float32) * 3
    x = ax.tensor(arr, "N C H W")
    scale = abs(x).max(("N", "H", "W")) / 127 if arr.size else ax.ones((x.axes["C"],), "float32")
    inv = (1 / scale).eval()
    q = ax.empty(x.axes, "int8", layout=layout)
    e = (x * inv).round().clip(-128, 127).astype("int8")
    assert len(ax.explain(e, out=q).kernels) == 1
    q[...] = e
    s = scale.numpy()
    ref = np.clip(np.round(arr * (1 / s)[None, :, None, None]), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(q.numpy(), ref)
    np.testing.assert_array_equal(q.physical, ax.tensor(ref, "N C H W").to_layout(layout).physical)
