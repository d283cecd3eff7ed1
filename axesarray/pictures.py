"""Layout pictures: one cell per storage element, in address order.

Owns ``memory_map`` (which logical index reaches each address of an l-tensor's storage,
padding and gaps included), ``show_layout`` (a matplotlib figure) and ``layout_svg`` (the
same picture as an SVG string, for ``_repr_html_``). Reads tensors duck-typed (``_node``,
``axes``, ``layout``, ``is_lvalue``); imports ``errors``, ``strided`` and, lazily,
matplotlib.
"""

from __future__ import annotations

import colorsys
import html
import itertools

import attrs
import numpy as np

from .errors import AxesError, fmt_axes, message
from .strided import Block

__all__ = ["MemoryMap", "memory_map", "show_layout", "layout_svg", "palette", "CELL_LIMIT"]

CELL_LIMIT = 4096  # cells show_layout draws at most
LABEL_LIMIT = 1024  # cells above which a figure shows colours only (labels would not fit)
_ELEMENT_FACTOR = 16  # logical elements per cell above which a map is refused (broadcasts)


@attrs.frozen(eq=False)
class MemoryMap:
    """What each address ``start + k`` of a storage holds, for ``k < cells``.

    ``count[k]`` is how many logical indices reach it (0: a gap or padding, 2+: an
    overlap such as a broadcast); ``coords[k]`` the first logical index reaching it (for
    padding, the index the lane would have; -1 for gaps); ``lane[k]`` the position inside
    its block of the blocked axis ``block_axis`` (-1 when not blocked).
    """

    names: tuple[str, ...]
    lengths: tuple[int, ...]
    start: int
    count: np.ndarray
    coords: np.ndarray  # (cells, ndim) int64
    padding: np.ndarray  # (cells,) bool
    lane: np.ndarray  # (cells,) int64
    block_axis: int | None
    block_size: int
    storage: int  # elements in the whole storage
    row: int  # cells per row in a picture

    @property
    def cells(self) -> int:
        return len(self.count)

    @property
    def gaps(self) -> np.ndarray:
        return (self.count == 0) & ~self.padding

    def label(self, k: int) -> str:
        """Compact logical coordinate of cell ``k``: ``n0c1h0w2``; '' for a gap."""
        if self.count[k] == 0 and not self.padding[k]:
            return ""
        if not self.names:
            return "()"
        first = [n[0].lower() for n in self.names]
        if len(set(first)) == len(first):
            return "".join(f"{p}{i}" for p, i in zip(first, self.coords[k], strict=True))
        # First letters clash: whole names, separated.
        return ",".join(f"{n}={i}" for n, i in zip(self.names, self.coords[k], strict=True))


def _blocking(t, view) -> list:
    """(outer stride, Block or None) per dim, with the blocks the layout tag declares.

    A block whose lanes are contiguous is stored as a plain axis in the view
    (``j//x*s*x + j%x*s == j*s``); the tag still says where its padding lanes are.
    """
    out = [(s, b) for s, b in zip(view.strides, view.blocks or (None,) * view.ndim, strict=True)]
    if not _pads_padding(t):
        return out
    names = [a.name for a in t.axes]
    for name, x in t.layout.blocks:
        if name in names:
            d = names.index(name)
            s, b = out[d]
            if b is None:
                out[d] = (s * x, Block(x, s))
    return out


