"""The ``axesarray`` command: convert .npy files between layouts, and describe them.

    axesarray convert IN.npy OUT.npy --axes "N C H W" --from NCHW --to NCHW32
    axesarray convert OUT.npy BACK.npy            # the sidecar knows the axes and layout
    axesarray info FILE.npy

The input is memory-mapped and converted in chunks of the output's outermost dims, so a
file larger than memory converts with bounded memory. OUT.npy is a plain .npy of the
physical array; OUT.npy.axes.json records axes and layout. Everything is checked before
anything is written, and the output appears (by rename) only when complete.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from itertools import product
from pathlib import Path

import numpy as np

from .axes import Axes, Axis
from .errors import AxesError, LayoutError, fmt_axes, message
from .layouts import Layout, bind, physical_dims

__all__ = ["main", "convert", "info", "plan_chunks"]

DEFAULT_CHUNK = 64 << 20


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
    return n


def _axes_spec(text: str) -> list:
    """``"N C=3 H W"``: names, optionally with a length (needed for a padded axis)."""
    items = []
    for tok in text.replace(",", " ").split():
        name, _, length = tok.partition("=")
        items.append(Axis(name, int(length)) if length else name)
    return items


def _roles(text: str | None) -> dict:
    if not text:
        return {}
    out = {}
    for tok in text.replace(",", " ").split():
        role, sep, name = tok.partition("=")
        if not sep:
            raise LayoutError(
                message("convert", f"bad role {tok!r}", None, "Write roles as N=batch C=feat")
            )
        out[role] = name
    return out


# --- the input -----------------------------------------------------------------------------


def _open_input(path: Path, axes_text, from_text, roles: dict):
    """(tensor over the memory-mapped input, layout or None)."""
    from .creation import tensor
    from .npyio import open_npy, read_sidecar

    side = read_sidecar(path, "convert")
    arr = open_npy(path, "convert", "r")
    if side is not None:
        axes, layout, _ = side
        if axes_text is not None:
            names = [a.name if isinstance(a, Axis) else a for a in _axes_spec(axes_text)]
            if tuple(names) != axes.names:
                raise AxesError(
                    message(
                        "convert",
                        "--axes differs from the input's sidecar",
                        f"--axes {axes_text}; sidecar {fmt_axes(axes)}",
                        "Leave --axes out: the sidecar has them",
                    )
                )
        if from_text is not None:
            given = bind(Layout.parse(from_text, **roles), axes, "convert")
            if given != layout:
                raise LayoutError(
                    message(
                        "convert",
                        "--from differs from the input's sidecar",
                        f"--from {from_text}; sidecar {layout}",
                        "Leave --from out: the sidecar has it",
                    )
                )
        return (tensor(arr, axes, layout=layout) if layout else tensor(arr, axes)), layout
    if axes_text is None:
        raise AxesError(
            message(
                "convert",
                f"{path} has no sidecar, so its axes are unknown",
                f"shape {arr.shape}",
                "Give them: --axes 'N C H W'",
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
                    "Give one name per dimension, or --from for a blocked layout",
                )
            )
        return tensor(arr, items), None
    names = tuple(a.name if isinstance(a, Axis) else a for a in items)
    layout = bind(Layout.parse(from_text, **roles), Axes(Axis(n, 0) for n in names), "convert")
    if arr.ndim != layout.ndim_physical:
        raise AxesError(
            message(
                "convert",
                f"a {layout} array has {layout.ndim_physical} dimensions but "
                f"{path.name} has {arr.ndim}",
                f"--axes {axes_text}; shape {arr.shape}",
                "Check --axes and --from",
            )
        )
    return tensor(arr, items, layout=layout), layout


# --- chunking ------------------------------------------------------------------------------


def plan_chunks(
    axes: Axes, dst: Layout | None, src: Layout | None, itemsize: int, chunk_bytes: int
) -> list[dict]:
    """Index dicts (axis name -> slice) covering ``axes``, each at most about
    ``chunk_bytes`` of output, cut along the output's outermost physical dims.

    Cuts along an axis fall on multiples of its blocks in both layouts, so each chunk holds
    whole blocks (the last one holds the padded tail).
    """
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


def convert(
    src_path,
    dst_path,
    axes=None,
    from_layout=None,
    to_layout=None,
    roles=None,
    chunk_bytes: int = DEFAULT_CHUNK,
    progress: bool | None = None,
) -> None:
    """Convert ``src_path`` into ``dst_path`` (the ``axesarray convert`` command)."""
    from .creation import tensor
    from .layout_ops import repack
    from .npyio import atomic_outputs, sidecar_path, sidecar_text

    src_path, dst_path = Path(src_path), Path(dst_path)
    roles = _roles(roles) if isinstance(roles, str) or roles is None else dict(roles)
    if dst_path.exists() and src_path.exists() and dst_path.resolve() == src_path.resolve():
        raise LayoutError(
            message(
                "convert",
                "the output path is the input path",
                str(src_path),
                "Write to another file",
            )
        )
    src, src_layout = _open_input(src_path, axes, from_layout, roles)
    dst_layout = None
    if to_layout is not None:
        dst_layout = bind(Layout.parse(to_layout, **roles), src.axes, "convert")
    if dst_layout is None:
        shape = src.axes.shape
    else:
        shape = tuple(d.length for d in physical_dims(dst_layout, src.axes))
    if not dst_path.parent.is_dir():
        raise FileNotFoundError(
            message("convert", "the output directory does not exist", str(dst_path.parent))
        )
    chunks = plan_chunks(src.axes, dst_layout, src_layout, src.dtype.itemsize, chunk_bytes)
    total = math.prod(shape) * src.dtype.itemsize
    bar = Progress(total, sys.stderr.isatty() if progress is None else progress)
    with atomic_outputs(dst_path, sidecar_path(dst_path)) as (tmp, tmp_side):
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=src.dtype, shape=shape)
        if dst_layout is None:
            dst = tensor(out, src.axes)
        else:
            dst = tensor(out, src.axes, layout=dst_layout)
        written = 0
        for index in chunks:
            part = dst.isel(index)
            repack(src.isel(index), out=part)
            written += part.size * src.dtype.itemsize
            bar.update(part.size * src.dtype.itemsize)
            if written >= 256 << 20:  # keep the dirty pages of the output bounded
                out.flush()
                written = 0
        out.flush()
        del out, dst
        tmp_side.write_text(sidecar_text(src.axes, dst_layout, src.dtype))
    bar.close()


def info(path) -> str:
    """A description of a .npy file and its sidecar (the ``axesarray info`` command)."""
    from .npyio import open_npy, read_sidecar, sidecar_path

    path = Path(path)
    side = read_sidecar(path, "info")
    arr = open_npy(path, "info", "r")
    lines = [
        f"file      {path} ({path.stat().st_size:,} bytes)",
        f"physical  {arr.dtype} {arr.shape}",
    ]
    if side is None:
        lines.append("axes      unknown (no sidecar); convert with --axes 'N C H W'")
        return "\n".join(lines)
    axes, layout, _ = side
    lines.append(f"axes      {fmt_axes(axes)}")
    if layout is None:
        lines.append("layout    none (the physical array is in axis order)")
    else:
        dims = physical_dims(layout, axes)
        labels = ", ".join(f"{d.label}={d.length}" for d in dims)
        padded = math.prod(d.length for d in dims)
        pad = 1 - axes.size / padded if padded else 0.0
        lines.append(f"layout    {layout} ({labels})")
        lines.append(f"padding   {pad:.1%} of the elements")
    lines.append(f"sidecar   {sidecar_path(path)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="axesarray", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert", help="convert a .npy between layouts")
    c.add_argument("input", type=Path)
    c.add_argument("output", type=Path)
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
    i = sub.add_parser("info", help="describe a .npy file and its sidecar")
    i.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    try:
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
            )
        else:
            print(info(args.file))
    except (ValueError, TypeError, OSError) as err:  # AxesError, LayoutError included
        print(f"axesarray: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"axesarray {args.command}: interrupted; nothing written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
