"""What a tensor looks like in a terminal and in Jupyter; the HTML form of a plan.

``tensor_repr``/``tensor_html`` show axes, memory (physical order, byte strides, blocks,
padding, storage and view), dtype, layout, device, kind, bytes and a summarized preview.
An r-tensor shows its expression, a key of its inputs and its plan (passed in: computing it
is the engine's job), and is evaluated for the preview only when that is small and cheap.
Reads tensors duck-typed (``axes``, ``dtype``, ``_node``, ``layout``, ``device``,
``is_lvalue``, ``kind``); imports ``errors``, ``options``, ``expr``, ``layouts``,
``strided`` and the two helpers ``_exprtext`` and ``pictures``.
"""

from __future__ import annotations

import html
import math
import sys

import numpy as np

from . import expr as ex
from ._exprtext import formula, inputs, tree_lines, work
from .devices import device_of
from .errors import fmt_axes
from .expr_chunked import has_chunked
from .layouts import physical_dims
from .options import get_option, set_options
from .memory_map import first_address
from .pictures import chunk_svg, layout_svg
from .strided import has_internal_overlap, is_contiguous, span

__all__ = [
    "tensor_repr",
    "tensor_html",
    "plan_html",
    "program_html",
    "chunked_html",
    "loops_text",
    "estimated_bytes",
    "estimated_work",
    "nbytes_text",
    "memory_order",
    "PREVIEW_ELEMENTS",
]

PREVIEW_ELEMENTS = 100_000  # an r-tensor is evaluated for a preview up to this many elements
PREVIEW_WORK = 2_000_000  # ... and this many elements read or computed (see _exprtext.work)
THRESHOLD = 200  # values shown in full; above, each long axis shows its edges (numpy style)
SVG_ELEMENTS = 256  # l-tensors up to this size get a memory picture in their HTML


# --- facts about memory -----------------------------------------------------------------------


