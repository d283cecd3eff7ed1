"""The ``axesarray`` command: convert .npy files (and Zarr stores) between layouts.

    axesarray convert IN.npy OUT.npy --axes "N C H W" --from NCHW --to NCHW32
    axesarray convert OUT.npy BACK.npy            # the sidecar knows the axes and layout
    axesarray info FILE.npy
    axesarray convert IN.zarr OUT.zarr --to NCHW32   # dask does the work (zarr_io)

The input is memory-mapped and converted in chunks of the output's outermost dims, each
written with ordinary I/O (so a full disk is an error, not a crash) and the input pages it
read released, so a file larger than memory converts with memory bounded by a few chunks.
OUT.npy is a plain .npy of the physical array; OUT.npy.axes.json records axes and layout.
Everything is checked before anything is written, the output's space is reserved first,
and the output appears (by rename) only when complete. Files follow the umask.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import time
import warnings
from itertools import product
from pathlib import Path

from .._version import __version__
from ..core.axes import Axes, Axis
from ..errors import AxesError, LayoutError, fmt_axes, message
from ..storage.layouts import Layout, bind, physical_dims, role_pairs
from .npy import (
    NpyWriter,
    atomic_outputs,
    check_output,
    map_npy,
    open_npy,
    read_sidecar,
    renamed_errors,
    sidecar_path,
    sidecar_text,
)
from .zarr_store import is_zarr

__all__ = ["main", "entry", "convert", "info", "plan_chunks", "Interrupts"]

DEFAULT_CHUNK = 64 << 20
# The smallest --chunk-size: each chunk costs Python-level work (an isel, a repack call, a
# write), so one-element chunks took minutes on a few MB. 64K keeps that cost under the copy.
MIN_CHUNK = 64 << 10
# Output bytes between two releases of the input pages read: releasing after every small
# chunk costs more than the copy (the next chunk faults the same pages back in).
RELEASE_EVERY = 32 << 20


# --- Ctrl-C --------------------------------------------------------------------------------


class Interrupts:
    """While the command runs, SIGINT only sets a flag; ``check()`` raises
    ``KeyboardInterrupt`` at the points where stopping is safe (between chunks, before the
    renames). So Ctrl-C never lands inside numba's or llvmlite's code (a compile in this
    thread, or one of their callbacks, which would swallow it or crash), and a second one
    cannot cut the clean-up short. Worker threads block SIGINT (``block_interrupts``).

    >>> with Interrupts() as stop:
    ...     stop.check()  # nothing pending
    """

    def __init__(self) -> None:
        self.hit = False
        self._old = None

    def _handler(self, signum, frame) -> None:
        self.hit = True

    def check(self) -> None:
        if self.hit:
            raise KeyboardInterrupt

    def wait(self, future) -> None:
        """``future.result()``, checking for Ctrl-C every 50 ms."""
        from concurrent.futures import TimeoutError as Pending

        while True:
            self.check()
            try:
                return future.result(timeout=0.05)
            except Pending:
                continue

    @property
    def active(self) -> bool:
        """Whether this guard handles SIGINT (entered, in the main thread)."""
        return self._old is not None

    def __enter__(self) -> Interrupts:
        try:
            self._old = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not the main thread: the caller's handling stays
            self._old = None
        return self

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


# --- parsing -------------------------------------------------------------------------------


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B")
    try:
        n = int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 64M)") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"the chunk size must be positive, got {text!r}")
    if n < MIN_CHUNK:
        raise argparse.ArgumentTypeError(
            f"the chunk size must be at least {MIN_CHUNK >> 10}K, got {text!r} (e.g. 64M)"
        )
    return n


def _axes_spec(text: str) -> list:
    """``"N C=3 H W"``: names, optionally with a length (needed for a padded axis)."""
    items = []
    for tok in text.replace(",", " ").split():
        name, sep, length = tok.partition("=")
        if not sep:
            items.append(name)
            continue
        try:
            n = int(length)
        except ValueError:
            n = -1
        if n < 0:
            raise AxesError(
                message(
                    "convert",
                    f"--axes: the length of {name!r} must be a non-negative integer",
                    f"got {tok!r}",
                    f"Write {name} alone to take the length from the file",
                )
            )
        items.append(Axis(name, n))
    return items


def _names(items) -> tuple[str, ...]:
    return tuple(a.name if isinstance(a, Axis) else a for a in items)


def _roles(text: str | None) -> dict:
    if not text:
        return {}
    out = {}
    for tok in text.replace(",", " ").split():
        role, sep, name = tok.partition("=")
        if not sep:
            raise LayoutError(
                message(
                    "convert", f"bad role {tok!r}", None, "Write them as --roles 'N=batch C=feat'"
                )
            )
        out[role] = name
    return out


def _layout(text: str, flag: str, roles: dict, names: tuple[str, ...]) -> Layout:
    """``--from``/``--to`` bound to the axis ``names``, with a hint in terms of flags."""
    layout = Layout.parse(text, **roles)
    extra = [n for n in layout.order if n not in names]
    missing = [n for n in names if n not in layout.order]
    if extra or missing:
        # The letters pair with the axes in N C H W order (as the Python API's hint), not
        # in the layout's order: CHWN4's C is the second axis, not the first.
        pairs = role_pairs(layout, extra, missing)
        if pairs is not None:
            hint = (
                "Map its letters to your axis names (axes in N C H W order): --roles '"
                + " ".join(f"{r}={n}" for r, n in pairs)
                + "'"
            )
        elif len(layout.order) != len(names):
            hint = (
                f"{text} orders {len(layout.order)} axes and there are {len(names)}: give "
                f"{flag} an order of the axis names, e.g. {flag} '{' '.join(names)}'"
            )
        else:
            hint = "Name every axis once in the layout"
        raise LayoutError(
            message(
                "convert",
                f"{flag} {text} places "
                + (", ".join(map(repr, extra)) or "not all axes")
                + f", the axes are {' '.join(names)}",
                f"layout {layout}",
                hint,
            )
        )
    return bind(layout, Axes(Axis(n, 0) for n in names), "convert")


# --- the input -----------------------------------------------------------------------------


def _open_input(path: Path, axes_text, from_text, roles: dict):
    """(tensor over the memory-mapped input, its layout or None, drop): ``drop()`` releases
    the input pages read so far."""
    from ..creation import tensor

    side = read_sidecar(path, "convert")
    arr, drop = map_npy(path, "convert")
    if side is not None:
        axes, layout, dtype = side
        if dtype.kind == "V" and arr.dtype.str == "|V2":  # bfloat16 bits (the sidecar says)
            arr = arr.view(dtype)
        if axes_text is not None:
            names = _names(_axes_spec(axes_text))
            if names != axes.names:
                raise AxesError(
                    message(
                        "convert",
                        "--axes differs from the input's sidecar",
                        f"--axes {axes_text}; sidecar {fmt_axes(axes)}",
                        "Leave --axes out: the sidecar has them",
                    )
                )
        if from_text is not None:
            given = _layout(from_text, "--from", roles, axes.names)
            if given != layout:
                raise LayoutError(
                    message(
                        "convert",
                        "--from differs from the input's sidecar",
                        f"--from {from_text}; sidecar {layout}",
                        "Leave --from out: the sidecar has it",
                    )
                )
        return (tensor(arr, axes, layout=layout) if layout else tensor(arr, axes)), layout, drop
    if axes_text is None:
        raise AxesError(
            message(
                "convert",
                f"{path} has no sidecar, so its axes are unknown",
                f"shape {arr.shape}",
                f"Give them: {_suggest(arr.shape)}",
            )
        )
    items = _axes_spec(axes_text)
    if from_text is None:
        if len(items) != arr.ndim:
            raise AxesError(
                message(
                    "convert",
                    f"--axes names {len(items)} axes but the array has {arr.ndim} dimensions",
                    f"--axes {axes_text}; shape {arr.shape}",
                    f"Give one name per dimension: {_suggest(arr.shape)}",
                )
            )
        for k, item in enumerate(items):
            if isinstance(item, Axis) and item.length != arr.shape[k]:
                raise AxesError(
                    message(
                        "convert",
                        f"--axes gives {item} but dimension {k} of {path.name} has {arr.shape[k]}",
                        f"--axes {axes_text}; shape {arr.shape}",
                        f"Write {item.name} alone to take the length from the file (a length "
                        "is for a padded axis, with --from)",
                    )
                )
        return tensor(arr, items), None, drop
    layout = _layout(from_text, "--from", roles, _names(items))
    if arr.ndim != layout.ndim_physical:
        raise AxesError(
            message(
                "convert",
                f"a {layout} array has {layout.ndim_physical} dimensions but "
                f"{path.name} has {arr.ndim}",
                f"--axes {axes_text}; shape {arr.shape}",
                "Leave --from out: the file has one dimension per axis"
                if arr.ndim == len(items)
                else "Check --axes and --from",
            )
        )
    t = tensor(arr, items, layout=layout)
    for name, x in layout.blocks:
        if name in items:  # given without a length: the padding would count as data
            padded = t.axes[name].length
            fixed = " ".join(
                f"{n}=<1..{padded}>" if n == name else str(n) for n in items
            )
            raise AxesError(
                message(
                    "convert",
                    f"--axes gives no length for the blocked axis {name!r}, and its "
                    f"{padded} entries in the file may end in padding",
                    f"--axes {axes_text}; {layout} blocks of {x}",
                    f"Give its real length ({name}={padded} if there is no padding): "
                    f"--axes '{fixed}'",
                )
            )
    return t, layout, drop


def _suggest(shape: tuple[int, ...]) -> str:
    """The --axes (and --from) to try for a .npy without a sidecar."""
    names = "N C H W" if len(shape) == 4 else " ".join(f"d{k}" for k in range(len(shape)))
    plain = f"--axes '{names}'"
    if len(shape) == 5 and shape[-1] > 1:
        x = shape[-1]
        return (
            f"{plain}; or, if it is blocked, --axes 'N C=<channels> H W' --from NCHW{x} "
            f"(C=<channels>, at most {shape[1] * x}, keeps the padding out of the data)"
        )
    return plain


# --- chunking ------------------------------------------------------------------------------


def plan_chunks(
    axes: Axes, dst: Layout | None, src: Layout | None, itemsize: int, chunk_bytes: int
) -> list[dict]:
    """Index dicts (axis name -> slice) covering ``axes``, each at most about
    ``chunk_bytes`` of output, cut along the output's outermost physical dims.

    Cuts along an axis fall on multiples of its blocks in both layouts, so each chunk holds
    whole blocks (the last one holds the padded tail).
    """
    if axes.size == 0:
        return []  # nothing to copy (and no chunk size to divide by)
    order = list(dst.order) if dst is not None else list(axes.names)

    def block(lay, n):
        return (lay.block(n) if lay is not None else None) or 1

    lengths = {a.name: a.length for a in axes}
    inner = itemsize * math.prod(block(dst, n) for n in order)  # the block dims, innermost
    tail = []  # output bytes of one index (one block, if blocked) of each order dim
    for n in reversed(order):
        tail.append(inner)
        inner *= math.ceil(lengths[n] / block(dst, n))
    tail.reverse()
    levels = []
    for k, n in enumerate(order):
        unit = math.lcm(block(dst, n), block(src, n))
        step_bytes = tail[k] * unit // block(dst, n)
        if step_bytes <= chunk_bytes or k == len(order) - 1:
            step = unit * max(1, chunk_bytes // step_bytes)
            levels.append((n, step))
            break
        levels.append((n, unit))
    ranges = []
    for n, step in levels:
        ranges.append([slice(s, min(s + step, lengths[n])) for s in range(0, lengths[n], step)])
    return [dict(zip([n for n, _ in levels], combo, strict=True)) for combo in product(*ranges)]


# --- progress ------------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on stderr, shown once a job has run for ``delay`` seconds."""

    def __init__(self, total: int, enabled: bool, label: str = "convert", delay: float = 0.5):
        self.total, self.enabled, self.label, self.delay = total, enabled, label, delay
        self.start = time.perf_counter()
        self.done = 0
        self.last = 0.0
        self.shown = False

    def update(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if not self.enabled or now - self.start < self.delay or now - self.last < 0.1:
            return
        self.last = now
        self.shown = True
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(30 * frac)
        rate = self.done / max(now - self.start, 1e-9) / 1e6
        sys.stderr.write(
            f"\r{self.label} [{bar:<30}] {100 * frac:5.1f}% "
            f"{self.done / 1e6:,.0f}/{self.total / 1e6:,.0f} MB {rate:,.0f} MB/s"
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")


# --- commands ------------------------------------------------------------------------------


def _box(index: dict, axes: Axes, layout: Layout | None) -> tuple[tuple, tuple]:
    """(start, lengths) of chunk ``index`` in the output's physical array."""

    def part(name: str) -> tuple[int, int]:
        n = axes[name].length
        lo, hi, _ = index.get(name, slice(0, n)).indices(n)
        return lo, hi - lo

    if layout is None:
        spans = [part(a.name) for a in axes]
    else:
        spans = []
        for d in physical_dims(layout, axes):
            lo, n = part(axes[d.axis].name)
            if d.kind == "plain":
                spans.append((lo, n))
            elif d.kind == "outer":  # chunks start on whole blocks (plan_chunks)
                spans.append((lo // d.block, -(-n // d.block)))
            else:
                spans.append((0, d.block))
    return tuple(s for s, _ in spans), tuple(n for _, n in spans)


def convert(
    src_path,
    dst_path,
    axes=None,
    from_layout=None,
    to_layout=None,
    roles=None,
    chunk_bytes: int = DEFAULT_CHUNK,
    progress: bool | None = None,
    stop: Interrupts | None = None,
) -> None:
    """Convert ``src_path`` into ``dst_path`` (the ``axesarray convert`` command).

    Checks everything before writing; writes with ordinary I/O into a temporary file that
    is renamed onto ``dst_path`` when complete; memory stays within a few chunks. ``stop``
    (an entered ``Interrupts``) is checked between chunks and before the renames.

    >>> import numpy as np, tempfile, os
    >>> d = tempfile.mkdtemp(); src, dst = os.path.join(d, "a.npy"), os.path.join(d, "b.npy")
    >>> np.save(src, np.arange(6, dtype="int8").reshape(1, 3, 1, 2))
    >>> convert(src, dst, "N C H W", to_layout="NCHW4")
    >>> np.load(dst).shape
    (1, 1, 1, 2, 4)
    """
    stop = stop or Interrupts()  # not entered: no handler, check() never raises
    with renamed_errors("convert"):
        if is_zarr(src_path) or is_zarr(dst_path):
            _convert_zarr(src_path, dst_path, axes, from_layout, to_layout, roles, progress, stop)
            return
        _convert(
            src_path, dst_path, axes, from_layout, to_layout, roles, chunk_bytes, progress, stop
        )


def _convert_zarr(src, dst, axes, from_layout, to_layout, roles, progress, stop) -> None:
    """A Zarr store converts through dask (``zarr_io.convert``), chunk by chunk."""
    from .zarr_store import convert as convert_zarr

    if from_layout is not None:
        raise LayoutError(
            message(
                "convert",
                "--from is for .npy input",
                str(src),
                "Leave --from out: a Zarr store records its layout",
            )
        )
    roles = _roles(roles) if isinstance(roles, str) or roles is None else dict(roles)
    names = None if axes is None else _names(_axes_spec(axes))
    if to_layout is not None and Path(dst).suffix == ".zarr":
        from .zarr_store import open_zarr

        # --to checked against the store's axes here, for a hint in terms of flags
        _layout(to_layout, "--to", roles, open_zarr(src, names).names)
    bars: list = []

    def start(total: int):
        bars.append(Progress(total, _show(progress)))
        update = bars[-1].update

        def done(n: int) -> None:  # after each task, in this thread: a safe point
            update(n)
            stop.check()

        return done

    stop.check()
    try:
        convert_zarr(src, dst, names, to_layout, roles, start)
    finally:
        for bar in bars:
            bar.close()


def _convert(src_path, dst_path, axes, from_layout, to_layout, roles, chunk_bytes, progress, stop):
    from ..storage.memory import allocate

    src_path, dst_path = Path(src_path), Path(dst_path)
    roles = _roles(roles) if isinstance(roles, str) or roles is None else dict(roles)
    if dst_path.exists() and src_path.exists() and dst_path.resolve() == src_path.resolve():
        raise LayoutError(
            message(
                "convert",
                "the output path is the input path",
                str(src_path),
                f"Name it {src_path.stem}_out.npy",
            )
        )
    check_output(dst_path, "convert")
    src, src_layout, drop = _open_input(src_path, axes, from_layout, roles)
    dst_layout = None
    if to_layout is not None:
        dst_layout = _layout(to_layout, "--to", roles, src.axes.names)
    if dst_layout is None:
        shape = src.axes.shape
    else:
        shape = tuple(d.length for d in physical_dims(dst_layout, src.axes))
    dtype = src.dtype
    chunks = plan_chunks(src.axes, dst_layout, src_layout, dtype.itemsize, chunk_bytes)
    boxes = [_box(index, src.axes, dst_layout) for index in chunks]
    # One buffer for every chunk, allocated before the output exists (memory is refused
    # with a message, and nothing is left behind).
    buf = allocate(max((math.prod(n) for _, n in boxes), default=0), dtype, op="convert")
    bar = Progress(math.prod(shape) * dtype.itemsize, _show(progress))
    stop.check()
    try:
        with atomic_outputs(dst_path, sidecar_path(dst_path), op="convert") as (tmp, tmp_side):
            out = NpyWriter(tmp, dtype, shape)
            try:
                pieces = zip(chunks, boxes, strict=True)
                _write_chunks(out, src, dst_layout, pieces, buf, drop, bar, stop)
            except BaseException:
                out.file.close()
                raise
            out.close()
            tmp_side.write_text(sidecar_text(src.axes, dst_layout, dtype))
            _settle(stop)
            stop.check()  # the last point: past it the renames make the output whole
    finally:
        bar.close()  # an error or Ctrl-C starts on a line of its own


def _settle(stop: Interrupts) -> None:
    """Wait (interruptibly) for the kernels compiling on the background thread while
    numpy answered: they reach the disk cache, and the process exits with no compile
    under way (a thread inside LLVM at interpreter exit can crash it)."""
    from ..engine.tiers import background_done

    done = background_done()
    if done is not None and stop.active:
        stop.wait(done)


def _write_chunks(out, src, dst_layout, chunks, buf, drop, bar, stop) -> None:
    """Repack each (index, box) of ``chunks`` into ``buf`` and write it to ``out``."""
    from ..creation import tensor
    from ..layout_ops import repack

    part, since = None, 0
    for index, (start, lengths) in chunks:
        stop.check()
        piece = src.isel(index)
        if part is None or part.axes != piece.axes:
            # A chunk of a new shape: zero the buffer so that its padding reads zero (repack
            # writes the data only, so the padding stays zero while the shape is reused).
            box = buf[: math.prod(lengths)].reshape(lengths)
            box[...] = 0
            if dst_layout is None:
                part = tensor(box, piece.axes)
            else:
                part = tensor(box, piece.axes, layout=dst_layout)
        repack(piece, out=part)
        out.write(box, start)
        since += box.nbytes
        if since >= RELEASE_EVERY:  # the input pages read so far go back to the page cache
            drop()
            since = 0
        bar.update(box.nbytes)


def _show(progress: bool | None) -> bool:
    return sys.stderr.isatty() if progress is None else progress


def info(path) -> str:
    """A description of a .npy file and its sidecar, or of a Zarr store (the ``axesarray
    info`` command)."""
    with renamed_errors("info"):
        if is_zarr(path):
            return _info_zarr(Path(path))
        return _info(Path(path))


def _layout_lines(axes: Axes, layout: Layout | None) -> list[str]:
    lines = [f"axes      {fmt_axes(axes)}"]
    if layout is None:
        lines.append("layout    none (the physical array is in axis order)")
        return lines
    dims = physical_dims(layout, axes)
    labels = ", ".join(f"{d.label}={d.length}" for d in dims)
    padded = math.prod(d.length for d in dims)
    pad = 1 - axes.size / padded if padded else 0.0
    lines.append(f"layout    {layout} ({labels})")
    lines.append(f"padding   {pad:.1%} of the elements")
    return lines


def _info_zarr(path: Path) -> str:
    from .zarr_store import open_zarr, physical_array

    arr = physical_array(path, "info")
    head = [f"physical  {arr.dtype} {tuple(arr.shape)}"]
    try:
        t = open_zarr(path)
    except AxesError:  # no names: describe the array alone
        return "\n".join(
            [f"store     {path} (Zarr)", *head, "axes      unknown (no dimension_names)"]
        )
    chunks = ", ".join(f"{n}={c}" for n, c in t.chunks.items())
    return "\n".join(
        [f"store     {path} (Zarr, chunks {chunks})", *head, *_layout_lines(t.axes, t.layout)]
    )


def _info(path: Path) -> str:
    side = read_sidecar(path, "info")
    arr = open_npy(path, "info", "r")
    lines = [
        f"file      {path} ({path.stat().st_size:,} bytes)",
        f"physical  {arr.dtype} {arr.shape}",
    ]
    if side is None:
        lines.append("axes      unknown (no sidecar)")
        lines.append(f"convert   with {_suggest(arr.shape)}")
        return "\n".join(lines)
    axes, layout, _ = side
    lines += _layout_lines(axes, layout)
    lines.append(f"sidecar   {sidecar_path(path)}")
    return "\n".join(lines)


EXAMPLES = """examples:
  axesarray convert x.npy y.npy --axes "N C H W" --to NCHW32
      NCHW -> NCHW32; writes y.npy and its sidecar y.npy.axes.json
  axesarray convert y.npy back.npy
      back to axis order: the sidecar knows the axes and the layout
  axesarray convert raw.npy z.npy --axes "N C=3 H W" --from NCHW4 --to NHWC
      a blocked file without a sidecar: C=3 is the real channel count, the rest is padding
  axesarray convert x.npy t.npy --axes "b c y x" --roles "N=b C=c H=y W=x" --to CHWN4
  axesarray info y.npy

guarantees: the output appears complete or not at all (an error leaves no file); memory
stays within a few chunks (--chunk-size) beyond the input pages; files follow the umask.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="axesarray",
        description=__doc__.splitlines()[0].replace("``", ""),  # plain text, not RST
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"axesarray {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser(
        "convert",
        help="convert a .npy between layouts",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("input", type=Path)
    c.add_argument("output", type=Path, help="a .npy file (its sidecar goes next to it)")
    c.add_argument("--axes", help="logical axes, e.g. 'N C H W' (or 'N C=3 H W')")
    c.add_argument("--from", dest="from_layout", help="the input's layout (default: axis order)")
    c.add_argument("--to", dest="to_layout", help="the output's layout (default: axis order)")
    c.add_argument("--roles", help="role letters to axis names, e.g. 'N=batch C=feat'")
    c.add_argument(
        "--chunk-size",
        type=_size,
        default=DEFAULT_CHUNK,
        help="output bytes per chunk (default 64M)",
    )
    c.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: when stderr is a terminal)",
    )
    i = sub.add_parser("info", help="describe a .npy file and its sidecar, or a Zarr store")
    i.add_argument("file", type=Path)
    return parser


def _one_line(command: str, err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror and not str(err).startswith(f"{command}: "):
        # An OS error from below, not one of ours: its words and file, not "[Errno 28] ..."
        return message(command, err.strerror, err.filename and str(err.filename))
    text = " ".join(str(err).split()) or type(err).__name__
    return text if text.startswith(f"{command}: ") else f"{command}: {text}"


def main(argv=None) -> int:
    """The ``axesarray`` command, in this process: its exit status (130 after Ctrl-C)."""
    with Interrupts() as stop:
        return _main(argv, stop)


def _main(argv, stop: Interrupts) -> int:
    args = _parser().parse_args(argv)

    def show(msg, category, *_args, **_kwargs):
        print(f"axesarray: warning: {_one_line(args.command, msg)}", file=sys.stderr)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = show
            if args.command == "convert":
                convert(
                    args.input,
                    args.output,
                    args.axes,
                    args.from_layout,
                    args.to_layout,
                    args.roles,
                    args.chunk_size,
                    args.progress,
                    stop,
                )
            else:
                print(info(args.file))
                sys.stdout.flush()  # here, so that a closed pipe is seen below
    except BrokenPipeError:
        # The reader left (``info FILE | head -1``): end quietly as cat does, with the
        # status of SIGPIPE; stdout goes to /dev/null so the exit flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE
    except (ValueError, TypeError, OSError, MemoryError) as err:  # our errors included
        print(f"axesarray: error: {_one_line(args.command, err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"axesarray {args.command}: interrupted; nothing written", file=sys.stderr)
        return 130
    return 0


def entry() -> None:
    """The ``axesarray`` program (console script and ``python -m axesarray``): ``main()``,
    then an exit that does not finalize the interpreter, so a compile still under way on
    the background thread (after Ctrl-C or an error) cannot crash the exit or delay it."""
    from .. import _startup

    if _startup.HIT:  # Ctrl-C while the package was imported
        command = sys.argv[1] if sys.argv[1:2] in (["convert"], ["info"]) else None
        print(f"axesarray{' ' + command if command else ''}: interrupted; nothing written",
              file=sys.stderr)
        code = 130
    else:
        code = main()  # (SIGINT sets _startup.HIT again after main() returns: ignored)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
