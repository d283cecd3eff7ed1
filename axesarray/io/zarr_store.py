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

from ..core.axes import Axes, Axis, parse_names
from ..tensors.chunking import dask_array, to_logical
from ..errors import AxesError, LayoutError, fmt_axes, message
from ..dag.chunked_leaf import Chunked
from ..storage.layouts import Layout, bind, physical_dims
from ..tensors.tensor import Tensor

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
    if chunks is not None or t.chunks is None:
        t = t.chunk(chunks or {})
    layout = t.layout
    if layout is not None:
        node = t._node
        if type(node) is not Chunked or node.physical is None:
            t = t.to_layout(layout)
        phys = t._node.physical
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
    except BaseException:
        _Target.cancel(str(tmp))  # kept, so that a chunk finishing later writes nothing
        shutil.rmtree(tmp, ignore_errors=True)
        raise


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
    zarr = _zarr("open_zarr")
    da = dask_array("open_zarr")
    path = _store_path(store, "open_zarr")
    if not is_zarr(path) or not path.exists():
        raise FileNotFoundError(message("open_zarr", "no Zarr array at", str(path)))
    arr = zarr.open_array(store=str(path), mode="r")
    phys = da.from_zarr(arr)
    doc = arr.attrs.get(FORMAT)
    if doc is not None:
        full = Axes(Axis(str(n), int(k)) for n, k in doc["axes"])
        lay = doc.get("layout")
        if axes is not None:
            given = tuple(parse_names(axes, "open_zarr")) if isinstance(axes, str) else axes
            if tuple(given) != full.names:
                raise AxesError(
                    message(
                        "open_zarr",
                        "axes= differs from the store's axes",
                        f"axes={' '.join(given)}; store {fmt_axes(full)}",
                        "Leave axes= out, or rename the result",
                    )
                )
        if lay is None:
            return Tensor(full, Chunked(phys))
        layout = bind(
            Layout(
                lay["order"], [tuple(b) for b in lay["blocks"]], [tuple(r) for r in lay["roles"]]
            ),
            full,
            "open_zarr",
        )
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
        given = tuple(parse_names(axes, "open_zarr")) if isinstance(axes, str) else tuple(axes)
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
    to_zarr(t, dst, progress=progress)
