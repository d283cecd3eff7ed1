"""Engines: evaluate a node into fresh storage, or assign it into an existing l-tensor.

``engine="numpy"`` runs the reference engine; ``engine="numba"`` the fused engine
(``executor``; numba itself is imported when a kernel is first compiled or loaded, on a
background thread when the numpy tier answers meanwhile, see ``tiers``). Both allocate
results in the order ``order.result_order`` picks. An expression reading
chunked (dask) arrays goes to ``chunked`` (imported on first use: it imports dask),
whatever the engine option; that option then picks the engine each chunk runs.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..dag.chunked_leaf import _CHUNKED_SEEN, has_chunked
from ..dag.nodes import Leaf, Node
from ..errors import fmt_axes, message
from ..kernels.threads import interrupts_held
from ..options import OPTIONS
from ..storage.devices import host_array
from ..storage.memory import wrap_array
from . import direct, executor, multi, reference, runner, tiers
from .order import allocate_for, result_order

__all__ = [
    "evaluate",
    "assign",
    "to_numpy",
    "explain",
    "assign_many",
    "explain_many",
    "precompile",
    "profile",
    "result_order",
    "warmup",
    "UNBOUND",
    "check_bound",
    "DIRECT",
    "ASSIGNS",
]


_CHUNKED: list = []  # the dask lowering, imported on first use (it imports dask)


def chunked_engine():
    """The dask lowering module (``engine.chunked.lowering``)."""
    if not _CHUNKED:
        from .chunked import lowering as module

        _CHUNKED.append(module)
    return _CHUNKED[0]


# Tags (``autograd.Kind``) of placeholders that have no value now: filled from above (a
# placeholder is bound only during a call of its ``ax.function``). Reading one is an error.
UNBOUND: weakref.WeakSet = weakref.WeakSet()


def check_bound(root: Node, op: str = "evaluate") -> None:
    """Refuse an expression reading a placeholder that has no value now."""
    for p in root.params:
        if type(p) is Leaf and p.tag is not None and p.tag in UNBOUND:
            tag = p.tag
            raise ValueError(
                message(
                    op,
                    f"{tag.label} has no value outside a call of its function",
                    fmt_axes(tag.axes),
                    "Compile with f = ax.function(outputs, inputs=[...]) and call f(values)",
                )
            )


def evaluate(root: Node) -> Node:
    """Compute ``root`` into newly allocated storage (a ``Leaf``); for an expression over
    chunked arrays, the lazy dask result (a ``Chunked`` node)."""
    # The hot path of small evaluations: C-level tests first (``UNBOUND.data`` is the
    # WeakSet's own set: its ``len`` is a Python frame), one lookup for the direct path.
    if UNBOUND.data:
        check_bound(root)
    if _CHUNKED_SEEN[0] and has_chunked(root):
        return chunked_engine().evaluate(root)
    run = DIRECT.get(root.key, _UNSEEN)
    if run is _UNSEEN:
        run = _direct_for(root)
    if run is not None:
        out = run(root)
        if out is not None:
            return out
    if OPTIONS["engine"] == "numba":
        # executor.evaluate's cache hit, inline (one frame less on the hot path)
        plan = _PLANS.get(root.key)
        if plan is not None:
            run = plan.fast  # a runner, or a false marker (``runner.NoRunner``), or None
            if run and run.threshold == OPTIONS["serial_threshold"]:
                _STATS["hits"] += 1
                return run(root.params)
        out = executor.evaluate(root)
        plan = _PLANS.get(root.key)
        if plan is not None and plan.fast and DIRECT.get(root.key) is None:
            DIRECT[root.key] = _kernel_runner(plan.fast, UNBOUND.data)
        return out
    out = allocate_for(root)
    reference.assign(out, root)
    return out


_PLANS, _STATS = executor._PLANS, executor.PLAN_STATS

# Root key -> ``direct.runner_for``'s answer (None: the general path). Bounded. A runner
# checks the unbound placeholders itself, so ``Tensor.eval`` may call one found here
# without this function's frame.
DIRECT: dict = {}
_UNSEEN = object()


def _kernel_runner(fast, unbound: set):
    """``run(root) -> Leaf | None`` for ``Tensor.eval``: a ready plan's generated runner
    (one kernel, or a straight runner of several) while the options it was made under
    hold and no placeholder is unbound (else None: ``evaluate`` decides)."""
    threshold, options, stats = fast.threshold, OPTIONS, _STATS

    def run(root):
        if unbound or options["engine"] != "numba" or options["serial_threshold"] != threshold:
            return None
        stats["hits"] += 1
        return fast(root.params)

    return run


def _direct_for(root: Node):
    if len(DIRECT) >= 4096:
        DIRECT.clear()
    run = DIRECT[root.key] = direct.runner_for(root, UNBOUND.data)
    return run


def assign(dst: Leaf, root: Node) -> None:
    """Write ``root`` into ``dst`` (same shape, castable dtype, already validated)."""
    if UNBOUND.data:  # the WeakSet's own set: its ``len`` is a Python frame (hot path)
        check_bound(root, "assign")
    if _CHUNKED_SEEN[0] and has_chunked(root):  # computed whole first: it may read ``dst``
        data, view = wrap_array(np.ascontiguousarray(chunked_engine().compute(root)))
        root = Leaf(data, view, False)
    if OPTIONS["engine"] == "numba":
        executor.assign(dst, root)
        if type(root) is not Leaf:  # a leaf's copy may go to the repack kernels
            key = (root.key, dst.key)
            plan = _PLANS.get(key)
            known = ASSIGNS.get(key)
            if plan is not None and plan.fast and (known is None or known.fast is not plan.fast):
                if len(ASSIGNS) >= 4096:
                    ASSIGNS.clear()
                ASSIGNS[key] = _assign_runner(plan.fast, UNBOUND.data)
    else:
        reference.assign(dst, root)


# (root key, destination key) -> what ``tensors.tensor.assign`` may call, after the checks
# of its common case, without this module's and ``executor``'s frames: a ready plan's
# runner into the destination, behind the checks of ``_kernel_runner``. Bounded.
ASSIGNS: dict = {}


def _assign_runner(fast, unbound: set):
    """``run(root, dst) -> bool``: ``fast(root.params, dst)`` while the options it was
    made under hold and no placeholder is unbound (else False: ``assign`` decides)."""
    threshold, options, stats = fast.threshold, OPTIONS, _STATS

    def run(root, dst):
        if unbound or options["engine"] != "numba" or options["serial_threshold"] != threshold:
            return False
        stats["hits"] += 1
        fast(root.params, dst)
        return True

    run.fast = fast
    return run


def assign_many(pairs: list) -> None:
    """``dst[...] = root`` for each ``(dst, root)`` in order, as one multi-output kernel
    when they fuse (an optimizer's step: see ``multi``), else one after the other."""
    plain = OPTIONS["engine"] == "numba" and not any(has_chunked(r) for _, r in pairs)
    if UNBOUND:
        for _, root in pairs:
            check_bound(root, "assign")
    if plain and len(pairs) > 1:
        multi.assign_many(pairs, executor.assign)
    else:
        for dst, root in pairs:
            assign(dst, root)


def explain_many(pairs: list):
    """The public ``Plan`` of ``assign_many(pairs)``."""
    return multi.explain_many(pairs, lambda dst, root: explain(root, dst))


def explain(root: Node, dst: Leaf | None = None, names=None):
    """The fused engine's public ``Plan`` for ``root`` (into ``dst`` when given); the
    ``ChunkedPlan`` of an expression over chunked arrays."""
    if has_chunked(root):
        return chunked_engine().explain(root, names)
    return executor.explain(root, dst, names)


def to_numpy(root: Node) -> np.ndarray:
    """The value in logical order: a view for plain leaves, else a computed array."""
    if UNBOUND.data:
        check_bound(root, "numpy")
    if isinstance(root, Leaf):
        return host_array(root.data, root.view, root.writeable)
    if has_chunked(root):
        return chunked_engine().compute(root)
    leaf = evaluate(root)
    return host_array(leaf.data, leaf.view)


def warmup(background: bool = False) -> None:
    """Pay numba's one-time start-up now: import it, load its CPU target's registries and
    the math library (about half a second; later loads of cached kernels take milliseconds).

    With ``background=True`` this runs on the compile thread and returns at once: useful
    in a notebook's first cell or a server's start-up.

    >>> import axesarray as ax
    >>> ax.warmup()
    """
    if background:
        tiers.in_background(_warm)
    else:
        _warm()


def _warm() -> None:
    with interrupts_held():
        from ..kernels import cache, mathlib  # noqa: F401 - numba, the code cache, the math
        from ..storage.numba_private import load_cpu_target

        load_cpu_target()


def profile(root: Node, dst: Leaf | None = None, names=None, repeat: int = 3):
    """The public Plan with each kernel's measured time: the kernels compiled first, then
    the plan run ``repeat`` times (into ``dst`` when given, else into fresh storage), the
    best time of each step kept."""
    import attrs

    plan = precompile(root, dst, names)
    if not plan.kernels:
        return plan
    schedule, _ = executor.schedule_for(root, dst)
    if dst is None:  # the result is a temporary of the schedule: written, then dropped
        times = runner.time_steps(schedule, root.params, None, repeat)
    else:
        times = runner.time_steps(schedule, root.params, dst, repeat)
    kernels = tuple(attrs.evolve(k, time_s=t) for k, t in zip(plan.kernels, times, strict=True))
    return attrs.evolve(plan, kernels=kernels)


def precompile(root: Node, dst: Leaf | None = None, names=None):
    """Compile (or load) every kernel of ``root``'s plan now; returns the public Plan."""
    if dst is not None or type(root) is not Leaf:
        plan, _ = executor.schedule_for(root, dst)
        if plan.device.is_cpu:
            tiers.compile_first(plan, root.params, dst)  # Ctrl-C-safe, as a first run
        tiers.compile_schedule(plan, root.params, dst)  # nothing left on the CPU
    return executor.explain(root, dst, names)
