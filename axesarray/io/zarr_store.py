"""Zarr v3 storage of tensors (``to_zarr``, ``open_zarr``), ``from_dask``, and the Zarr
branch of ``axesarray convert``.

A tensor is stored as one Zarr array: its physical array (axis order when it has no
layout) chunked like the tensor, ``dimension_names`` naming each dim (a blocked axis gives
two: ``C//32`` and ``C%32``), and the attribute ``axesarray`` holding the logical axes
(names and lengths) and the layout. Writing goes to a hidden ``.NAME.tmp-XXXX`` next to
the target, renamed when complete, so a failure (an error, a lost worker that is not
recovered, a full disk, Ctrl-C) leaves nothing under the requested name. Opening is lazy.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from pathlib import Path

import numpy as np

from ..core.axes import Axis, spec_items
from ..dag.chunked_leaf import Chunked
from ..errors import AxesError, LayoutError, fmt_axes, message
from ..storage.layouts import Layout, physical_dims
from ..tensors.chunking import dask_array, to_logical
from ..tensors.tensor import Tensor
from .npy import parse_doc, read_failed, write_failed

__all__ = ["from_dask", "to_zarr", "open_zarr", "convert", "is_zarr"]

FORMAT = "axesarray"
VERSION = 1


def from_dask(array, axes) -> Tensor:
    """A chunked tensor over a dask array; ``axes`` names its dims (mandatory).

    >>> import axesarray as ax, dask.array as da
    >>> ax.from_dask(da.zeros((4, 6), chunks=2), "N C").chunks
    {'N': (2, 2), 'C': (2, 2, 2)}
    """
    return Tensor.from_dask(array, axes)


def _zarr(op: str):
    try:
        import zarr
    except ImportError:
        raise ImportError(
            message(op, "zarr is not installed", None, "pip install 'axesarray[dask]'")
        ) from None
    return zarr


def is_zarr(path) -> bool:
    """Whether ``path`` names a Zarr store (a ``.zarr`` name or a directory with
    ``zarr.json``/``.zarray``)."""
    p = Path(path)
    return p.suffix == ".zarr" or (p / "zarr.json").exists() or (p / ".zarray").exists()


def _layout_doc(layout: Layout | None):
    if layout is None:
        return None
    return {
        "name": str(layout),
        "order": list(layout.order),
        "blocks": [list(b) for b in layout.blocks],
        "roles": [list(r) for r in layout.roles],
    }


def _regular(arr):
    """``arr`` rechunked to a regular grid (every chunk as big as the first, but the
    last), which Zarr needs; each dask chunk then writes whole Zarr chunks."""
    want = []
    for cs in arr.chunks:
        size = max(cs[0], 1)
        want.append(tuple(min(size, sum(cs) - s) for s in range(0, sum(cs), size)) or (0,))
    want = tuple(want)
    return arr if want == tuple(arr.chunks) else arr.rechunk(want)


def _store_path(store, op: str) -> Path:
    """A Zarr store given as a path (str or os.PathLike)."""
    if not isinstance(store, (str, os.PathLike)):
        raise TypeError(
            message(
                op,
                "the store must be a directory path",
                f"got {type(store).__name__}",
                "Pass e.g. 'data.zarr'",
            )
        )
    return Path(store)


def to_zarr(t: Tensor, store, chunks: dict | None = None, progress=None) -> None:
    """Write ``t`` to a new Zarr v3 store (a directory path), keeping axis names, dtype,
    layout and logical lengths; ``chunks`` (name -> size) rechunks first.

    Nothing appears under ``store`` unless the write completes. ``progress(total_bytes)``
    returns a function called with the bytes of each chunk written (local schedulers).

    >>> import axesarray as ax, numpy as np, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> t = ax.tensor(np.arange(12.0).reshape(3, 4), "N C")
    >>> ax.to_zarr(t, os.path.join(d, "t.zarr"), chunks={"N": 2})
    >>> ax.open_zarr(os.path.join(d, "t.zarr")).chunks
    {'N': (2, 1), 'C': (4,)}
    """
    _to_zarr(t, store, chunks, progress)


def _to_zarr(t, store, chunks, progress, op: str = "to_zarr", source=None) -> None:
    """``to_zarr``; an OS error comes out as one ``op:`` line: ``cannot read`` ``source``
    when it names a file in it, else ``cannot write`` the store."""
    if not isinstance(t, Tensor):
        raise TypeError(message("to_zarr", "expected a Tensor", type(t).__name__))
    zarr = _zarr("to_zarr")
    da = dask_array("to_zarr")
    path = _store_path(store, "to_zarr")
    if path.exists():
        raise FileExistsError(
            message("to_zarr", "the output exists", str(path), "Remove it or pick another name")
        )
    if not path.parent.is_dir():
        raise FileNotFoundError(
            message("to_zarr", "the output directory does not exist", str(path.parent))
        )
    layout = t.layout
    if layout is not None and layout.partial:
        # A view through blocks is stored blocked as ax.save stores it: a fresh copy in
        # the layout (zero padding), not in axis order without it.
        layout = Layout(layout.order, layout.blocks, layout.roles)
    if chunks is not None or t.chunks is None:
        t = t.chunk(chunks or {})
    if layout is not None:
        node = t.node
        if type(node) is not Chunked or node.physical is None:
            t = t.to_layout(layout)
        phys = t.node.physical
        names = [d.label for d in physical_dims(layout, t.axes)]
    else:
        phys = t.to_dask()
        names = list(t.names)
    phys = _regular(phys)
    attributes = {
        FORMAT: {
            "version": VERSION,
            "axes": [[a.name, a.length] for a in t.axes],
            "layout": _layout_doc(layout),
            "dtype": phys.dtype.str,
        }
    }
    tmp = path.parent / f".{path.name}.tmp-{secrets.token_hex(4)}"
    try:
        out = zarr.create_array(
            store=str(tmp),
            shape=phys.shape,
            dtype=phys.dtype,
            chunks=tuple(max(cs[0], 1) for cs in phys.chunks),
            dimension_names=names,
            attributes=attributes,
            fill_value=0,
        )
        target = _Target(out, str(tmp))
        stored = da.store(phys, target, lock=False, compute=False)
        _compute(stored, progress, phys.nbytes)
        os.replace(tmp, path)
        _Target.forget(str(tmp))
    except BaseException as err:
        _Target.cancel(str(tmp))  # kept, so that a chunk finishing later writes nothing
        shutil.rmtree(tmp, ignore_errors=True)
        if not isinstance(err, OSError) or err.errno is None:
            raise
        name = str(getattr(err, "filename", None) or "")
        if source is not None and name.startswith(str(source)):
            raise read_failed(op, source, err) from None
        if name and not name.startswith(str(tmp)) and source is None:
            raise read_failed(op, name, err) from None
        raise write_failed(op, path, err) from None


class _Target:
    """A Zarr array that ``da.store`` writes through, cancellable from this process.

    When one chunk fails, a local scheduler raises at once while other threads may still
    be writing chunks; one of those would recreate the temporary after it was removed.
    ``cancel`` refuses further writes and waits for the ones under way (writes from other
    processes, on a distributed cluster, are not tracked here).
    """

    _state: dict = {}  # tmp path -> [writes under way, cancelled]
    _cond = threading.Condition()

    def __init__(self, array, key: str):
        self.array, self.key = array, key
        with self._cond:
            self._state[key] = [0, False]

    @property
    def shape(self):
        return self.array.shape

    @property
    def dtype(self):
        return self.array.dtype

    def __setitem__(self, index, value):
        state = self._state.get(self.key)
        if state is not None:
            with self._cond:
                if state[1]:
                    return
                state[0] += 1
        try:
            self.array[index] = value
        finally:
            if state is not None:
                with self._cond:
                    state[0] -= 1
                    self._cond.notify_all()

    @classmethod
    def cancel(cls, key: str, timeout: float = 60.0) -> None:
        with cls._cond:
            state = cls._state.get(key)
            if state is not None:
                state[1] = True
                cls._cond.wait_for(lambda: state[0] == 0, timeout)

    @classmethod
    def forget(cls, key: str) -> None:
        with cls._cond:
            cls._state.pop(key, None)


def _compute(stored, progress, nbytes: int) -> None:
    """Run a store graph, reporting written bytes to ``progress`` (local schedulers)."""
    if progress is None:
        stored.compute()
        return
    from dask.callbacks import Callback

    update = progress(nbytes)

    class _Bar(Callback):
        def _start_state(self, dsk, state):
            self.per = nbytes / max(len(dsk), 1)

        def _posttask(self, key, result, dsk, state, worker_id):
            update(int(self.per))

    with _Bar():
        stored.compute()


def _names_of(arr) -> tuple | None:
    """The store's own dim names: Zarr v3 ``dimension_names`` or xarray's v2 attribute."""
    names = getattr(arr.metadata, "dimension_names", None)
    if names is None:
        names = arr.attrs.get("_ARRAY_DIMENSIONS")
    if names is None or any(n is None for n in names):
        return None
    return tuple(str(n) for n in names)


def physical_array(path, op: str = "open_zarr"):
    """The Zarr array at ``path`` (read-only), with ``op:`` errors for what is not one.

    >>> import tempfile, os, zarr
    >>> p = os.path.join(tempfile.mkdtemp(), "raw.zarr")
    >>> physical_array(zarr.create_array(p, shape=(2, 3), dtype="f4").store_path.store.root).shape
    (2, 3)
    """
    zarr = _zarr(op)
    path = Path(path)
    if path.is_file():
        raise NotADirectoryError(
            message(
                op,
                f"{path} is a file, not a Zarr store (a directory)",
                None,
                "Give the store's directory",
            )
        )
    if not path.exists():
        raise FileNotFoundError(message(op, "no Zarr array at", str(path)))
    try:
        return zarr.open_array(store=str(path), mode="r")
    except OSError as err:
        if err.errno is not None:  # the OS refused (permissions, I/O): not a missing array
            raise read_failed(op, path, err) from None
        raise FileNotFoundError(
            message(op, f"no Zarr array at {path}", " ".join(str(err).split()))
        ) from None
    except (ValueError, KeyError, TypeError) as err:  # zarr's errors are ValueErrors
        raise FileNotFoundError(
            message(op, f"no Zarr array at {path}", " ".join(str(err).split()))
        ) from None


def _attribute(doc, arr, path: Path):
    """(axes, layout) from the store's ``axesarray`` attribute, checked against the array
    as ``ax.load`` checks a sidecar: its kind, version, lengths, layout, dtype, shape."""
    try:
        full, layout = parse_doc(doc, VERSION)
        if isinstance(doc.get("dtype"), str) and np.dtype(doc["dtype"]) != arr.dtype:
            raise ValueError(
                f"the array's dtype {arr.dtype} is not the attribute's {np.dtype(doc['dtype'])}"
            )
        if layout is None:
            want, where = full.shape, ""
        else:
            want = tuple(d.length for d in physical_dims(layout, full))
            where = f" in layout {layout} {want}"
        if tuple(arr.shape) != want:
            raise ValueError(
                f"the array's shape {tuple(arr.shape)} is not {fmt_axes(full)}'s{where}"
            )
    except (ValueError, TypeError, AxesError, LayoutError) as err:
        raise LayoutError(
            message(
                "open_zarr",
                f"the axesarray attribute of {path} does not describe its array",
                " ".join(str(err).split()),
                "Delete it if the array is right: "
                f"del zarr.open_array({str(path)!r}, mode='r+').attrs[{FORMAT!r}], "
                "then ax.open_zarr(store, axes='...')",
            )
        ) from None
    return full, layout


def open_zarr(store, axes=None) -> Tensor:
    """Open a Zarr array lazily as a chunked tensor (read-only).

    Axis names come from the store (written by ``to_zarr``, or any writer that sets Zarr
    v3 ``dimension_names``); ``axes`` names the dims of a store without them.

    >>> import axesarray as ax, numpy as np, tempfile, os, zarr
    >>> p = os.path.join(tempfile.mkdtemp(), "raw.zarr")
    >>> z = zarr.create_array(p, shape=(2, 3), dtype="f4", chunks=(1, 3))
    >>> ax.open_zarr(p, axes="N C").chunks
    {'N': (1, 1), 'C': (3,)}
    """
    da = dask_array("open_zarr")
    path = _store_path(store, "open_zarr")
    arr = physical_array(path)
    phys = da.from_zarr(arr)
    doc = arr.attrs.get(FORMAT)
    if doc is not None:
        full, layout = _attribute(doc, arr, path)
        if axes is not None:
            items = spec_items(axes, "open_zarr")
            given = tuple(getattr(a, "name", a) for a in items)
            if given != full.names or any(
                isinstance(a, Axis) and a != full[a.name] for a in items
            ):
                raise AxesError(
                    message(
                        "open_zarr",
                        "axes= differs from the store's axes",
                        f"axes={', '.join(map(str, items))}; store {fmt_axes(full)}",
                        "Leave axes= out, or rename the result",
                    )
                )
        if layout is None:
            return Tensor(full, Chunked(phys))
        return Tensor(full, Chunked(to_logical(phys, full, layout), physical=phys), layout)
    names = _names_of(arr)
    if axes is None:
        if names is None:
            raise AxesError(
                message(
                    "open_zarr",
                    f"{path.name} has no dimension_names, so its axes are unknown",
                    f"shape {arr.shape}",
                    "Name them: ax.open_zarr(store, axes='N C H W')",
                )
            )
        axes = names
    elif names is not None:
        given = spec_items(axes, "open_zarr")
        if tuple(getattr(a, "name", a) for a in given) != names:
            raise AxesError(
                message(
                    "open_zarr",
                    "axes= differs from the store's dimension_names",
                    f"axes={' '.join(map(str, given))}; store {' '.join(names)}",
                    "Leave axes= out, or rename the result",
                )
            )
    return Tensor.from_dask(phys, axes)


def convert(src, dst, axes=None, to_layout=None, roles=None, progress=None) -> None:
    """``axesarray convert IN.zarr OUT.zarr --to NCHW32``: dask does the work, chunk by
    chunk (memory bounded by a few chunks per thread), into a store that appears only
    when complete. An output ending in ``.npy`` is refused (convert to Zarr)."""
    if Path(dst).suffix != ".zarr":
        raise LayoutError(
            message(
                "convert",
                "a Zarr input converts to a Zarr store, whose name must end in .zarr",
                f"got {Path(dst).name}",
                f"Name it {Path(dst).stem}.zarr",
            )
        )
    if Path(src).exists() and Path(dst).exists() and Path(src).resolve() == Path(dst).resolve():
        raise LayoutError(message("convert", "the output path is the input path", str(src)))
    t = open_zarr(src, axes)
    if to_layout is not None:
        t = t.to_layout(to_layout, **(roles or {}))
    elif t.layout is not None:
        t = Tensor(t.axes, Chunked(t.to_dask()))
    _to_zarr(t, dst, None, progress, "convert", Path(src))
