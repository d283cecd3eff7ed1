"""Layout pictures: ``memory_map``, ``show_layout`` (matplotlib) and ``layout_svg``.

The oracle for where each logical element lives is independent of the library: the offset
formulas of DESIGN §4 evaluated with numpy, and for strided views the byte addresses numpy
itself reports for the same view.
"""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest
from hypothesis import given
from strategies import numpy_tensors

import axesarray as ax
from axesarray.display.memory_map import block_runs, color_axis, used_values
from axesarray.display.pictures import CELL_LIMIT, chunk_svg, layout_svg, memory_map

SHAPE = (2, 6, 2, 3)  # N C H W: C=6 pads to 8 in blocks of 4


def label(index) -> str:
    return "".join(f"{p}{i}" for p, i in zip("nchw", index, strict=True))


def offsets(layout: str, shape) -> tuple[np.ndarray, int]:
    """DESIGN §4: the offset of every logical (n, c, h, w), and the physical size."""
    n, c, h, w = shape
    N, C, H, W = np.indices(shape)
    if layout == "NCHW":
        return ((N * c + C) * h + H) * w + W, n * c * h * w
    if layout == "NHWC":
        return ((N * h + H) * w + W) * c + C, n * c * h * w
    if layout == "CHWN4":
        cb = -(-c // 4)
        return (((C // 4 * h + H) * w + W) * n + N) * 4 + C % 4, cb * h * w * n * 4
    if layout == "HWCN4c2w":  # Layout(order="H W C N", blocks={"C": 4, "W": 2})
        cb, wb = -(-c // 4), -(-w // 2)
        off = ((((H * wb + W // 2) * cb + C // 4) * n + N) * 4 + C % 4) * 2 + W % 2
        return off, h * wb * cb * n * 4 * 2
    x = int(layout[4:])  # NCHWx
    cb = -(-c // x)
    return (((N * cb + C // x) * h + H) * w + W) * x + C % x, n * cb * h * w * x


LAYOUTS = ["NCHW", "NHWC", "NCHW4", "NCHW32", "NCHW3", "CHWN4", "HWCN4c2w"]


def laid_out(name: str, shape=SHAPE) -> ax.Tensor:
    logical = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    lay = ax.Layout("H W C N", {"C": 4, "W": 2}) if name == "HWCN4c2w" else name
    return ax.tensor(logical, "N C H W").to_layout(lay)


@pytest.mark.parametrize("name", LAYOUTS)
@pytest.mark.parametrize("shape", [SHAPE, (1, 1, 1, 1), (3, 5, 1, 2)])
def test_layouts_against_the_formulas(name, shape):
    """Cells = physical size; each element at its formula's offset; the rest is padding."""
    t = laid_out(name, shape)
    m = memory_map(t)
    off, physical = offsets(name, shape)
    assert m.cells == physical == t._node.data.size
    assert m.start == 0
    for index in np.ndindex(*shape):
        assert m.label(off[index]) == label(index)
    np.testing.assert_array_equal(m.count[off.ravel()], 1)
    expected_padding = np.setdiff1d(np.arange(physical), off.ravel())
    np.testing.assert_array_equal(np.flatnonzero(m.padding), expected_padding)
    assert not m.gaps.any()


def test_padding_lanes_are_labelled_as_padding():
    """A padding lane holds no channel: labelled "pad" (not c6, c7 when C=6 pads to 8); its
    coordinates still say which lane of which block it is."""
    m = memory_map(laid_out("NCHW4"))
    first = offsets("NCHW4", SHAPE)[0][0, 4, 0, 0]  # the block of channels 4..7
    lanes = [m.label(k) for k in range(first, first + 4)]
    assert lanes == ["n0c4h0w0", "n0c5h0w0", "pad", "pad"]
    assert m.padding[first + 2 : first + 4].all() and not m.padding[first : first + 2].any()
    assert list(m.coords[first + 2 : first + 4, 1]) == [6, 7]
    svg = layout_svg(laid_out("NCHW4").isel(N=slice(0, 1)))
    assert "c6" not in svg and "c7" not in svg and ">pad<" in svg


@pytest.mark.parametrize(
    "index",
    [
        {"W": slice(None, None, 2)},
        {"C": slice(None, None, -1)},
        {"C": slice(1, 5), "H": 1},
        {"N": 1, "W": slice(2, 0, -2)},
    ],
    ids=["step", "reversed", "slice+int", "int+negative"],
)
def test_strided_views_against_numpy(index):
    """A view's cells span its lowest to highest address; untouched ones are gaps."""
    base = np.arange(math.prod(SHAPE)).reshape(SHAPE)
    t = ax.tensor(base.astype(np.float32), "N C H W").isel(**index)
    sub = base[tuple(index.get(n, slice(None)) for n in "NCHW")]  # addresses, by numpy
    m = memory_map(t)
    lo, hi = sub.min(), sub.max()
    assert (m.start, m.cells) == (lo, hi - lo + 1)
    assert m.gaps.sum() == m.cells - sub.size and not m.padding.any()
    names = [n for n in "NCHW" if not isinstance(index.get(n), int)]
    for idx in np.ndindex(*sub.shape):
        expected = "".join(f"{n.lower()}{i}" for n, i in zip(names, idx, strict=True))
        assert m.label(sub[idx] - lo) == expected


def test_view_through_blocks_has_gaps_not_padding():
    """Lanes a partial view skips hold data of the full tensor: gaps, not padding."""
    t = laid_out("NCHW4").isel(C=slice(1, 3))
    m = memory_map(t)
    assert not m.padding.any() and m.gaps.any()
    assert m.label(1 - m.start) == "n0c0h0w0"  # channel 1 of the full tensor is lane 1


def test_broadcast_is_an_overlap():
    """Stride 0: every cell is reached once per broadcast index, labelled by the first."""
    t = ax.tensor(np.arange(3.0), "C").broadcast_to((ax.Axis("N", 4), ax.Axis("C", 3)))
    m = memory_map(t)
    assert m.cells == 3
    np.testing.assert_array_equal(m.count, [4, 4, 4])
    assert [m.label(k) for k in range(3)] == ["n0c0", "n0c1", "n0c2"]


@given(numpy_tensors())
def test_numpy_views_match_numpy_addresses(case):
    """Any wrapped numpy view: the element at each address is the one numpy puts there."""
    t, arr, _ = case
    m = memory_map(t, limit=1 << 20)
    if arr.size == 0:
        assert m.cells == 0
        return
    item = arr.itemsize
    start = arr.__array_interface__["data"][0]
    addr = np.zeros(arr.shape, dtype=np.int64) + start
    for d, s in enumerate(arr.strides):
        addr += (np.arange(arr.shape[d]) * s).reshape((1,) * d + (-1,) + (1,) * (arr.ndim - d - 1))
    addr = (addr - addr.min()) // item
    assert m.cells == addr.max() + 1
    assert m.count.sum() == arr.size
    firsts = {}
    for idx in np.ndindex(*arr.shape):
        firsts.setdefault(int(addr[idx]), idx)
    first = [n[0].lower() for n in t.names]
    for a, idx in firsts.items():
        if len(set(first)) == len(first):
            text = "".join(f"{p}{i}" for p, i in zip(first, idx, strict=True))
        else:  # first letters clash: whole names
            text = ",".join(f"{n}={i}" for n, i in zip(t.names, idx, strict=True))
        assert m.label(a) == (text or "()")
    assert m.gaps.sum() == m.cells - len(firsts)


# --- errors ----------------------------------------------------------------------------------


def test_size_limit_with_first_blocks_false():
    """Above the cell limit, first_blocks=False refuses: a ValueError with ways out, and
    each way out works."""
    t = ax.zeros((ax.Axis("N", 64), ax.Axis("C", 65)))
    with pytest.raises(ValueError) as err:
        ax.show_layout(t, first_blocks=False)
    assert str(err.value) == (
        f"show_layout: the storage span has 4160 cells, more than the limit of {CELL_LIMIT} "
        "(axes: N=64, C=65; addresses 0..4159). Slice first, e.g. t.isel(N=slice(0, 2)), "
        "pass a larger limit, or first_blocks=True (the first blocks of each axis)."
    )
    fig = ax.show_layout(t.isel(N=slice(0, 2)), first_blocks=False)  # the hints work
    assert fig.get_suptitle().splitlines()[1].startswith("130 cells")
    fig = ax.show_layout(t, first_blocks=True)
    assert "first blocks: N 2 of 64, C 13 of 65" in fig.get_suptitle()  # a row of C


def test_element_limit_for_broadcasts():
    """Many logical elements over few cells (a broadcast) are refused too."""
    t = ax.zeros((ax.Axis("C", 3),)).broadcast_to((ax.Axis("N", 30000), ax.Axis("C", 3)))
    with pytest.raises(ValueError) as err:
        ax.show_layout(t, first_blocks=False)
    assert str(err.value) == (
        "show_layout: 90000 elements are too many to draw (axes: N=30000, C=3; limit 65536). "
        "Slice first, e.g. t.isel(N=slice(0, 2)), pass a larger limit, or first_blocks=True "
        "(the first blocks of each axis)."
    )
    m = ax.show_layout(t)  # by default: the first blocks
    assert "first blocks: N 2 of 30000" in m.get_suptitle()


def test_r_tensor_is_refused():
    t = ax.zeros((ax.Axis("N", 2), ax.Axis("C", 3))) + 1
    with pytest.raises(TypeError) as err:
        ax.show_layout(t)
    assert str(err.value) == (
        "show_layout: an r-tensor has no memory layout; only l-tensors are stored "
        "(axes: N=2, C=3). Evaluate it first: show_layout(e.eval())."
    )


def test_unknown_color_axis():
    with pytest.raises(ax.AxesError) as err:
        ax.show_layout(ax.zeros((ax.Axis("N", 2),)), color_by="Q")
    assert str(err.value) == (
        "show_layout: color_by names no axis: 'Q' (axes: N=2). Pass one of the tensor's axis names."
    )


def test_missing_matplotlib(monkeypatch):
    """Without matplotlib: an ImportError that says how to get it."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError) as err:
        ax.show_layout(ax.zeros((ax.Axis("N", 2),)))
    assert str(err.value) == (
        "show_layout: matplotlib is not installed. Install it: pip install 'axesarray[plot]' "
        "(the HTML repr draws without it)."
    )


# --- drawings --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["NCHW4", "CHWN4", "NHWC"])
def test_figure_draws_every_cell(name):
    """One patch per cell, split into elements, padding and gaps; labels on each; a PNG."""
    from matplotlib.figure import Figure

    t = laid_out(name)
    m = memory_map(t)
    fig = ax.show_layout(t)
    assert isinstance(fig, Figure)
    solid, pads, gaps, _blocks = fig.axes[0].collections
    assert len(solid.get_paths()) == int((m.count > 0).sum()) == math.prod(SHAPE)
    assert len(pads.get_paths()) == int(m.padding.sum())
    assert len(gaps.get_paths()) == 0
    texts = [x.get_text() for x in fig.axes[0].texts]
    assert texts == [m.label(k) for k in range(m.cells)]
    assert fig._repr_png_().startswith(b"\x89PNG")
    assert fig.get_suptitle().splitlines()[0] == f"float32 (N=2, C=6, H=2, W=3) in {name}"


def test_figure_of_a_view_and_a_broadcast():
    """Gaps for a strided view; the count beside each element of a broadcast."""
    view = laid_out("NCHW").isel(W=slice(None, None, 2))
    fig = ax.show_layout(view)
    assert len(fig.axes[0].collections[2].get_paths()) == int(memory_map(view).gaps.sum()) > 0
    b = ax.tensor(np.arange(3.0), "C").broadcast_to((ax.Axis("N", 2), ax.Axis("C", 3)))
    texts = [x.get_text() for x in ax.show_layout(b).axes[0].texts]
    assert texts == ["n0c0", "x2", "n0c1", "x2", "n0c2", "x2"]


def test_svg_cells():
    """The HTML picture: one rect per cell with its kind, no matplotlib needed."""
    t = laid_out("NCHW4")
    svg = layout_svg(t, limit=256)
    m = memory_map(t)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count('class="cell"') == int((m.count > 0).sum())
    assert svg.count('class="pad"') == int(m.padding.sum())
    assert svg.count('class="gap"') == 0
    view = laid_out("NCHW").isel(W=slice(None, None, 2))
    assert layout_svg(view).count('class="gap"') == int(memory_map(view).gaps.sum()) > 0
    big = laid_out("NCHW", (4, 8, 4, 4))
    assert layout_svg(big, limit=256, first_blocks=False) is None  # too big, refused
    assert "first blocks: N 2 of 4, C 2 of 8, H 2 of 4, W 4 of 4" in layout_svg(big, limit=256)
    assert layout_svg(ax.zeros((ax.Axis("N", 2),)) + 1) is None  # an r-tensor: nothing stored


# --- pictures at real sizes -------------------------------------------------------------------


def nchw32(shape):
    base = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    return ax.tensor(base, "N C H W").to_layout("NCHW32"), base


def check_first_blocks(t, base):
    """Every drawn element sits at the address its NCHW32 formula gives; the kept prefix
    of each axis is drawn whole; skipped rows are counted."""
    m = memory_map(t, first_blocks=True)
    n, c, h, w = base.shape
    blocks = -(-c // 32)
    assert m.shown is not None
    drawn = 0
    for k in range(m.cells):
        if m.count[k]:
            i = tuple(m.coords[k])
            # NCHW32: ((n * blocks + c // 32) * h + h_) * w + w_) * 32 + c % 32
            addr = (((i[0] * blocks + i[1] // 32) * h + i[2]) * w + i[3]) * 32 + i[1] % 32
            assert m.address(k) == addr
            drawn += 1
    assert drawn == math.prod(m.shown)
    assert m.cells + sum(m.elided(r) for r in range(len(m.row_starts))) == (
        m.row_starts[-1] + m.row - m.start
    )
    return m


def test_first_blocks_of_a_small_padded_tensor():
    """(1, 3, 8, 8) in NCHW32: 3 channels and 29 padding lanes per block, drawn."""
    t, base = nchw32((1, 3, 8, 8))
    m = check_first_blocks(t, base)
    assert m.shown == (1, 3, 2, 2) and m.padding.sum() == 4 * 29
    assert {m.label(k) for k in np.flatnonzero(m.padding)} == {"pad"}
    svg = layout_svg(t)
    assert "first blocks" in svg and "cells not shown" in svg


def test_first_blocks_of_a_realistic_tensor():
    """(32, 64, 56, 56) in NCHW32 and plain: two channel blocks, a picture of a few hundred
    cells, and the skipped storage counted."""
    t, base = nchw32((32, 64, 56, 56))
    m = check_first_blocks(t, base)
    assert m.shown == (1, 64, 2, 2) and m.cells <= 512
    assert sum(m.elided(r) for r in range(len(m.row_starts))) > 100_000
    plain = ax.tensor(base, "N C H W")
    m = memory_map(plain, first_blocks=True)
    assert m.cells <= 512 and m.count.sum() == math.prod(m.shown)
    for k in np.flatnonzero(m.count):
        assert m.address(k) == np.ravel_multi_index(tuple(m.coords[k]), base.shape)


def test_show_layout_on_12_8_million_elements():
    t = ax.zeros((ax.Axis("N", 32), ax.Axis("C", 128), ax.Axis("H", 56), ax.Axis("W", 56)))
    assert t.size == 12_845_056
    fig = ax.show_layout(t.to_layout("NCHW32"))
    assert "first blocks: N 1 of 32, C 64 of 128" in fig.get_suptitle()
    assert any("not shown" in tick.get_text() for tick in fig.axes[0].get_yticklabels())


def test_mid_block_view_is_drawn_from_its_block():
    """isel(C=slice(1, 40, 3)) of NCHW32: the picture starts at the block (lane 0 is not
    in the view), outlines whole blocks of 32 lanes, and each element is at numpy's
    address of the full tensor's element."""
    t, base = nchw32((1, 64, 2, 2))
    v = t.isel(C=slice(1, 40, 3))
    m = memory_map(v)
    assert m.start == 0 and m.count[0] == 0 and m.count[1] == 1
    assert m.label(1) == "n0c0h0w0"
    full = memory_map(t)
    for k in np.flatnonzero(m.count):
        n, c, h, w = m.coords[k]
        assert m.address(k) == m.address(
            int(np.flatnonzero((full.coords == [n, 1 + 3 * c, h, w]).all(axis=1))[0])
        )
    runs = list(block_runs(m, 32))
    assert runs and all(cols == 32 for _, _, cols in runs)  # whole blocks, not single cells
    svg = layout_svg(v)
    assert "element 0 at address 1 (byte 4), inside its block" in svg


def test_broadcast_legend_lists_only_used_colours():
    """A broadcast over H is coloured by C (H would give every cell H=0) and the legend
    lists the colours cells have."""
    t = ax.tensor(np.arange(3.0), "C").broadcast_to((ax.Axis("H", 4), ax.Axis("C", 3)))
    m = memory_map(t)
    assert color_axis(t, m, None, "t") == 1 and used_values(m, 1) == [0, 1, 2]
    svg = layout_svg(t)
    assert "colour: C" in svg and "colour: H" not in svg
    alone = ax.tensor(np.arange(3.0), "W").broadcast_to((ax.Axis("H", 5), ax.Axis("W", 3)))
    m = memory_map(alone)
    colour = color_axis(alone, m, "H", "t")
    assert used_values(m, colour) == [0]
    legend = layout_svg(alone, color_by="H").split("colour: H")[1]
    assert re.findall(r">(\d+)</text>", legend)[:2] == ["0"] or ">1</text>" not in legend


def test_chunk_grid_picture():
    """One line per chunk boundary of the last two axes (and the depth), names and counts."""
    svg = chunk_svg(("N", "C", "H", "W"), ((2, 2), (3,) * 4, (7, 7), (4, 4, 4)))
    assert svg.count("<line") == 2 + 1 + 2 * 3  # W: 2 inner lines, H: 1, C: 3 (two each)
    assert "W=12 (3 chunks)" in svg and "H=14" in svg and "C=12 (4)" in svg
    assert "N=4 (2 chunks)" in svg
    assert chunk_svg((), ()) is None
