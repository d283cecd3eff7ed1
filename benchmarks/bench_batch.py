"""The cost of a new batch length for a function whose placeholder has ``Axis("N", None)``:
the first call at a new length rebuilds the graph for it and plans it (kernels are reused:
none compiles), later calls at that length are plan-cache hits.

python benchmarks/bench_batch.py            # N=256 then 200 (the last batch of an epoch)
python benchmarks/bench_batch.py --quick

Prints milliseconds per call (medians) and ratios to a steady call and to numpy's step.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import axesarray as ax
from axesarray.kernels import cache


def _step(features: int, hidden: int):
    x = ax.placeholder((ax.Axis("N", None), ax.Axis("F", features)), "float32", name="x")
    y = ax.placeholder((ax.Axis("N", None),), "float32", name="y")
    rng = np.random.default_rng(0)
    w = ax.variable(
        rng.standard_normal((features, hidden)).astype("float32") * 0.1, "F H", name="w"
    )
    v = ax.variable(rng.standard_normal(hidden).astype("float32") * 0.1, "H", name="v")
    h = ax.relu(ax.dot(x, w, over="F"))
    loss = ((ax.dot(h, v, over="H") - y) ** 2).mean("N")
    return ax.function([loss, *ax.grad(loss, [w, v])], inputs=[x, y]), w, v


def _numpy_step(a, b, w, v):
    z = a @ w
    h = np.maximum(z, 0)
    r = h @ v - b
    loss = (r**2).mean()
    g = 2 * r / len(a)
    gv = h.T @ g
    gh = np.outer(g, v) * (z > 0)
    return loss, a.T @ gh, gv


def _median(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    features, hidden, n, last = (16, 8, 64, 40) if quick else (256, 128, 256, 200)
    repeat = 5 if quick else 30
    step, w, v = _step(features, hidden)
    rng = np.random.default_rng(1)
    data = {
        k: (
            rng.standard_normal((k, features)).astype("float32"),
            rng.standard_normal(k).astype("float32"),
        )
        for k in (n, last)
    }
    with ax.set_options(tiered=False):
        step(*data[n])  # compiles the kernels
        steady = _median(lambda: step(*data[n]), repeat)
        compiled = cache.STATS["compiled"] + cache.STATS["disk_hits"]
        t0 = time.perf_counter()
        step(*data[last])
        first_new = (time.perf_counter() - t0) * 1e3
        new_kernels = cache.STATS["compiled"] + cache.STATS["disk_hits"] - compiled
        steady_new = _median(lambda: step(*data[last]), repeat)
    wn, vn = w.numpy(), v.numpy()
    np_ms = _median(lambda: _numpy_step(*data[last], wn, vn), repeat)
    print(f"batch length: F={features} H={hidden}, N={n} then N={last}; load {_load()}")
    print(f"  steady call N={n}: {steady:8.3f} ms")
    print(
        f"  first call at a new length: {first_new:8.3f} ms "
        f"({first_new / steady_new:.1f}x a steady call; kernels compiled: {new_kernels})"
    )
    print(f"  steady call N={last}: {steady_new:8.3f} ms ({steady_new / np_ms:.2f}x numpy's step)")
    print(f"  numpy step N={last}: {np_ms:8.3f} ms")


def _load() -> str:
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


if __name__ == "__main__":
    main()
