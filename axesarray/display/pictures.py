"""Layout pictures: one cell per storage element, in address order.

``show_layout`` draws a matplotlib figure (imported lazily); ``layout_svg`` builds the same
picture as an SVG string for ``_repr_html_``. The data comes from ``display.memory_map``. Imports
``errors`` and ``display.memory_map``.
"""

from __future__ import annotations

import html
import itertools

from ..errors import message
from .memory_map import (
    CELL_LIMIT,
    LABEL_LIMIT,
    MemoryMap,
    block_runs,
    color_axis,
    first_address,
    hex_color,
    memory_map,
    palette,
    title,
    used_values,
)

__all__ = ["show_layout", "layout_svg", "chunk_svg", "memory_map", "MemoryMap", "CELL_LIMIT"]


# --- SVG ----------------------------------------------------------------------------------

_SVG_ID = itertools.count()


def layout_svg(
    t, limit: int = 256, color_by: str | None = None, first_blocks: bool | None = None
) -> str | None:
    """The layout picture as an SVG string; above ``limit`` cells (or with
    ``first_blocks=True``) the first blocks of each axis, with the rows of storage in
    between left out and counted. None for an r-tensor or an empty one.

    Pure string building (no matplotlib), readable on light and dark backgrounds.

    >>> import axesarray as ax
    >>> layout_svg(ax.zeros((ax.Axis("N", 2), ax.Axis("C", 3)))).count('class="cell"')
    6
    >>> big = ax.zeros((ax.Axis("N", 32), ax.Axis("C", 64), ax.Axis("H", 56), ax.Axis("W", 56)))
    >>> "first blocks" in layout_svg(big.to_layout("NCHW32"))
    True
    """
    if not getattr(t, "is_lvalue", False):
        return None
    m = None
    if not first_blocks and t.node.view.size <= limit:
        m = memory_map(t, limit, "layout_svg", refuse=False)
    if m is None:
        if first_blocks is False:
            return None
        m = memory_map(t, limit, "layout_svg", first_blocks=True)
    if m.cells == 0:
        return None
    color = color_axis(t, m, color_by, "layout_svg")
    labels = [m.label(k) for k in range(m.cells)]
    overlap = bool((m.count > 1).any())
    cw = max(26.0, _CHAR * max(len(s) for s in labels) + 6)
    ch = 28.0 if overlap else 20.0  # room for the count under the label
    left, top, gap = 8.0 + _CHAR * len(str(m.span[1])), 6.0, 14.0
    per_row = max(1, min(m.row, int((_SVG_WIDTH - left) // cw)))
    if m.cells > per_row and m.row > per_row and m.row % per_row:
        per_row = next(w for w in range(per_row, 0, -1) if m.row % w == 0)
    rows = -(-m.cells // per_row)
    # A row of storage left out (first blocks) is a gap line with its count.
    cuts = {r: m.elided(r * per_row // m.row) for r in range(rows) if (r * per_row) % m.row == 0}
    cuts = {r: n for r, n in cuts.items() if n > 0}
    y_of = []
    y = top
    for r in range(rows):
        if r in cuts:
            y += gap
        y_of.append(y)
        y += ch
    legend_y = y + 10
    colors = palette(m.lengths[color] if color is not None else 1)
    uid = f"axa{next(_SVG_ID)}"
    legend, legend_end = _svg_legend(m, color, colors, uid, left, legend_y)
    width = max(left + per_row * cw, legend_end) + 4
    caption = _svg_caption(t, m)
    height = legend_y + 22 + (14 if caption else 0)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="{_FONT}" '
        # Narrower than the picture (a docs column, a split notebook): scaled down, not cut.
        'style="color:inherit;display:block;max-width:100%;height:auto">',
        f'<defs><pattern id="{uid}h" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#9e9e9e" '
        'fill-opacity="0.25"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9e9e9e" '
        'stroke-opacity="0.7" stroke-width="1"/></pattern></defs>',
    ]
    for r in range(rows):
        out.append(
            f'<text x="{left - 4}" y="{y_of[r] + ch / 2 + 3:.1f}" text-anchor="end" '
            f'fill="currentColor" fill-opacity="0.6">{m.address(r * per_row)}</text>'
        )
        if r in cuts:
            out.append(
                f'<text x="{left + 4}" y="{y_of[r] - 3:.1f}" fill="currentColor" '
                f'fill-opacity="0.75" font-style="italic">⋮ {cuts[r]:,} cells not shown</text>'
            )
    for k in range(m.cells):
        x = left + (k % per_row) * cw
        y = y_of[k // per_row]
        out.append(_svg_cell(m, k, (x, y, cw, ch), labels[k], color, colors, uid))
    out.extend(_svg_blocks(m, per_row, left, y_of, cw, ch))
    out.append(legend)
    if caption:
        out.append(
            f'<text x="{left}" y="{legend_y + 32}" fill="currentColor" fill-opacity="0.8">'
            f"{html.escape(caption)}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _svg_caption(t, m) -> str:
    """Where the view starts when not at the picture's first cell, and what a first-blocks
    picture leaves out: ``first blocks: N 1 of 32, C 64 of 64...``."""
    parts = []
    view = t.node.view
    first = first_address(view)
    if view.size and first != m.start:
        where = f"element 0 at address {first} (byte {first * t.dtype.itemsize})"
        if view.blocks is not None and any(b is not None and b.phase for b in view.blocks):
            where += ", inside its block"
        parts.append(where)
    if m.shown is not None:
        kept = [
            f"{n} {k} of {total}" for n, k, total in zip(m.names, m.shown, m.lengths, strict=True)
        ]
        parts.append("first blocks: " + ", ".join(kept) + f" ({m.storage:,} elements stored)")
    return "; ".join(parts)


# Monospace advance (0.6 em) at the font size, and the widest picture a notebook shows whole.
_CHAR, _FONT, _SVG_WIDTH = 5.45, 9, 960.0


def _svg_cell(m, k, box, label, color, colors, uid) -> str:
    x, y, cw, ch = box
    kind = "pad" if m.padding[k] else "gap" if m.count[k] == 0 else "cell"
    rect = f'<rect class="{kind}" x="{x:.1f}" y="{y:.1f}" width="{cw:.1f}" height="{ch:.1f}" '
    text_y = y + (ch / 2 + 3 if ch <= 20 else 12)
    if m.padding[k]:
        body = rect + f'fill="url(#{uid}h)" stroke="currentColor" stroke-opacity="0.35"/>'
        text = f'fill="currentColor" fill-opacity="0.8">{html.escape(label)}'
    elif m.count[k] == 0:
        return (
            rect + 'fill="none" stroke="currentColor" stroke-opacity="0.3" stroke-dasharray="2 2"/>'
        )
    else:
        fill = hex_color(colors[m.coords[k, color]]) if color is not None else hex_color(colors[0])
        many = m.count[k] > 1
        stroke = (
            'stroke="#d62728" stroke-width="2"'
            if many
            else 'stroke="currentColor" stroke-opacity="0.35"'
        )
        body = rect + f'fill="{fill}" {stroke}/>'
        text = f'fill="#111">{html.escape(label)}'
        if many:
            body += (
                f'<text x="{x + cw / 2:.1f}" y="{y + ch - 4:.1f}" text-anchor="middle" '
                f'font-size="8" fill="#b71c1c">x{m.count[k]}</text>'
            )
    return body + f'<text x="{x + cw / 2:.1f}" y="{text_y:.1f}" text-anchor="middle" {text}</text>'


def _svg_blocks(m, per_row, left, y_of, cw, ch) -> list[str]:
    """One outline per block: a block that wraps onto the next row is drawn open at the
    wrap (no line between its two halves), so a block of 32 lanes over two rows of 16
    reads as one shape."""
    out = []
    for r, c, n in block_runs(m, per_row):
        k = r * per_row + c
        x0, x1, y0, y1 = left + c * cw, left + (c + n) * cw, y_of[r], y_of[r] + ch
        parts = [f"M{x0:.1f},{y0:.1f}V{y1:.1f}", f"M{x1:.1f},{y0:.1f}V{y1:.1f}"]
        if m.lane[k] == 0:  # the block starts here
            parts.append(f"M{x0:.1f},{y0:.1f}H{x1:.1f}")
        if m.lane[k + n - 1] == m.block_size - 1 or k + n == m.cells:  # ... ends here
            parts.append(f"M{x0:.1f},{y1:.1f}H{x1:.1f}")
        out.append(
            f'<path d="{"".join(parts)}" fill="none" stroke="currentColor" stroke-width="2"/>'
        )
    return out


def _svg_legend(m, color, colors, uid, x, y) -> tuple[str, float]:
    """The legend row and the x where it ends."""
    parts = []
    if color is not None:
        name = m.names[color]
        parts.append(
            f'<text x="{x}" y="{y + 10}" fill="currentColor">colour: {html.escape(name)}</text>'
        )
        x += _CHAR * (9 + len(name))
        used = used_values(m, color)  # only the colours some cell has
        shown = used[:12]
        for v in shown:
            w = max(14, _CHAR * len(str(v)) + 4)
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.0f}" height="13" '
                f'fill="{hex_color(colors[v])}"/><text x="{x + w / 2:.1f}" y="{y + 10}" '
                f'text-anchor="middle" font-size="8" fill="#111">{v}</text>'
            )
            x += w + 2
        x += 8
        if len(shown) < len(used):
            parts.append(f'<text x="{x}" y="{y + 10}" fill="currentColor">… {used[-1]}</text>')
            x += _CHAR * (3 + len(str(used[-1]))) + 8
    keys = [
        (m.padding.any(), f'fill="url(#{uid}h)"', "padding"),
        (
            m.gaps.any(),
            'fill="none" stroke="currentColor" stroke-dasharray="2 2"',
            "not in view" if m.shown is None else "not in view, or not shown",
        ),
        (
            (m.count > 1).any(),
            'fill="none" stroke="#d62728" stroke-width="2"',
            "reached twice or more",
        ),
    ]
    for shown, style, text in keys:
        if shown:
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="14" height="13" {style}/>'
                f'<text x="{x + 18:.1f}" y="{y + 10}" fill="currentColor">{text}</text>'
            )
            x += 18 + _CHAR * len(text) + 12
    return "".join(parts), x


# --- chunk grid ---------------------------------------------------------------------------


def chunk_svg(names, chunks, size: float = 180.0) -> str | None:
    """The chunk grid of a chunked tensor as an SVG string (dask's picture is the model):
    the last two axes are the front face, a third-last axis the depth, one line per chunk
    boundary; axes in front of those are named in the caption. None for a scalar.

    >>> chunk_svg(("N", "C"), ((2, 2), (3,))).count("<line")
    1
    """
    if not chunks:
        return None
    names, chunks = tuple(names), tuple(tuple(c) for c in chunks)
    if len(chunks) == 1:
        names, chunks = ("",) + names, ((1,),) + chunks
    rows, cols = chunks[-2], chunks[-1]
    depth = chunks[-3] if len(chunks) >= 3 else None
    n_r, n_c = max(sum(rows), 1), max(sum(cols), 1)
    # Long axes are drawn long, but no side shorter than a fifth of the other (dask's rule).
    scale = size / max(n_r, n_c)
    w, h = max(n_c * scale, size / 5), max(n_r * scale, size / 5)
    if len(names[0]) == 0:
        h = min(h, 24.0)
    dx = dy = 0.0
    if depth is not None:
        dx = dy = min(60.0, max(20.0, 60.0 * sum(depth) / max(n_r, n_c, 1)))
    left, top = 58.0, 8.0 + dy
    out = []
    stroke = 'stroke="currentColor" stroke-opacity="0.75"'
    face = 'fill="rgba(236,178,46,0.35)"'  # dask's amber, translucent for both themes
    if depth is not None:
        out.append(
            f'<polygon points="{left},{top} {left + dx},{top - dy} {left + w + dx},{top - dy} '
            f'{left + w},{top}" {face} {stroke}/>'
            f'<polygon points="{left + w},{top} {left + w + dx},{top - dy} '
            f'{left + w + dx},{top + h - dy} {left + w},{top + h}" {face} {stroke}/>'
        )
        total = sum(depth)
        acc = 0
        for c in depth[:-1]:
            acc += c
            f = acc / total
            out.append(
                f'<line x1="{left + f * dx:.1f}" y1="{top - f * dy:.1f}" '
                f'x2="{left + w + f * dx:.1f}" y2="{top - f * dy:.1f}" {stroke}/>'
                f'<line x1="{left + w + f * dx:.1f}" y1="{top - f * dy:.1f}" '
                f'x2="{left + w + f * dx:.1f}" y2="{top + h - f * dy:.1f}" {stroke}/>'
            )
    out.append(
        f'<rect x="{left}" y="{top}" width="{w:.1f}" height="{h:.1f}" {face} {stroke} '
        'stroke-width="1.5"/>'
    )
    acc = 0
    for c in cols[:-1]:
        acc += c
        x = left + w * acc / n_c
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + h:.1f}" {stroke}/>')
    acc = 0
    for c in rows[:-1]:
        acc += c
        y = top + h * acc / n_r
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + w:.1f}" y2="{y:.1f}" {stroke}/>')
    text = 'fill="currentColor" font-size="11"'
    out.append(
        f'<text x="{left + w / 2:.1f}" y="{top + h + 14:.1f}" text-anchor="middle" {text}>'
        f"{html.escape(names[-1])}={sum(cols)} ({_chunks(len(cols))})</text>"
    )
    if names[-2]:
        out.append(
            f'<text x="{left - 6}" y="{top + h / 2:.1f}" text-anchor="end" {text}>'
            f"{html.escape(names[-2])}={sum(rows)}</text>"
            f'<text x="{left - 6}" y="{top + h / 2 + 13:.1f}" text-anchor="end" {text}>'
            f"({len(rows)})</text>"
        )
    if depth is not None:
        out.append(
            f'<text x="{left + w + dx + 4:.1f}" y="{top - dy + 10:.1f}" {text}>'
            f"{html.escape(names[-3])}={sum(depth)} ({len(depth)})</text>"
        )
    width = left + w + dx + 110
    height = top + h + 22
    lead = [
        f"{n}={sum(c)} ({_chunks(len(c))})" for n, c in zip(names[:-3], chunks[:-3], strict=True)
    ]
    if lead:
        out.append(
            f'<text x="0" y="{height + 2:.1f}" {text}>× {html.escape(", ".join(lead))}</text>'
        )
        height += 16
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        'font-family="monospace" style="color:inherit;display:block;margin:4px 0">'
        + "".join(out)
        + "</svg>"
    )


def _chunks(n: int) -> str:
    return f"{n} chunk" + ("" if n == 1 else "s")


# --- matplotlib -----------------------------------------------------------------------------


def show_layout(
    t,
    *,
    color_by: str | None = None,
    limit: int = CELL_LIMIT,
    labels=None,
    first_blocks: bool | None = None,
):
    """Draw an l-tensor's memory: one cell per storage element, in address order.

    Cells are coloured by one logical axis (``color_by``; default a blocked axis, else
    ``C``, else the first) and labelled with their logical coordinates (``n0c1h0w2``).
    Padding is hatched grey, storage the view skips is a dashed gap, an element reached by
    several indices (a broadcast) has a red border and its count, and a thick outline
    groups the lanes of each block. Rows start at the address on their left. A tensor
    above ``limit`` cells (or any, with ``first_blocks=True``) is drawn by its first blocks:
    two blocks of a blocked axis, a row of the innermost axis, two of the others, and the
    rows of storage between them are left out (the row label counts them);
    ``first_blocks=False`` refuses instead. Returns a matplotlib ``Figure``
    (``fig.savefig("layout.png")``; Jupyter shows it as an image).

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.zeros((1, 6, 2, 3), "float32"), "N C H W").to_layout("NCHW4")
    >>> fig = ax.show_layout(x)
    >>> fig.get_suptitle().splitlines()[0]
    'float32 (N=1, C=6, H=2, W=3) in NCHW4'

    Raises ``TypeError`` for an r-tensor, and ``ValueError`` above ``limit`` cells with
    ``first_blocks=False``.
    """
    if first_blocks:
        m = memory_map(t, limit, "show_layout", first_blocks=True)
    else:
        m = memory_map(t, limit, "show_layout", refuse=first_blocks is False)
        if m is None:
            m = memory_map(t, limit, "show_layout", first_blocks=True)
    color = color_axis(t, m, color_by, "show_layout")
    _need_matplotlib()
    per_row = m.row
    rows = max(1, -(-m.cells // per_row))
    show_labels = m.cells <= LABEL_LIMIT if labels is None else bool(labels)
    longest = max((len(m.label(k)) for k in range(m.cells)), default=2)
    cw = max(0.36, 0.085 * longest + 0.14) if show_labels else 0.2
    ch = 0.34 if show_labels else 0.2
    width = max(1.0 + per_row * cw, 0.065 * max(map(len, title(t, m).splitlines())) + 0.3)
    fig = _figure((min(width, 40.0), min(1.3 + rows * ch, 60.0)))
    axes = fig.add_subplot(1, 1, 1)
    colors = palette(m.lengths[color] if color is not None else 1)
    _draw_cells(axes, m, per_row, color, colors)
    if show_labels:
        _draw_labels(axes, m, per_row, min(9.0, 100.0 * cw / max(longest, 1)))
    axes.set_xlim(-0.1, per_row + 0.1)
    axes.set_ylim(-rows - 0.1, 0.1)
    axes.set_aspect(ch / cw)
    ticks = []
    for r in range(rows):
        cut = m.elided(r) if per_row == m.row else 0
        ticks.append(
            f"⋮ {cut:,} not shown  {m.address(r * per_row)}" if cut else str(m.address(r * per_row))
        )
    axes.set_yticks([-r - 0.5 for r in range(rows)], ticks, fontsize=7)
    axes.set_xticks([])
    axes.tick_params(length=0)
    for side in axes.spines.values():
        side.set_visible(False)
    fig.suptitle(title(t, m), fontsize=9, x=0.01, ha="left")
    _legend(fig, m, color, colors)
    return fig


def _draw_cells(axes, m: MemoryMap, per_row: int, color, colors) -> None:
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    solid, pads, gaps = [], [], []
    faces, edges, widths = [], [], []
    for k in range(m.cells):
        r, c = divmod(k, per_row)
        rect = Rectangle((c, -r - 1), 1, 1)
        if m.padding[k]:
            pads.append(rect)
        elif m.count[k] == 0:
            gaps.append(rect)
        else:
            solid.append(rect)
            faces.append(colors[m.coords[k, color]] if color is not None else colors[0])
            overlap = m.count[k] > 1
            edges.append(_OVERLAP if overlap else "#555555")
            widths.append(2.0 if overlap else 0.5)
    axes.add_collection(PatchCollection(solid, facecolors=faces, edgecolors=edges, lw=widths))
    axes.add_collection(PatchCollection(pads, facecolor=_PAD, edgecolor=_HATCH, hatch="//", lw=0.5))
    axes.add_collection(PatchCollection(gaps, facecolor="none", edgecolor="#999999", ls=":"))
    runs = [Rectangle((c, -r - 1), n, 1) for r, c, n in block_runs(m, per_row)]
    axes.add_collection(PatchCollection(runs, facecolor="none", edgecolor="black", lw=1.6))


def _draw_labels(axes, m: MemoryMap, per_row: int, size: float) -> None:
    for k in range(m.cells):
        if m.count[k] == 0 and not m.padding[k]:
            continue
        r, c = divmod(k, per_row)
        color = "#555555" if m.padding[k] else "black"
        axes.text(
            c + 0.5,
            -r - 0.55,
            m.label(k),
            ha="center",
            va="center",
            fontsize=size,
            family="monospace",
            color=color,
        )
        if m.count[k] > 1:
            axes.text(
                c + 0.97,
                -r - 0.06,
                f"x{m.count[k]}",
                ha="right",
                va="top",
                fontsize=size * 0.75,
                color=_OVERLAP,
            )


def _legend(fig, m: MemoryMap, color, colors) -> None:
    from matplotlib.patches import Patch

    handles = []
    if color is not None:
        name = m.names[color]
        shown = [(v, colors[v]) for v in used_values(m, color)]  # only colours some cell has
        if len(shown) > 16:  # the two ends say which way the colours run
            shown = [shown[0], shown[len(shown) // 2], shown[-1]]
        handles += [Patch(facecolor=c, edgecolor="#555555", label=f"{name}={v}") for v, c in shown]
    if m.padding.any():
        handles.append(Patch(facecolor=_PAD, edgecolor=_HATCH, hatch="//", label="padding"))
    if m.gaps.any():
        handles.append(Patch(facecolor="none", edgecolor="#999999", ls=":", label="not in view"))
    if (m.count > 1).any():
        handles.append(Patch(facecolor="none", edgecolor=_OVERLAP, lw=2, label="reached twice+"))
    if handles:
        fig.legend(
            handles=handles,
            loc="outside lower left",
            ncol=min(8, len(handles)),
            fontsize=7,
            frameon=False,
        )


_PAD, _HATCH, _OVERLAP = "#e4e4e4", "#b0b0b0", "#d62728"


def _need_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(
            message(
                "show_layout",
                "matplotlib is not installed",
                None,
                "Install it: pip install 'axesarray[plot]' (the HTML repr draws without it)",
            )
        ) from None


def _figure(size):
    """A matplotlib Figure with an Agg canvas that Jupyter shows as a PNG.

    Not created through pyplot: no global figure list to leak into, no GUI backend, and a
    notebook does not show it twice (pyplot's inline hook would draw it at the cell's end).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = _figure_class()(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


_CLASS: list = []


def _figure_class():
    if not _CLASS:
        import io

        from matplotlib.figure import Figure

        class LayoutFigure(Figure):
            """A Figure that Jupyter displays as a PNG without pyplot."""

            def _repr_png_(self):
                buf = io.BytesIO()
                self.savefig(buf, format="png", dpi=100)
                return buf.getvalue()

        _CLASS.append(LayoutFigure)
    return _CLASS[0]
