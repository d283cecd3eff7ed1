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

from ..dag.text import dim_names
from ..display.htmlparts import nbytes_text
from ..display.planviews import estimated_bytes, estimated_work, loops_text, plan_html
from ..kernels.ir import kernel_nodes
from ..kernels.threads import interrupts_held
from .cost import step_estimate
from .dispatch import debug_level, source_for, variant
from .schedule import CallStep, KernelStep, Schedule

__all__ = ["Plan", "KernelInfo", "make_plan", "debug_print", "step_names"]


@attrs.frozen
class KernelInfo:
    """One step of a plan: a fused kernel or a BLAS call.

    ``arg_bytes`` estimates the bytes it moves: every argument read once (a broadcast one
    counted without its repeats) and the output written once. ``work`` counts its element
    operations (loop iterations times the ops of its body; 2*M*N*K for a BLAS call).
    """

    # "elementwise", "reduction", "blas", "numpy" (a numpy call) or "scan" (a running sum
    # or product by a compiled loop, ``kernels.scans``)
    kind: str
    computes: str  # what it is for: the result, a temporary, an assignment...
    writes: str  # "destination", "result" or "temporary #i"
    loops: tuple  # ((length, label), ...) outermost first, after dropping and merging dims
    operands: int  # arrays read
    order_from: str | None  # which input ("t0", "t1"...) set a fresh output's memory order
    # "in memory", "on disk", "to compile" (the variant that would run), "blas", "numpy", "scan"
    cache: str
    arg_bytes: int = 0  # bytes of its arguments: each read once, the output written once
    work: int = 0  # element operations
    time_s: float | None = None  # measured seconds per run (``ax.explain(e, timed=True)``)
    # the planner's cost model (engine.cost): bytes read and written (each distinct input
    # element once, the output once) and work in flop-equivalents (an exp counts 4)
    est_bytes: int = 0
    est_flops: int = 0

    def __str__(self) -> str:
        loops = loops_text(self.loops, " x ")
        text = f"{self.kind} kernel -> {self.writes}: loops {loops}; reads {self.operands}"
        if self.order_from:
            text += f"; order from {self.order_from}"
        text += f"; {self.cache}; ~{nbytes_text(estimated_bytes(self))}"
        text += f", {estimated_work(self):,} ops"
        if self.time_s is not None:
            text += f"; {self.time_s * 1e3:.3g} ms"
        return text


@attrs.frozen(repr=False)
class Plan:
    """What evaluating an expression runs: kernels (in order) and temporaries (numbered in
    the order the kernels write them). ``repr`` and ``print`` show the same readable text;
    Jupyter shows a table.

    >>> import axesarray as ax
    >>> x = ax.ones((ax.Axis("N", 4), ax.Axis("C", 3)))
    >>> plan = ax.explain(ax.sigmoid(x + 1))
    >>> len(plan.kernels), plan.temporaries
    (1, ())
    >>> ax.explain(x.sum("C")).kernels[0].loops
    ((4, 'N'), (3, 'C'))
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

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        n, nt = len(self.kernels), len(self.temporaries)
        lines = [
            f"Plan: {n} kernel{'' if n == 1 else 's'}, {nt} temporar{'y' if nt == 1 else 'ies'}"
            f" ({self.temporary_bytes} bytes); plan {'cached' if self.cached else 'new'}"
        ]
        if self.kernels and self.tier != "kernels":
            lines.append(f"  next run: {self.tier}")
        for i, k in enumerate(self.kernels):
            lines.append(f"  [{i}] {k}")
        for i, shape, dtype, size in self.temporaries:
            lines.append(f"  temporary #{i}: shape {shape} {dtype} ({size} bytes)")
        return "\n".join(lines)


def _cache_state(step: KernelStep, device) -> str:
    """Where the compiled code of the variant that would run is: memory, disk or nowhere."""
    with interrupts_held():  # imports numba (explain is not a hot path)
        from ..kernels.cache import state

    return state(source_for(step, device, variant(step, device))[0])


def _view_bytes(view, dtype) -> int:
    """Bytes of the distinct elements a view reads (a broadcast dim counted once)."""
    n = 1
    for length, stride in zip(view.shape, view.strides, strict=True):
        if stride != 0:
            n *= length
    return n * np.dtype(dtype).itemsize


def _temp_numbers(schedule: Schedule) -> dict:
    """Old temp index -> its number in the order the kernels first write it."""
    order: dict = {}
    for step in schedule.steps:
        outs = [step.out] + [o for o, _ in getattr(step, "extra", ())]
        for out in outs:
            if out.src[0] == "temp" and out.src[1] not in order:
                order[out.src[1]] = len(order)
    for t in range(len(schedule.temps)):
        order.setdefault(t, len(order))
    return order


def make_plan(
    schedule: Schedule | None, cached: bool, out_names=None, tier="kernels", step_dims=None
) -> Plan:
    """The public ``Plan`` of a schedule (None: nothing to run); ``out_names`` label the
    result's dims, ``step_dims`` (``step_names``) the dims of every step."""
    if schedule is None:
        return Plan((), (), cached, tier)
    step_dims = step_dims or {}
    numbers = _temp_numbers(schedule)
    kernels = []
    for i, step in enumerate(schedule.steps):
        out_dims, red_dims, blas_dims = step_dims.get(i, (None, None, None))
        writes = _writes(step.out.src, schedule, numbers)
        if type(step) is CallStep:
            loops = tuple((n, _name(out_dims, d, "d")) for d, n in enumerate(step.out.view.shape))
            moved = sum(_view_bytes(a.view, a.dtype) for a in step.args)
            moved += _view_bytes(step.out.view, step.out.dtype)
            kind = "numpy" if step.scan is None else "scan"  # a compiled loop (kernels.scans)
            kernels.append(
                KernelInfo(
                    kind,
                    step.why,
                    writes,
                    loops,
                    len(step.args),
                    None,
                    kind,
                    moved,
                    int(np.prod(step.out.view.shape)),
                    **_estimate(step),
                )
            )
            continue
        if type(step) is not KernelStep:
            nb, m, k, n = step.sizes
            labels = blas_dims if blas_dims is not None else ("batch", "M", "N", "K")
            loops = tuple((v, lb) for v, lb in zip((nb, m, n, k), labels, strict=True) if v != 1)
            item = step.out.dtype.itemsize
            moved = (nb * m * k + nb * k * n + nb * m * n) * item
            kernels.append(
                KernelInfo(
                    "blas",
                    step.why,
                    writes,
                    loops,
                    2,
                    None,
                    "blas",
                    moved,
                    2 * nb * m * n * k,
                    **_estimate(step),
                )
            )
            continue
        is_result = step.out.src == schedule.result.src
        if out_dims is None and out_names and is_result:
            out_dims = tuple(out_names)
        labels = []
        n_out = step.out.view.ndim
        for length, group in zip(step.nest.lengths, step.nest.groups, strict=True):
            names = [
                _name(out_dims, d, "d") if d < n_out else _name(red_dims, d - n_out, "r")
                for d in group
            ]
            labels.append((length, " ".join(names)))
        nodes = kernel_nodes(step.tree)
        red = any(n.kind == "reduce" for n in nodes)
        ops = max(1, sum(n.kind in ("map", "reduce", "cast") for n in nodes))
        outs = [step.out] + [o for o, _ in step.extra]
        moved = sum(_view_bytes(leaf.view, leaf.dtype) for leaf in step.leaves())
        moved += sum(_view_bytes(o.view, o.dtype) for o in outs)
        kernels.append(
            KernelInfo(
                "reduction" if red else "elementwise",
                step.why,
                writes if not step.extra else f"{1 + len(step.extra)} destinations",
                tuple(labels),
                len(step.leaves()),
                None if step.order_from is None else f"input t{step.order_from}",
                _cache_state(step, schedule.device),
                moved,
                step.size * ops,
                **_estimate(step),
            )
        )
    result = schedule.result.src
    temps = sorted(
        (numbers[t], shape, str(dtype), int(np.prod(shape)) * dtype.itemsize)
        for t, (shape, dtype, _) in enumerate(schedule.temps)
        if result != ("temp", t)
    )
    return Plan(tuple(kernels), tuple(temps), cached, tier)


