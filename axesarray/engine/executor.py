"""The fused engine: plan once per expression structure, then run compiled kernels.

Owns the plan cache (keyed by the root's structural key, the device and the destination's
view key: one dict lookup per call, no tree walk) and running a ``Schedule``: temporaries,
BLAS steps, kernel steps, and the alias fallback for the final kernel.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from functools import partial
from types import FunctionType

import numpy as np

from ..storage.devices import CPU, device_of
from ..errors import message
from ..dag.nodes import Leaf, Node
from ..options import OPTIONS
from ..storage.memory import SMALL, allocate
from . import reference
from .alias import overlap_test, overlaps, via_temp
from .binder import binder, fresh_runner, into_runner
from .dispatch import debug_level, run_kernel, variant
from .order import allocate_for
from .explain import debug_print, make_plan
from .planner import build_schedule
from .rewrite import CPU_REWRITES, REWRITES, rewrite
from .routes import ROUTES, try_copy
from .schedule import KernelStep, Schedule
from .tiers import describe_tier, use_numpy

__all__ = ["evaluate", "assign", "explain", "schedule_for", "run_schedule", "PLAN_STATS"]

_PLANS: OrderedDict = OrderedDict()
_PLANS_MAX = 512
_plans_lock = threading.Lock()
PLAN_STATS = {"hits": 0, "misses": 0}


def _device_error(devices) -> ValueError:
    return ValueError(
        message(
            "evaluate",
            "the operands are on different devices",
            ", ".join(sorted(str(d) for d in devices)),
            "Move them first: t.to('cuda') or t.to('cpu')",
        )
    )


def _device(params, dst: Leaf | None):
    device = CPU if dst is None else device_of(dst.data)
    for p in params:
        if type(p) is Leaf and type(p.data) is not np.ndarray:
            return device_of(p.data)
    return device


def schedule_for(root: Node, dst: Leaf | None) -> tuple[Schedule, bool]:
    """The cached schedule for ``dst[...] = root`` (or a fresh result) and whether it was
    cached. Kernels receive ``root.params`` in order."""
    # Keys name the device kind of every leaf whose storage is not a numpy array, so the
    # key alone tells the device: a hit costs one lookup.
    key = root.key if dst is None else (root.key, dst.key)
    plan = _PLANS.get(key)
    if plan is not None:
        PLAN_STATS["hits"] += 1
        return plan, True
    return _new_plan(root, dst, key), False


def _new_plan(root: Node, dst: Leaf | None, key) -> Schedule:
    params = root.params
    found = {device_of(p.data) for p in params if type(p) is Leaf}
    if dst is not None:
        found.add(device_of(dst.data))
    if len(found) > 1:
        raise _device_error(found)
    device = _device(params, dst)
    target = None if dst is None else (dst.view, dst.dtype)
    rules = CPU_REWRITES if device.is_cpu else REWRITES
    plan = build_schedule(rewrite(root, rules), params, target, device.has_blas)
    plan.device = device
    if debug_level() > 0:
        debug_print(plan)
    with _plans_lock:
        PLAN_STATS["misses"] += 1
        _PLANS[key] = plan
        if len(_PLANS) > _PLANS_MAX:
            _PLANS.popitem(last=False)
    return plan


_NO_TEMPS: dict = {}


def run_schedule(plan: Schedule, params, dst: Leaf | None) -> dict:
    """Execute a schedule; returns the temps (the result is one of them when ``dst`` is
    None)."""
    device = plan.device
    steps = plan.steps
    if (  # the common small case: one kernel into the destination, no overlap
        dst is not None
        and not plan.temps
        and len(steps) == 1
        and type(steps[0]) is KernelStep
        and not overlaps(steps[0], params, dst)
    ):
        run_kernel(steps[0], params, _NO_TEMPS, dst, device)
        plan.ready = True
        return _NO_TEMPS
    temps = {
        t: device.empty(math.prod(shape), dtype) for t, (shape, dtype, _) in enumerate(plan.temps)
    }
    last = len(steps) - 1
    for i, step in enumerate(steps):
        if type(step) is not KernelStep:
            ROUTES[type(step)](step, params, temps, dst, device)
        elif i == last and dst is not None and overlaps(step, params, dst):
            first, copy = via_temp(step)
            temps["alias"] = device.empty(first.out.view.size, first.out.dtype)
            run_kernel(first, params, temps, dst, device)
            run_kernel(copy, params, temps, dst, device)
        else:
            run_kernel(step, params, temps, dst, device)
    plan.ready = True
    return temps


def explain(root: Node, dst: Leaf | None = None, names=None):
    """The public ``Plan`` for evaluating ``root`` (into ``dst`` when given); ``names``
    label the result's dims."""
    if dst is None and type(root) is Leaf:
        return make_plan(None, True, tier="none")  # already an l-tensor: nothing runs
    plan, cached = schedule_for(root, dst)
    return make_plan(plan, cached, names, describe_tier(plan, root))


