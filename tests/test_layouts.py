"""Layouts (DESIGN §4): names, roles, repacks against the offset formulas, padding, views,
wrapping physical buffers, ops on padded tensors. numpy is the oracle."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given
from hypothesis import strategies as st

import axesarray as ax
from axesarray import Axis, Layout, LayoutError
from axesarray.dag.nodes import Leaf

STANDARD = ["NCHW", "NHWC", "NCHW4", "NCHW8", "NCHW32", "NCHW64", "CHWN4"]
DTYPES = ["int8", "uint8", "float16", "float32", "float64"]


def block_of(name: str) -> int | None:
    if name == "CHWN4":
        return 4
    return int(name[4:]) if name[4:] else None


def expected_physical(logical: np.ndarray, name: str) -> np.ndarray:
    """The physical array built with numpy: pad C, split it, transpose."""
    n, c, h, w = logical.shape
    if name == "NCHW":
        return logical
    if name == "NHWC":
        return logical.transpose(0, 2, 3, 1)
    x = block_of(name)
    cb = -(-c // x)
    padded = np.pad(logical, ((0, 0), (0, cb * x - c), (0, 0), (0, 0)))
    blocks = padded.reshape(n, cb, x, h, w)
    return blocks.transpose(1, 3, 4, 0, 2) if name == "CHWN4" else blocks.transpose(0, 1, 3, 4, 2)


def design_offsets(name: str, shape) -> np.ndarray:
    """Flat physical offset of every logical (n, c, h, w): the DESIGN §4 table, verbatim."""
    N, C, H, W = shape
    n, c, h, w = np.indices(shape)
    if name == "NCHW":
        return ((n * C + c) * H + h) * W + w
    if name == "NHWC":
        return ((n * H + h) * W + w) * C + c
    if name == "CHWN4":
        return ((((c // 4) * H + h) * W + w) * N + n) * 4 + c % 4
    x = block_of(name)
    cb = -(-C // x)
    return (((n * cb + c // x) * H + h) * W + w) * x + c % x


def values(shape, dtype, seed=0) -> np.ndarray:
    # Small integers: exact in every dtype, and never 0 so padding stands out.
    return np.random.default_rng(seed).integers(1, 100, shape).astype(dtype)


def check_layout(t: ax.Tensor, name: str, logical: np.ndarray) -> None:
    """Physical array = formula element by element, padding zero, logical values kept."""
    assert str(t.layout) == name
    phys = t.physical
    np.testing.assert_array_equal(phys, expected_physical(logical, name), strict=True)
    flat = phys.reshape(-1) if phys.flags.c_contiguous else phys.copy().reshape(-1)
    off = design_offsets(name, logical.shape)
    np.testing.assert_array_equal(flat[off], logical)
    pad = np.ones(flat.shape, bool)
    pad[off.reshape(-1)] = False
    np.testing.assert_array_equal(flat[pad], np.zeros(pad.sum(), logical.dtype))
    np.testing.assert_array_equal(t.numpy(), logical, strict=True)


# --- the Layout value type ----------------------------------------------------------------


@pytest.mark.parametrize(
    "name, order, blocks",
    [
        ("NCHW", ("N", "C", "H", "W"), ()),
        ("NHWC", ("N", "H", "W", "C"), ()),
        ("NCHW4", ("N", "C", "H", "W"), (("C", 4),)),
        ("NCHW32", ("N", "C", "H", "W"), (("C", 32),)),
        ("NCHW64", ("N", "C", "H", "W"), (("C", 64),)),
        ("NCHW8", ("N", "C", "H", "W"), (("C", 8),)),
        ("NCHW3", ("N", "C", "H", "W"), (("C", 3),)),
        ("CHWN4", ("C", "H", "W", "N"), (("C", 4),)),
        ("nhwc16", ("N", "H", "W", "C"), (("C", 16),)),
    ],
)
def test_standard_names(name, order, blocks):
    lay = Layout.parse(name)
    assert lay.order == order and lay.blocks == blocks
    assert str(lay) == name.upper()
    assert Layout.parse(str(lay)) == lay


def test_general_constructor():
    lay = Layout(order="C H W N", blocks={"C": 4})
    assert lay == Layout.parse("CHWN4") and str(lay) == "CHWN4"
    assert hash(lay) == hash(Layout.parse("CHWN4"))
    assert eval(repr(lay), {"Layout": Layout}) == lay
    assert str(Layout(order="N C H W", blocks={"H": 2})) == "NCHW2h"
    assert str(Layout(order="batch feat y x", blocks={"feat": 4})) == "batch feat y x [feat:4]"
    assert Layout(order=("N", "C"), blocks=[("C", 2)]).block("C") == 2


LAYOUT_ERRORS = [
    (lambda: Layout.parse("NCHWX"), "layout: unknown layout 'NCHWX'. Write the block size"),
    (lambda: Layout.parse("NCHQ"), r"layout: unknown layout 'NCHQ'. Use NCHW, NHWC"),
    (lambda: Layout.parse("NCHW1"), r"layout: block size in 'NCHW1' must be >= 2 \(got 1\)"),
    (lambda: Layout.parse(4), "layout: expected a layout name or an ax.Layout"),
    (lambda: Layout(order="N C N"), "Layout: axis 'N' appears twice in the order"),
    (lambda: Layout(order="N C", blocks={"H": 4}), "Layout: block axis 'H' is not in the order"),
    (lambda: Layout(order="N C", blocks={"C": 1}), "Layout: block size of 'C' must be an integer"),
    (
        lambda: Layout(order="N C", blocks=[("C", 2), ("C", 4)]),
        r"Layout: axis 'C' is blocked twice \(C:2, C:4\)",
    ),
    (lambda: Layout(order="NCHW"), "Layout: order 'NCHW' is one word"),
    (lambda: Layout(order=["N", 3]), "Layout: an axis name must be a string identifier"),
    (lambda: Layout.parse("NCHW", D="depth"), "layout: roles name axes the layout does not have"),
    (lambda: Layout.parse("NCHW", N="1x"), "layout: role 'N' must map to an axis name"),
    (lambda: Layout.parse("NCHW", N="C"), "layout: two axes would get the same name"),
]


@pytest.mark.parametrize("make, match", LAYOUT_ERRORS)
def test_layout_errors(make, match):
    with pytest.raises(LayoutError, match=match):
        make()


def test_roles_map_letters_to_axis_names():
    logical = values((2, 3, 4, 5), "float32")
    t = ax.tensor(logical, "batch feat y x")
    u = t.to_layout("NHWC", N="batch", C="feat", H="y", W="x")
    assert str(u.layout) == "NHWC"
    assert u.layout.order == ("batch", "y", "x", "feat")
    assert u.layout == Layout(order="batch y x feat")
    np.testing.assert_array_equal(u.physical, logical.transpose(0, 2, 3, 1))
    v = t.to_layout("NCHW4", N="batch", C="feat", H="y", W="x")
    assert v.physical.shape == (2, 1, 4, 5, 4) and str(v.layout) == "NCHW4"
    np.testing.assert_array_equal(v.numpy(), logical)


def test_bind_errors_name_the_roles():
    t = ax.tensor(values((2, 3, 4, 5), "int8"), "batch feat y x")
    with pytest.raises(
        LayoutError,
        match=r"to_layout: the tensor has no 'N', 'C', 'H', 'W'.*"
        r"\(layout NCHW4; axes: batch=2, feat=3, y=4, x=5\)\. Map roles .*"
        r"N='batch', C='feat', H='y', W='x'",
    ):
        t.to_layout("NCHW4")
    five = ax.zeros((Axis("N", 1), Axis("C", 2), Axis("D", 3), Axis("H", 4), Axis("W", 5)))
    with pytest.raises(LayoutError, match="to_layout: the layout does not place 'D'"):
        five.to_layout("NCHW")
    assert str(five.to_layout(Layout("N C D H W", {"C": 4})).layout) == "NCDHW4"


@pytest.mark.parametrize("name", ["CHWN4", "NHWC", "NCHW32"])
@pytest.mark.parametrize("given", [{}, {"N": "batch"}, {"W": "x", "C": "feat"}])
def test_the_roles_hint_followed_literally_lays_out_the_tensor(name, given):
    """The hint pairs the letters with the axes in N C H W order (not the layout's) and
    keeps the roles already given, so the call it shows succeeds as meant."""
    logical = values((2, 3, 4, 5), "int8")
    t = ax.tensor(logical, "batch feat y x")
    with pytest.raises(LayoutError) as err:
        t.to_layout(name, **given)
    call = re.search(r"(to_layout\('\w+', [^)]*\))\.$", str(err.value))[1]
    u = eval("t." + call, {"t": t})
    assert str(u.layout) == name
    np.testing.assert_array_equal(u.physical, expected_physical(logical, name), strict=True)


# --- repacks against the formula ----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("src", STANDARD)
@pytest.mark.parametrize("dst", STANDARD)
def test_every_pair(src, dst, dtype):
    logical = values((2, 5, 3, 4), dtype)
    a = ax.tensor(logical, "N C H W").to_layout(src)
    check_layout(a, src, logical)
    b = a.to_layout(dst)
    check_layout(b, dst, logical)
    check_layout(b.to_layout(src), src, logical)


SHAPE_LENGTHS = st.sampled_from([0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 63, 64, 65])


@st.composite
def sources(draw):
    """A logical (N, C, H, W) array, as a tensor over a possibly non-contiguous view."""
    n = draw(st.sampled_from([0, 1, 2, 3]))
    c = draw(SHAPE_LENGTHS)
    h = draw(st.integers(0, 5))
    w = draw(st.integers(0, 5))
    dtype = draw(st.sampled_from(DTYPES))
    kind = draw(st.sampled_from(["plain", "sliced C", "reversed H", "transposed", "blocked"]))
    logical = values((n, c, h, w), dtype, seed=draw(st.integers(0, 3)))
    if kind == "plain":
        t = ax.tensor(logical, "N C H W")
    elif kind == "sliced C":
        big = np.repeat(logical, 2, axis=1)
        t = ax.tensor(big[:, ::2], "N C H W")
    elif kind == "reversed H":
        t = ax.tensor(np.ascontiguousarray(logical[:, :, ::-1])[:, :, ::-1], "N C H W")
    elif kind == "transposed":
        t = ax.tensor(np.ascontiguousarray(logical.transpose(0, 2, 3, 1)), "N H W C")
        t = t.transpose("N C H W")
    else:  # a view of a padded blocked tensor, cut through its blocks
        start = draw(st.integers(0, 3))
        wide = np.concatenate([values((n, start, h, w), dtype, 9), logical], axis=1)
        stored = ax.tensor(wide, "N C H W").to_layout(draw(st.sampled_from(STANDARD)))
        t = stored.isel(C=slice(start, start + c))
    return t, logical


@given(sources(), st.sampled_from(STANDARD))
def test_repack_random_shapes_and_sources(source, name):
    t, logical = source
    out = t.to_layout(name)
    check_layout(out, name, logical)
    back = out.to_layout("NCHW")
    np.testing.assert_array_equal(back.physical, logical, strict=True)


def test_round_trip_keeps_the_logical_length():
    logical = values((2, 5, 3, 3), "int8")
    packed = ax.tensor(logical, "N C H W").to_layout("NCHW32")
    assert packed.physical.shape == (2, 1, 3, 3, 32)
    assert packed.axes == ax.tensor(logical, "N C H W").axes
    assert packed.to_layout("NCHW").physical.shape == (2, 5, 3, 3)


@pytest.mark.parametrize("shape", [(0, 5, 2, 2), (2, 0, 2, 2), (2, 5, 0, 2), (1, 1, 1, 1)])
@pytest.mark.parametrize("name", ["NCHW4", "CHWN4", "NHWC"])
def test_empty_and_unit_axes(shape, name):
    logical = values(shape, "float32")
    out = ax.tensor(logical, "N C H W").to_layout(name)
    check_layout(out, name, logical)
    check_layout(out.to_layout("NCHW"), "NCHW", logical)


def test_chwn4_with_n1_has_the_bytes_of_nchw4():
    logical = values((1, 6, 3, 2), "int8")
    t = ax.tensor(logical, "N C H W")
    a, b = t.to_layout("CHWN4").physical, t.to_layout("NCHW4").physical
    np.testing.assert_array_equal(a.reshape(-1), b.reshape(-1))


def test_ambiguous_strides_keep_their_tag():
    # H = W = 1: NCHW and NHWC have the same bytes; the tag says which one it is.
    t = ax.tensor(values((2, 3, 1, 1), "float32"), "N C H W")
    a, b = t.to_layout("NCHW"), t.to_layout("NHWC")
    np.testing.assert_array_equal(a.physical.reshape(-1), b.physical.reshape(-1))
    assert str(a.layout) == "NCHW" and str(b.layout) == "NHWC"
    assert str((b + 1).eval().layout) == "NHWC"


def test_to_layout_always_copies():
    t = ax.tensor(values((1, 4, 2, 2), "int8"), "N C H W").to_layout("NCHW4")
    u = t.to_layout("NCHW4")
    assert not np.shares_memory(t.physical, u.physical)


# --- physical, views and wrapping -----------------------------------------------------------


def test_physical_is_a_zero_copy_view():
    t = ax.tensor(values((2, 5, 3, 3), "int8"), "N C H W").to_layout("NCHW4")
    phys = t.physical
    assert np.shares_memory(phys, t._node.data)
    phys[1, 0, 2, 1, 3] = 77
    assert t.numpy()[1, 3, 2, 1] == 77


def test_views_keep_the_layout():
    logical = values((2, 8, 3, 4), "int16")
    t = ax.tensor(logical, "N C H W").to_layout("NCHW4")
    tr = t.transpose("W C N H")
    assert tr.layout == t.layout and np.shares_memory(tr.physical, t.physical)
    np.testing.assert_array_equal(tr.physical, t.physical)
    h = t.isel(H=slice(1, 3))
    np.testing.assert_array_equal(h.physical, t.physical[:, :, 1:3])
    assert np.shares_memory(h.physical, t.physical)
    c = t.isel(C=slice(4, 8))
    np.testing.assert_array_equal(c.physical, t.physical[:, 1:2])
    n0 = t.isel(N=0)
    assert str(n0.layout) == "CHW4" and n0.physical.shape == (2, 3, 4, 4)
    one = t.isel(C=5)
    assert str(one.layout) == "NHW"
    np.testing.assert_array_equal(one.physical, logical[:, 5])
    r = t.rename(C="K")
    assert str(r.layout) == "NCHW4" and r.layout.order == ("N", "K", "H", "W")
    np.testing.assert_array_equal(r.physical, t.physical)


def test_a_view_through_blocks_computes_but_has_no_physical():
    logical = values((2, 9, 3, 2), "float32")
    t = ax.tensor(logical, "N C H W").to_layout("NCHW4")
    cases = [slice(1, 5), slice(0, 3), slice(None, None, -1), slice(0, 8, 2)]
    for key in cases:
        v = t.isel(C=key)
        assert v.layout.partial
        np.testing.assert_array_equal(v.numpy(), logical[:, key])
        np.testing.assert_array_equal((v * 2).sum("C").numpy(), (logical[:, key] * 2).sum(1))
        with pytest.raises(
            LayoutError,
            match=r"physical: the view does not cover whole blocks"
            r", so it has no physical array \(layout NCHW4; C=.* \(block 4\)\)\. "
            r"Copy it first: t.to_layout\(t.layout\).physical",
        ):
            _ = v.physical
        np.testing.assert_array_equal(v.to_layout(v.layout).numpy(), logical[:, key])
    # The padded tail is a whole block: slicing to the end keeps a physical array.
    tail = t.isel(C=slice(8, 9))
    np.testing.assert_array_equal(tail.physical, t.physical[:, 2:3])


def test_physical_errors():
    plain = ax.tensor(values((2, 3), "int8"), "N C")
    with pytest.raises(
        LayoutError,
        match=r"physical: the tensor has no layout \(N=2, C=3\)\. "
        r"Store it in one first",
    ):
        _ = plain.physical
    lazy = ax.tensor(values((1, 3, 2, 2), "int8"), "N C H W").to_layout("NCHW4") + 1
    assert str(lazy.layout) == "NCHW4"
    with pytest.raises(
        LayoutError,
        match=r"physical: an r-tensor has no storage .*"
        r"Evaluate it first: t.eval\(\).physical",
    ):
        _ = lazy.physical


def test_physical_of_device_storage_is_refused():
    class DeviceBuffer:  # stands for a CuPy / numba device array
        __cuda_array_interface__ = {}
        dtype = np.dtype("float32")
        size = 16

    t = ax.tensor(values((1, 4, 2, 2), "float32"), "N C H W").to_layout("NCHW4")
    on_gpu = ax.Tensor(t.axes, Leaf(DeviceBuffer(), t.node.view), t.layout)
    with pytest.raises(
        LayoutError,
        match=r"physical: the tensor is not in host memory "
        r"\(device cuda\)\. Bring it to the CPU first",
    ):
        _ = on_gpu.physical


def test_wrap_a_physical_buffer():
    logical = values((2, 5, 3, 4), "int8")
    phys = np.ascontiguousarray(expected_physical(logical, "NCHW4"))
    N, H, W = Axis("N", 2), Axis("H", 3), Axis("W", 4)
    t = ax.tensor(phys, (N, Axis("C", 5), H, W), layout="NCHW4")
    assert np.shares_memory(t.physical, phys) and str(t.layout) == "NCHW4"
    np.testing.assert_array_equal(t.numpy(), logical)
    full = ax.tensor(phys, "N C H W", layout="NCHW4")  # names only: C = Cb * x
    assert full.axes["C"] == Axis("C", 8)
    chwn = np.ascontiguousarray(expected_physical(logical, "CHWN4"))
    u = ax.tensor(chwn, (N, Axis("C", 5), H, W), layout=Layout("C H W N", {"C": 4}))
    np.testing.assert_array_equal(u.numpy(), logical)
    strided = np.zeros((2, 2, 3, 8, 4), "int8")[:, :, :, ::2]
    strided[...] = phys
    np.testing.assert_array_equal(
        ax.tensor(strided, "N C H W", layout="NCHW4").numpy()[:, :5], logical
    )


WRAP_ERRORS = [
    (
        np.zeros((2, 2, 3, 4), "int8"),
        "N C H W",
        r"tensor: a NCHW4 buffer has 5 dimensions but the array has 4 \(expected \(N, C//4, H, W, "
        r"C%4\); got shape \(2, 2, 3, 4\)\)\. Pass the physical array",
    ),
    (
        np.zeros((2, 2, 3, 4, 8), "int8"),
        "N C H W",
        r"tensor: the block dimension C%4 must have length 4 \(got shape",
    ),
    (
        np.zeros((2, 2, 3, 4, 4), "int8"),
        (Axis("N", 2), Axis("C", 4), "H", "W"),
        r"tensor: axis 'C' of length 4 does not fit 2 blocks of 4 "
        r"\(buffer shape \(2, 2, 3, 4, 4\)\)\. Use a length in 5..8",
    ),
    (
        np.zeros((2, 2, 3, 4, 4), "int8"),
        "N C H",
        r"tensor: the layout does not place 'W'|tensor: the tensor has no 'W'",
    ),
]


@pytest.mark.parametrize("buf, axes, match", WRAP_ERRORS)
def test_wrap_errors(buf, axes, match):
    with pytest.raises(LayoutError, match=match):
        ax.tensor(buf, axes, layout="NCHW4")


def test_wrap_length_mismatch_is_an_axes_error():
    with pytest.raises(ax.AxesError, match="tensor: axis 'H' has length 5 but the buffer has 3"):
        ax.tensor(np.zeros((2, 2, 3, 4, 4)), ("N", "C", Axis("H", 5), "W"), layout="NCHW4")


# --- ops on padded blocked tensors ------------------------------------------------------------


@pytest.mark.parametrize("name", ["NCHW4", "NCHW32", "CHWN4"])
def test_ops_never_read_padding(engine, name):
    logical = np.random.default_rng(1).standard_normal((2, 5, 3, 2)).astype("float32")
    t = ax.tensor(logical, "N C H W").to_layout(name)
    assert_close(ax.exp(t).sum("C"), np.exp(logical).sum(1))
    assert_close((t + 1).sum("C"), (logical + 1).sum(1))
    assert_close(ax.exp(t).mean(("C", "H")), np.exp(logical).mean((1, 2)))


@pytest.mark.parametrize("name", ["NCHW4", "CHWN4"])
def test_results_in_a_blocked_layout_keep_zero_padding(engine, name):
    logical = values((2, 5, 3, 2), "float32")
    t = ax.tensor(logical, "N C H W").to_layout(name)
    e = (ax.exp(t * 0) + 1).eval()  # f(0) = 2 everywhere, padding must stay 0
    check_layout(e, name, np.full(logical.shape, 2, "float32"))
    c = t.copy()
    check_layout(c, name, logical)
    out = ax.tensor(logical, "N C H W").to_layout(name)
    out[...] = t + 1
    check_layout(out, name, logical + 1)


def test_elementwise_between_layouts(engine):
    a_np = values((2, 6, 3, 4), "float32", 1)
    b_np = values((2, 6, 3, 4), "float32", 2)
    a = ax.tensor(a_np, "N C H W").to_layout("NCHW4")
    b = ax.tensor(b_np, "N C H W").to_layout("NHWC")
    s = a * b + 1
    np.testing.assert_array_equal(s.numpy(), a_np * b_np + 1)
    small = ax.tensor(values((6,), "float32"), "C").to_layout(Layout("C"))
    assert str((a + small).eval().layout) == "NCHW4"
    assert str((small + b).eval().layout) == "NHWC"


def test_eval_with_a_new_axis_puts_it_outermost():
    t = ax.tensor(values((1, 5, 2, 2), "float32"), "N C H W").to_layout("NCHW4")
    k = ax.tensor(np.arange(3, dtype="float32"), "K")
    e = (t + k).eval()
    assert e.layout == Layout("K N C H W", {"C": 4}) and e.physical.shape == (3, 1, 2, 2, 2, 4)
    np.testing.assert_array_equal(e.numpy(), t.numpy()[..., None] + np.arange(3))


# --- repack -----------------------------------------------------------------------------------


def test_repack_into_out():
    logical = values((2, 5, 3, 4), "int8")
    t = ax.tensor(logical, "N C H W")
    out = ax.empty_like_layout(t.axes, "int8", Layout.parse("NCHW32"))
    assert ax.repack(t, out=out) is out
    check_layout(out, "NCHW32", logical)
    ax.repack(t.transpose("W H C N") * 2, "NCHW32", out=out)  # any axis order, r-tensors
    check_layout(out, "NCHW32", logical * 2)
    wide = ax.empty_like_layout(t.axes, "float64", Layout.parse("NHWC"))
    ax.repack(t, out=wide)  # casts through the engine
    np.testing.assert_array_equal(wide.numpy(), logical.astype("float64"))
    ax.repack(out, out=out)  # aliasing: unchanged
    check_layout(out, "NCHW32", logical * 2)


def test_repack_errors():
    t = ax.tensor(values((2, 5, 3, 4), "int8"), "N C H W")
    out = t.to_layout("NCHW4")
    with pytest.raises(
        LayoutError,
        match=r"repack: out is not stored in the requested layout "
        r"\(out: NCHW4; requested: NHWC\)",
    ):
        ax.repack(t, "NHWC", out=out)
    with pytest.raises(ax.AxesError, match=r"repack: out must have the same axes as the input"):
        ax.repack(t.isel(N=0), out=out)
    with pytest.raises(LayoutError, match="repack: give a layout or an out tensor"):
        ax.repack(t)
    with pytest.raises(TypeError, match="repack: out must be an l-tensor"):
        ax.repack(t, out=t + 1)
    with pytest.raises(TypeError, match="to_layout: expected a Tensor"):
        ax.to_layout(np.zeros(3), "NCHW")
