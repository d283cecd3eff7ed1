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
from conftest import assert_close
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
    assert lines[3].startswith("  Plan: 1 kernel, 0 temporaries")
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
        (ax.exp(plain).sum("C"), "sum(exp(t0), over=C)"),
        (plain.max(("N", "C")), "max(t0, over=(N, C))"),
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
    assert "Plan: 1 kernel," in text
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


def test_plan_html(plain):
    """Plan._repr_html_ is plan_html: one row per kernel, loops, temporaries."""
    e = ax.exp(plain).sum("C") + plain.max("C")
    plan = ax.explain(e)
    html = plan._repr_html_()
    assert html == plan_html(plan)
    assert f"{len(plan.kernels)} kernel" in html
    for k in plan.kernels:
        assert k.kind in html and k.cache in html
    assert "N=2 × C=3" in html  # the reduced axis by its name, not r0


# --- names through the IR's display (DESIGN §15) -----------------------------------------------

NAMES = {"N", "C", "H", "W", "M", "K"}


def loop_names(plan) -> set[str]:
    return {name for k in plan.kernels for _, label in k.loops for name in label.split()}


def test_reductions_are_named_everywhere():
    """A reduction over three axes shows N, H, W in the formula, tree, key and plan: no r0."""
    x = ax.tensor(np.arange(72.0).reshape(2, 6, 2, 3), "N C H W")
    e = ax.exp(x).sum(("N", "H", "W"))
    text = repr(e)
    assert "  = sum(exp(t0), over=(N, H, W))" in text
    assert "t0: float64 (N=2, C=6, H=2, W=3)" in text
    html = e._repr_html_()
    assert "sum over (N, H, W)" in html and "r0" not in html and "d0" not in html
    plan = ax.explain(e)
    assert loop_names(plan) <= NAMES and {"N", "H", "W", "C"} <= loop_names(plan)
    assert not re.search(r"\b[rd]\d\b", str(plan) + repr(plan) + plan._repr_html_())


def test_temporaries_and_dot_are_named():
    """A two-kernel softmax (its max over another axis: a temporary) names its loops; a
    dot names M, N and K."""
    x = ax.tensor(np.ones((4, 5)), "N C")
    e = ax.exp(x - x.max("N"))
    plan = ax.explain(e / e.sum("C"))
    assert len(plan.kernels) >= 2 and loop_names(plan) == {"N", "C"}
    M, K, Nn = ax.Axis("M", 3), ax.Axis("K", 4), ax.Axis("N", 5)
    d = ax.dot(ax.ones((M, K)), ax.ones((K, Nn)), over="K")
    plan = ax.explain(ax.sigmoid(d).sum("M"))
    assert loop_names(plan) <= NAMES and "K" in loop_names(plan)
    assert "over=K" in repr(ax.sigmoid(d).sum("M")) and "over=M" in repr(ax.sigmoid(d).sum("M"))


def test_a_contraction_found_in_a_sum_of_products_is_named():
    """``(x * w).sum("I")`` runs as a BLAS call over new views of the leaves: the loops keep
    the leaves' names (B, H, I), carried through the views, not positions (r0)."""
    x = ax.tensor(np.ones((64, 32), np.float32), "B I")
    w = ax.tensor(np.ones((32, 48), np.float32), "I H")
    plan = ax.explain((x * w).sum("I"))
    assert [k.kind for k in plan.kernels] == ["blas"]
    assert loop_names(plan) == {"B", "H", "I"}
    assert not re.search(r"\b[rd]\d\b", str(plan))
    t = ax.tensor(np.ones((32, 64), np.float32), "I B").transpose("B", "I")  # a view leaf
    assert loop_names(ax.explain((t * w).sum("I"))) == {"B", "H", "I"}


def test_each_reduction_kernel_names_its_own_reduced_axis():
    """A reduction reading another reduction's temporary names its loops by the axis it
    reduces itself, not by the one reduced below it (explain names a kernel's loops from
    the reduction fused into that kernel)."""
    x = ax.tensor(np.arange(60.0).reshape(3, 4, 5) / 60, "N C W")
    e = ax.exp(x).sum("W").max("C")
    plan = ax.explain(e)
    assert len(plan.kernels) == 2
    inner, outer = ({n for _, lb in k.loops for n in lb.split()} for k in plan.kernels)
    assert inner == {"N", "C", "W"} and outer == {"N", "C"}
    assert_close(e, np.exp(x.numpy()).sum(2).max(1))


