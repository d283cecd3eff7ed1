"""The public ``Plan``: what the fused engine will do for an expression, without running it.

Owns the public ``Plan`` and ``KernelInfo`` value types (made from an internal
``Schedule``) and the ``AXESARRAY_DEBUG`` output (1: the schedule of each new plan, 2: plus
operands and loop nests, 3: plus generated source, printed by ``dispatch``). Inputs are
named ``t0``, ``t1``... in order of first appearance in the expression.
"""

from __future__ import annotations

import sys

import attrs
import numpy as np

from ..display.reprs import plan_html
from ..kernels.ir import kernel_nodes
from .dispatch import debug_level, source_for, variant
from .schedule import CallStep, KernelStep, Schedule

__all__ = ["Plan", "KernelInfo", "make_plan", "debug_print"]


@attrs.frozen
class KernelInfo:
    """One step of a plan: a fused kernel or a BLAS call."""

    kind: str  # "elementwise", "reduction", "blas" or "numpy" (a numpy call)
    computes: str  # what it is for: the result, a temporary, an assignment...
    writes: str  # "destination", "result" or "temporary #i"
    loops: tuple  # ((length, label), ...) outermost first, after dropping and merging dims
    operands: int  # arrays read
    order_from: str | None  # which input ("t0", "t1"...) set a fresh output's memory order
    cache: str  # "in memory", "on disk", "to compile" (the variant that would run), "blas", "numpy"

    def __str__(self) -> str:
        loops = " x ".join(f"{n}[{label}]" for n, label in self.loops) or "scalar"
        text = f"{self.kind} kernel -> {self.writes}: loops {loops}; reads {self.operands}"
        if self.order_from:
            text += f"; order from {self.order_from}"
        return text + f"; {self.cache}"


@attrs.frozen
class Plan:
    """What evaluating an expression runs: kernels (in order) and temporaries.

    >>> import axesarray as ax
    >>> x = ax.ones((ax.Axis("N", 4), ax.Axis("C", 3)))
    >>> plan = ax.explain(ax.sigmoid(x + 1))
    >>> len(plan.kernels), plan.temporaries
    (1, ())
    """

    kernels: tuple[KernelInfo, ...]
    temporaries: tuple[tuple[int, tuple[int, ...], str, int], ...]  # (#, shape, dtype, bytes)
    cached: bool  # whether this plan was already in the plan cache
    tier: str = "kernels"  # what the next run uses: "kernels", or numpy while they compile

    @property
    def temporary_bytes(self) -> int:
        return sum(t[3] for t in self.temporaries)

    def _repr_html_(self) -> str:
        return plan_html(self)

    def __str__(self) -> str:
        lines = [
            f"Plan: {len(self.kernels)} kernel(s), {len(self.temporaries)} temporary(ies)"
            f" ({self.temporary_bytes} bytes); plan {'cached' if self.cached else 'new'}"
        ]
        if self.kernels and self.tier != "kernels":
            lines.append(f"  next run: {self.tier}")
        for i, k in enumerate(self.kernels):
            lines.append(f"  [{i}] {k}")
        for i, shape, dtype, nbytes in self.temporaries:
            lines.append(f"  temporary #{i}: shape {shape} {dtype} ({nbytes} bytes)")
        return "\n".join(lines)


def _cache_state(step: KernelStep, device) -> str:
    """Where the compiled code of the variant that would run is: memory, disk or nowhere."""
    from ..kernels.cache import state  # imports numba (explain is not a hot path)

    return state(source_for(step, device, variant(step, device))[0])


def make_plan(schedule: Schedule | None, cached: bool, out_names=None, tier="kernels") -> Plan:
    """The public ``Plan`` of a schedule (None: nothing to run); ``out_names`` label the
    result's dims."""
    if schedule is None:
        return Plan((), (), cached, tier)
    kernels = []
    for step in schedule.steps:
        if type(step) is CallStep:
            loops = tuple((n, f"d{d}") for d, n in enumerate(step.out.view.shape))
            writes = _writes(step.out.src, schedule)
            kernels.append(
                KernelInfo("numpy", step.why, writes, loops, len(step.args), None, "numpy")
            )
            continue
        if type(step) is not KernelStep:
            nb, m, k, n = step.sizes
            loops = tuple(
                (v, lb) for v, lb in ((nb, "batch"), (m, "M"), (n, "N"), (k, "K")) if v != 1
            )
            kernels.append(
                KernelInfo(
                    "blas", step.why, _writes(step.out.src, schedule), loops, 2, None, "blas"
                )
            )
            continue
        is_result = step.out.src == schedule.result.src
        labels = []
        n_out = step.out.view.ndim
        for length, group in zip(step.nest.lengths, step.nest.groups, strict=True):
            names = [
                (out_names[d] if out_names and is_result else f"d{d}")
                if d < n_out
                else f"r{d - n_out}"
                for d in group
            ]
            labels.append((length, " ".join(names)))
        red = any(n.kind == "reduce" for n in kernel_nodes(step.tree))
        kernels.append(
            KernelInfo(
                "reduction" if red else "elementwise",
                step.why,
                _writes(step.out.src, schedule)
                if not step.extra
                else f"{1 + len(step.extra)} destinations",
                tuple(labels),
                len(step.leaves()),
                None if step.order_from is None else f"input t{step.order_from}",
                _cache_state(step, schedule.device),
            )
        )
    result = schedule.result.src
    temps = tuple(
        (t, shape, str(dtype), int(np.prod(shape)) * dtype.itemsize)
        for t, (shape, dtype, _) in enumerate(schedule.temps)
        if result != ("temp", t)
    )
    return Plan(tuple(kernels), temps, cached, tier)


def _writes(src: tuple, schedule: Schedule) -> str:
    if src == ("dst",):
        return "destination"
    if src[0] == "param":  # a multi-output kernel writes its destinations (engine.multi)
        return "destinations"
    if src == schedule.result.src:
        return "result"
    return f"temporary #{src[1]}"


def debug_print(schedule: Schedule, names=None) -> None:
    """Print a new schedule to stderr at ``AXESARRAY_DEBUG`` >= 1."""
    level = debug_level()
    if level <= 0:
        return
    plan = make_plan(schedule, False, names)
    print(f"[axesarray] {plan}", file=sys.stderr)
    if level >= 2:
        for i, step in enumerate(schedule.steps):
            if type(step) is KernelStep:
                print(f"[axesarray] kernel {i}: {step.why}; nest {step.nest}", file=sys.stderr)
