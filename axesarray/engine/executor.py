"""The fused engine: plan once per expression structure, then run compiled kernels.

Owns the plan cache (keyed by the root's structural key, the device and the destination's
view key: one dict lookup per call, no tree walk) and running a ``Schedule``: temporaries,
BLAS steps, kernel steps, and the alias fallback for the final kernel.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..dag.nodes import Leaf, Node
from ..errors import message
from ..options import OPTIONS
from ..storage.devices import CPU, device_of
from .dispatch import debug_level
from .explain import debug_print, make_plan, step_names
from .order import allocate_for
from .planner import build_schedule
from .rewrite import CPU_REWRITES, REWRITES, rewrite
from .routes import try_copy
from .runner import NoRunner, run_schedule
from .runner import fast_runner as _fast_runner
from .runner import into_runner as _into_runner
from .schedule import Schedule
from .tier_eval import tier_assign
from .tiers import describe_tier, start_compile, use_numpy, wait_compile

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


def _new_plan(root: Node, dst: Leaf | None, key, seen: list | None = None) -> Schedule:
    """Plan ``dst[...] = root`` and cache it; ``seen`` (explain) receives the rewritten
    DAG and which node each step computes (``build_schedule``'s ``record``)."""
    params = root.params
    found = {device_of(p.data) for p in params if type(p) is Leaf}
    if dst is not None:
        found.add(device_of(dst.data))
    if len(found) > 1:
        raise _device_error(found)
    device = _device(params, dst)
    target = None if dst is None else (dst.view, dst.dtype)
    rules = CPU_REWRITES if device.is_cpu else REWRITES
    dag = rewrite(root, rules, target)
    record = None if seen is None else {}
    plan = build_schedule(dag, params, target, device.has_blas, record=record, stores=device.is_cpu)
    if seen is not None:
        seen.append((dag, record))
    plan.device = device
    if debug_level() > 0:
        debug_print(plan)
    with _plans_lock:
        PLAN_STATS["misses"] += 1
        _PLANS[key] = plan
        if len(_PLANS) > _PLANS_MAX:
            _PLANS.popitem(last=False)
    return plan


def explain(root: Node, dst: Leaf | None = None, names=None):
    """The public ``Plan`` for evaluating ``root`` (into ``dst`` when given); ``names``
    label the result's dims."""
    if dst is None and type(root) is Leaf:
        return make_plan(None, True, tier="none")  # already an l-tensor: nothing runs
    seen: list = []
    key = root.key if dst is None else (root.key, dst.key)
    if key in _PLANS:
        plan, cached = schedule_for(root, dst)
    else:  # planned here, recording which node each step computes (planned once)
        plan, cached = _new_plan(root, dst, key, seen), False
    dims = step_names(*seen[0], names) if seen else _step_dims(plan, root, dst, names)
    return make_plan(plan, cached, names, describe_tier(plan, root), dims)


def _step_dims(plan: Schedule, root: Node, dst: Leaf | None, names) -> dict | None:
    """Names of every step's dims of a cached plan: the schedule planned again (uncached,
    as ``_new_plan`` does) recording which node each step computes; a cached plan holds no
    nodes."""
    device = plan.device
    rules = CPU_REWRITES if device.is_cpu else REWRITES
    target = None if dst is None else (dst.view, dst.dtype)
    dag = rewrite(root, rules, target)
    record: dict = {}
    again = build_schedule(
        dag, root.params, target, device.has_blas, record=record, stores=device.is_cpu
    )
    if len(again.steps) != len(plan.steps):  # pragma: no cover - planning is deterministic
        return None
    return step_names(dag, record, names)


def numpy_tier(plan: Schedule, root: Node, dst: Leaf | None) -> Leaf | None:
    """``dst[...] = root`` (or a fresh result) on the reference engine when the tiers say
    so: the result leaf, or None when the kernels must run. The compile starts after the
    answer (``tiers.start_compile``)."""
    if not use_numpy(plan, root, dst):
        return None
    out = allocate_for(root) if dst is None else dst
    try:
        tier_assign(out, root, plan)  # computes everything it can fail on before it writes
    except (ValueError, TypeError, ArithmeticError):
        # numpy refuses what a kernel computes (an integer to a negative power): give the
        # kernels' answer, as every later call will (after a compile under way).
        wait_compile(plan)
        return None
    start_compile(plan, root.params, dst)
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
        if run and run.threshold == OPTIONS["serial_threshold"]:
            return run(root.params)
    if not plan.ready and tiered:
        out = numpy_tier(plan, root, None)
        if out is not None:
            return out
    params = root.params
    temps = run_schedule(plan, params, None)
    res = plan.result
    out = Leaf(temps[res.src[1]], res.view)
    if _look_again(plan):
        plan.fast = _found(plan, _fast_runner(plan, params, out, True))
    return out


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
        if run and run.threshold == OPTIONS["serial_threshold"]:
            run(root.params, dst)
            return
    if not plan.ready and tiered and numpy_tier(plan, root, dst) is not None:
        return
    params = root.params
    run_schedule(plan, params, dst)
    if _look_again(plan):
        plan.fast = _found(plan, _into_runner(plan, params, dst, True))


def _look_again(plan: Schedule) -> bool:
    """Whether to look for the plan's generated runner: none looked for yet under this
    ``serial_threshold``, or one to build on this run (a plan without one is marked, so
    it is looked for once)."""
    run = plan.fast
    if run is None or run.threshold != OPTIONS["serial_threshold"]:
        return True
    return not run and run.later


def _found(plan: Schedule, run):
    """``plan.fast`` after looking: the runner, its marker, or (none found) a mark, made
    only once every kernel is compiled: a runner may exist from then on."""
    if run is not None:
        return run
    return NoRunner() if plan.ready else None
