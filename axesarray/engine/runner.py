"""The one runner: a planned ``Schedule`` run over parameters given by argument.

Everything that executes a schedule goes through ``run_schedule``: eager evaluation and
assignment (``executor``), the stages of an ``ax.function``, a backward pass and an
optimizer step (``program``), and the chunks of a dask task (``chunk_run``, serial
variants). A ``Bound`` schedule is a schedule with its parameters, some fixed, some filled
per call (an input, a program's intermediate value, a dask block): the call passes their
storage and gets new ``Leaf`` objects over it in the parameter list, so no shared node is
ever mutated and concurrent calls of one program run in parallel (DESIGN §13).
"""

from __future__ import annotations

import math
import time
from functools import partial
from types import FunctionType

import numpy as np

from ..core.strided import span
from ..dag.nodes import Leaf
from ..options import OPTIONS
from ..storage.memory import SMALL, allocate
from .alias import overlap_test, overlaps, shares_storage, via_temp
from .binder import binder
from .binder import fresh_runner as _fresh
from .binder import into_runner as _into
from .dispatch import kernel_for, run_kernel, variant
from .routes import ROUTES
from .schedule import KernelStep, Schedule

__all__ = ["run_schedule", "time_steps", "Bound", "NO_TEMPS", "kernel_calls"]

NO_TEMPS: dict = {}


def run_schedule(
    plan: Schedule, params, dst: Leaf | None, serial: bool = False, fresh_dst: bool = False
) -> dict:
    """Execute ``plan`` over ``params`` (into ``dst`` when given); returns the temps (the
    result is one of them when ``dst`` is None). ``serial``: every kernel's serial variant
    (a dask task: dask already runs one task per core). ``fresh_dst``: ``dst`` is new
    storage no operand reads (no alias check)."""
    device = plan.device
    steps = plan.steps
    if plan.dst_early and dst is not None and not fresh_dst and shares_storage(params, dst):
        return _via_scratch(plan, params, dst, serial)
    if (  # the common small case: one kernel into the destination, no overlap
        dst is not None
        and not serial
        and not plan.temps
        and len(steps) == 1
        and type(steps[0]) is KernelStep
        and (fresh_dst or not overlaps(steps[0], params, dst))
    ):
        run_kernel(steps[0], params, NO_TEMPS, dst, device)
        plan.ready = True
        return NO_TEMPS
    temps = {
        t: device.empty(math.prod(shape), dtype) for t, (shape, dtype, _) in enumerate(plan.temps)
    }
    last = len(steps) - 1
    for i, step in enumerate(steps):
        if type(step) is not KernelStep:
            ROUTES[type(step)](step, params, temps, dst, device)
        elif i == last and dst is not None and not fresh_dst and overlaps(step, params, dst):
            first, copy = via_temp(step)
            temps["alias"] = device.empty(first.out.view.size, first.out.dtype)
            run_kernel(first, params, temps, dst, device)
            run_kernel(copy, params, temps, dst, device)
        elif serial:
            fn = step.compiled.kernels.get((device.type, "serial"))
            if fn is None:
                fn = kernel_for(step, device, "serial")
            fn(*binder(step)(params, temps, dst))
        else:
            run_kernel(step, params, temps, dst, device)
    if not serial:
        plan.ready = True
    return temps


def _via_scratch(plan: Schedule, params, dst: Leaf, serial: bool) -> dict:
    """Run ``plan`` into scratch storage laid out like ``dst``, then copy the destination's
    elements: an input that shares ``dst``'s memory is read intact by every step."""
    device = plan.device
    end = span(dst.view)
    scratch = Leaf(device.empty(0 if end is None else end[1], dst.dtype), dst.view)
    temps = run_schedule(plan, params, scratch, serial, fresh_dst=True)
    if end is not None:
        device.array_view(dst.data, dst.view)[...] = device.array_view(scratch.data, dst.view)
    return temps


def time_steps(plan: Schedule, params, dst: Leaf | None, repeat: int) -> list[float]:
    """Seconds each step of a (compiled) schedule takes, the best of ``repeat`` runs of the
    whole schedule (temporaries written as in a real run; the destination too)."""
    device = plan.device
    best = [math.inf] * len(plan.steps)
    last = len(plan.steps) - 1
    for _ in range(repeat):
        temps = {
            t: device.empty(math.prod(shape), dtype)
            for t, (shape, dtype, _) in enumerate(plan.temps)
        }
        for i, step in enumerate(plan.steps):
            start = time.perf_counter()
            if type(step) is not KernelStep:
                ROUTES[type(step)](step, params, temps, dst, device)
            elif i == last and dst is not None and overlaps(step, params, dst):
                first, copy = via_temp(step)
                temps["alias"] = device.empty(first.out.view.size, first.out.dtype)
                run_kernel(first, params, temps, dst, device)
                run_kernel(copy, params, temps, dst, device)
            else:
                run_kernel(step, params, temps, dst, device)
            if not device.is_cpu:  # kernels launch asynchronously: wait for this one
                device.to_host(device.empty(1, np.dtype("uint8")))
            best[i] = min(best[i], time.perf_counter() - start)
    return best


# --- straight paths for a ready one-kernel schedule ----------------------------------------


