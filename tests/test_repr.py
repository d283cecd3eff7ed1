"""What users see: ``repr`` and ``_repr_html_`` of tensors, and ``plan_html``.

numpy is the oracle for the values shown (``np.array2string`` of the logical array) and
for the memory facts (byte strides of numpy arrays of the physical shapes). Nothing here
may evaluate a big r-tensor: the engine's entry points are patched to fail.
"""

from __future__ import annotations

import re
from html import escape

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import apply_view_op, numpy_tensors, shadow_view_op, view_ops

import axesarray as ax
import axesarray.engine as eng
from axesarray.display.reprs import PREVIEW_ELEMENTS, THRESHOLD, plan_html

N, C = ax.Axis("N", 2), ax.Axis("C", 3)


def values_text(arr: np.ndarray) -> str:
    """numpy's own summarized text of the logical array: what the preview must equal."""
    return np.array2string(
        np.asarray(arr), edgeitems=ax.get_option("display_edgeitems"), threshold=THRESHOLD
    )


def td_cells(html: str) -> list[str]:
    return re.findall(r"<td[^>]*>(.*?)</td>", html)


@pytest.fixture
def no_evaluation(monkeypatch):
    """Every way into the engine that computes values fails the test."""

    def refuse(*args):
        raise AssertionError("repr evaluated an expression")

    for name in ("evaluate", "assign", "to_numpy"):
        monkeypatch.setattr(eng, name, refuse)


@pytest.fixture
def plain():
    return ax.tensor(np.arange(6.0).reshape(2, 3), "N C")


# --- l-tensors -------------------------------------------------------------------------------


def test_plain_text(plain):
    """Header, memory (byte strides outermost first), storage, then numpy's text."""
    lines = repr(plain).split("\n")
    assert lines[0] == "<Tensor float64 (N=2, C=3) l-tensor, cpu>"
    assert lines[1] == "  memory N 24 | C 8 (byte strides, outermost first)"
    assert lines[2] == "  storage of 6 elements (48 B), C-contiguous"
    assert "\n".join(lines[3:]) == values_text(np.arange(6.0).reshape(2, 3))


def test_transposed_view_shows_memory_order(plain):
    """A transpose keeps the memory order: N is still outermost, C still stride 8."""
    t = plain.transpose("C N")
    text = repr(t)
    assert text.startswith("<Tensor float64 (C=3, N=2) l-tensor, cpu>")
    assert "memory N 24 | C 8" in text
    assert "dense in memory order N C" in text
    page = t._repr_html_()
    assert td_cells(page)[:8] == ["<b>C</b>", "3", "1 of 2", "8", "<b>N</b>", "2", "0 of 2", "24"]


def test_sliced_view_says_what_it_views():
    """A view names its storage, its offset (first element, numpy's rule) and its gaps."""
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = ax.tensor(base, "N C")
    v = x.isel(N=slice(1, None), C=slice(None, None, -2))
    first = 1 * 6 + 5  # v[0, 0] is base[1, 5]
    text = repr(v)
    assert f"view of a storage of 24 elements (96 B) at offset {first}" in text
    assert "strided (the storage has elements outside this view)" in text
    assert "memory N 24 | C -8" in text
    assert text.endswith(values_text(base[1:, ::-2]))


def test_blocked_layout_shows_blocks_and_padding():
    """NCHW4 with C=70: both strides of C, the padding 70 -> 72, no blank cell anywhere."""
    shape = (2, 70, 3, 5)
    logical = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    t = ax.tensor(logical, "N C H W").to_layout("NCHW4")
    physical = np.empty((2, 18, 3, 5, 4), np.float32)  # (N, ceil(C/4), H, W, 4)
    sn, sc, sh, sw, sl = physical.strides
    text = repr(t)
    assert text.startswith("<Tensor float32 (N=2, C=70, H=3, W=5) l-tensor, NCHW4, cpu>")
    assert "layout NCHW4, C padded 70 -> 72" in text
    assert f"memory N {sn} | C//4 {sc} | H {sh} | W {sw} | C%4 {sl}" in text
    padding = physical.size - logical.size
    assert f"storage of {physical.size} elements (8.4 KiB), {padding} of them padding" in text
    assert text.endswith(values_text(logical))
    html = t._repr_html_()
    assert f"C=70 blocked by 4: outer stride {sc}, inner stride {sl}" in html
    assert "1 (blocks) and 4 (lanes) of 5" in html
    assert "NCHW4, C padded 70 -&gt; 72" in html
    assert all(cell.strip() for cell in td_cells(html)), "a blank table cell"


