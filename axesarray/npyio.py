"""Files: a plain ``.npy`` holding the physical array plus a JSON sidecar with the axes.

``FILE.npy`` is readable by any tool (``np.load``); ``FILE.npy.axes.json`` records the
logical axes (names and lengths: a blocked axis may be shorter than its padded length),
the layout and the dtype, so a tensor comes back exactly and conversions need no flags.
Writes go to a temporary file in the destination directory, renamed at the end, so a
failure leaves no partial output. Shared by ``ax.save``/``ax.load`` and the CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from .axes import Axes, Axis
from .errors import LayoutError, fmt_axes, message
from .layouts import Layout

__all__ = [
    "save",
    "load",
    "sidecar_path",
    "read_sidecar",
    "sidecar_text",
    "open_npy",
    "atomic_outputs",
    "FORMAT",
]

FORMAT = "axesarray"
VERSION = 1
SUFFIX = ".axes.json"


def sidecar_path(path) -> Path:
    """``FILE.npy`` -> ``FILE.npy.axes.json``."""
    return Path(str(path) + SUFFIX)


def sidecar_text(axes: Axes, layout: Layout | None, dtype) -> str:
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "axes": [[a.name, a.length] for a in axes],
        "layout": None
        if layout is None
        else {
            "name": str(layout),
            "order": list(layout.order),
            "blocks": [list(b) for b in layout.blocks],
            "roles": [list(r) for r in layout.roles],
        },
        "dtype": np.dtype(dtype).str,
    }
    return json.dumps(doc, indent=1) + "\n"


def read_sidecar(path, op: str = "load") -> tuple[Axes, Layout | None, np.dtype] | None:
    """(axes, layout, dtype) from ``path``'s sidecar, or None when it has none."""
    side = sidecar_path(path)
    if not side.exists():
        return None
    try:
        doc = json.loads(side.read_text())
        if doc.get("format") != FORMAT:
            raise ValueError(f"format is {doc.get('format')!r}")
        axes = Axes(Axis(str(n), int(k)) for n, k in doc["axes"])
        lay = doc.get("layout")
        layout = None
        if lay is not None:
            layout = Layout(
                lay["order"],
                [tuple(b) for b in lay["blocks"]],
                [tuple(r) for r in lay.get("roles", [])],
            )
        return axes, layout, np.dtype(doc["dtype"])
    except (ValueError, KeyError, TypeError) as err:
        raise LayoutError(
            message(
                op,
                f"the sidecar {side} is not readable",
                str(err),
                "Delete it and pass the axes explicitly",
            )
        ) from None


def open_npy(path, op: str = "load", mmap_mode: str | None = "r") -> np.ndarray:
    """``np.load`` with clear errors: missing, not a .npy, truncated, object dtype."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(message(op, f"no such file {str(path)!r}"))
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            header = f.tell()
    except ValueError as err:
        raise LayoutError(
            message(op, f"{path} is not a .npy file", str(err), "Write it with np.save")
        ) from None
    if dtype.hasobject:
        raise LayoutError(
            message(
                op,
                f"{path} holds Python objects",
                str(dtype),
                "Only numeric arrays can be converted",
            )
        )
    need = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size < need:
        raise LayoutError(
            message(
                op,
                f"{path} is truncated",
                f"{size} bytes, the header needs {need}",
                "Copy the file again",
            )
        )
    return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)


@contextlib.contextmanager
def atomic_outputs(*paths):
    """Temporary paths next to ``paths``; renamed onto them only if the block succeeds."""
    temps = []
    try:
        for p in paths:
            p = Path(p)
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent or ".")
            os.close(fd)
            temps.append(Path(tmp))
        yield temps
        for tmp, p in zip(temps, paths, strict=True):
            os.replace(tmp, p)
        temps = []
    finally:
        for tmp in temps:
            with contextlib.suppress(OSError):
                tmp.unlink()


def save(path, t) -> None:
    """Write ``t`` to ``path`` (a .npy of its physical array) plus its axes sidecar.

    >>> import axesarray as ax, numpy as np, tempfile, os
    >>> x = ax.tensor(np.arange(6, dtype="int8").reshape(1, 3, 1, 2), "N C H W")
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "x.npy")
    >>> ax.save(p, x.to_layout("NCHW4"))
    >>> np.load(p).shape, str(ax.load(p).layout)
    ((1, 1, 1, 2, 4), 'NCHW4')
    """
    from .layout_ops import physical, to_layout
    from .tensor import Tensor

    if not isinstance(t, Tensor):
        raise TypeError(message("save", "expected a Tensor", type(t).__name__))
    layout = t.layout
    if layout is None:
        arr = t.numpy()
    else:
        try:
            arr = physical(t)
        except LayoutError:  # an r-tensor or a view through blocks: store a fresh copy
            arr = physical(to_layout(t, layout))
    path = Path(path)
    with atomic_outputs(path, sidecar_path(path)) as (tmp, tmp_side):
        with open(tmp, "wb") as f:
            np.lib.format.write_array(f, np.asarray(arr), allow_pickle=False)
        tmp_side.write_text(sidecar_text(t.axes, layout, t.dtype))


def load(path, axes=None, mmap_mode: str | None = None):
    """Read a tensor written by ``ax.save`` (or the CLI); zero-copy with ``mmap_mode``.

    A .npy without a sidecar needs ``axes`` (names, e.g. ``"N C H W"``).
    """
    from .creation import tensor

    info = read_sidecar(path, "load")
    arr = open_npy(path, "load", mmap_mode)
    if info is None:
        if axes is None:
            raise LayoutError(
                message(
                    "load",
                    f"{path} has no sidecar {sidecar_path(path).name}",
                    f"shape {arr.shape}",
                    "Pass its axes: ax.load(path, axes='N C H W')",
                )
            )
        return tensor(arr, axes)
    saved, layout, dtype = info
    if axes is not None:
        names = axes.split() if isinstance(axes, str) else [getattr(a, "name", a) for a in axes]
        if tuple(names) != saved.names:
            raise LayoutError(
                message(
                    "load",
                    "the axes given differ from the sidecar's",
                    f"given {' '.join(names)}; file: {fmt_axes(saved)}",
                    "Leave axes out to use the file's",
                )
            )
    if arr.dtype != dtype:
        raise LayoutError(
            message(
                "load",
                "the array's dtype differs from the sidecar's",
                f"{arr.dtype} vs {dtype}",
                "The files do not belong together",
            )
        )
    if layout is None:
        if arr.shape != saved.shape:
            raise LayoutError(
                message(
                    "load",
                    "the array's shape differs from the sidecar's",
                    f"{arr.shape} vs {fmt_axes(saved)}",
                    "The files do not belong together",
                )
            )
        return tensor(arr, saved)
    return tensor(arr, saved, layout=layout)
