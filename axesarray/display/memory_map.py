"""Where each element of an l-tensor's storage comes from: the data of a layout picture.

Owns ``display.memory_map`` (for every address a tensor's physical array covers: the logical index
there, how many indices reach it, padding and gaps) and what both drawers share (colours,
row width, block outlines, title). Reads tensors duck-typed (``_node``, ``axes``,
``layout``, ``is_lvalue``); imports ``errors`` and ``strided``.
"""

from __future__ import annotations

import colorsys

import attrs
import numpy as np

from ..core.strided import Block, View
from ..errors import AxesError, fmt_axes, message

__all__ = [
    "MemoryMap",
    "memory_map",
    "palette",
    "hex_color",
    "color_axis",
    "title",
    "block_runs",
    "used_values",
    "first_address",
    "CELL_LIMIT",
    "LABEL_LIMIT",
]

CELL_LIMIT = 4096  # cells show_layout draws at most
LABEL_LIMIT = 1024  # cells above which a figure shows colours only (labels would not fit)
_ELEMENT_FACTOR = 16  # logical elements per cell above which a map is refused (broadcasts)


@attrs.frozen(eq=False)
class MemoryMap:
    """What each address ``start + k`` of a storage holds, for ``k < cells``.

    ``count[k]`` is how many logical indices reach it (0: a gap or padding, 2+: an
    overlap such as a broadcast); ``coords[k]`` the first logical index reaching it (for
    padding, the index the lane would have; -1 for gaps); ``lane[k]`` the position inside
    its block of the blocked axis ``block_axis`` (-1 when not blocked): every lane of a block
    the view touches, so a view starting mid-block shows the whole block. A "first blocks"
    map (``shown``) holds only the rows that the first blocks of each axis reach.
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
    # The address of each row of ``row`` cells (cell k is at row_starts[k // row] + k % row):
    # consecutive for a whole map; in a "first blocks" map, rows of storage the picture
    # leaves out lie between two rows whose addresses jump.
    row_starts: np.ndarray = attrs.field(factory=lambda: np.zeros(0, np.int64))
    shown: tuple | None = None  # first blocks: the length kept of each axis (None: all)

    @property
    def cells(self) -> int:
        return len(self.count)

    def address(self, k: int) -> int:
        """The storage address (in elements) of cell ``k``."""
        if not len(self.row_starts):
            return self.start + k
        return int(self.row_starts[k // self.row]) + k % self.row

    def elided(self, r: int) -> int:
        """Cells of storage left out just before row ``r`` of ``row`` cells (first blocks)."""
        if r == 0 or r >= len(self.row_starts):
            return 0
        return int(self.row_starts[r] - self.row_starts[r - 1] - self.row)

    @property
    def span(self) -> tuple[int, int]:
        """(lowest, highest) address the map covers."""
        return self.start, self.address(self.cells - 1) if self.cells else self.start

    @property
    def gaps(self) -> np.ndarray:
        return (self.count == 0) & ~self.padding

    def label(self, k: int) -> str:
        """Compact logical coordinate of cell ``k``: ``n0c1h0w2``; '' for a gap."""
        if self.count[k] == 0 and not self.padding[k]:
            return ""
        if self.padding[k]:
            return "pad"
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


def memory_map(
    t,
    limit: int = CELL_LIMIT,
    op: str = "show_layout",
    refuse: bool = True,
    first_blocks: bool = False,
) -> MemoryMap | None:
    """Map every address an l-tensor's physical array covers to the logical index there.

    The cells run from the lowest to the highest address its elements and padding occupy
    (whole blocks: a view that starts mid-block starts at its block). Above ``limit``
    cells (or 16 times as many elements) it raises ``ValueError``, or returns None when
    not ``refuse``. With ``first_blocks``, any size: only the first blocks of each axis
    (two blocks of a blocked axis, a row of the innermost, two of the others), and only
    the rows of storage they reach.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.zeros((1, 3, 1, 2), "float32"), "N C H W").to_layout("NCHW4")
    >>> m = memory_map(x)
    >>> m.cells, int(m.padding.sum()), m.label(1), m.label(3)
    (8, 2, 'n0c1h0w0', 'pad')
    >>> big = ax.zeros((ax.Axis("N", 32), ax.Axis("C", 64), ax.Axis("H", 56), ax.Axis("W", 56)))
    >>> m = memory_map(big.to_layout("NCHW32"), first_blocks=True)
    >>> m.shown, m.cells
    ((1, 64, 2, 2), 256)
    """
    _check_lvalue(t, op)
    leaf = t.node
    view = leaf.view
    names = tuple(a.name for a in t.axes)
    hint = "Pass a larger limit, or first_blocks=True"
    if names:
        hint = (
            f"Slice first, e.g. t.isel({names[0]}=slice(0, 2)), pass a larger limit, "
            "or first_blocks=True (the first blocks of each axis)"
        )
    pad = _pads_padding(t)
    blocking = _blocking(t, view)
    shown = None
    if first_blocks:
        row = _row_width(view.shape, blocking, int(leaf.data.size), 24)
        shown = _first_blocks(view, blocking, min(limit, 256), row)
        view = View(shown, view.strides, view.offset, view.blocks)
    elif view.size > limit * _ELEMENT_FACTOR:
        if not refuse:
            return None
        raise ValueError(
            message(
                op,
                f"{view.size} elements are too many to draw",
                f"axes: {fmt_axes(t.axes)}; limit {limit * _ELEMENT_FACTOR}",
                hint,
            )
        )
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
    block_axis, block_size, flat_lanes = _lanes(view, blocking, terms)
    # Every lane of each block touched: block starts are addresses minus their lane.
    extra = np.zeros(0, np.int64)
    if block_axis is not None and flat.size:
        starts = np.unique(flat - flat_lanes)
        extra = (starts[:, None] + np.arange(block_size)[None, :]).reshape(-1)
    everything = np.concatenate([flat, extra])
    lo = int(everything.min()) if everything.size else view.offset
    hi = int(everything.max()) + 1 if everything.size else view.offset
    span = hi - lo
    widest = 24 if (first_blocks or span <= LABEL_LIMIT) else 64
    row = _row_width(leaf.view.shape, blocking, span, widest)
    if first_blocks:
        rows = np.unique((everything - lo) // row)
        row_starts = lo + rows * row
        cells = len(rows) * row

        def index(addr):
            r = np.searchsorted(rows, (addr - lo) // row)
            return r * row + (addr - lo) % row

    else:
        row_starts = lo + np.arange(-(-span // row), dtype=np.int64) * row
        cells = span

        def index(addr):
            return addr - lo

    if cells > limit and not first_blocks:
        if not refuse:
            return None
        raise ValueError(
            message(
                op,
                f"the storage span has {cells} cells, more than the limit of {limit}",
                f"axes: {fmt_axes(t.axes)}; addresses {lo}..{hi - 1}",
                hint,
            )
        )
    reached = index(flat[inside])
    count = np.bincount(reached, minlength=cells).astype(np.int64)
    cell_coords = np.full((cells, view.ndim), -1, dtype=np.int64)
    # np.unique's return_index gives each address's first index in logical order.
    first, at = np.unique(reached, return_index=True)
    cell_coords[first] = coords[inside][at]
    padding = np.zeros(cells, dtype=bool)
    pads = index(flat[~inside])
    padding[pads] = count[pads] == 0
    cell_coords[pads[padding[pads]]] = coords[~inside][padding[pads]]
    lane = np.full(cells, -1, dtype=np.int64)
    if block_axis is not None and extra.size:
        lane[index(extra)] = np.tile(np.arange(block_size), len(extra) // block_size)
    return MemoryMap(
        names,
        tuple(view.shape) if shown is None else tuple(leaf.view.shape),
        lo,
        count,
        cell_coords,
        padding,
        lane,
        block_axis,
        block_size,
        int(leaf.data.size),
        row,
        row_starts,
        shown,
    )


def _first_blocks(view, blocking, budget: int, row: int) -> tuple[int, ...]:
    """How much of each axis a "first blocks" picture keeps: two blocks of a blocked axis,
    a row's worth of the innermost plain axis, two of every other; then outer axes drop to
    one until about ``budget`` cells remain."""
    shape = view.shape
    plain = [d for d, (s, b) in enumerate(blocking) if b is None and s != 0 and shape[d] > 1]
    inner = min(plain, key=lambda d: abs(blocking[d][0]), default=None)
    keep = []
    for d, (n, (s, b)) in enumerate(zip(shape, blocking, strict=True)):
        if b is not None:
            lanes = max(1, -(-(2 * b.size - b.phase) // max(b.step, 1)))
            keep.append(min(n, lanes))
        elif d == inner and abs(s) == 1:
            keep.append(min(n, row if row >= 8 else 16))  # one picture row of it
        else:
            keep.append(min(n, 2))

    def cells(k) -> int:
        out = 1
        for n, (_, b) in zip(k, blocking, strict=True):
            out *= -(-n // b.size) * b.size if b is not None else n
        return out

    # Outermost first (largest stride), never the blocked or innermost axis.
    order = sorted(
        (d for d in range(len(shape)) if blocking[d][1] is None and d != inner),
        key=lambda d: -abs(blocking[d][0]),
    )
    for d in order:
        if cells(keep) <= budget:
            break
        keep[d] = min(keep[d], 1)
    return tuple(keep)


def _lanes(view, blocking, terms):
    """(axis, block size, lane of every grid address) for the first blocked axis whose
    lanes are adjacent; (None, 1, None) when there is none."""
    for d, (_, blk) in enumerate(blocking):
        if blk is None or blk.inner != 1:
            continue
        _, i = terms[d]
        j = (blk.phase + blk.step * i) % blk.size
        shape = (1,) * d + (len(i),) + (1,) * (view.ndim - d - 1)
        lanes = np.broadcast_to(j.reshape(shape), tuple(len(a) for a, _ in terms)).reshape(-1)
        return d, blk.size, lanes
    return None, 1, None


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
    """``n`` light, distinct RGB colours (0..1) on which black text reads well.

    Few values go round the whole colour circle; many stop short of it, so that the first
    and the last value do not look alike.
    """
    span = 1.0 if n <= 12 else 0.8
    return [colorsys.hls_to_rgb((0.58 + span * k / max(n, 1)) % 1.0, 0.74, 0.62) for k in range(n)]


def hex_color(rgb) -> str:
    return "#" + "".join(f"{round(255 * c):02x}" for c in rgb)


def color_axis(t, m: MemoryMap, color_by: str | None, op: str) -> int | None:
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
    # A broadcast axis (stride 0) colours nothing apart: every cell holds its index 0.
    strides = t.node.view.strides
    if "C" in m.names and strides[m.names.index("C")] != 0:
        return m.names.index("C")
    if m.block_axis is not None:
        return m.block_axis
    spread = [d for d, n in enumerate(m.lengths) if n > 1 and strides[d] != 0]
    return spread[0] if spread else next((d for d, n in enumerate(m.lengths) if n > 1), 0)


def first_address(view) -> int:
    """The storage address (in elements) of a view's element 0: a view that starts inside a
    block (``isel(C=slice(1, ...))`` of NCHW32) starts ``phase`` lanes into it."""
    first = view.offset
    for b in view.blocks or ():
        if b is not None:
            first += b.phase * b.inner
    return first


def used_values(m: MemoryMap, color: int) -> list[int]:
    """The values of axis ``color`` that some drawn element has (a legend lists only these)."""
    held = m.count > 0
    return [int(v) for v in np.unique(m.coords[held, color])] if held.any() else []


def title(t, m: MemoryMap) -> str:
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
    lo, hi = m.span
    span = f"addresses {lo}..{hi} of {m.storage}"
    text = f"{t.dtype} ({axes}){where}\n{', '.join(parts)}; {span}"
    if m.shown is not None:
        kept = ", ".join(
            f"{n} {k} of {total}" for n, k, total in zip(m.names, m.shown, m.lengths, strict=True)
        )
        text += f"\nfirst blocks: {kept}; rows of storage between them left out"
    return text


def block_runs(m: MemoryMap, per_row: int):
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