def test_reversed_tensor_is_its_whole_storage():
    """A reversed axis starts at the far end, yet the view still covers all its storage."""
    t = ax.tensor(np.arange(6.0).reshape(2, 3), "N C").isel(C=slice(None, None, -1))
    text = repr(t)
    assert "storage of 6 elements (48 B), dense in memory order N C" in text
    assert "view of" not in text and "memory N 24 | C -8" in text


def test_view_of_blocked_tensor_claims_no_padding():
    """A slice cutting through blocks is marked as such; its length says nothing of padding."""
    t = ax.tensor(np.zeros((1, 6, 2, 3), np.float32), "N C H W").to_layout("NCHW4")
    text = repr(t.isel(C=slice(0, 2)))
    assert "NCHW4 (a view cutting through blocks)" in text
    assert "padded" not in text
    assert "view of a storage of 48 elements" in text


def test_broadcast_and_read_only():
    """A broadcast view: read-only, stride 0, and the storage it repeats."""
    t = ax.zeros((C,)).broadcast_to((N, C))
    text = repr(t)
    assert text.startswith("<Tensor float64 (N=2, C=3) l-tensor, read-only, cpu>")
    assert "broadcast (stride 0 on N)" in text
    assert "view of a storage of 3 elements (24 B) at offset 0" in text
    assert "0 (broadcast)" in t._repr_html_()


@pytest.mark.parametrize(
    "t, head",
    [
        (ax.tensor(np.float32(3.0), ""), "<Tensor float32 () l-tensor, cpu>"),
        (ax.zeros((ax.Axis("E", 0), C)), "<Tensor float64 (E=0, C=3) l-tensor, cpu>"),
        (ax.tensor(np.array([True, False]), "N"), "<Tensor bool (N=2) l-tensor, cpu>"),
    ],
    ids=["scalar", "empty", "bool"],
)
def test_edge_cases(t, head):
    """Scalars, empty tensors and bools print readably, in text and HTML."""
    text = repr(t)
    assert text.split("\n")[0] == head
    assert text.endswith(values_text(t.numpy()))
    assert escape(values_text(t.numpy())) in t._repr_html_()


def test_kind_attribute_is_shown(plain):
    """A tensor kind (constant, variable...) appears when the tensor has one."""

    class Variable(ax.Tensor):
        __slots__ = ()
        kind = "variable"

    v = Variable(plain.axes, plain._node)
    assert repr(v).startswith("<Tensor float64 (N=2, C=3) l-tensor, variable, cpu>")
    assert "l-tensor, variable" in v._repr_html_()


def test_device_is_shown():
    """A CUDA tensor (numba's simulator without a GPU) reads only what it shows."""
    t = ax.tensor(np.arange(1200, dtype=np.float32).reshape(300, 4), "N C").to("cuda")
    text = repr(t)
    assert text.startswith("<Tensor float32 (N=300, C=4) l-tensor, cuda>")
    assert text.endswith(values_text(np.arange(1200, dtype=np.float32).reshape(300, 4)))
    assert "cuda" in t._repr_html_()


def test_edgeitems_option():
    """Long axes are elided with numpy's '...' using ``display_edgeitems``."""
    t = ax.arange(ax.Axis("N", 1000))
    assert repr(t).endswith("[  0   1   2 ... 997 998 999]")
    with ax.set_options(display_edgeitems=1):
        assert repr(t).endswith("[  0 ... 999]")


