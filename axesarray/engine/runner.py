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

from ..dag.nodes import Leaf
from .alias import overlaps, via_temp
from .binder import binder
from .dispatch import kernel_for, run_kernel
from .routes import ROUTES
from .schedule import KernelStep, Schedule

__all__ = ["run_schedule", "Bound", "NO_TEMPS"]

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


class Bound:
    """A schedule and its parameters: ``fixed`` ones (constants, variables, leaves the
    program reads as they are) and per-call ones, given to ``params(storages)`` as the
    storage of each *source* (an input, a computed value, a block) in order. Each per-call
    parameter is a view of its source: the same view and key as when planned, this call's
    storage."""

    __slots__ = ("plan", "fixed", "slots")

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

    def params(self, storages) -> list:
        """The parameter list of one call: ``storages[k]`` is source ``k``'s 1-D storage."""
        params = self.fixed.copy()
        fresh = Leaf.fresh
        for i, k, view, key in self.slots:
            params[i] = fresh(storages[k], view, key)
        return params

    def evaluate(self, storages, serial: bool = False) -> Leaf:
        """Run into a fresh result: its leaf."""
        plan = self.plan
        temps = run_schedule(plan, self.params(storages), None, serial)
        res = plan.result
        return Leaf(temps[res.src[1]], res.view)

    def assign(self, storages, dst: Leaf, serial: bool = False, fresh_dst: bool = False):
        """Run into ``dst``."""
        run_schedule(self.plan, self.params(storages), dst, serial, fresh_dst)
