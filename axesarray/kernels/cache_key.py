"""The kernel cache's keys, directory and listing, without importing numba.

A key hashes a kernel's generated source with what its machine code depends on beyond it
(numba, llvmlite and numpy versions, the Python ABI, the CPU). Reading the versions from
the installed packages' metadata, not from the imported modules, lets the compile thread
ask whether a kernel is on disk (``on_disk``) before numba is imported: that import, and
numba's caching modules (~0.2 s more), would make an exiting script wait for them.
``kernels.cache`` keys and lists with these functions.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

__all__ = ["cache_dir", "environment", "key", "indexed", "on_disk"]


def cache_dir() -> Path:
    """Where generated kernels and numba's machine code are kept: ``$AXESARRAY_CACHE_DIR``
    when set, else the user's cache directory. It is only used when private (see
    docs/kernel-cache.md); this function creates and checks nothing.

    >>> from axesarray.kernels import cache_key
    >>> cache_key.cache_dir().is_absolute()
    True
    """
    env = os.environ.get("AXESARRAY_CACHE_DIR")
    if env:
        return Path(os.path.abspath(os.path.expanduser(env)))
    import platformdirs

    return Path(platformdirs.user_cache_dir("axesarray")) / "kernels"


_cpu: list[str] = []
_installed: dict = {}  # package -> its installed version, read once


def _version(name: str) -> str:
    """The version of package ``name``: the imported module's, else the installed one's
    (numba not imported yet: the same string, without importing it)."""
    version = getattr(sys.modules.get(name), "__version__", None)
    if version is None:
        version = _installed.get(name)
        if version is None:
            version = _installed[name] = metadata.version(name)
    return version


def environment() -> str:
    """What compiled machine code depends on besides the source: a change of any of it
    must miss the cache (numba checks only its own version and the CPU, llvmlite's bitcode
    may not parse in another LLVM, numba's numpy typing follows numpy's version). The CPU
    is numba's setting (``NUMBA_CPU_NAME``) or the host's, as LLVM names it."""
    if not _cpu:
        name = os.environ.get("NUMBA_CPU_NAME")
        if not name:
            import llvmlite.binding as llvm  # the LLVM library only, not numba

            name = llvm.get_host_cpu_name()
        _cpu.append(name)
    return (
        f"numba {_version('numba')}; llvmlite {_version('llvmlite')}; numpy {_version('numpy')}"
        f"; {sys.implementation.cache_tag}; {platform.machine()} {_cpu[0]}"
    )


def key(source: str) -> str:
    """The cache key of a kernel's generated source in this environment."""
    text = environment() + "\n" + source
    return hashlib.sha256(text.encode()).hexdigest()[:24]


_listing: dict = {}  # directory -> (its mtime, the kernel keys with an index file there)


def indexed(directory: Path) -> frozenset:
    """``k_<key>`` of every kernel numba's cache in ``directory`` has an index for, listed
    again only when the directory changed (``explain`` asks once per kernel: a listing each
    time made explaining a long program quadratic)."""
    try:
        mtime = directory.stat().st_mtime_ns
    except OSError:
        return frozenset()
    hit = _listing.get(directory)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    try:
        with os.scandir(directory) as it:
            names = frozenset(e.name.split(".", 1)[0] for e in it if e.name.endswith(".nbi"))
    except OSError:
        names = frozenset()
    if time.time_ns() - mtime > 50_000_000:  # else a file may land in the same clock tick
        _listing[directory] = (mtime, names)
    return names


def on_disk(source: str) -> bool:
    """Whether numba's cache in the cache directory has an index for this kernel (machine
    code for some argument types: for others it is compiled when loaded). Nothing is
    checked or created here; loading the kernel (``kernels.cache``) checks the directory."""
    names = indexed(cache_dir() / "__pycache__")
    if not names:  # an empty cache: no key to compute
        return False
    try:
        return f"k_{key(source)}" in names
    except (ImportError, OSError, ValueError):  # no package metadata, no LLVM library: the
        return False  # caller compiles as if it were not there (the load finds it if it is)
