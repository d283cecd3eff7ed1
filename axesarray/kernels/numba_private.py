"""Every private numba / numba-cuda name the project uses, behind one door.

numba's public API does not cover a few things the kernels need: LLVM helpers for
intrinsics (``cgutils``), turning reference counting off inside the repack tile loops,
reading whether a dispatcher loaded from its disk cache, loading the CPU target's
registries ahead of time, and the CUDA simulator's backing arrays. Each use is a function
here; ``tests/test_numba_private.py`` calls every one of them, so an upgrade that renames
or removes one fails that test loudly instead of breaking a kernel somewhere else.

Nothing here imports ``numba.cuda`` at module import time (the simulator must be chosen
before it loads).
"""

from __future__ import annotations

import numba
from numba.core import cgutils as _cgutils

__all__ = [
    "NO_NRT",
    "alloca_once",
    "for_range",
    "cache_hits",
    "load_cpu_target",
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


def load_cpu_target() -> None:
    """Load the CPU target's typing and lowering registries now (numba does it lazily on
    the first compile or cache load, which costs about a second)."""
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()


def cuda_simulated() -> bool:
    """Whether numba runs CUDA kernels in its simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    return bool(numba.config.ENABLE_CUDASIM)


def is_simulator_array(data) -> bool:
    """Whether ``data`` is a device array of numba's CUDA simulator."""
    return type(data).__module__.startswith("numba.cuda.simulator")


def simulator_pointer(data) -> int:
    """Address of a simulator device array's first element (its host backing array)."""
    return data._ary.__array_interface__["data"][0]
