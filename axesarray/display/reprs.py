"""What a tensor looks like in a terminal and in Jupyter; the HTML form of a plan.

``tensor_repr``/``tensor_html`` show axes, memory (physical order, byte strides, blocks,
padding, storage and view), dtype, layout, device, kind, bytes and a summarized preview.
An r-tensor shows its expression, a key of its inputs and its plan (passed in: computing it
is the engine's job), and is evaluated for the preview only when that is small and cheap.
Reads tensors duck-typed (``axes``, ``dtype``, ``_node``, ``layout``, ``device``,
``is_lvalue``, ``kind``); imports ``errors``, ``options``, ``expr``, ``layouts``,
``strided`` and the display helpers ``dag.text``, ``memory_map``, ``pictures``,
``htmlparts`` and ``planviews`` (the HTML of plans).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from ..core.strided import has_internal_overlap, is_contiguous, span
from ..dag import nodes as ex
from ..dag.chunked_leaf import has_chunked
from ..dag.text import formula, inputs, tree_lines, work
from ..errors import fmt_axes
from ..options import get_option, set_options
from ..storage.devices import device_of
from ..storage.layouts import physical_dims
from .htmlparts import BOX as _BOX
from .htmlparts import MUTED as _MUTED
from .htmlparts import PRE as _PRE
from .htmlparts import details as _details
from .htmlparts import e as _e
from .htmlparts import nbytes_text
from .htmlparts import pill as _pill
from .htmlparts import table as _table
from .memory_map import first_address
from .pictures import chunk_svg, layout_svg
from .planviews import chunked_html, plan_html

__all__ = ["tensor_repr", "tensor_html", "plan_html", "memory_order", "PREVIEW_ELEMENTS"]

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
    view = t.node.view
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


def _storage_facts(t) -> tuple[str, str]:
    """(storage sentence, contiguity) of an l-tensor."""
    leaf = t.node
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
    view = t.node.view
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
    node = t.node
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
        for p in t.node.params
    ):
        return None, "no value: a placeholder has one only during a call of its function"
    if t.is_lvalue:
        sub = _gather(t.node, lists)
    elif has_chunked(t.node):
        return None, "chunked (dask), not computed: .compute() or .numpy() computes it"
    else:
        cost = work(t.node)
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
        inp = inputs(t.node, t.axes.names)
        lines.append("  = " + formula(t.node, inp))
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
        total = int(t.node.data.size) * item
        rows.append(
            ("bytes", f"{nbytes_text(t.size * item)} of values, {nbytes_text(total)} allocated")
        )
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
    inp = inputs(t.node, t.axes.names)
    rows = []
    for prefix, text, kind in tree_lines(t.node, inp):
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
    return _details(f"expression = {formula(t.node, inp)}", tree + key)


def _placeholder(t) -> bool:
    tag = getattr(t.node, "tag", None)
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
        if chunks is None and t.node.kind == "chunked":
            chunks = t.node.chunks
        if chunks is not None:
            grid = chunk_svg(t.axes.names, chunks)
            if grid is not None:
                parts.append(_details("chunks (dask)", grid + _chunk_table(t, chunks)))
        if plan is not None:
            if hasattr(plan, "kernels"):
                shown = plan_html(plan, boxed=False)
            elif hasattr(plan, "graph_tasks"):  # chunked: its grid is drawn above
                shown = chunked_html(plan, grid=False)
            else:
                shown = plan._repr_html_()
            parts.append(_details("plan", shown))
    parts.append(_values_html(t))
    parts.append("</div>")
    return "".join(parts)
