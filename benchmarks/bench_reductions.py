"""Sums of transcendental values: the sum's loop computing each value (one loop) against
the values computed into a buffer first, then added up (``kernels.cpu._buffer_pays``).

Per case, the serial kernel the planner makes for it, generated both ways from the same
plan and timed round-robin (median us), next to numpy's whole expression. "chosen" is the
way ``_buffer_pays`` generates it. The buffered way is kept here as the reference: it was
the rule for every transcendental sum until issue 18.

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
from axesarray.engine import executor  # noqa: E402
from axesarray.engine.binder import binder  # noqa: E402
from axesarray.engine.dispatch import source_for  # noqa: E402
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


if __name__ == "__main__":
    main()
