"""Plans as a user reads them: the HTML of ``ax.explain`` for every plan kind (the
engine's ``Plan``, a function's ``ProgramPlan``, a ``ChunkedPlan``), loops by axis name,
and each kernel's estimated bytes and work. Imports ``_html`` and ``pictures``.
"""

from __future__ import annotations

import math

from .htmlparts import BOX as _BOX
from .htmlparts import MUTED as _MUTED
from .htmlparts import e as _e
from .htmlparts import nbytes_text
from .htmlparts import pill as _pill
from .htmlparts import table as _table
from .pictures import chunk_svg

__all__ = [
    "plan_html",
    "program_html",
    "chunked_html",
    "loops_text",
    "estimated_bytes",
    "estimated_work",
]


def loops_text(loops, sep: str = " × ") -> str:
    """``N=4 × C=3``; a merged group of dims is ``(H W)=12``."""
    parts = []
    for length, label in loops:
        name = f"({label})" if " " in label else label
        parts.append(f"{name}={length}")
    return sep.join(parts) or "scalar"


def estimated_bytes(k) -> int:
    """A kernel's bytes estimate: a cost model's ``est_bytes`` when the plan has one, else
    the bytes of its arguments (``arg_bytes``)."""
    est = getattr(k, "est_bytes", None)
    return int(est) if est is not None else k.arg_bytes


def estimated_work(k) -> int:
    """A kernel's work estimate: a cost model's ``est_flops`` when the plan has one, else
    its element operations (``work``)."""
    est = getattr(k, "est_flops", None)
    return int(est) if est is not None else k.work


def _kernel_rows(kernels, first: int = 0, order: bool = True, timed: bool = False):
    rows = []
    for i, k in enumerate(kernels, first):
        row = [
            str(i),
            _e(k.kind),
            _e(k.writes),
            _e(loops_text(k.loops)),
            str(k.operands),
            _e(nbytes_text(estimated_bytes(k))),
            _e(f"{estimated_work(k):,}"),
        ]
        if order:
            row.append(_e(k.order_from or ""))
        row.append(_e(k.cache))
        if timed:
            t = getattr(k, "time_s", None)
            row.append("" if t is None else f"<b>{t * 1e3:.3g} ms</b>")
        rows.append(row)
    return rows


_HEAD = ["#", "kind", "writes", "loops", "reads", "bytes (est.)", "work (ops)"]


def _head(kernels) -> tuple[list[str], bool, bool]:
    """The kernel table's columns: "order from" only when some kernel has one, "time"
    when the plan was timed (``ax.explain(e, timed=True)``)."""
    order = any(k.order_from for k in kernels)
    timed = any(getattr(k, "time_s", None) is not None for k in kernels)
    head = _HEAD + (["order from"] if order else []) + ["code"] + (["time"] if timed else [])
    return head, order, timed


def _temps_text(plan) -> str:
    return "; ".join(
        f"#{i} {' × '.join(map(str, shape)) or 'scalar'} {dtype} ({nbytes_text(nbytes)})"
        for i, shape, dtype, nbytes in plan.temporaries
    )


def _plan_body(plan, first: int = 0) -> str:
    head, order, timed = _head(plan.kernels)
    rows = _kernel_rows(plan.kernels, first, order, timed)
    parts = [_table(head, rows)] if plan.kernels else []
    if plan.temporaries:
        temps = [
            [f"#{i}", _e(" × ".join(map(str, shape)) or "scalar"), _e(dtype), nbytes_text(nbytes)]
            for i, shape, dtype, nbytes in plan.temporaries
        ]
        parts.append(_table(["temporary", "shape", "dtype", "bytes"], temps))
    return "".join(parts)


