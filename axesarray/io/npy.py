"""Files: a plain ``.npy`` holding the physical array plus a JSON sidecar with the axes.

``FILE.npy`` is readable by any tool (``np.load``); ``FILE.npy.axes.json`` records the
logical axes (names and lengths: a blocked axis may be shorter than its padded length),
the layout and the dtype, so a tensor comes back exactly and conversions need no flags.
Writes go to a temporary file in the destination directory, renamed at the end, so a
failure leaves no partial output. Shared by ``ax.save``/``ax.load`` and the CLI.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import mmap
import os
import secrets
from pathlib import Path

import numpy as np

from ..core.axes import Axes, Axis, spec_items
from ..core.dtypes import as_dtype
from ..errors import AxesError, LayoutError, fmt_axes, message
from ..storage.layouts import Layout, bind
from ..storage.memory import AllocationError

__all__ = [
    "save",
    "load",
    "sidecar_path",
    "read_sidecar",
    "sidecar_text",
    "open_npy",
    "map_npy",
    "NpyWriter",
    "atomic_outputs",
    "check_output",
    "renamed_errors",
    "read_failed",
    "write_failed",
    "FORMAT",
]

FORMAT = "axesarray"
VERSION = 1
SUFFIX = ".axes.json"


def sidecar_path(path) -> Path:
    """``FILE.npy`` -> ``FILE.npy.axes.json``."""
    return Path(str(path) + SUFFIX)


def _dtype_text(dt: np.dtype) -> str:
    """The sidecar's dtype: numpy's ``str``; bfloat16 by name (the .npy says only '<V2')."""
    return dt.name if dt.kind == "V" else dt.str


def _dtype_of(text: str) -> np.dtype:
    return as_dtype(text, "load") if text == "bfloat16" else np.dtype(text)


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
        "dtype": _dtype_text(np.dtype(dtype)),
    }
    return json.dumps(doc, indent=1) + "\n"


def _kind(value) -> str:
    """The JSON kind of a parsed value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    kinds = {str: "a string", list: "a list", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


def _length(name: str, value) -> int:
    """A JSON length: an int (not a bool, a float, Infinity or NaN) that is >= 0."""
    if type(value) is not int or value < 0:
        raise ValueError(
            f"the length of axis {name!r} must be a non-negative integer (got {value!r})"
        )
    return value


def _pairs(value, what: str) -> list[tuple]:
    if not isinstance(value, list) or not all(
        isinstance(p, list) and len(p) == 2 for p in value
    ):
        raise ValueError(f"{what} must be a list of [name, length] pairs (got {value!r:.60})")
    return [tuple(p) for p in value]


def parse_doc(doc, version: int = VERSION):
    """(axes, layout bound to them or None) from a parsed axesarray document (a sidecar or
    a Zarr store's ``axesarray`` attribute); ``ValueError`` on anything malformed: a JSON
    value of the wrong kind, an unknown version, a fractional, negative or non-finite length,
    a layout that does not fit the axes."""
    if not isinstance(doc, dict):
        raise ValueError(f"it holds {_kind(doc)}, not an object")
    if doc.get("version") != version or type(doc.get("version")) is not int:
        raise ValueError(
            f"version {doc.get('version')!r} is not one this axesarray reads ({version})"
        )
    items = []
    for name, length in _pairs(doc.get("axes"), "'axes'"):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"an axis name must be a Python identifier (got {name!r})")
        items.append(Axis(name, _length(name, length)))
    axes = Axes(items)
    lay = doc.get("layout")
    if lay is None:
        return axes, None
    if not isinstance(lay, dict):
        raise ValueError(f"'layout' must be an object or null (got {_kind(lay)})")
    order, blocks, roles = lay.get("order"), lay.get("blocks", []), lay.get("roles", [])
    if not isinstance(order, list) or not all(isinstance(n, str) for n in order):
        raise ValueError(f"'layout' needs 'order', a list of axis names (got {order!r:.60})")
    blocks = _pairs(blocks, "'layout' 'blocks'")
    roles = _pairs(roles, "'layout' 'roles'")
    try:
        layout = bind(Layout(order, blocks, roles), axes, "load")
    except LayoutError as err:
        raise ValueError(str(err).partition(": ")[2].rstrip(".")) from None
    return axes, layout