@given(
    data=st.data(),
    layout=st.sampled_from(["NCHW", "NHWC", "NCHW4", "CHWN4", "NCHW3", "HWCN2"]),
    lengths=st.tuples(*[st.integers(0, 4)] * 2, st.integers(0, 9), st.integers(0, 4)),
    edge=st.integers(1, 3),
)
def test_preview_matches_numpy(data, layout, lengths, edge):
    """Any layout and view: the preview reads only its elements and equals numpy's text."""
    n, h, c, w = lengths
    logical = np.arange(n * c * h * w, dtype=np.float32).reshape(n, c, h, w)
    lay = ax.Layout.parse(layout) if layout != "HWCN2" else ax.Layout("H W C N", {"C": 2})
    t = ax.tensor(logical, "N C H W").to_layout(lay)
    ops = data.draw(view_ops(t.axes, max_ops=2))
    arr, names = logical, ["N", "C", "H", "W"]
    for op in ops:
        t = apply_view_op(t, op)
        arr, names = shadow_view_op(arr, names, op)
    with ax.set_options(display_edgeitems=edge):
        assert repr(t).endswith(values_text(arr))
        assert escape(values_text(arr)) in t._repr_html_()


@given(numpy_tensors(shape_axes=None))
def test_numpy_views_match(case):
    """Wrapped numpy views of any strides and dtype: the same text as numpy."""
    t, arr, _ = case
    assert repr(t).endswith(values_text(arr))


# --- r-tensors -------------------------------------------------------------------------------


def test_small_r_tensor_shows_expression_key_plan_and_values(plain):
    """Formula, a key naming every input once, the plan, and the computed values."""
    y = ax.tensor(np.arange(3.0), "C")
    e = ax.sigmoid(plain + y)
    lines = repr(e).split("\n")
    assert lines[0] == "<Tensor float64 (N=2, C=3) r-tensor, cpu>"
    assert lines[1] == "  = sigmoid(t0 + t1)"
    assert lines[2] == "  where t0: float64 (N=2, C=3); t1: float64 (C=3), broadcast over N"
    assert lines[3].startswith("  Plan: 1 kernel(s)")
    a = np.arange(6.0).reshape(2, 3) + np.arange(3.0)
    assert "\n".join(lines[-2:]) == values_text(1 / (1 + np.exp(-a)))


def test_formula_reads_like_python(plain):
    """Operator precedence as in Python: parentheses only where they change the meaning."""
    cases = [
        (plain * 2 - 1, "t0 * 2.0 - 1.0"),
        (plain - (plain - 1), "t0 - (t0 - 1.0)"),
        (-(plain**2), "-t0 ** 2.0"),
        ((-plain) ** 2, "(-t0) ** 2.0"),
        ((plain < 1) == (plain > 2), "(t0 < 1.0) == (t0 > 2.0)"),
        (ax.exp(plain).sum("C"), "sum(exp(t0), over=r0)"),
        (plain.max(("N", "C")), "max(t0, over=(r0, r1))"),
    ]
    for e, expected in cases:
        assert repr(e).split("\n")[1] == "  = " + expected


def test_key_explains_the_plan_inputs():
    """The input the plan says set the memory order is in the key, with its axes."""
    big = ax.tensor(np.zeros((4, 3, 2)), "H C N").transpose("N C H")
    small = ax.tensor(np.arange(3.0), "C")
    e = small + big  # the dominant (bigger) input is the right operand
    text = repr(e)
    found = re.search(r"order from input (t\d+)", text)
    assert found, text
    label = found.group(1)
    assert f"{label}: float64 (N=2, C=3, H=4)" in text
    html = e._repr_html_()
    assert f"<b>{label}</b>" in html and f"input {label}" in html


def test_same_storage_is_noted():
    """Two inputs over one storage say so; a constant is not listed in the text key."""
    x = ax.tensor(np.arange(6.0).reshape(2, 3), "N C")
    e = x + x.isel(C=slice(None, None, -1))
    text = repr(e)
    assert "t1: float64 (N=2, C=3), same storage as t0" in text
    assert "constant" not in repr(x + 1)


