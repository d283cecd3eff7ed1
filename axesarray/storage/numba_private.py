"""Every private numba / numba-cuda name the project uses, behind one door.

numba's public API does not cover a few things the kernels need: LLVM helpers for
intrinsics (``cgutils``), turning reference counting off inside the repack tile loops,
reading whether a dispatcher loaded from its disk cache, calling a compiled signature
without the dispatcher's argument typing, giving a dispatcher a disk cache
in a directory of our choosing, loading the CPU target's registries ahead of time, and
the CUDA simulator's backing arrays. Each use is a function
here; ``tests/test_numba_private.py`` calls every one of them, so an upgrade that renames
or removes one fails that test loudly instead of breaking a kernel somewhere else.

Nothing here imports ``numba.cuda`` at module import time (the simulator must be chosen
before it loads).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys

import numba
from numba.core import caching as _caching
from numba.core import cgutils as _cgutils
from numba.core import serialize as _serialize

__all__ = [
    "NO_NRT",
    "alloca_once",
    "for_range",
    "cache_hits",
    "DirectoryCache",
    "attach_cache",
    "load_cpu_target",
    "entry_point",
    "compiled_overload",
    "call_inlined",
    "target_features",
    "add_function_attribute",
    "cuda_simulated",
    "simulator_pointer",
    "is_simulator_array",
]

# ``njit`` option: compile without numba's reference counting (NRT). The repack tile loops
# allocate nothing, and NRT's per-call bookkeeping made them 6x slower (measured).
NO_NRT = {"_nrt": False}


def alloca_once(builder, ty, size):
    """A stack slot of ``size`` values of LLVM type ``ty`` in the entry block."""
    return _cgutils.alloca_once(builder, ty, size=size)


def for_range(builder, count):
    """Context manager emitting an LLVM loop ``for i in range(count)`` (``.index``)."""
    return _cgutils.for_range(builder, count)


def cache_hits(fn) -> int:
    """How many of a CPU dispatcher's compiled signatures came from numba's disk cache
    (0 for anything else, e.g. the Python launcher of a CUDA kernel)."""
    from numba.core.registry import CPUDispatcher

    if not isinstance(fn, CPUDispatcher):
        return 0
    return sum(fn._cache_hits.values())


class _Locator(_caching._CacheLocator):
    """numba's cache locator for one function: the directory and the source stamp are given,
    not derived from the function's file (numba's own locators insist on a writable
    directory, so a read-only cache would never be read, and stamp the file's contents)."""

    def __init__(self, py_func, directory: str, stamp: str) -> None:
        self._py_file = py_func.__code__.co_filename  # numba's warnings name it
        self._lineno = py_func.__code__.co_firstlineno
        self._directory = directory
        self._stamp = stamp

    def ensure_cache_path(self) -> None:
        os.makedirs(self._directory, mode=0o700, exist_ok=True)

    def get_cache_path(self) -> str:
        return self._directory

    def get_source_stamp(self) -> str:
        return self._stamp

    def get_disambiguator(self) -> str:
        return str(self._lineno)


class _Impl(_caching.CompileResultCacheImpl):
    """numba's serializer of compile results, with the locator given and each data file
    carrying a SHA-256 of its payload: a flipped bit in the machine code would otherwise
    reach LLVM's object loader, which aborts the process (measured) rather than raising."""

    def __init__(self, py_func, locator: _Locator) -> None:
        self._lineno = py_func.__code__.co_firstlineno
        self._locator = locator
        module = os.path.splitext(os.path.basename(py_func.__code__.co_filename))[0]
        fullname = f"{module}.{py_func.__qualname__}"
        self._filename_base = self.get_filename_base(fullname, getattr(sys, "abiflags", ""))

    def reduce(self, cres):
        blob = _serialize.dumps(super().reduce(cres))
        return hashlib.sha256(blob).digest(), blob

    def rebuild(self, target_context, payload):
        digest, blob = payload
        if hashlib.sha256(blob).digest() != digest:
            raise pickle.UnpicklingError("cache data does not match its SHA-256")
        return super().rebuild(target_context, pickle.loads(blob))