def _count(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def plan_html(plan, boxed: bool = True) -> str:
    """``ax.explain(...)`` as HTML: the kernels in execution order (loops by axis name,
    estimated bytes and work), then the temporaries, numbered in the order they are written.

    >>> import axesarray as ax
    >>> x = ax.zeros((ax.Axis("N", 2), ax.Axis("C", 3)))
    >>> "1 kernel" in plan_html(ax.explain(ax.exp(x).sum("C")))
    True
    """
    n, nt = len(plan.kernels), len(plan.temporaries)
    head = [
        "<div>",
        "<b>Plan</b> " if boxed else "",
        _pill(_count(n, "kernel")),
        _pill(_count(nt, "temporary", "temporaries") + f" ({nbytes_text(plan.temporary_bytes)})"),
        _pill("plan cached" if plan.cached else "plan new"),
        _pill(f"next run: {plan.tier}", "warn") if n and plan.tier != "kernels" else "",
        "</div>",
    ]
    parts = head + [_plan_body(plan)]
    if n:
        parts.append(
            f'<div style="{_MUTED}">kernels in execution order; inputs are t0, t1, ... as in '
            "the tensor's repr; bytes: each argument read once and the output written once</div>"
        )
    body = "".join(parts)
    return f'<div style="{_BOX}">{body}</div>' if boxed else body


def program_html(plan) -> str:
    """A function's (or backward pass's, or optimizer step's) plan as HTML: one table, a
    row per stage (its formula and temporaries) above its kernels, numbered through the
    whole program in execution order. Inputs ``t0, t1...`` are numbered per stage.

    >>> import axesarray as ax, numpy as np
    >>> w = ax.variable(np.ones(4), "K", name="w")
    >>> "grad_w" in program_html(ax.explain(ax.grad((w * w).sum(), [w])))
    True
    """
    head, order, timed = _head(plan.kernels)
    rows = []
    first = 0
    for stage in plan.stages:
        sub = stage.plan
        title = f"<b>{_e(stage.label)}</b> = {_e(stage.formula)}"
        if sub.temporaries:
            title += f' <span style="{_MUTED}">temporaries: {_e(_temps_text(sub))}</span>'
        if not sub.kernels:
            title += f' <span style="{_MUTED}">(nothing runs: already a value)</span>'
        rows.append([f'<td colspan="{len(head)}" style="{_STAGE}">{title}</td>'])
        rows += _kernel_rows(sub.kernels, first, order, timed)
        first += len(sub.kernels)
    return "".join(
        [
            f'<div style="{_BOX}"><div><b>Program</b> ',
            _pill(_count(len(plan.stages), "stage")),
            _pill(_count(len(plan.kernels), "kernel")),
            "</div>",
            _table(head, rows),
            f'<div style="{_MUTED}">kernels in execution order; each stage numbers its own '
            "inputs t0, t1, ...; bytes: each argument read once and the output written once"
            "</div></div>",
        ]
    )


_STAGE = (
    "padding:6px 10px 2px;text-align:left;white-space:normal;"
    "border-bottom:1px solid rgba(127,127,127,0.45);background:rgba(127,127,127,0.07)"
)


def chunked_html(plan, grid: bool = True) -> str:
    """A chunked (dask) plan as HTML: the result's chunk grid (unless ``grid`` is False: a
    tensor's repr draws it once, above), then one row per layer.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.ones((8, 4)), "N C").chunk({"N": 2})
    >>> "<svg" in chunked_html(ax.explain(x * 2))
    True
    """
    blocks = math.prod(len(c) for c in plan.chunks)
    parts = [
        f'<div style="{_BOX}"><div><b>Chunked plan (dask)</b> ',
        _pill(_count(len(plan.steps), "layer")),
        _pill(_count(blocks, "result chunk")),
        _pill(_count(plan.graph_tasks, "task") + " in the graph"),
        "</div>",
    ]
    names = getattr(plan, "names", None) or tuple(f"d{d}" for d in range(len(plan.chunks)))
    if grid:
        parts.append(chunk_svg(names, plan.chunks) or "")
    rows = [
        [
            str(i),
            _e(s.kind),
            str(s.tasks),
            f'<div style="white-space:normal;max-width:44em">{_e(s.per_chunk)}</div>',
            "<br>".join(_e(k) for k in s.kernels),
        ]
        for i, s in enumerate(plan.steps)
    ]
    parts.append(_table(["#", "layer", "tasks", "each task", "kernels per chunk"], rows))
    parts.append("</div>")
    return "".join(parts)