def _numpy_tier(plan: Schedule, root: Node, dst: Leaf | None) -> Leaf | None:
    """``dst[...] = root`` (or a fresh result) on the reference engine when the tiers say
    so: the result leaf, or None when the kernels must run."""
    if not use_numpy(plan, root, dst):
        return None
    out = allocate_for(root) if dst is None else dst
    try:
        reference.assign(out, root)  # computes everything before it writes
    except (ValueError, TypeError, ArithmeticError):
        # numpy refuses what a kernel computes (an integer to a negative power): give the
        # kernels' answer, as every later call will.
        plan.compiling.result()
        return None
    return out


def evaluate(root: Node, tiered: bool = True) -> Leaf:
    """Compute ``root`` into fresh storage laid out like its dominant input (``tiered``:
    the numpy tier may answer while the kernels compile; the ``tiered`` option too)."""
    plan = _PLANS.get(root.key)  # schedule_for's hit, inline: this is the hot path
    if plan is None:
        plan = _new_plan(root, None, root.key)
    else:
        PLAN_STATS["hits"] += 1
        run = plan.fast
        if run is not None and run.threshold == OPTIONS["serial_threshold"]:
            return run(root.params)
    if not plan.ready and tiered:
        out = _numpy_tier(plan, root, None)
        if out is not None:
            return out
    params = root.params
    temps = run_schedule(plan, params, None)
    res = plan.result
    out = Leaf(temps[res.src[1]], res.view)
    plan.fast = _fast_runner(plan, params, out)
    return out


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


def _fast_runner(plan: Schedule, params, out: Leaf):
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
    run = fresh_runner(found[0], found[1], alloc, n, dtype, Leaf.fresh, view, out.key)
    run.threshold = OPTIONS["serial_threshold"]
    return run


def _into_runner(plan: Schedule, params, dst: Leaf):
    """For a ready schedule of one CPU kernel writing the destination: ``run(params, dst)``
    that checks aliasing (an overlap takes the general path, through a temporary) and
    calls the kernel. None for other schedules."""
    if plan.temps:
        return None
    found = _single_kernel(plan, params, _NO_TEMPS, dst)
    if found is None:
        return None
    step, call = found
    general = partial(run_schedule, plan)
    run = into_runner(step, call, overlap_test(step), general)
    run.threshold = OPTIONS["serial_threshold"]
    return run


def assign(dst: Leaf, root: Node, tiered: bool = True) -> None:
    """``dst[...] = root``: same shape, castable dtype (validated by the caller)."""
    if root is dst or (type(root) is Leaf and try_copy(dst, root)):
        return
    key = (root.key, dst.key)
    plan = _PLANS.get(key)  # schedule_for's hit, inline: this is the hot path
    if plan is None:
        plan = _new_plan(root, dst, key)
    else:
        PLAN_STATS["hits"] += 1
        run = plan.fast
        if run is not None and run.threshold == OPTIONS["serial_threshold"]:
            run(root.params, dst)
            return
    if not plan.ready and tiered and _numpy_tier(plan, root, dst) is not None:
        return
    params = root.params
    run_schedule(plan, params, dst)
    plan.fast = _into_runner(plan, params, dst)