def read_sidecar(path, op: str = "load") -> tuple[Axes, Layout | None, np.dtype] | None:
    """(axes, layout, dtype) from ``path``'s sidecar, or None when it has none."""
    side = sidecar_path(path)
    if not side.exists():
        return None
    try:
        try:
            doc = json.loads(side.read_text())
        except RecursionError:
            raise ValueError("nested too deeply to be a sidecar") from None
        if isinstance(doc, dict) and doc.get("format") != FORMAT:
            raise ValueError(f"format is {doc.get('format')!r}, not {FORMAT!r}")
        axes, layout = parse_doc(doc)
        dtype = doc.get("dtype")
        try:
            if not isinstance(dtype, str):
                raise TypeError
            dtype = _dtype_of(dtype)
        except TypeError:
            raise ValueError(f"'dtype' must be a numpy dtype string (got {dtype!r:.60})") from None
        return axes, layout, dtype
    except (ValueError, AxesError, LayoutError, UnicodeDecodeError) as err:
        raise LayoutError(
            message(
                op,
                f"the sidecar {side} is not readable",
                " ".join(str(err).split()),
                "Delete it and pass the axes explicitly",
            )
        ) from None


def _header(path: Path, op: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran_order, dtype, header bytes) of a .npy file, checked: it exists, is a
    .npy, holds numbers (``TypeError`` for Python objects) and is not truncated."""
    if not path.is_file():
        raise FileNotFoundError(message(op, f"no such file {str(path)!r}"))
    try:
        size = path.stat().st_size
        f = open(path, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as err:
        raise read_failed(op, path, err) from None
    try:
        with f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            header = f.tell()
    except ValueError as err:
        raise LayoutError(
            message(op, f"{path} is not a .npy file", str(err), "Write it with np.save")
        ) from None
    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise LayoutError(
            message(
                op,
                f"{path} is not a valid .npy file",
                f"shape {shape} has a negative dimension",
                "Write it with np.save",
            )
        )
    if dtype.hasobject:
        raise TypeError(
            message(
                op,
                f"{path} holds Python objects",
                str(dtype),
                "Only numeric arrays can be read: save numbers (np.save without objects)",
            )
        )
    need = header + math.prod(shape) * dtype.itemsize
    if size < need:
        raise LayoutError(
            message(
                op,
                f"{path} is truncated",
                f"{size} bytes, the header needs {need}",
                "Copy the file again",
            )
        )
    return shape, fortran, dtype, header


def open_npy(path, op: str = "load", mmap_mode: str | None = "r") -> np.ndarray:
    """``np.load`` with clear errors: missing, not a .npy, truncated, object dtype."""
    path = Path(path)
    shape, _, dtype, _ = _header(path, op)
    try:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except OSError as err:
        raise read_failed(op, path, err) from None
    except MemoryError:
        raise AllocationError(
            message(
                op,
                f"cannot allocate {math.prod(shape) * dtype.itemsize:,} bytes to read {path}",
                f"shape {shape}; {dtype}",
                "Map it instead of reading it: mmap_mode='r'",
            )
        ) from None


def map_npy(path, op: str = "load"):
    """(read-only array mapped from ``path``, ``drop``): ``drop()`` returns the mapped pages
    to the page cache, so a pass over a large file keeps only what it touches since.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "a.npy"); np.save(p, np.arange(3))
    >>> arr, drop = map_npy(p); drop(); arr
    array([0, 1, 2])
    """
    path = Path(path)
    shape, fortran, dtype, header = _header(path, op)
    count = math.prod(shape)
    if count == 0:  # nothing to map (mmap refuses a length of zero)
        empty = np.empty(shape, dtype)
        empty.flags.writeable = False
        return empty, lambda: None
    try:
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as err:
        raise read_failed(op, path, err) from None
    flat = np.frombuffer(mm, dtype, count=count, offset=header)
    arr = flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
    advice = getattr(mmap, "MADV_DONTNEED", None)

    def drop() -> None:
        if advice is not None:
            mm.madvise(advice)

    return arr, drop


class NpyWriter:
    """A .npy file written box by box with ordinary I/O, so a full disk is an ``OSError``
    (a write through a memory map would die of SIGBUS instead).

    The header goes first and the whole size is reserved (``posix_fallocate``) before any
    data, so a disk too small fails at once. ``close()`` syncs the data to the disk.
    """

    def __init__(self, path, dtype, shape: tuple[int, ...]):
        self.dtype, self.shape = np.dtype(dtype), tuple(shape)
        self.file = open(path, "wb", buffering=0)  # noqa: SIM115 (closed by close())
        try:
            head = {
                "descr": np.lib.format.dtype_to_descr(self.dtype),
                "fortran_order": False,
                "shape": self.shape,
            }
            buf = io.BytesIO()
            try:
                np.lib.format.write_array_header_1_0(buf, head)
            except ValueError:  # a header past 64 KiB needs version 2.0
                buf = io.BytesIO()
                np.lib.format.write_array_header_2_0(buf, head)
            self.header = buf.tell()
            self._write(buf.getvalue(), 0)
            total = self.header + math.prod(self.shape) * self.dtype.itemsize
            self._reserve(total)
        except BaseException:
            self.file.close()
            raise
        # Byte strides of the C-ordered array.
        self.strides = [self.dtype.itemsize] * len(self.shape)
        for d in range(len(self.shape) - 2, -1, -1):
            self.strides[d] = self.strides[d + 1] * self.shape[d + 1]

    def _reserve(self, total: int) -> None:
        fd = self.file.fileno()
        try:
            os.posix_fallocate(fd, 0, total)
        except AttributeError:  # no posix_fallocate here (macOS): writes still report errors
            os.ftruncate(fd, total)
        except OSError as err:
            if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
            os.ftruncate(fd, total)

    def _write(self, data, offset: int) -> None:
        view = memoryview(data).cast("B")
        self.file.seek(offset)
        while view:
            n = self.file.write(view)
            view = view[n:]

    def write(self, box: np.ndarray, start: tuple[int, ...]) -> None:
        """Write ``box`` at index ``start``, one contiguous run per index of the cut dims."""
        if box.size == 0:
            return
        box = box if box.flags.c_contiguous else box.copy()  # (ascontiguousarray adds a dim to 0-d)
        cut = [d for d, (n, m) in enumerate(zip(box.shape, self.shape, strict=True)) if n != m]
        last = cut[-1] if cut else 0  # dims after it are whole: each run is contiguous
        base = self.header + sum(s * k for s, k in zip(start, self.strides, strict=True))
        for idx in np.ndindex(*box.shape[:last]):
            offset = base + sum(i * k for i, k in zip(idx, self.strides, strict=False))
            self._write(box[idx].reshape(-1).view(np.uint8), offset)

    def write_all(self, arr: np.ndarray, piece: int = 16 << 20) -> None:
        """Write the whole array, in slabs of about ``piece`` bytes along its first dim
        (a strided view is copied a slab at a time, never whole)."""
        if arr.ndim == 0 or arr.size == 0:
            self.write(arr.reshape(self.shape), (0,) * len(self.shape))
            return
        step = max(1, piece // max(1, arr[0].nbytes))
        for i in range(0, arr.shape[0], step):
            self.write(arr[i : i + step], (i,) + (0,) * (arr.ndim - 1))

    def close(self) -> None:
        try:
            os.fsync(self.file.fileno())
        finally:
            self.file.close()


def write_failed(op: str, path: Path, err: OSError) -> OSError:
    hints = {
        errno.ENOSPC: "Free space on the disk or write elsewhere",
        errno.EDQUOT: "The disk quota is used up: free space or write elsewhere",
        errno.EFBIG: "The file is larger than this file system or process allows (ulimit -f)",
        errno.EACCES: "Check the permissions of the directory",
        errno.EROFS: "The file system is read-only: write elsewhere",
    }
    new = type(err)(
        message(
            op,
            f"cannot write {path}",
            err.strerror or str(err),
            hints.get(err.errno, "Nothing was written"),
        )
    )
    new.errno = err.errno  # str() stays our message: strerror is left unset
    return new


def read_failed(op: str, path, err: OSError) -> OSError:
    """``err`` (raised reading ``path`` or a file inside it) as one ``op:`` line, of the
    same type and errno: ``convert: cannot read x.npy (Permission denied). Check ...``."""
    if str(err).startswith(f"{op}: "):
        return err
    hints = {
        errno.EACCES: "Check the permissions of the file",
        errno.EPERM: "Check the permissions of the file",
        errno.EIO: "The device reported a read error: copy the file again",
        errno.EISDIR: "Give a file, not a directory",
    }
    what = err.strerror or str(err)
    inner = getattr(err, "filename", None)
    if inner is not None and str(inner) != str(path):
        with contextlib.suppress(ValueError):
            inner = Path(inner).relative_to(path)
        what += f": {inner}"
    new = type(err)(
        message(op, f"cannot read {path}", what, hints.get(err.errno, "Check the file"))
    )
    new.errno = err.errno  # str() stays our message: strerror is left unset
    return new


def _create_temp(path: Path) -> Path:
    """A new empty file next to ``path``, created with mode 0o666 so the umask (and any
    default ACL) decides its permissions, as for any other file the user writes."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


