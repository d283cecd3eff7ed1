"""What each expensive op of the op table costs one core, next to the weight the cost model
gives it (``core.ops.Op.work``, else ``cost.TRANSCENDENTAL``).

Per op: ``y[...] = op(x)`` (or ``op(x, z)``) over 2**18 float32 in cache, the serial kernel
(``serial_threshold`` above the size), best of ``--repeat`` calls, less a kernel that only
adds (``x + 0``, ``x + z``: the loads and the store), in ns an element and in
flop-equivalents at ``cost.FLOPS_PER_SECOND``. The planner compares these weights when it
materializes or recomputes a shared value, stores a reduction's operand, and when a kernel
goes on threads (``dispatch.parallel_pays``: GELU's ``x ** 3`` and ``tanh``, weighed 4
each, made its one-core estimate 9x too small).

python benchmarks/bench_op_work.py
python benchmarks/bench_op_work.py --quick    # fewer repeats: checks that it runs
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import axesarray as ax
from axesarray.core.ops import OPS
from axesarray.engine import cost

N = 1 << 18

CASES = {
    "exp": lambda x, z: ax.exp(x),
    "sigmoid": lambda x, z: ax.sigmoid(x),
    "truediv": lambda x, z: x / z,
    "sqrt": lambda x, z: ax.sqrt(x),
    "log": lambda x, z: ax.log(x),
    "log1p": lambda x, z: ax.log1p(x),
    "expm1": lambda x, z: ax.expm1(x),
    "tanh": lambda x, z: ax.tanh(x),
    "hypot": lambda x, z: ax.hypot(x, z),
    "sin": lambda x, z: ax.sin(x),
    "cos": lambda x, z: ax.cos(x),
    "pow": lambda x, z: x**z,
    "floordiv": lambda x, z: x // z,
    "mod": lambda x, z: x % z,
}


def _best(fn, out, repeat: int) -> float:
    out[...] = fn()  # planned and compiled
    best = float("inf")
    for _ in range(repeat):
        e = fn()
        t0 = time.perf_counter()
        out[...] = e
        best = min(best, time.perf_counter() - t0)
    return best


def measure(repeat: int) -> dict:
    """op -> (ns an element, flop-equivalents, the table's weight)."""
    rng = np.random.default_rng(0)
    x = ax.tensor(rng.random(N).astype(np.float32) + 0.5, "I")
    z = ax.tensor(rng.random(N).astype(np.float32) + 0.5, "I")
    out = ax.zeros(x.axes, "float32")
    rows = {}
    with ax.set_options(tiered=False, serial_threshold=1 << 40):
        copies = {1: _best(lambda: x + 0, out, repeat), 2: _best(lambda: x + z, out, repeat)}
        for op, build in CASES.items():
            row = OPS[op]
            t = max(0.0, _best(lambda b=build: b(x, z), out, repeat) - copies[row.arity])
            weight = (row.work or cost.TRANSCENDENTAL) if row.expensive else 1
            rows[op] = (t / N * 1e9, t / N * cost.FLOPS_PER_SECOND, weight)
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeat", type=int, default=0)
    a = p.parse_args(argv)
    repeat = a.repeat or (3 if a.quick else 41)
    rows = measure(repeat)
    print(f"expensive ops, one core, {N} float32 in cache (best of {repeat}, less an add):")
    print(f"  {'op':<10} {'ns/elem':>8} {'flop-eq':>8} {'table':>6}")
    for op, (ns, flops, weight) in rows.items():
        print(f"  {op:<10} {ns:8.2f} {flops:8.1f} {weight:6d}")


if __name__ == "__main__":
    main()