def test_big_r_tensor_is_not_evaluated(no_evaluation):
    """64M elements (a broadcast of two small inputs): expression and plan, no values."""
    a = ax.tensor(np.ones(8192, np.float32), "N")
    b = ax.tensor(np.ones(8192, np.float32), "C")
    e = ax.sigmoid(a * b - 1)
    assert e.size == 8192 * 8192 > PREVIEW_ELEMENTS
    text = repr(e)
    assert "  = sigmoid(t0 * t1 - 1.0)" in text
    assert "Plan: 1 kernel(s)" in text
    assert text.endswith(
        "(not evaluated: 67,108,864 elements, 335,544,320 element reads or operations "
        "(previews compute up to 100,000 and 2,000,000); .numpy() or .eval() computes it)"
    )
    html = e._repr_html_()
    assert "not evaluated: 67,108,864 elements" in html and "<table" in html


def test_small_but_costly_r_tensor_is_not_evaluated(no_evaluation):
    """A scalar whose computation reads 16M elements is not cheap: no preview."""
    a = ax.tensor(np.ones(4096, np.float32), "N")
    b = ax.tensor(np.ones(4096, np.float32), "C")
    e = (a * b).sum(("N", "C"))
    assert e.size == 1
    assert "(not evaluated: 1 elements" in repr(e)


def test_small_preview_does_not_compile(plain):
    """A small preview is computed by the reference engine: no kernel is compiled or loaded."""
    from axesarray.kernels import cache

    before = dict(cache.STATS)
    text = repr(ax.tanh(plain * 3.25 + 0.5))
    assert dict(cache.STATS) == before
    assert text.endswith(values_text(np.tanh(np.arange(6.0).reshape(2, 3) * 3.25 + 0.5)))


# --- HTML ------------------------------------------------------------------------------------


def test_html_is_self_contained(plain):
    """Inline styles only: no script, no stylesheet, no external address; text escaped."""
    for t in (plain, plain < 2, plain.to_layout(ax.Layout("C N"))):
        html = t._repr_html_()
        assert html.startswith("<div style=") and html.endswith("</div>")
        fetchable = html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # a name, not a fetch
        for banned in ("<script", "<style", "<link", "<img", "http://", "https://", "url(http"):
            assert banned not in fetchable
        assert html.count("<div") == html.count("</div>")
        assert html.count("<table") == html.count("</table>")
    r = (plain < 2)._repr_html_()
    assert "t0 &lt; 2.0" in r and "t0 < 2.0" not in r


def test_html_theme_colors(plain):
    """Colours inherit the page's text colour; backgrounds are translucent (light and dark)."""
    html = plain._repr_html_()
    assert "color:inherit" in html
    backgrounds = re.findall(r"background:([^;\"]+)", html)
    assert backgrounds and all(b.startswith("rgba(") or b == "transparent" for b in backgrounds)


def test_html_has_layout_picture_only_when_small():
    """Up to 256 elements the HTML draws the memory; above, it does not."""
    small = ax.tensor(np.zeros((1, 6, 2, 3), np.float32), "N C H W").to_layout("NCHW4")
    html = small._repr_html_()
    assert html.count('class="cell"') == 36 and html.count('class="pad"') == 12
    big = ax.zeros((ax.Axis("N", 16), ax.Axis("C", 17)))
    assert "<svg" not in big._repr_html_()


def test_plan_html(plain):
    """Plan._repr_html_ is plan_html: one row per kernel, loops, temporaries."""
    e = ax.exp(plain).sum("C") + plain.max("C")
    plan = ax.explain(e)
    html = plan._repr_html_()
    assert html == plan_html(plan)
    assert f"{len(plan.kernels)} kernel" in html
    for k in plan.kernels:
        assert k.kind in html and k.cache in html
    assert "2[N] × 3[r0]" in html or "2[d0] × 3[r0]" in html