def memory_order(t) -> list[tuple[str, int, int, int]]:
    """Physical dims of an l-tensor, outermost first: ``(label, length, stride, axis)``.

    Strides are in elements. A blocked axis gives two dims, ``C//4`` (its blocks) and
    ``C%4`` (the lanes). The layout tag gives the order when it names the tensor's axes;
    otherwise the order is read from the strides (broadcast dims, stride 0, last).
    """
    view = t._node.view
    names = [a.name for a in t.axes]
    blocks = view.blocks or (None,) * view.ndim
    lay = t.layout
    if lay is not None and sorted(lay.order) == sorted(names):
        dims = []
        for p in physical_dims(lay, t.axes):
            s, b = view.strides[p.axis], blocks[p.axis]
            if p.kind == "plain":
                stride = s
            elif p.kind == "outer":
                stride = s if b is not None else s * p.block
            else:
                stride = b.inner * b.step if b is not None else s
            dims.append((p.label, p.length, stride, p.axis))
        return dims
    dims = []
    for d, (name, n, s, b) in enumerate(zip(names, view.shape, view.strides, blocks, strict=True)):
        if b is None:
            dims.append((name, n, s, d))
        else:
            dims.append((f"{name}//{b.size}", -(-n // b.size), s, d))
            dims.append((f"{name}%{b.size}", b.size, b.inner * b.step, d))
    return sorted(dims, key=lambda e: (e[2] == 0, -abs(e[2]), e[3]))


def _padding(t) -> list[str]:
    """``C padded 70 -> 72`` for each blocked axis whose length is not a multiple."""
    lay = t.layout
    if lay is None or lay.partial:
        return []  # a view cutting through blocks: its lengths say nothing of the padding
    out = []
    for name, x in lay.blocks:
        if name in t.axes.names:
            n = t.axes[name].length
            if n % x:
                out.append(f"{name} padded {n} -> {-(-n // x) * x}")
    return out


def _layout_text(t) -> str | None:
    lay = t.layout
    if lay is None:
        return None
    text = str(lay) + (" (a view cutting through blocks)" if lay.partial else "")
    return ", ".join([text, *_padding(t)])


def nbytes_text(n: int) -> str:
    """``48 B``, ``1.5 KiB``, ``12.3 MiB``..."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError  # pragma: no cover


def _storage_facts(t) -> tuple[str, str]:
    """(storage sentence, contiguity) of an l-tensor."""
    leaf = t._node
    view, item, total = leaf.view, leaf.dtype.itemsize, int(leaf.data.size)
    order = memory_order(t)
    physical = math.prod(n for _, n, _, _ in order) if order else 1
    overlap = view.size > 0 and has_internal_overlap(view)
    # The whole storage, in some order (a reversed axis starts at a non-zero offset).
    lowest = span(view)[0] if view.size else 0
    whole = physical == total and lowest == 0 and not overlap
    spread = [a.name for a, s in zip(t.axes, view.strides, strict=True) if s == 0 and a.length > 1]
    if is_contiguous(view):
        how = "C-contiguous"
    elif whole:
        how = "dense in memory order " + " ".join(label for label, *_ in order)
    elif spread:
        how = "broadcast (stride 0 on " + ", ".join(spread) + ")"
    elif overlap:
        how = "overlapping (elements share addresses)"
    else:
        how = "strided (the storage has elements outside this view)"
    if whole:
        text = f"storage of {total} elements ({nbytes_text(total * item)})"
        if physical > view.size:
            text += f", {physical - view.size} of them padding"
    else:
        first = first_address(view)
        text = (
            f"view of a storage of {total} elements ({nbytes_text(total * item)}) "
            f"at offset {first} (byte {first * item})"
        )
    return text, how


def _lanes_note(t) -> str:
    """How a view through blocks picks its lanes: ``C: lanes 1, 4, 7... of blocks of 32``."""
    view = t._node.view
    notes = []
    for a, b in zip(t.axes, view.blocks or (), strict=False):
        if b is not None and (b.phase or b.step != 1):
            lanes = ", ".join(str(b.phase + b.step * i) for i in range(min(3, a.length)))
            more = "..." if a.length > 3 else ""
            notes.append(
                f"{a.name}: lanes {lanes}{more} of blocks of {b.size} "
                f"(element 0 in lane {b.phase}, then every {b.step}, across blocks)"
            )
    return "; ".join(notes)


def _kind(t) -> str:
    node = t._node
    text = "l-tensor" if t.is_lvalue else "r-tensor"
    if t.is_lvalue and not node.writeable:
        text += ", read-only"
    kind = getattr(t, "kind", None)
    if kind:
        text += f", {kind}"
    return text


def _axes_text(t) -> str:
    return "(" + (fmt_axes(t.axes) if len(t.axes) else "") + ")"


# --- preview -------------------------------------------------------------------------------


def _indices(shape: tuple[int, ...], size: int) -> tuple[list, bool]:
    """Per axis, the indices a summarized print reads, and whether it summarizes.

    A long axis keeps its ``edge`` first and last indices with one index between them
    that numpy replaces by ``...`` (so numpy's own summarization lays the text out).
    """
    edge = get_option("display_edgeitems")
    summarize = size > THRESHOLD
    lists = []
    for n in shape:
        if summarize and n > 2 * edge:
            lists.append(np.r_[0:edge, edge, n - edge : n])
        else:
            lists.append(np.arange(n))
    return lists, summarize


def _gather(leaf: ex.Leaf, lists: list) -> np.ndarray:
    """Values of ``leaf`` at the index grid ``lists``: only those elements are read."""
    view = leaf.view
    addr = np.full(tuple(len(i) for i in lists), view.offset, dtype=np.int64)
    blocks = view.blocks or (None,) * view.ndim
    for d, (i, s, b) in enumerate(zip(lists, view.strides, blocks, strict=True)):
        if b is None:
            term = i * s
        else:
            j = b.phase + b.step * i
            term = (j // b.size) * s + (j % b.size) * b.inner
        addr += term.reshape((1,) * d + (len(i),) + (1,) * (view.ndim - d - 1))
    data = leaf.data
    device = device_of(data)
    if device.is_cpu:
        return data[addr]
    if addr.size == 0:
        return np.empty(addr.shape, leaf.dtype)
    lo, hi = int(addr.min()), int(addr.max()) + 1
    return np.asarray(device.to_host(data[lo:hi]))[addr - lo]


def _preview(t) -> tuple[str | None, str]:
    """(values text or None, why not) with numpy's layout and summarization."""
    lists, summarize = _indices(t.shape, t.size)
    if any(
        type(p) is ex.Leaf and p.tag is not None and p.tag.kind == "placeholder"
        for p in t._node.params
    ):
        return None, "no value: a placeholder has one only during a call of its function"
    if t.is_lvalue:
        sub = _gather(t._node, lists)
    elif has_chunked(t._node):
        return None, "chunked (dask), not computed: .compute() or .numpy() computes it"
    else:
        cost = work(t._node)
        if t.size > PREVIEW_ELEMENTS or cost > PREVIEW_WORK:
            return None, (
                f"not evaluated: {t.size:,} elements, {cost:,} element reads or operations "
                f"(previews compute up to {PREVIEW_ELEMENTS:,} and {PREVIEW_WORK:,}); "
                ".numpy() or .eval() computes it"
            )
        # The reference engine: a preview must not wait for a kernel to compile.
        with set_options(engine="numpy"):
            full = np.asarray(t.numpy())
        sub = full[np.ix_(*lists)] if lists else full
    threshold = 0 if summarize else sys.maxsize
    edge = get_option("display_edgeitems")
    return np.array2string(sub, edgeitems=edge, threshold=threshold), ""


# --- text ------------------------------------------------------------------------------------


def _header(t) -> str:
    parts = [_kind(t)]
    if t.layout is not None:
        parts.append(str(t.layout))
    parts.append(str(t.device))
    return f"<Tensor {t.dtype} {_axes_text(t)} {', '.join(parts)}>"


def _memory_line(t) -> str:
    item = t.dtype.itemsize
    order = memory_order(t)
    strides = " | ".join(f"{label} {s * item}" for label, _, s, _ in order) or "scalar"
    return f"memory {strides} (byte strides, outermost first)"


def tensor_repr(t, plan=None) -> str:
    """The terminal view: a header line, memory or expression lines, then values.

    >>> import axesarray as ax, numpy as np
    >>> print(repr(ax.tensor(np.arange(6.0).reshape(2, 3), "N C")))
    <Tensor float64 (N=2, C=3) l-tensor, cpu>
      memory N 24 | C 8 (byte strides, outermost first)
      storage of 6 elements (48 B), C-contiguous
    [[0. 1. 2.]
     [3. 4. 5.]]
    """
    lines = [_header(t)]
    if t.is_lvalue:
        layout = _layout_text(t)
        if layout is not None:
            lines.append(f"  layout {layout}")
        lines.append("  " + _memory_line(t))
        note = _lanes_note(t)
        if note:
            lines.append(f"  {note}")
        storage, how = _storage_facts(t)
        lines.append(f"  {storage}, {how}")
    else:
        inp = inputs(t._node, t.axes.names)
        lines.append("  = " + formula(t._node, inp))
        # Constants are written into the formula; leaves and pad values need the key.
        key = [str(i) for i in inp.infos if i.kind != "constant"]
        lines.extend(_wrap(key, "  where ", "; "))
        if plan is not None:
            lines.extend("  " + line for line in str(plan).splitlines())
    values, why = _preview(t)
    lines.append(values if values is not None else f"({why})")
    return "\n".join(lines)


def _wrap(items: list[str], prefix: str, sep: str, width: int = 100) -> list[str]:
    lines, line = [], prefix
    for k, item in enumerate(items):
        piece = item + (sep if k < len(items) - 1 else "")
        if len(line) + len(piece) > width and line.strip():
            lines.append(line.rstrip())
            line = " " * len(prefix)
        line += piece
    if items:
        lines.append(line.rstrip())
    return lines


# --- HTML -----------------------------------------------------------------------------------
# Inline styles only (no <style>, no scripts): colours inherit the notebook's text colour;
# backgrounds are translucent greys and tints that read on light and dark themes alike.

_BOX = (
    "font-family:var(--jp-code-font-family,ui-monospace,SFMono-Regular,Menlo,Consolas,"
    "monospace);font-size:var(--jp-code-font-size,12px);line-height:1.45;color:inherit;"
    "max-width:100%;overflow-x:auto;margin:2px 0"
)
_TINTS = {
    "grey": "rgba(127,127,127,0.18)",
    "l": "rgba(46,160,67,0.22)",
    "r": "rgba(163,113,247,0.25)",
    "layout": "rgba(56,139,253,0.22)",
    "warn": "rgba(210,153,34,0.25)",
}
_TABLE = "border-collapse:collapse;margin:4px 0;color:inherit;font-size:inherit"
_TH = (
    "padding:2px 10px;text-align:left;font-weight:600;background:rgba(127,127,127,0.14);"
    "border-bottom:1px solid rgba(127,127,127,0.45);color:inherit"
)
_TD = (
    "padding:2px 10px;text-align:left;vertical-align:top;"
    "border-bottom:1px solid rgba(127,127,127,0.2);color:inherit;background:transparent"
)
_MUTED = "opacity:0.72"
_SUMMARY = "cursor:pointer;font-weight:600;margin:4px 0 2px"
_PRE = (
    "margin:2px 0 4px;padding:6px 8px;background:rgba(127,127,127,0.09);border-radius:4px;"
    "color:inherit;font-family:inherit;font-size:inherit;line-height:1.35;overflow:auto;"
    "max-height:28em"
)


def _e(text) -> str:
    return html.escape(str(text))


def _pill(text: str, tint: str = "grey") -> str:
    return (
        f'<span style="display:inline-block;padding:0 7px;margin:0 4px 0 0;border-radius:9px;'
        f'background:{_TINTS[tint]};color:inherit">{_e(text)}</span>'
    )


def _table(head: list[str], rows: list[list[str]]) -> str:
    """A table; ``rows`` hold ready HTML, ``head`` plain text."""
    out = [f'<table style="{_TABLE}"><thead><tr>']
    out += [f'<th style="{_TH}">{_e(h)}</th>' for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f'<td style="{_TD}">{c}</td>' for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _details(title: str, body: str, open_: bool = True) -> str:
    flag = " open" if open_ else ""
    return (
        f'<details{flag} style="margin:2px 0"><summary style="{_SUMMARY}">{_e(title)}</summary>'
        f"{body}</details>"
    )


def _html_header(t) -> str:
    parts = ["<b>Tensor</b> ", _pill(str(t.dtype)), f"<span>{_e(_axes_text(t))}</span> "]
    parts.append(_pill(_kind(t), "l" if t.is_lvalue else "r"))
    if t.layout is not None:
        parts.append(_pill(str(t.layout), "layout"))
    parts.append(_pill(str(t.device)))
    return '<div style="margin-bottom:2px">' + "".join(parts) + "</div>"


def _axis_rows(t) -> list[list[str]]:
    """One row per axis: name, length, position(s) in memory, byte stride(s)."""
    if not t.is_lvalue:
        return [[f"<b>{_e(a.name)}</b>", str(a.length)] for a in t.axes]
    item = t.dtype.itemsize
    order = memory_order(t)
    count = len(order)
    rows = []
    for d, a in enumerate(t.axes):
        mine = [(p, label, s) for p, (label, _, s, axis) in enumerate(order) if axis == d]
        if len(mine) == 2:
            (p0, _, s0), (p1, _, s1) = mine
            x = order[p1][1]
            where = f"{p0} (blocks) and {p1} (lanes) of {count}"
            stride = (
                f"{a.name}={a.length} blocked by {x}: outer stride {s0 * item}, "
                f"inner stride {s1 * item}"
            )
        else:
            p, _, s = mine[0]
            where = f"{p} of {count}"
            stride = f"{s * item}" + (" (broadcast)" if s == 0 and a.length > 1 else "")
        rows.append([f"<b>{_e(a.name)}</b>", str(a.length), _e(where), _e(stride)])
    return rows


def _facts_html(t) -> str:
    item = t.dtype.itemsize
    rows = []
    if t.is_lvalue:
        layout = _layout_text(t)
        rows.append(
            ("layout", layout if layout is not None else "no tag (order read from strides)")
        )
        order = memory_order(t)
        rows.append(("memory order", " → ".join(label for label, *_ in order) or "scalar"))
        storage, how = _storage_facts(t)
        total = int(t._node.data.size) * item
        rows.append(("bytes", f"{nbytes_text(t.size * item)} of values, {nbytes_text(total)} allocated"))
        rows.append(("storage", f"{storage.removeprefix('storage of ')}; {how}"))
    else:
        rows.append(("bytes", f"{nbytes_text(t.size * item)} when computed"))
        if t.layout is not None:
            rows.append(("layout", f"{_layout_text(t)} (the result is allocated in it)"))
    return "".join(f'<div><span style="{_MUTED}">{_e(k)}:</span> {_e(v)}</div>' for k, v in rows)


def _values_html(t) -> str:
    values, why = _preview(t)
    names = ", ".join(t.axes.names) or "scalar"
    if values is None:
        return f'<div style="margin:4px 0">{_pill("values", "warn")} {_e(why)}</div>'
    inner = f" (innermost brackets run along {t.axes.names[-1]})" if len(t.axes) > 1 else ""
    title = f"values [{names}]{inner}"
    return _details(title, f'<pre style="{_PRE}">{_e(values)}</pre>')


def _expression_html(t) -> str:
    inp = inputs(t._node, t.axes.names)
    rows = []
    for prefix, text, kind in tree_lines(t._node, inp):
        rows.append(
            f'<div style="white-space:pre">{_e(prefix)}<b>{_e(text)}</b>'
            f'  <span style="{_MUTED}">{_e(kind)}</span></div>'
        )
    tree = f'<div style="{_PRE}">' + "".join(rows) + "</div>"
    key = _table(
        ["input", "dtype", "axes", "notes"],
        [
            [f"<b>{_e(i.label)}</b>", _e(i.dtype), _e(i.axes or i.kind), _e(", ".join(i.notes))]
            for i in inp.infos
        ],
    )
    return _details(f"expression = {formula(t._node, inp)}", tree + key)


def _placeholder(t) -> bool:
    tag = getattr(t._node, "tag", None)
    return tag is not None and tag.kind == "placeholder"


def _chunk_table(t, chunks) -> str:
    item = t.dtype.itemsize
    rows = [
        [
            f"<b>{_e(a.name)}</b>",
            str(a.length),
            str(len(c)),
            _e(str(c[0]) if len(set(c)) == 1 else f"{max(c)} (last {c[-1]})"),
        ]
        for a, c in zip(t.axes, chunks, strict=True)
    ]
    biggest = math.prod(max(c) if c else 0 for c in chunks) * item
    count = math.prod(len(c) for c in chunks)
    return _table(["axis", "length", "chunks", "chunk length"], rows) + (
        f'<div style="{_MUTED}">{count} chunks, the biggest {nbytes_text(biggest)}</div>'
    )


def tensor_html(t, plan=None) -> str:
    """The Jupyter view: header, axes table, memory facts and picture, or expression and plan,
    then the values. Self-contained HTML with inline styles (no scripts, no assets).

    >>> import axesarray as ax
    >>> page = tensor_html(ax.zeros((ax.Axis("N", 2), ax.Axis("C", 3))))
    >>> page.startswith("<div style=") and "stride (bytes)" in page
    True
    """
    head = ["axis", "length", "position in memory", "stride (bytes)"]
    parts = [f'<div style="{_BOX}">', _html_header(t)]
    if t.is_lvalue:
        parts.append(_table(head, _axis_rows(t)))
        parts.append(_facts_html(t))
        if len(t.axes) and not _placeholder(t):  # a placeholder has no values to draw
            svg = layout_svg(t, limit=4 * SVG_ELEMENTS)
            if svg is not None:
                title = "memory, one cell per element in address order"
                if "first blocks:" in svg:
                    title += " (the first blocks of each axis)"
                parts.append(_details(title, svg))
    else:
        parts.append(_table(head[:2], _axis_rows(t)))
        parts.append(_facts_html(t))
        parts.append(_expression_html(t))
        chunks = getattr(plan, "chunks", None)
        if chunks is None and t._node.kind == "chunked":
            chunks = t._node.chunks
        if chunks is not None:
            grid = chunk_svg(t.axes.names, chunks)
            if grid is not None:
                parts.append(_details("chunks (dask)", grid + _chunk_table(t, chunks)))
        if plan is not None:
            shown = plan_html(plan, boxed=False) if hasattr(plan, "kernels") else plan._repr_html_()
            parts.append(_details("plan", shown))
    parts.append(_values_html(t))
    parts.append("</div>")
    return "".join(parts)


def loops_text(loops, sep: str = " × ") -> str:
    """``N=4 × C=3``; a merged group of dims is ``(H W)=12``."""
    parts = []
    for length, label in loops:
        name = f"({label})" if " " in label else label
        parts.append(f"{name}={length}")
    return sep.join(parts) or "scalar"


def estimated_bytes(k) -> int:
    """A kernel's bytes estimate: a cost model's ``est_bytes`` when the plan has one, else
    the bytes of its arguments (``arg_bytes``)."""
    est = getattr(k, "est_bytes", None)
    return int(est) if est is not None else k.arg_bytes


def estimated_work(k) -> int:
    """A kernel's work estimate: a cost model's ``est_flops`` when the plan has one, else
    its element operations (``work``)."""
    est = getattr(k, "est_flops", None)
    return int(est) if est is not None else k.work


def _kernel_rows(kernels, first: int = 0) -> list[list[str]]:
    rows = []
    for i, k in enumerate(kernels, first):
        timed = getattr(k, "time_s", None)
        rows.append(
            [
                str(i),
                _e(k.kind),
                _e(k.writes),
                _e(loops_text(k.loops)),
                str(k.operands),
                _e(nbytes_text(estimated_bytes(k))),
                _e(f"{estimated_work(k):,}"),
                _e(k.order_from or ""),
                _e(k.cache if timed is None else f"{k.cache}, {timed * 1e3:.3g} ms"),
            ]
        )
    return rows


_KERNEL_HEAD = ["#", "kind", "writes", "loops", "reads", "bytes (est.)", "work (ops)", "order from", "code"]


def _plan_body(plan, first: int = 0) -> str:
    parts = [_table(_KERNEL_HEAD, _kernel_rows(plan.kernels, first))] if plan.kernels else []
    if plan.temporaries:
        temps = [
            [f"#{i}", _e(" × ".join(map(str, shape)) or "scalar"), _e(dtype), nbytes_text(nbytes)]
            for i, shape, dtype, nbytes in plan.temporaries
        ]
        parts.append(_table(["temporary", "shape", "dtype", "bytes"], temps))
    return "".join(parts)


def _count(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def plan_html(plan, boxed: bool = True) -> str:
    """``ax.explain(...)`` as HTML: the kernels in execution order (loops by axis name,
    estimated bytes and work), then the temporaries, numbered in the order they are written.

    >>> import axesarray as ax
    >>> x = ax.zeros((ax.Axis("N", 2), ax.Axis("C", 3)))
    >>> "1 kernel" in plan_html(ax.explain(ax.exp(x).sum("C")))
    True
    """
    n, nt = len(plan.kernels), len(plan.temporaries)
    head = [
        "<div>",
        "<b>Plan</b> " if boxed else "",
        _pill(_count(n, "kernel")),
        _pill(_count(nt, "temporary", "temporaries") + f" ({nbytes_text(plan.temporary_bytes)})"),
        _pill("plan cached" if plan.cached else "plan new"),
        _pill(f"next run: {plan.tier}", "warn") if n and plan.tier != "kernels" else "",
        "</div>",
    ]
    parts = head + [_plan_body(plan)]
    if n:
        parts.append(
            f'<div style="{_MUTED}">kernels in execution order; inputs are t0, t1, ... as in '
            "the tensor's repr; bytes: each argument read once and the output written once</div>"
        )
    body = "".join(parts)
    return f'<div style="{_BOX}">{body}</div>' if boxed else body


def program_html(plan) -> str:
    """A function's (or backward pass's, or optimizer step's) plan as HTML: per stage, its
    formula and its kernels, numbered through the whole program in execution order.

    >>> import axesarray as ax, numpy as np
    >>> w = ax.variable(np.ones(4), "K", name="w")
    >>> "grad_w" in program_html(ax.explain(ax.grad((w * w).sum(), [w])))
    True
    """
    kernels = len(plan.kernels)
    parts = [
        f'<div style="{_BOX}"><div><b>Program</b> ',
        _pill(_count(len(plan.stages), "stage")),
        _pill(_count(kernels, "kernel")),
        "</div>",
    ]
    first = 0
    for stage in plan.stages:
        sub = stage.plan
        title = f"{stage.label} = {stage.formula}"
        body = _plan_body(sub, first) if sub.kernels else (
            f'<div style="{_MUTED}">nothing runs (already a value)</div>'
        )
        parts.append(_details(title, body))
        first += len(sub.kernels)
    parts.append("</div>")
    return "".join(parts)


def chunked_html(plan) -> str:
    """A chunked (dask) plan as HTML: the result's chunk grid, then one row per layer.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.ones((8, 4)), "N C").chunk({"N": 2})
    >>> "<svg" in chunked_html(ax.explain(x * 2))
    True
    """
    from .pictures import chunk_svg

    blocks = math.prod(len(c) for c in plan.chunks)
    parts = [
        f'<div style="{_BOX}"><div><b>Chunked plan (dask)</b> ',
        _pill(_count(len(plan.steps), "layer")),
        _pill(_count(blocks, "result chunk")),
        _pill(_count(plan.graph_tasks, "task") + " in the graph"),
        "</div>",
    ]
    names = getattr(plan, "names", None) or tuple(f"d{d}" for d in range(len(plan.chunks)))
    parts.append(chunk_svg(names, plan.chunks) or "")
    rows = [
        [
            str(i),
            _e(s.kind),
            str(s.tasks),
            f'<div style="white-space:normal;max-width:44em">{_e(s.per_chunk)}</div>',
            "<br>".join(_e(k) for k in s.kernels),
        ]
        for i, s in enumerate(plan.steps)
    ]
    parts.append(_table(["#", "layer", "tasks", "each task", "kernels per chunk"], rows))
    parts.append("</div>")
    return "".join(parts)