@contextlib.contextmanager
def atomic_outputs(*paths, op: str = "save"):
    """Temporary paths next to ``paths``; renamed onto them only if the block succeeds.

    An ``OSError`` (a full disk, a file too large, no permission) comes out as one of the
    same type whose message names ``op`` and the output, and no file is left behind.
    """
    temps: list[Path] = []
    paths = [Path(p) for p in paths]
    try:
        try:
            for p in paths:
                temps.append(_create_temp(p))
            yield temps
            for tmp, p in zip(temps, paths, strict=True):
                os.replace(tmp, p)
            temps = []
        except OSError as err:
            if str(err).startswith(f"{op}: "):
                raise
            raise write_failed(op, paths[0], err) from None
    finally:
        for tmp in temps:
            with contextlib.suppress(OSError):
                tmp.unlink()


def check_output(path, op: str) -> Path:
    """Refuse, before any work, an output that cannot become ``path``: a name not ending
    in .npy (the file is always a .npy), a directory, a missing parent directory."""
    path = Path(path)
    for p in (path, sidecar_path(path)):
        if p.is_dir():
            raise IsADirectoryError(
                message(op, "the output is a directory", str(p), f"Give a file: {p / 'out.npy'}")
            )
    if path.suffix != ".npy":
        raise LayoutError(
            message(
                op,
                "the output is always a .npy file, so its name must end in .npy",
                f"got {path.name}",
                f"Name it {path.stem or path.name}.npy",
            )
        )
    if not path.parent.is_dir():
        raise FileNotFoundError(
            message(op, "the output directory does not exist", str(path.parent), "Create it first")
        )
    return path