class DirectoryCache(_caching.FunctionCache):
    """numba's disk cache of one function (an index ``<prefix>.nbi`` and data files
    ``<prefix>.<n>.nbc``) kept in ``directory`` and valid while ``stamp`` is unchanged.
    Subclasses may override ``load_overload`` / ``save_overload`` (numba's cache API) to
    add policy around them."""

    def __init__(self, py_func, directory: str, stamp: str) -> None:
        # numba's Cache builds its serializer as ``self._impl_class(py_func)``.
        locator = _Locator(py_func, directory, stamp)
        self._impl_class = functools.partial(_Impl, locator=locator)
        super().__init__(py_func)

    @property
    def prefix(self) -> str:
        """File names of this function's index and data files start with this."""
        return self._impl.filename_base


def attach_cache(fn, cache_class, *args) -> bool:
    """Give a CPU dispatcher the disk cache ``cache_class(fn.py_func, *args)`` (what
    ``njit(cache=True)`` does with numba's own locators). False, and nothing done, for
    anything that is not a CPU dispatcher (a CUDA launcher)."""
    from numba.core.registry import CPUDispatcher

    if not isinstance(fn, CPUDispatcher):
        return False
    fn._cache = cache_class(fn.py_func, *args)
    return True


def entry_point(fn, args: tuple):
    """The machine code a CPU dispatcher runs for arguments typed like ``args``, as a
    callable that skips the dispatcher's typing of each argument (the caller guarantees
    later arguments have the same numba types); None when that signature is not compiled
    or ``fn`` is not a CPU dispatcher."""
    from numba.core.registry import CPUDispatcher

    if not isinstance(fn, CPUDispatcher):
        return None
    compiled = fn.overloads.get(tuple(numba.typeof(a) for a in args))
    return None if compiled is None else compiled.entry_point


def load_cpu_target() -> None:
    """Load the CPU target's typing and lowering registries now (numba does it lazily on
    the first compile or cache load, which costs about a second)."""
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()


def compiled_overload(disp, argtypes: tuple):
    """The compile result of CPU dispatcher ``disp`` for ``argtypes`` (compiled or loaded
    from its disk cache now if need be), for ``call_inlined``."""
    disp.compile(argtypes)
    return disp.overloads[argtypes]


def call_inlined(context, builder, cres, sig, args):
    """In an intrinsic's codegen: call the compiled function ``cres`` (its machine-level
    code linked in, not recompiled) with LLVM's ``alwaysinline`` on the call, and return
    its value. Only for functions that raise nothing: the status is not read."""
    context.add_linking_libs([cres.library])
    fn = context.declare_function(builder.module, cres.fndesc)
    call = context.call_conv.call_function
    _, out = call(builder, fn, sig.return_type, sig.args, args, attrs=("alwaysinline",))
    return out


def target_features(context) -> str:
    """The LLVM feature string numba's CPU target machine compiles for (``"+avx2,...``"),
    from a lowering ``context``: the host's, or ``NUMBA_CPU_FEATURES`` when set."""
    return context.codegen()._tm_features


def add_function_attribute(builder, text: str) -> None:
    """In an intrinsic's codegen: add the LLVM string attribute ``text`` (``'"key"="value"'``)
    to the function being lowered. llvmlite's attribute set accepts only keyword attributes
    from a fixed list, so the set's own ``add`` is bypassed; it prints members as written."""
    set.add(builder.function.attributes, text)


def cuda_simulated() -> bool:
    """Whether numba runs CUDA kernels in its simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    return bool(numba.config.ENABLE_CUDASIM)


def is_simulator_array(data) -> bool:
    """Whether ``data`` is a device array of numba's CUDA simulator."""
    return type(data).__module__.startswith("numba.cuda.simulator")


def simulator_pointer(data) -> int:
    """Address of a simulator device array's first element (its host backing array)."""
    return data._ary.__array_interface__["data"][0]