def test_two_names_for_one_dim_show_the_position_and_both():
    """The same node reduced under two names: the display says d0[N|A], not one of them."""
    e = ax.tensor(np.ones((2, 3)), "N C") + 1
    renamed = e.rename(N="A")
    assert renamed._node is e._node  # one node, two names
    assert "over=N" in repr(e.sum("N"))
    assert "over=d0[N|A]" in repr(renamed.sum("A"))


def test_temporaries_are_numbered_in_kernel_order():
    """Each kernel that writes a temporary writes the next number: #0, #1, #2..."""
    x = ax.tensor(np.arange(24.0).reshape(2, 3, 4), "N C W")
    # reductions of values the root does not read itself: each a kernel of its own
    e = (x * 2).sum("C") + ax.tanh(x).max("W") + ax.exp(x).sum(("C", "W")) * 2
    plan = ax.explain(e)
    written = [int(k.writes.split("#")[1]) for k in plan.kernels if "#" in k.writes]
    assert len(written) >= 3
    assert written == list(range(len(written)))
    assert [t[0] for t in plan.temporaries] == sorted(t[0] for t in plan.temporaries)


def test_formula_is_cut_at_a_word_boundary():
    x = ax.tensor(np.ones(3), "N")
    e = x
    for k in range(30):
        e = ax.sigmoid(e * (k + 1.5) - 0.25)
    line = repr(e).split("\n")[1]
    assert line.endswith(" ...") and len(line) <= 106
    body = line[len("  = ") : -len(" ...")]
    assert body.endswith(("(", "*", "-", "+")) or body[-1].isalnum()
    assert not re.search(r"[a-z]$", body) or body.split()[-1] in ("sigmoid(",) or body[-1] != "g"


def test_plan_reprs_are_text_not_dataclass_dumps():
    """repr of every plan kind is its readable text; each has an HTML form."""
    N2, K3 = ax.Axis("N", 2), ax.Axis("K", 3)
    x = ax.placeholder((N2, K3), "float64", name="x")
    w = ax.variable(np.ones(3), "K", name="w")
    loss = ((x * w).sum("K") ** 2).sum()
    f = ax.function([loss, *ax.grad(loss, [w])], inputs=[x])
    plans = [ax.explain((w * 2).sum()), ax.explain(f)]
    opt = ax.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    plans.append(opt.explain())
    plans.append(ax.explain(ax.tensor(np.ones((8, 4)), "N C").chunk({"N": 2}) * 2))
    for plan in plans:
        assert repr(plan) == str(plan)
        assert not re.match(r"\w+\(", repr(plan))  # "Plan: ...", not "Plan(kernels=..."
        assert "KernelInfo(" not in repr(plan) and "StagePlan(" not in repr(plan)
        assert "<table" in plan._repr_html_()
    program = ax.explain(f)._repr_html_()
    assert "Program" in program and "grad_w" in program
    assert len(program) < 20_000


def test_plan_html_columns_bytes_and_work():
    """Bytes: each argument read once, the output written once (numpy's nbytes)."""
    a = ax.tensor(np.ones((4, 3)), "N C")
    b = ax.tensor(np.ones((4, 3)), "N C")
    plan = ax.explain(a * b + 1)
    k = plan.kernels[0]
    assert k.arg_bytes == 3 * np.ones((4, 3)).nbytes
    assert k.work >= 12
    html = plan._repr_html_()
    assert "bytes (est.)" in html and "288 B" in html and "work (ops)" in html
    bc = ax.explain(a * ax.tensor(np.ones(3), "C"))  # a broadcast input counts once
    assert bc.kernels[0].arg_bytes == 2 * 96 + 24


def test_chunked_repr_counts_chunks_and_draws_the_grid():
    x = ax.tensor(np.ones((8, 6)), "N C").chunk({"N": 2})
    text = repr(x * 2)
    assert "chunks N: 4 chunks of 2, C: 1 chunk of 6" in text
    assert "blocks N=" not in text
    html = (x * 2)._repr_html_()
    assert html.count("<svg") >= 1 and "N=8" in html and "(4)" in html