def step_names(dag, record: dict, names) -> dict:
    """Step index -> (output dim names, reduced dim names, a BLAS call's (batch, M, N, K)
    names or None) of the schedule planned for ``dag`` (``record``: step index -> (the
    node it computes, the reduction fused into it or None), as ``build_schedule`` records
    it), named from the DAG's name map (the result's ``names``, and what reductions and
    dots remembered). One naming pass over the DAG, then constant work per step."""
    dims = dim_names(dag, tuple(names) if names is not None else None)
    out = {}
    for i, (node, reduction) in record.items():
        mine = dims.get(id(node))
        if mine is None:
            continue
        if node.kind == "dot":
            out[i] = (mine, _contracted(node, dims), _dot_labels(node, dims))
            continue
        reduced: tuple = ()
        if reduction is not None and id(reduction.arg) in dims:
            below = dims[id(reduction.arg)]
            reduced = tuple(below[d] for d in reduction.axes)
            if node.ndim == reduction.arg.ndim:  # a normalize kernel: its output's dims,
                # kept ones first, then the reduced ones (``planner._Builder._normalize``)
                axes = reduction.axes
                mine = tuple(m for d, m in enumerate(mine) if d not in axes) + reduced
                reduced = ()
        out[i] = (mine, reduced, None)
    return out


def _contracted(node, dims) -> tuple:
    a = dims[id(node.a)]
    return tuple(a[k] for k, lb in enumerate(node.a_labels) if lb not in node.out_labels)


def _dot_labels(node, dims) -> tuple:
    """(batch, M, N, K) of a BLAS call in the dims' names; as ``out`` dims of a
    sum-of-products kernel the dot's own names come first."""
    by_label = dict(zip(node.a_labels, dims[id(node.a)], strict=True))
    by_label.update(zip(node.b_labels, dims[id(node.b)], strict=True))
    a, b, o = node.a_labels, node.b_labels, node.out_labels
    groups = (
        [lb for lb in o if lb in a and lb in b],
        [lb for lb in o if lb in a and lb not in b],
        [lb for lb in o if lb in b and lb not in a],
        [lb for lb in a if lb in b and lb not in o],
    )
    return tuple(" ".join(by_label[lb] for lb in g) or "-" for g in groups)


def _name(names, d: int, prefix: str) -> str:
    if names is not None and d < len(names):
        return names[d]
    return f"{prefix}{d}"


def _estimate(step) -> dict:
    """The cost model's ``est_bytes``/``est_flops`` of a step (``engine.cost``)."""
    moved, flops = step_estimate(step)
    return {"est_bytes": moved, "est_flops": flops}


def _writes(src: tuple, schedule: Schedule, numbers: dict) -> str:
    if src == ("dst",):
        return "destination"
    if src[0] == "param":  # a multi-output kernel writes its destinations (engine.multi)
        return "destinations"
    if src == schedule.result.src:
        return "result"
    return f"temporary #{numbers[src[1]]}"


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
