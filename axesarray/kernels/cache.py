"""Kernel cache: generated source -> compiled function, in memory and on disk.

The key hashes the generated source (structure, dtypes, loop rank, stride classes, block
sizes, library and mathlib versions) together with what the machine code depends on
beyond it (numba, llvmlite, numpy, the Python ABI, the CPU: ``cache_key``). The module
is executed from the source text held in memory, never imported from the cache
directory, so no bytecode is written or read there; a copy is kept as
``<cache dir>/k_<key>.py`` for people to read. numba's disk cache of the machine code
lives in ``<cache dir>/__pycache__``, attached by this module
(``numba_private.DirectoryCache``); the kernel templates must not ask for ``cache=True``,
which would let numba pick a directory that nothing here checks.

numba unpickles what it loads, so the cache is code: a directory that another user can
write is refused, the way ssh treats its keys. See docs/kernel-cache.md.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import pickle
import stat
import sys
import tempfile
import threading
import types
import warnings
from pathlib import Path

import numba

from ..errors import message
from ..storage.numba_private import DirectoryCache, attach_cache, cache_hits
from .cache_key import cache_dir
from .cache_key import indexed as _indexed
from .cache_key import key as _key

__all__ = ["cache_dir", "get_kernel", "state", "STATS", "clear_memory", "Kernel"]

STATS = {"compiled": 0, "disk_hits": 0, "memory_hits": 0, "recovered": 0}
_memory: dict[str, Kernel] = {}
_lock = threading.RLock()  # held while a kernel is loaded or first called
# Taken by numba's cache hooks, which run under numba's compiler lock (possibly in a thread
# that does not hold ``_lock``): it must never be held while taking another lock.
_event_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # a lock held by another thread of the parent (the compile thread) is never released
    # in a child, where only the forking thread lives on
    global _lock, _event_lock
    _lock, _event_lock = threading.RLock(), threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)

_warned: set[tuple[str, str]] = set()
_MODULE_PREFIX = "axesarray_kernels"
_OP = "kernel cache"


# --- where, and whether it is safe ------------------------------------------------------------


class _Disk:
    """A checked cache directory: ``writable`` (new kernels are saved) and ``shared``
    (others may enter ``__pycache__``, so each file is checked before numba reads it)."""

    __slots__ = ("path", "pycache", "writable", "shared")

    def __init__(self, path: Path, writable: bool, shared: bool) -> None:
        self.path = path
        self.pycache = path / "__pycache__"
        self.writable = writable
        self.shared = shared


class _Unusable(Exception):
    def __init__(self, fact: str, values: str) -> None:
        super().__init__(fact)
        self.fact, self.values = fact, values


_disks: dict[Path, _Disk | None] = {}


def _disk() -> _Disk | None:
    """The checked cache directory, or None (kernels stay in memory), decided once per
    directory per process; an unusable one is named in one warning."""
    path = cache_dir()
    try:
        return _disks[path]
    except KeyError:
        pass
    with _lock:
        if path not in _disks:
            try:
                _disks[path] = _check_dir(path)
            except _Unusable as bad:
                _warn(
                    path,
                    "unusable",
                    f"not using the cache directory: {bad.fact}",
                    bad.values,
                    "Kernels are compiled in memory for this process; point "
                    "AXESARRAY_CACHE_DIR at a directory only you can write "
                    "(see docs/kernel-cache.md)",
                )
                _disks[path] = None
        return _disks[path]


def _make_private(path: Path) -> None:
    """Create the missing directories of ``path``, each readable by its owner only."""
    missing = []
    while not os.path.lexists(path) and path != path.parent:
        missing.append(path)
        path = path.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile: checked like any other
            os.mkdir(d, 0o700)


def _trusted_owner(st: os.stat_result) -> bool:
    return st.st_uid in (os.geteuid(), 0)


def _unsafe(st: os.stat_result) -> tuple[str, str] | None:
    """Why a directory or file we load from is unsafe (the fact, a detail), or None: it must
    be owned by us (or root) and writable by no one else, as ssh requires of ``~/.ssh``."""
    if not _trusted_owner(st):
        return "owned by another user", f"uid {st.st_uid}"
    if st.st_mode & 0o022:
        return "writable by group or others", f"mode {stat.S_IMODE(st.st_mode):o}"
    return None


def _check_dir(path: Path) -> _Disk:
    """Create ``path`` privately if missing, then check it, the directories above it and
    its ``__pycache__``. Raises ``_Unusable``."""
    try:
        _make_private(path)
        real = Path(os.path.realpath(path))  # from here on, no symlink can be swapped
        st = os.stat(real)
    except OSError as exc:
        raise _Unusable(f"cannot create it ({exc.strerror})", str(path)) from None
    if not stat.S_ISDIR(st.st_mode):
        raise _Unusable("it is not a directory", str(path))
    why = _unsafe(st)
    if why:
        raise _Unusable(f"it is {why[0]}", f"{path}, {why[1]}")
    # Whoever can rename an entry of a directory above can swap the whole tree. Group
    # write is allowed there (with user-private groups, umask 002 makes ~/.cache 775).
    for parent in real.parents:
        pst = os.stat(parent)
        if not _trusted_owner(pst):
            fact = "a directory above it is owned by another user"
            raise _Unusable(fact, f"{parent}, uid {pst.st_uid}")
        if pst.st_mode & 0o002 and not pst.st_mode & stat.S_ISVTX:
            fact = "a directory above it is writable by others"
            raise _Unusable(fact, f"{parent}, mode {stat.S_IMODE(pst.st_mode):o}")
    if not os.access(real, os.R_OK | os.X_OK):
        raise _Unusable("it is not readable", str(path))
    writable = os.access(real, os.W_OK | os.X_OK)
    pycache = real / "__pycache__"
    if writable:
        try:
            os.mkdir(pycache, 0o700)
        except FileExistsError:
            pass
        except OSError:  # access() can say yes where the server says no (NFS)
            writable = False
    try:
        st = os.lstat(pycache)
    except FileNotFoundError:  # read-only and empty: nothing to load, nowhere to save
        return _Disk(real, writable=False, shared=False)
    if not stat.S_ISDIR(st.st_mode):
        raise _Unusable("its __pycache__ is not a directory", str(pycache))
    why = _unsafe(st)
    if why:
        raise _Unusable(f"its __pycache__ is {why[0]}", f"{pycache}, {why[1]}")
    writable = writable and os.access(pycache, os.W_OK | os.X_OK)
    return _Disk(real, writable, shared=bool(st.st_mode & 0o011))


def _warn(path: Path, kind: str, fact: str, values: str, hint: str) -> None:
    with _event_lock:
        if (str(path), kind) in _warned:
            return
        _warned.add((str(path), kind))
    warnings.warn(message(_OP, fact, values, hint), RuntimeWarning, stacklevel=2)


def _cannot_write(disk: _Disk, exc: OSError) -> None:
    disk.writable = False
    with _event_lock:
        _warned.add((str(disk.path), "read-only"))  # this warning says it
    _warn(
        disk.path,
        "write",
        f"cannot write to the cache directory ({exc.strerror})",
        str(disk.path),
        "New kernels are kept in memory for this process",
    )


# --- numba's disk cache, with our checks around it ----------------------------------------------

# What numba raises reading a damaged index or data file (measured: truncated, random and
# bit-flipped .nbi/.nbc files): pickle's errors, and what unpickling garbage raises on the
# way (a wrong class name, bad UTF-8, runaway recursion). Missing files are misses, not
# errors; a flipped bit in machine code is caught by the data file's SHA-256 (an
# UnpicklingError). Only numba's reading of our files runs under this guard, never a
# kernel, so a genuine error of a kernel call is not mistaken for damage.
_DAMAGE = (
    pickle.UnpicklingError,
    EOFError,
    OSError,
    ImportError,
    AttributeError,
    ValueError,  # UnicodeDecodeError among them
    KeyError,
    IndexError,
    TypeError,
    RecursionError,
    RuntimeError,  # llvmlite: "LLVM bitcode parsing error"
)


class _KernelCache(DirectoryCache):
    """numba's disk cache of one kernel: loads only files we may trust, treats a file that
    fails to load as a miss (purged when we can), saves only to a writable directory."""

    def __init__(self, py_func, disk: _Disk, key: str) -> None:
        super().__init__(py_func, str(disk.pycache), key)
        self._disk = disk

    def _files(self) -> list[os.DirEntry]:
        try:
            with os.scandir(self._disk.pycache) as it:
                return [e for e in it if e.name.startswith(self.prefix + ".")]
        except OSError:  # removed meanwhile: nothing to check or purge
            return []

    def _purge(self) -> None:
        if self._disk.writable:
            for entry in self._files():
                with contextlib.suppress(OSError):  # gone meanwhile, or not a file
                    os.remove(entry.path)

    def _untrusted_file(self) -> tuple[str, str] | None:
        for entry in self._files():
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                return "a file is not a regular file", entry.path
            why = _unsafe(st)
            if why:
                return f"a file is {why[0]}", f"{entry.path}, {why[1]}"
        return None

    def load_overload(self, sig, target_context):
        if self._disk.shared:  # others can reach the files: check each, as ssh does
            why = self._untrusted_file()
            if why:
                fact = f"not loading a cached kernel: {why[0]}"
                _warn(self._disk.path, "file", fact, why[1], "It is compiled again")
                self._purge()
                return None
        try:
            return super().load_overload(sig, target_context)
        except _DAMAGE:
            with _event_lock:
                STATS["recovered"] += 1
            self._purge()  # else numba's save would read the damaged index again
            return None

    def save_overload(self, sig, data):
        if not self._disk.writable:
            _warn(
                self._disk.path,
                "read-only",
                "the cache directory is read-only",
                str(self._disk.path),
                "Kernels found there are used; new ones are kept in memory for this process",
            )
            return
        try:
            super().save_overload(sig, data)
        except OSError as exc:
            _cannot_write(self._disk, exc)
            return
        if self._disk.shared:  # numba wrote the files under the umask: none writable by others
            for entry in self._files():
                with contextlib.suppress(OSError):  # purged meanwhile by another process
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if mode & 0o022:
                        os.chmod(entry.path, stat.S_IMODE(mode) & ~0o022)


# --- loading --------------------------------------------------------------------------------


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _keep_source(disk: _Disk, path: Path, source: str) -> None:
    """Keep the readable copy ``k_<key>.py`` of the source (never executed from there)."""
    try:
        current = path.read_text()
    except (OSError, UnicodeDecodeError):
        current = None
    if current == source:
        return
    if current is not None:  # a damaged copy
        with _event_lock:
            STATS["recovered"] += 1
    try:
        _write_atomic(path, source)
    except OSError as exc:
        _cannot_write(disk, exc)


def _load(key: str, source: str, entry: str, disk: _Disk | None):
    """Execute the module from ``source`` (held in memory) and return its ``entry`` and
    the function numba compiles (``part`` where the module defines one: ``entry`` then
    runs it on threads; else ``entry``), with numba's disk cache attached to it when
    there is a usable directory, and the module's ``part_args`` (``part``'s arguments for
    a call of ``entry``) or None."""
    name = f"{_MODULE_PREFIX}_{key}"
    if disk is None:
        filename = f"<axesarray kernel {key}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    else:
        path = disk.path / f"k_{key}.py"
        filename = str(path)
        if disk.writable:
            _keep_source(disk, path, source)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module  # numba resolves the kernel's globals through it
    exec(compile(source, filename, "exec"), module.__dict__)
    fn = getattr(module, entry)
    jit = getattr(module, "part", fn)
    if disk is not None:
        attach_cache(jit, _KernelCache, disk, key)
    return fn, jit, getattr(module, "part_args", None)


class Kernel:
    """A compiled kernel: calls the numba dispatcher (or the module's entry that runs it
    on threads, ``jit`` being the dispatcher). ``ready`` once a first call went through
    (then the engine calls ``fn`` directly); that first call records whether the machine
    code came from the disk cache or was compiled."""

    __slots__ = ("key", "fn", "jit", "part_args", "ready", "__weakref__")

    def __init__(self, key: str, fn, jit=None, part_args=None) -> None:
        self.key = key
        self.fn = fn
        self.jit = fn if jit is None else jit
        self.part_args = part_args
        self.ready = False

    def __call__(self, *args):
        if self.ready:
            return self.fn(*args)
        with _lock:
            result = self.fn(*args)
            self._count()
            return result

    def warm(self, args: tuple) -> None:
        """Compile (or load from disk) the machine code for arguments like ``args`` without
        running the kernel (only their types are read): for background compiles."""
        if self.ready:
            return
        with _lock:
            if not self.ready:
                if self.part_args is not None:  # part(jlo, jhi, ..., *args)
                    args = self.part_args(*args)
                self.jit.compile(tuple(numba.typeof(a) for a in args))
                self._count()

    def _count(self) -> None:
        if not self.ready:
            STATS["disk_hits" if cache_hits(self.jit) else "compiled"] += 1
            self.ready = True


def state(source: str) -> str:
    """'in memory' (compiled in this process), 'on disk' (numba's cache holds machine code
    for it) or 'to compile'."""
    key = _key(source)
    kernel = _memory.get(key)
    if kernel is not None and kernel.ready:
        return "in memory"
    disk = _disk()
    if disk is not None and f"k_{key}" in _indexed(disk.pycache):
        return "on disk"
    return "to compile"


def get_kernel(source: str, entry: str = "kernel") -> Kernel:
    """The compiled kernel for ``source`` (a module defining ``entry``), cached.

    >>> src = "from numba import njit\\n@njit\\ndef kernel(x):\\n    return x + 1\\n"
    >>> get_kernel(src)(41)
    42
    """
    key = _key(source)
    hit = _memory.get(key)
    if hit is not None:
        STATS["memory_hits"] += 1
        return hit
    if "cache=True" in source:
        raise ValueError(
            message(
                _OP,
                "the generated source asks numba for cache=True",
                key,
                "This module attaches numba's disk cache itself, in a checked directory; "
                "drop cache=True from the kernel template",
            )
        )
    with _lock:
        hit = _memory.get(key)
        if hit is not None:
            return hit
        kernel = Kernel(key, *_load(key, source, entry, _disk()))
        _memory[key] = kernel
        return kernel


def clear_memory() -> None:
    """Forget in-memory kernels (the disk cache stays): for tests of the disk cache."""
    with _lock:
        _memory.clear()