def test_html_draws_memory_at_any_size_but_not_for_a_placeholder():
    """Small: every cell; big: the first blocks; a placeholder (no value): no picture."""
    small = ax.tensor(np.zeros((1, 6, 2, 3), np.float32), "N C H W").to_layout("NCHW4")
    html = small._repr_html_()
    assert html.count('class="cell"') == 36 and html.count('class="pad"') == 12
    big = ax.zeros((ax.Axis("N", 32), ax.Axis("C", 64), ax.Axis("H", 56), ax.Axis("W", 56)))
    for t in (big, big.to_layout("NCHW32")):
        html = t._repr_html_()
        assert "<svg" in html and "first blocks" in html and "cells not shown" in html
    tiny = ax.zeros((ax.Axis("N", 1), ax.Axis("C", 3), ax.Axis("H", 8), ax.Axis("W", 8)))
    assert "<svg" in tiny.to_layout("NCHW32")._repr_html_()
    p = ax.placeholder((ax.Axis("N", 2),), "float64", name="x")
    assert "<svg" not in p._repr_html_()


def test_mid_block_view_says_its_true_offset():
    """isel(C=slice(1, 40, 3)) of NCHW32 starts at lane 1: byte 4, lanes 1, 4, 7..."""
    x = ax.tensor(np.arange(256, dtype=np.float32).reshape(1, 64, 2, 2), "N C H W")
    v = x.to_layout("NCHW32").isel(C=slice(1, 40, 3))
    first = v._node.data[v.description.offset // 4]
    assert first == x.numpy()[0, 1, 0, 0]  # the description's offset is element 0's byte
    text = repr(v)
    assert "at offset 1 (byte 4)" in text and "C: lanes 1, 4, 7..." in text
    assert "C%32 12" in text  # 3 lanes of 4 bytes between neighbours inside a block


def test_timed_explain_is_a_profile():
    """timed=True: every kernel has its best measured time, in the text and the table; the
    run into out= writes what numpy computes."""
    x = ax.tensor(np.random.default_rng(1).random((16, 8, 32)), "N C W")
    e = ax.exp(x - x.max("W"))  # over another axis than the sum: two kernels
    s = e / e.sum("C")
    out = ax.empty(s.axes, dtype=s.dtype)
    plan = ax.explain(s, out=out, timed=True, repeat=2)
    assert len(plan.kernels) >= 2 and all(k.time_s > 0 for k in plan.kernels)
    assert str(plan).count(" ms") == len(plan.kernels) and "<th" in plan._repr_html_()
    assert ">time<" in plan._repr_html_() and ">time<" not in ax.explain(s)._repr_html_()
    xn = x.numpy()
    en = np.exp(xn - xn.max(2, keepdims=True))
    assert_close(out, en / en.sum(1, keepdims=True))


def test_timed_explain_errors():
    x = ax.tensor(np.ones((4, 3)), "N C")
    with pytest.raises(ValueError) as err:
        ax.explain(x * 2, timed=True, repeat=0)
    assert str(err.value) == (
        "explain: repeat must be a positive int, not 0. Pass repeat=3 (the best of three runs "
        "is shown)."
    )
    assert ax.explain(x * 2, timed=True, repeat=3).kernels[0].time_s > 0  # the hint works
    chunked = x.chunk({"N": 2})
    with pytest.raises(TypeError) as err:
        ax.explain(chunked * 2, timed=True)
    assert str(err.value) == (
        "explain: timed=True times in-memory kernels; this expression is chunked "
        "(axes: N=4, C=3). Time expr.compute() instead, or explain without timed=True."
    )
    assert ax.explain(chunked * 2).steps  # without timed=True
    w = ax.variable(np.ones(3), "K", name="w")
    with pytest.raises(TypeError) as err:
        ax.explain([w * 2], timed=True)
    assert str(err.value) == (
        "explain: timed=True times one expression's kernels (got list). Time the call "
        "itself (timeit), or pass one tensor expression."
    )