def _single_kernel(plan: Schedule, params, temps: dict, dst: Leaf | None):
    """The one CPU kernel step of a ready schedule and its machine code, called without
    numba's argument typing (the plan key fixes every argument's numba type: dtypes,
    storage kinds and flags are in the leaf keys), or None for other schedules or a
    variant that depends on the output's alignment."""
    if not (plan.ready and plan.device.is_cpu and len(plan.steps) == 1):
        return None
    step = plan.steps[0]
    if type(step) is not KernelStep:
        return None
    kind = variant(step, plan.device)
    if kind == "stream":  # would change with the output's alignment
        return None
    fn = step.compiled.kernels.get(("cpu", kind))  # a Kernel, or its dispatcher once ready
    if fn is None or not getattr(fn, "ready", True):
        return None
    from ..storage.numba_private import entry_point  # numba is loaded: the kernel ran

    target = getattr(fn, "fn", fn)
    call = entry_point(target, binder(step)(params, temps, dst))
    if call is None and type(target) is FunctionType:
        call = target  # a parallel variant: Python running the compiled parts on threads
    return None if call is None else (step, call)


def fast_runner(plan: Schedule, params, out: Leaf):
    """For a ready schedule of one CPU kernel writing a fresh result (the common small
    evaluation): ``run(params) -> Leaf``, generated with its kernel, arguments, allocation
    and result key fixed (``binder.fresh_runner``): the next evaluation of the same
    structure skips the general path. None for other schedules. ``run.threshold`` records
    the ``serial_threshold`` it chose its variant under."""
    if len(plan.temps) != 1:
        return None
    found = _single_kernel(plan, params, {0: out.data}, None)
    if found is None:
        return None
    (shape, dtype, _), view = plan.temps[0], plan.result.view
    n = math.prod(shape)
    # Small buffers keep numpy's alignment (as ``allocate`` does), without its frame.
    alloc = np.empty if n * dtype.itemsize < SMALL else allocate
    run = _fresh(found[0], found[1], alloc, n, dtype, Leaf.fresh, view, out.key)
    run.threshold = OPTIONS["serial_threshold"]
    return run


def into_runner(plan: Schedule, params, dst: Leaf):
    """For a ready schedule of one CPU kernel writing the destination: ``run(params, dst)``
    that checks aliasing (an overlap takes the general path, through a temporary) and
    calls the kernel. None for other schedules."""
    if plan.temps:
        return None
    found = _single_kernel(plan, params, NO_TEMPS, dst)
    if found is None:
        return None
    step, call = found
    general = partial(run_schedule, plan)
    run = _into(step, call, overlap_test(step), general)
    run.threshold = OPTIONS["serial_threshold"]
    return run


class Bound:
    """A schedule and its parameters: ``fixed`` ones (constants, variables, leaves the
    program reads as they are) and per-call ones, given to ``params(storages)`` as the
    storage of each *source* (an input, a computed value, a block) in order. Each per-call
    parameter is a view of its source: the same view and key as when planned, this call's
    storage."""

    __slots__ = ("plan", "fixed", "slots", "fast", "tried")

    def __init__(self, plan: Schedule, params: tuple, source_of):
        """``source_of(param) -> int | None``: which source a parameter views (None:
        fixed)."""
        self.plan = plan
        slots = []
        fixed = list(params)
        for i, p in enumerate(params):
            k = source_of(p) if type(p) is Leaf else None
            if k is not None:
                slots.append((i, k, p.view, p.key))
                fixed[i] = None  # not kept alive: filled per call
        self.fixed = fixed
        self.slots = tuple(slots)
        self.fast = None  # the straight path of a ready one-kernel schedule (see below)
        self.tried = False  # whether ``fast`` was looked for (once the plan is ready)

    def params(self, storages) -> list:
        """The parameter list of one call: ``storages[k]`` is source ``k``'s 1-D storage."""
        params = self.fixed.copy()
        fresh = Leaf.fresh
        for i, k, view, key in self.slots:
            params[i] = fresh(storages[k], view, key)
        return params

    def _straight(self):
        run = self.fast
        if run is not None and run.threshold == OPTIONS["serial_threshold"]:
            return run
        return None

    def evaluate(self, storages, serial: bool = False) -> Leaf:
        """Run into a fresh result: its leaf."""
        params = self.params(storages)
        if not serial:
            run = self._straight()
            if run is not None:
                return run(params)
        plan = self.plan
        temps = run_schedule(plan, params, None, serial)
        res = plan.result
        out = Leaf(temps[res.src[1]], res.view)
        if not serial and not self.tried and plan.ready:
            self.tried = True
            self.fast = fast_runner(plan, params, out)
        return out

    def assign(self, storages, dst: Leaf, serial: bool = False, fresh_dst: bool = False):
        """Run into ``dst``."""
        params = self.params(storages)
        if not serial:
            run = self._straight()
            if run is not None:
                run(params, dst)
                return
        run_schedule(self.plan, params, dst, serial, fresh_dst)
        if not serial and not self.tried and self.plan.ready:
            self.tried = True
            self.fast = into_runner(self.plan, params, dst)


def kernel_calls(bound: Bound, storages, dst: Leaf | None = None) -> list:
    """Zero-argument calls of each compiled kernel of a ready bound schedule, arguments
    bound once (benchmarks: the kernels' own time, what no call can avoid)."""
    plan = bound.plan
    device = plan.device
    params = bound.params(storages)
    temps = {
        t: device.empty(math.prod(shape), dtype) for t, (shape, dtype, _) in enumerate(plan.temps)
    }
    calls = []
    for step in plan.steps:
        if type(step) is KernelStep:
            fn = kernel_for(step, device, variant(step, device))
            fn = fn.fn if getattr(fn, "ready", False) else fn
            args = binder(step)(params, temps, dst)
            calls.append(lambda fn=fn, args=args: fn(*args))
    return calls