def _axis_terms(n: int, s: int, blk, pad: bool):
    """(address terms, logical indices) over the physical positions of one dim.

    With ``pad``, a blocked dim also yields the lanes of its blocks that no logical index
    reaches (their index is >= the length): the padding.
    """
    if blk is None or not pad or blk.step != 1 or n == 0:
        i = np.arange(n, dtype=np.int64)
        if blk is None:
            return i * s, i
        j = blk.phase + blk.step * i
        return (j // blk.size) * s + (j % blk.size) * blk.inner, i
    first = blk.phase // blk.size * blk.size
    last = -(-(blk.phase + n) // blk.size) * blk.size
    j = np.arange(first, last, dtype=np.int64)
    return (j // blk.size) * s + (j % blk.size) * blk.inner, j - blk.phase


def _pads_padding(t) -> bool:
    """Whether unreached lanes of ``t``'s blocks are padding (not data outside a view).

    Only a layout tag that is not ``partial`` says the view covers whole blocks.
    """
    layout = getattr(t, "layout", None)
    return layout is not None and not getattr(layout, "partial", False)


def _check_lvalue(t, op: str):
    if not getattr(t, "is_lvalue", False):
        raise TypeError(
            message(
                op,
                "an r-tensor has no memory layout; only l-tensors are stored",
                f"axes: {fmt_axes(t.axes)}" if hasattr(t, "axes") else type(t).__name__,
                f"Evaluate it first: {op}(e.eval())",
            )
        )


def memory_map(t, limit: int = CELL_LIMIT, op: str = "show_layout") -> MemoryMap:
    """Map every address an l-tensor's physical array covers to the logical index there.

    The cells run from the lowest to the highest address its elements and padding occupy.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.zeros((1, 3, 1, 2), "float32"), "N C H W").to_layout("NCHW4")
    >>> m = memory_map(x)
    >>> m.cells, int(m.padding.sum()), m.label(1)
    (8, 2, 'n0c1h0w0')
    """
    _check_lvalue(t, op)
    leaf = t._node
    view = leaf.view
    names = tuple(a.name for a in t.axes)
    hint = "Pass a larger limit"
    if names:
        hint = f"Slice first, e.g. t.isel({names[0]}=slice(0, 2)), or pass a larger limit"
    if view.size > limit * _ELEMENT_FACTOR:
        raise ValueError(
            message(
                op,
                f"{view.size} elements are too many to draw",
                f"axes: {fmt_axes(t.axes)}; limit {limit * _ELEMENT_FACTOR}",
                hint,
            )
        )
    pad = _pads_padding(t)
    blocking = _blocking(t, view)
    terms = [_axis_terms(n, s, b, pad) for n, (s, b) in zip(view.shape, blocking, strict=True)]
    grid = np.full(tuple(len(a) for a, _ in terms), view.offset, dtype=np.int64)
    inside = np.ones(grid.shape, dtype=bool)
    for d, (a, i) in enumerate(terms):
        shape = (1,) * d + (len(a),) + (1,) * (view.ndim - d - 1)
        grid += a.reshape(shape)
        inside &= ((i >= 0) & (i < view.shape[d])).reshape(shape)
    flat, inside = grid.reshape(-1), inside.reshape(-1)
    coords = np.zeros((flat.size, view.ndim), dtype=np.int64)
    for d, (_, i) in enumerate(terms):
        shape = (1,) * d + (len(i),) + (1,) * (view.ndim - d - 1)
        coords[:, d] = np.broadcast_to(i.reshape(shape), grid.shape).reshape(-1)
    lo = int(flat.min()) if flat.size else view.offset
    hi = int(flat.max()) + 1 if flat.size else view.offset
    cells = hi - lo
    if cells > limit:
        raise ValueError(
            message(
                op,
                f"the storage span has {cells} cells, more than the limit of {limit}",
                f"axes: {fmt_axes(t.axes)}; addresses {lo}..{hi - 1}",
                hint,
            )
        )
    reached = flat[inside] - lo
    count = np.bincount(reached, minlength=cells).astype(np.int64)
    cell_coords = np.full((cells, view.ndim), -1, dtype=np.int64)
    # np.unique's return_index gives each address's first index in logical order.
    first, at = np.unique(reached, return_index=True)
    cell_coords[first] = coords[inside][at]
    padding = np.zeros(cells, dtype=bool)
    pads = flat[~inside] - lo
    padding[pads] = count[pads] == 0
    cell_coords[pads[padding[pads]]] = coords[~inside][padding[pads]]
    block_axis, block_size, lane = _lanes(view, blocking, terms, flat, lo, cells)
    return MemoryMap(
        names,
        tuple(view.shape),
        lo,
        count,
        cell_coords,
        padding,
        lane,
        block_axis,
        block_size,
        int(leaf.data.size),
        _row_width(view.shape, blocking, cells, 24 if cells <= LABEL_LIMIT else 64),
    )


def _lanes(view, blocking, terms, flat, lo, cells):
    """The lane of every cell for the first blocked axis whose lanes are adjacent."""
    lane = np.full(cells, -1, dtype=np.int64)
    if cells == 0:
        return None, 1, lane
    for d, (_, blk) in enumerate(blocking):
        if blk is None or blk.inner != 1:
            continue
        _, i = terms[d]
        j = (blk.phase + blk.step * i) % blk.size
        shape = (1,) * d + (len(i),) + (1,) * (view.ndim - d - 1)
        lanes = np.broadcast_to(j.reshape(shape), tuple(len(a) for a, _ in terms)).reshape(-1)
        lane[flat - lo] = lanes
        return d, blk.size, lane
    return None, 1, lane


def _row_width(shape, blocking, cells: int, widest: int = 24) -> int:
    """Cells per picture row: a stride or extent of the storage between 8 and ``widest``.

    Rows then start at the same place in the physical structure (a channel, a block row),
    so the picture reads like the memory-format drawings of oneDNN and MegEngine.
    """
    found = set()
    for n, (s, blk) in zip(shape, blocking, strict=True):
        s = abs(s)
        if blk is not None:
            found.update({abs(blk.inner) * blk.size, abs(blk.inner)})
            n = -(-n // blk.size)
        found.update({s, s * n})
    found.discard(0)
    fits = sorted(c for c in found if 8 <= c <= widest)
    if fits:
        return fits[0]
    if cells <= widest:
        return max(cells, 1)
    # A multiple of the largest small extent that divides the next bigger one: rows of
    # whole channels (say), and every row starts at the same place.
    small = max((c for c in found if c < 8), default=1)
    above = min((c for c in found if c > widest), default=0)
    k = widest // small
    while k > 1 and above % (small * k):
        k -= 1
    return small * k


# --- colours ------------------------------------------------------------------------------


def palette(n: int) -> list[tuple[float, float, float]]:
    """``n`` light, distinct RGB colours (0..1) on which black text reads well."""
    return [colorsys.hls_to_rgb((0.58 + k / max(n, 1)) % 1.0, 0.74, 0.62) for k in range(n)]


def _hex(rgb) -> str:
    return "#" + "".join(f"{round(255 * c):02x}" for c in rgb)


def _color_axis(t, m: MemoryMap, color_by: str | None, op: str) -> int | None:
    """The axis the cells are coloured by: ``color_by``, a blocked axis, C, or the first."""
    if not m.names:
        return None
    if color_by is not None:
        if color_by not in m.names:
            raise AxesError(
                message(
                    op,
                    f"color_by names no axis: {color_by!r}",
                    f"axes: {fmt_axes(t.axes)}",
                    "Pass one of the tensor's axis names",
                )
            )
        return m.names.index(color_by)
    if "C" in m.names:
        return m.names.index("C")
    if m.block_axis is not None:
        return m.block_axis
    return next((d for d, n in enumerate(m.lengths) if n > 1), 0)


def _title(t, m: MemoryMap) -> str:
    layout = getattr(t, "layout", None)
    where = f" in {layout}" if layout is not None else ""
    axes = fmt_axes(t.axes)
    parts = [f"{m.cells} cells"]
    if m.padding.any():
        parts.append(f"{int(m.padding.sum())} padding")
    if m.gaps.any():
        parts.append(f"{int(m.gaps.sum())} not in the view")
    if (m.count > 1).any():
        parts.append(f"{int((m.count > 1).sum())} reached more than once")
    span = f"addresses {m.start}..{m.start + m.cells - 1} of {m.storage}"
    return f"{t.dtype} ({axes}){where}\n{', '.join(parts)}; {span}"


# --- SVG ----------------------------------------------------------------------------------

_SVG_ID = itertools.count()


def layout_svg(t, limit: int = 256, color_by: str | None = None) -> str | None:
    """The layout picture as an SVG string, or None when ``t`` has more than ``limit`` cells.

    Pure string building (no matplotlib), readable on light and dark backgrounds.
    """
    if not getattr(t, "is_lvalue", False) or t._node.view.size > limit:
        return None
    try:
        m = memory_map(t, limit, "layout_svg")
    except ValueError:
        return None
    if m.cells == 0:
        return None
    color = _color_axis(t, m, color_by, "layout_svg")
    labels = [m.label(k) for k in range(m.cells)]
    overlap = bool((m.count > 1).any())
    cw = max(26.0, _CHAR * max(len(s) for s in labels) + 6)
    ch = 28.0 if overlap else 20.0  # room for the count under the label
    left, top = 44.0, 6.0
    per_row = max(1, min(m.row, int((_SVG_WIDTH - left) // cw)))
    if m.cells > per_row and m.row > per_row and m.row % per_row:
        per_row = next(w for w in range(per_row, 0, -1) if m.row % w == 0 or w < 4)
    rows = -(-m.cells // per_row)
    legend_y = top + rows * ch + 10
    colors = palette(m.lengths[color] if color is not None else 1)
    uid = f"axa{next(_SVG_ID)}"
    legend, legend_end = _svg_legend(m, color, colors, uid, left, legend_y)
    width = max(left + per_row * cw, legend_end) + 4
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
        f'height="{legend_y + 22:.0f}" font-family="monospace" font-size="{_FONT}" '
        'style="color:inherit;display:block">',
        f'<defs><pattern id="{uid}h" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#9e9e9e" '
        'fill-opacity="0.25"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9e9e9e" '
        'stroke-opacity="0.7" stroke-width="1"/></pattern></defs>',
    ]
    for r in range(rows):
        out.append(
            f'<text x="{left - 4}" y="{top + r * ch + ch / 2 + 3:.1f}" text-anchor="end" '
            f'fill="currentColor" fill-opacity="0.6">{m.start + r * per_row}</text>'
        )
    for k in range(m.cells):
        x = left + (k % per_row) * cw
        y = top + (k // per_row) * ch
        out.append(_svg_cell(m, k, (x, y, cw, ch), labels[k], color, colors, uid))
    out.extend(_svg_blocks(m, per_row, left, top, cw, ch))
    out.append(legend)
    out.append("</svg>")
    return "".join(out)


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
        fill = _hex(colors[m.coords[k, color]]) if color is not None else _hex(colors[0])
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


def _block_runs(m: MemoryMap, per_row: int):
    """(row, first column, columns) of each run of one block's lanes within a row."""
    if m.block_axis is None:
        return
    k = 0
    while k < m.cells:
        if m.lane[k] != 0:
            k += 1
            continue
        end = k + 1
        while end < m.cells and m.lane[end] == m.lane[end - 1] + 1:
            end += 1
        s = k
        while s < end:
            r = s // per_row
            stop = min(end, (r + 1) * per_row)
            yield r, s % per_row, stop - s
            s = stop
        k = end


def _svg_blocks(m, per_row, left, top, cw, ch) -> list[str]:
    return [
        f'<rect x="{left + c * cw:.1f}" y="{top + r * ch:.1f}" width="{n * cw:.1f}" '
        f'height="{ch:.1f}" fill="none" stroke="currentColor" stroke-width="2"/>'
        for r, c, n in _block_runs(m, per_row)
    ]


def _svg_legend(m, color, colors, uid, x, y) -> tuple[str, float]:
    """The legend row and the x where it ends."""
    parts = []
    if color is not None:
        name = m.names[color]
        parts.append(
            f'<text x="{x}" y="{y + 10}" fill="currentColor">colour: {html.escape(name)}</text>'
        )
        x += _CHAR * (9 + len(name))
        shown = min(len(colors), 12)
        for v in range(shown):
            parts.append(
                f'<rect x="{x + v * 16:.1f}" y="{y}" width="14" height="13" '
                f'fill="{_hex(colors[v])}"/><text x="{x + v * 16 + 7:.1f}" y="{y + 10}" '
                f'text-anchor="middle" font-size="8" fill="#111">{v}</text>'
            )
        x += shown * 16 + 8
        if shown < len(colors):
            parts.append(
                f'<text x="{x}" y="{y + 10}" fill="currentColor">… {len(colors) - 1}</text>'
            )
            x += _CHAR * (3 + len(str(len(colors)))) + 8
    keys = [
        (m.padding.any(), f'fill="url(#{uid}h)"', "padding"),
        (m.gaps.any(), 'fill="none" stroke="currentColor" stroke-dasharray="2 2"', "not in view"),
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


# --- matplotlib -----------------------------------------------------------------------------


def show_layout(t, *, color_by: str | None = None, limit: int = CELL_LIMIT, labels=None):
    """Draw an l-tensor's memory: one cell per storage element, in address order.

    Cells are coloured by one logical axis (``color_by``; default a blocked axis, else
    ``C``, else the first) and labelled with their logical coordinates (``n0c1h0w2``).
    Padding is hatched grey, storage the view skips is a dashed gap, an element reached by
    several indices (a broadcast) has a red border and its count, and a thick outline
    groups the lanes of each block. Rows start at the address on their left. Returns a
    matplotlib ``Figure`` (``fig.savefig("layout.png")``; Jupyter shows it as an image).

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.zeros((1, 6, 2, 3), "float32"), "N C H W").to_layout("NCHW4")
    >>> fig = ax.show_layout(x)
    >>> fig.get_suptitle().splitlines()[0]
    'float32 (N=1, C=6, H=2, W=3) in NCHW4'

    Raises ``TypeError`` for an r-tensor and ``ValueError`` above ``limit`` cells.
    """
    m = memory_map(t, limit, "show_layout")
    color = _color_axis(t, m, color_by, "show_layout")
    _need_matplotlib()
    per_row = m.row
    rows = max(1, -(-m.cells // per_row))
    show_labels = m.cells <= LABEL_LIMIT if labels is None else bool(labels)
    longest = max((len(m.label(k)) for k in range(m.cells)), default=2)
    cw = max(0.36, 0.085 * longest + 0.14) if show_labels else 0.2
    ch = 0.34 if show_labels else 0.2
    width = max(1.0 + per_row * cw, 0.065 * max(map(len, _title(t, m).splitlines())) + 0.3)
    fig = _figure((min(width, 40.0), min(1.3 + rows * ch, 60.0)))
    axes = fig.add_subplot(1, 1, 1)
    colors = palette(m.lengths[color] if color is not None else 1)
    _draw_cells(axes, m, per_row, color, colors)
    if show_labels:
        _draw_labels(axes, m, per_row, min(9.0, 100.0 * cw / max(longest, 1)))
    axes.set_xlim(-0.1, per_row + 0.1)
    axes.set_ylim(-rows - 0.1, 0.1)
    axes.set_aspect(ch / cw)
    axes.set_yticks(
        [-r - 0.5 for r in range(rows)],
        [str(m.start + r * per_row) for r in range(rows)],
        fontsize=7,
    )
    axes.set_xticks([])
    axes.tick_params(length=0)
    for side in axes.spines.values():
        side.set_visible(False)
    fig.suptitle(_title(t, m), fontsize=9, x=0.01, ha="left")
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
    runs = [Rectangle((c, -r - 1), n, 1) for r, c, n in _block_runs(m, per_row)]
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
    if color is not None and len(colors) <= 16:
        name = m.names[color]
        handles += [
            Patch(facecolor=c, edgecolor="#555555", label=f"{name}={v}")
            for v, c in enumerate(colors)
        ]
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