@contextlib.contextmanager
def renamed_errors(op: str):
    """Errors raised by the functions called inside name ``op``, the operation the user ran
    (``load``, not the ``tensor`` it calls); the type and the rest of the message stay."""
    try:
        yield
    except (AxesError, LayoutError, TypeError, OSError) as err:
        head, sep, rest = str(err).partition(": ")
        if not sep or head == op or not head.isidentifier():
            raise
        new = type(err)(f"{op}: {rest}")
        if isinstance(err, OSError):
            new.errno = err.errno
        raise new from None


def save(path, t) -> None:
    """Write ``t`` to ``path`` (a .npy of its physical array) plus its axes sidecar.

    >>> import axesarray as ax, numpy as np, tempfile, os
    >>> x = ax.tensor(np.arange(6, dtype="int8").reshape(1, 3, 1, 2), "N C H W")
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "x.npy")
    >>> ax.save(p, x.to_layout("NCHW4"))
    >>> np.load(p).shape, str(ax.load(p).layout)
    ((1, 1, 1, 2, 4), 'NCHW4')
    """
    from ..layout_ops import physical, to_layout
    from ..tensors.tensor import Tensor

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
    path = check_output(path, "save")
    with atomic_outputs(path, sidecar_path(path), op="save") as (tmp, tmp_side):
        arr = np.asarray(arr)
        out = NpyWriter(tmp, arr.dtype, arr.shape)
        try:
            out.write_all(arr)
        except BaseException:
            out.file.close()
            raise
        out.close()
        tmp_side.write_text(sidecar_text(t.axes, layout, t.dtype))


def load(path, axes=None, mmap_mode: str | None = None):
    """Read a tensor written by ``ax.save`` (or the CLI); zero-copy with ``mmap_mode``.

    A .npy without a sidecar needs ``axes`` (names, e.g. ``"N C H W"``).

    >>> import axesarray as ax, numpy as np
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
    >>> ax.save(path, ax.tensor(np.zeros((2, 5, 1, 1), "float32"), "N C H W").to_layout("NCHW4"))
    >>> y = ax.load(path, mmap_mode="r")
    >>> y.axes, str(y.layout)
    (Axes(Axis('N', 2), Axis('C', 5), Axis('H', 1), Axis('W', 1)), 'NCHW4')
    """
    with renamed_errors("load"):
        return _load(path, axes, mmap_mode)


def _load(path, axes, mmap_mode):
    from ..creation import tensor

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
        items = spec_items(axes, "load")
        names = [getattr(a, "name", a) for a in items]
        lengths_differ = any(
            isinstance(a, Axis) and a.name in saved.names and a.length != saved[a.name].length
            for a in items
        )
        if tuple(names) != saved.names or lengths_differ:
            raise LayoutError(
                message(
                    "load",
                    "the axes given differ from the sidecar's",
                    f"given {' '.join(map(str, items))}; file: {fmt_axes(saved)}",
                    "Leave axes out to use the file's",
                )
            )
    if dtype.kind == "V" and arr.dtype == np.dtype("V2"):
        arr = arr.view(dtype)  # bfloat16: the .npy holds its bits as 2-byte voids
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
