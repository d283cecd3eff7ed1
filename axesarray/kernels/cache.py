"""Kernel cache: generated source -> compiled function, in memory and on disk.

The key is a hash of the generated source, which encodes exactly what the compile depends on
(structure, dtypes, loop rank, stride classes, block sizes, library and mathlib versions).
The source is written to ``<cache dir>/k_<hash>.py`` and imported from there, so numba's
``cache=True`` can persist the machine code beside it: a new process loads it instead of
compiling. A corrupt or stale entry (unreadable file, broken numba index) is deleted and
recompiled, never a crash. The cache dir is ``$AXESARRAY_CACHE_DIR`` or the user cache dir.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path

from .numba_private import cache_hits

__all__ = ["cache_dir", "get_kernel", "state", "STATS", "clear_memory"]

STATS = {"compiled": 0, "disk_hits": 0, "memory_hits": 0, "recovered": 0}
_memory: dict[str, object] = {}
_lock = threading.RLock()
_MODULE_PREFIX = "axesarray_kernels"


def cache_dir() -> Path:
    """Where generated kernels and numba's machine code are kept."""
    env = os.environ.get("AXESARRAY_CACHE_DIR")
    if env:
        path = Path(env)
    else:
        import platformdirs

        path = Path(platformdirs.user_cache_dir("axesarray")) / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _purge(path: Path) -> None:
    """Delete a kernel's source and numba's cache files for it."""
    stem = path.stem
    for f in glob.glob(str(path.parent / "__pycache__" / f"{stem}.*")):
        with contextlib.suppress(OSError):
            os.remove(f)
    with contextlib.suppress(OSError):
        path.unlink()


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # numba's cache locator needs the module registered before it runs.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Kernel:
    """A compiled kernel: calls the numba dispatcher; the first call is guarded so that a
    broken disk cache is purged and recompiled instead of raising."""

    __slots__ = ("key", "source", "path", "fn", "ready", "entry", "__weakref__")

    def __init__(self, key: str, source: str, path: Path, fn, entry: str) -> None:
        self.key = key
        self.source = source
        self.path = path
        self.fn = fn
        self.ready = False
        self.entry = entry

    def __call__(self, *args):
        if self.ready:
            return self.fn(*args)
        with _lock:
            try:
                result = self.fn(*args)
            except Exception as first:  # noqa: BLE001 - any cache fault: rebuild once
                if not _is_cache_fault(first):
                    raise
                STATS["recovered"] += 1
                _purge(self.path)
                self.fn = _load(self.key, self.source, self.path, self.entry, fresh=True)
                result = self.fn(*args)
            hits = cache_hits(self.fn)
            STATS["disk_hits" if hits else "compiled"] += 1
            self.ready = True
            return result


def _is_cache_fault(exc: Exception) -> bool:
    """Errors that come from reading numba's cache files rather than from the kernel."""
    import pickle

    return isinstance(
        exc,
        (
            EOFError,
            pickle.UnpicklingError,
            OSError,
            ValueError,
            TypeError,
            AttributeError,
            ImportError,
            KeyError,
        ),
    )


def _load(key: str, source: str, path: Path, entry: str, fresh: bool = False):
    name = f"{_MODULE_PREFIX}_{key}"
    try:
        current = path.read_text() if path.exists() else None
    except (OSError, UnicodeDecodeError):
        current = None
    if current != source or fresh:
        if current is not None and current != source:
            STATS["recovered"] += 1
            _purge(path)
        _write_atomic(path, source)
    try:
        module = _import(path, name)
    except Exception:  # noqa: BLE001 - a stale or broken file: rewrite and import again
        STATS["recovered"] += 1
        _purge(path)
        _write_atomic(path, source)
        module = _import(path, name)
    return getattr(module, entry)


def _key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def state(source: str) -> str:
    """'in memory' (compiled in this process), 'on disk' (numba's cache holds machine code
    for it) or 'to compile'."""
    key = _key(source)
    kernel = _memory.get(key)
    if kernel is not None and kernel.ready:
        return "in memory"
    path = cache_dir() / f"k_{key}.py"
    if glob.glob(str(path.parent / "__pycache__" / f"k_{key}.*.nbi")):
        return "on disk"
    return "to compile"


def get_kernel(source: str, entry: str = "kernel") -> Kernel:
    """The compiled kernel for ``source`` (a module defining ``entry``), cached."""
    key = _key(source)
    hit = _memory.get(key)
    if hit is not None:
        STATS["memory_hits"] += 1
        return hit
    with _lock:
        hit = _memory.get(key)
        if hit is not None:
            return hit
        path = cache_dir() / f"k_{key}.py"
        kernel = Kernel(key, source, path, _load(key, source, path, entry), entry)
        _memory[key] = kernel
        return kernel


def clear_memory() -> None:
    """Forget in-memory kernels (the disk cache stays): for tests of the disk cache."""
    with _lock:
        _memory.clear()
