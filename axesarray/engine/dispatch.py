"""Dispatch: which variant of a kernel runs, its generated source, and calling it.

CPU variants: ``serial`` (below ``serial_threshold`` elements, or where the estimated
time saved on threads is less than a launch costs: ``parallel_pays``), ``parallel``
(ranges of the outer loop on threads, ``kernels/threads.py``) and ``stream`` (a big map
kernel whose output rows are contiguous: streaming stores); CUDA has one. A variant is
generated and compiled only when a run needs it. numba itself is imported on the first
compile or load (``kernels.cache``), not with this module: planning and the numpy tier
run without it.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from .._version import __version__
from ..kernels.cpu import can_stream, cpu_source
from ..kernels.cuda import cuda_source
from ..kernels.threads import interrupts_held, num_threads
from ..options import OPTIONS
from ..storage.devices import Device
from .binder import binder, lowered
from .cost import step_seconds, threads_pay
from .schedule import KernelStep

__all__ = [
    "variant",
    "parallel_pays",
    "source_for",
    "kernel_for",
    "run_kernel",
    "debug_level",
]

# Generated files name the hash of the code they inline (the math library and the SIMD
# intrinsics), so editing it invalidates numba's disk cache of every kernel.
_KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"
_MATHLIB = hashlib.sha256(
    b"".join(
        (_KERNELS_DIR / name).read_bytes()
        for name in ("mathlib.py", "atomics.py", "repack/simd.py", "repack/plan.py")
    )
).hexdigest()[:12]
# Outputs at least this big are written with streaming (non-temporal) stores when their
# rows are contiguous: they would not stay in cache anyway, and skipping the read of each
# destination line saves a third of the memory traffic.
STREAM_MIN_BYTES = 8 << 20
STREAM_MIN_ROW = 1024


def debug_level() -> int:
    """``AXESARRAY_DEBUG``: 1 prints each new schedule, 2 adds loop nests, 3 the source."""
    import os

    try:
        return int(os.environ.get("AXESARRAY_DEBUG", "0"))
    except ValueError:
        return 0


def _streamable(step: KernelStep) -> bool:
    c = step.compiled
    if c.streamable is None:
        nest = step.nest
        c.streamable = (
            can_stream(lowered(step))
            and step.size * step.out.dtype.itemsize >= STREAM_MIN_BYTES
            and (nest.rank == 1 or nest.lengths[-1] >= STREAM_MIN_ROW)
        )
    return c.streamable


def parallel_pays(step: KernelStep) -> bool:
    """Whether the step's kernel is estimated faster on threads (``cost.threads_pay``: the
    time ``num_threads()`` cores save over one exceeds ``cost.LAUNCH_SECONDS``). The
    estimate is made once per step; the thread count is read on each call
    (``numba.set_num_threads`` changes it)."""
    threads = num_threads()
    if threads == 1:
        return False
    c = step.compiled
    if c.seconds is None:
        c.seconds = step_seconds(step)
    return threads_pay(c.seconds, threads)


def variant(step: KernelStep, device: Device, out=None) -> str:
    """Which variant runs: "cuda", "serial" (below ``serial_threshold`` elements, or when
    threads do not pay: ``parallel_pays``), "parallel", or "stream" (a big output with
    contiguous rows, when its storage ``out`` is element-aligned)."""
    if not device.is_cpu:
        return "cuda"
    if step.size < OPTIONS["serial_threshold"] or not parallel_pays(step):
        return "serial"
    if _streamable(step) and (out is None or out.flags.aligned):
        return "stream"
    return "parallel"


def source_for(
    step: KernelStep, device: Device, variant_name: str, alias: tuple = ()
) -> tuple[str, str]:
    """Generated module source and its entry point for a step's variant (``alias``: the
    parameters it reads in place through the destination, CPU only)."""
    if device.is_cpu:
        return cpu_source(lowered(step, alias), variant_name, __version__, _MATHLIB), "kernel"
    simulated = device.backend == "simulator"
    return cuda_source(lowered(step), __version__, _MATHLIB, simulated), "launch"


def kernel_for(step: KernelStep, device: Device, variant_name: str, alias: tuple = ()):
    """The compiled kernel of a step's variant (from the kernel cache); ``alias``: its
    in-place variant reading those parameters through the destination."""
    kernels = step.compiled.kernels
    key = (device.type, variant_name, alias) if alias else (device.type, variant_name)
    fn = kernels.get(key)
    if fn is None:
        source, entry = source_for(step, device, variant_name, alias)
        if debug_level() >= 3:
            print(f"[axesarray] generated source:\n{source}", file=sys.stderr)
        with interrupts_held():  # imports numba: the first compile pays it
            from ..kernels.cache import get_kernel

        fn = kernels[key] = get_kernel(source, entry)
    return fn


def run_kernel(step: KernelStep, params, temps: dict, dst, device: Device) -> None:
    args = binder(step)(params, temps, dst)
    if device.is_cpu and step.size < OPTIONS["serial_threshold"]:
        variant_name = "serial"
    else:
        variant_name = variant(step, device, args[0])
    kernels = step.compiled.kernels
    fn = kernels.get((device.type, variant_name))
    if fn is None:
        fn = kernel_for(step, device, variant_name)
    elif getattr(fn, "ready", False):
        # compiled and checked: call numba directly
        kernels[(device.type, variant_name)] = fn = fn.fn
    fn(*args)
