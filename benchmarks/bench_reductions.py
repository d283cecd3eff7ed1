"""Reductions: how the planner's and templates' choices pay.

- Sums of transcendental values: the sum's loop computing each value (one loop) against
  the values computed into a buffer first, then added up (``kernels.cpu._buffer_pays``).
  Per case, the serial kernel the planner makes for it, generated both ways from the same
  plan and timed round-robin (median us), next to numpy's whole expression. "chosen" is
  the way ``_buffer_pays`` generates it. The buffered way is kept here as the reference:
  it was the rule for every transcendental sum until issue 18.
- An input and its reduction (``x - x.max(K)``, ``x / x.sum(K)``, a log-softmax ``x -
  logsumexp(x)``): the normalize kernel storing ``x`` in the result while reducing it
  (one kernel, ``x`` from memory once) against the plan without it
  (``cost.STORE_CACHE_BYTES`` 0 while planning: the reduction's kernel into a temporary,
  then the root's reading ``x`` again), each plan run by ``run_schedule`` into the same
  destination, round-robin, next to numpy.
- Layer norms (over the last dim, and over C of NCHW: rows-first), one normalize kernel
  against the three kernels planned without it, the same way.

python benchmarks/bench_reductions.py
python benchmarks/bench_reductions.py --quick    # small sizes: checks that it runs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import round_robin  # noqa: E402

import axesarray as ax  # noqa: E402
from axesarray.engine import cost, executor  # noqa: E402
from axesarray.engine.binder import binder  # noqa: E402
from axesarray.engine.dispatch import source_for  # noqa: E402
from axesarray.engine.runner import run_schedule  # noqa: E402
from axesarray.kernels import cpu  # noqa: E402
from axesarray.kernels.cache import get_kernel  # noqa: E402


def _buffered(child, acc_t, value) -> bool:
    """The previous rule: every transcendental float sum, and every transformed one."""
    return value is not None or cpu._expensive(child)


def _cases(rows: int, k: int):
    rng = np.random.default_rng(0)
    for dt in ("float32", "float64"):
        xn = rng.standard_normal((rows, k)).astype(dt)
        x = ax.tensor(xn, "N K")
        yield (
            f"exp(x).sum('K') {dt}",
            ax.exp(x).sum("K"),
            lambda xn=xn: np.exp(xn).sum(axis=1),
        )
        m = x.max("K")

        def lse_np(xn=xn):
            m = xn.max(axis=1, keepdims=True)
            return (m + np.log(np.exp(xn - m).sum(axis=1, keepdims=True)))[:, 0]

        yield f"logsumexp by hand {dt}", m + ax.log(ax.exp(x - m).sum("K")), lse_np


def _variants(e, out):
    """The plan's one kernel generated in one loop and buffered, and whether today's rule
    (``cpu._buffer_pays``) buffers it."""
    plan, _ = executor.schedule_for(e.node, out.node)
    (step,) = plan.steps
    args = binder(step)(e.node.params, {}, out.node)
    fns, kept = {}, cpu._buffer_pays
    try:
        for name, rule in (("one loop", lambda *a: False), ("buffered", _buffered), ("", kept)):
            cpu._buffer_pays = rule
            source, entry = source_for(step, plan.device, "serial")
            if name:
                fns[name] = get_kernel(source, entry)
    finally:
        cpu._buffer_pays = kept
    return fns, args, "buffered" if "rowbuf" in source else "one loop"


def _log_sm(a):
    m = a.max(1, keepdims=True)
    return a - (m + np.log(np.exp(a - m).sum(1, keepdims=True)))


def _plan(e, out, store_bytes: int):
    """A fresh plan of ``out[...] = e`` made with ``cost.STORE_CACHE_BYTES`` at
    ``store_bytes`` (0: no input is stored in the result)."""
    kept = cost.STORE_CACHE_BYTES
    cost.STORE_CACHE_BYTES = store_bytes
    try:
        return executor._new_plan(e.node, out.node, ("bench_reductions", store_bytes, e.node.key))
    finally:
        cost.STORE_CACHE_BYTES = kept


def bench_stored_inputs(sizes, repeat: int) -> None:
    print("\nan input and its reduction, one kernel vs two (run_schedule, median us):")
    print(f"  {'case':<34} {'size':>10} {'1 kernel':>9} {'2 kernels':>9} {'numpy':>9}")
    rng = np.random.default_rng(1)
    for rows, k in sizes:
        xn = np.abs(rng.standard_normal((rows, k))).astype(np.float32) + 1
        x = ax.tensor(xn, "N K")
        out = ax.zeros(x.axes, "float32")
        for name, e, np_fn in (
            ("x - x.max('K') float32", x - x.max("K"), lambda a=xn: a - a.max(1, keepdims=True)),
            ("x / x.sum('K') float32", x / x.sum("K"), lambda a=xn: a / a.sum(1, keepdims=True)),
            ("ax.log_softmax(x, 'K') float32", ax.log_softmax(x, "K"), lambda a=xn: _log_sm(a)),
        ):
            plans = {"1": _plan(e, out, cost.STORE_CACHE_BYTES), "2": _plan(e, out, 0)}
            assert [len(p.steps) for p in plans.values()] == [1, 2]
            fns = {}
            for way, plan in plans.items():
                run_schedule(plan, e.node.params, out.node)
                np.testing.assert_allclose(out.numpy(), np_fn(), rtol=1e-5)
                fns[way] = lambda p=plan, e=e, o=out: run_schedule(p, e.node.params, o.node)
            m = round_robin(dict(fns, numpy=np_fn), repeat)
            print(
                f"  {name:<34} {f'{rows}x{k}':>10} {m['1'] * 1e6:9.1f} {m['2'] * 1e6:9.1f}"
                f" {m['numpy'] * 1e6:9.1f}"
            )


def _np_norm(a, axis):
    c = a - a.mean(axis, keepdims=True)
    return c / np.sqrt((c * c).mean(axis, keepdims=True) + np.float32(1e-5))


def bench_norms(shapes, repeat: int) -> None:
    """Layer norms as users write them, over the last dim and over C of NCHW (rows-first:
    the reduced dim strided), the normalize kernel (the mean swept, the variance's
    ``(x - mean)**2`` stored as scratch) against the plan without it (three kernels)."""
    print("\nlayer norms, one kernel vs three (run_schedule, median us):")
    print(f"  {'case':<34} {'size':>14} {'1 kernel':>9} {'3 kernels':>9} {'numpy':>9}")
    rng = np.random.default_rng(2)
    for shape, names, over in shapes:
        xn = rng.standard_normal(shape).astype(np.float32)
        x = ax.tensor(xn, names)
        out = ax.zeros(x.axes, "float32")
        xc = x - x.mean(over)
        e = xc / ax.sqrt((xc * xc).mean(over) + 1e-5)
        axis = names.split().index(over)
        plans = {"1": _plan(e, out, cost.STORE_CACHE_BYTES), "3": _plan(e, out, 0)}
        assert [len(p.steps) for p in plans.values()] == [1, 3]
        fns = {}
        for way, plan in plans.items():
            run_schedule(plan, e.node.params, out.node)
            np.testing.assert_allclose(out.numpy(), _np_norm(xn, axis), rtol=1e-3, atol=1e-4)
            fns[way] = lambda p=plan, o=out, r=e: run_schedule(p, r.node.params, o.node)
        m = round_robin(dict(fns, numpy=lambda a=xn, d=axis: _np_norm(a, d)), repeat)
        size = "x".join(map(str, shape))
        print(
            f"  {f'layer norm over {over}':<34} {size:>14} {m['1'] * 1e6:9.1f}"
            f" {m['3'] * 1e6:9.1f} {m['numpy'] * 1e6:9.1f}"
        )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeat", type=int, default=0)
    a = p.parse_args(argv)
    ax.set_options(tiered=False)
    sizes = [(8, 64)] if a.quick else [(128, 1024), (4096, 1024)]
    repeat = a.repeat or (3 if a.quick else 201)
    print("transcendental sums, one loop vs buffered (serial kernel, median us):")
    print(f"  {'case':<34} {'size':>10} {'one loop':>9} {'buffered':>9} {'numpy':>9}  chosen")
    for rows, k in sizes:
        for name, e, np_fn in _cases(rows, k):
            out = ax.zeros(e.axes, e.dtype)
            fns, args, chosen = _variants(e, out)
            timed = {}
            for way, fn in fns.items():
                fn(*args)
                np.testing.assert_allclose(out.numpy(), np_fn(), rtol=1e-5)
                timed[way] = lambda f=fn, a=args: f(*a)
            timed["numpy"] = np_fn
            m = round_robin(timed, repeat)
            print(
                f"  {name:<34} {f'{rows}x{k}':>10} {m['one loop'] * 1e6:9.1f}"
                f" {m['buffered'] * 1e6:9.1f} {m['numpy'] * 1e6:9.1f}  {chosen}"
            )

    bench_stored_inputs(sizes, repeat)
    if a.quick:
        norms = [((4, 64), "N D", "D"), ((2, 4, 4, 8), "N C H W", "C")]
    else:
        norms = [((256, 512), "N D", "D"), ((8192, 512), "N D", "D"),
                 ((8, 32, 64, 64), "N C H W", "C")]  # fmt: skip
    bench_norms(norms, max(3, repeat // 4))


if __name__ == "__main__":
    main()
