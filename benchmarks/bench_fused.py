"""Fused-engine benchmarks (DESIGN §6): ratios to a plain copy, next to numpy, numexpr, torch.

    python benchmarks/bench_fused.py            # full sizes (64M elements, ~100 MB)
    python benchmarks/bench_fused.py --quick    # small sizes, a smoke run

Goals: sigmoid >= 0.75 of copy; sum((a-b)**2) >= 0.9; a(N,C,H,W) + b(W,H) >= 0.7;
sigmoid(a+b) on 1e3 elements <= 1.5x numpy's time; first call of a cached kernel in a new
process <= 50 ms; peak memory of sigmoid(x) for a 256 MB input: input + output + < 5%.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, copy_time, median_time, optional  # noqa: E402

import axesarray as ax  # noqa: E402

ne = optional("numexpr")
torch = optional("torch")


def bench_sigmoid(table: Table, n: int, repeat: int) -> None:
    x_np = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out_np = np.empty_like(x_np)
    traffic = 2 * x_np.nbytes
    copy_s = copy_time(traffic, repeat)
    x, out = ax.tensor(x_np, "I"), ax.tensor(out_np, "I")
    case = f"sigmoid 1/(1+exp(-x)) f32 {n / 2**20:.0f}M"
    table.add(case, "axesarray", median_time(lambda: ax.assign(out, 1 / (1 + ax.exp(-x))),
                                             repeat), traffic, copy_s)

    def numpy_sigmoid():
        np.negative(x_np, out=out_np)
        np.exp(out_np, out=out_np)
        np.add(out_np, 1, out=out_np)
        np.divide(1, out_np, out=out_np)

    table.add(case, "numpy", median_time(numpy_sigmoid, repeat), traffic, copy_s, "in place")
    if ne is not None:
        table.add(case, "numexpr", median_time(
            lambda: ne.evaluate("1/(1+exp(-x))", local_dict={"x": x_np}, out=out_np), repeat), traffic, copy_s)
    if torch is not None:
        tx, to = torch.from_numpy(x_np), torch.from_numpy(out_np)
        table.add(case, "torch", median_time(lambda: torch.sigmoid(tx, out=to), repeat),
                  traffic, copy_s)


def bench_sumsq(table: Table, n: int, repeat: int) -> None:
    rng = np.random.default_rng(1)
    a_np = rng.standard_normal(n).astype(np.float32)
    b_np = rng.standard_normal(n).astype(np.float32)
    traffic = 2 * a_np.nbytes
    copy_s = copy_time(traffic, repeat)
    a, b = ax.tensor(a_np, "I"), ax.tensor(b_np, "I")
    case = f"sum((a-b)**2) f32 {n / 2**20:.0f}M"
    table.add(case, "axesarray", median_time(lambda: float(((a - b) ** 2).sum()), repeat),
              traffic, copy_s)
    table.add(case, "numpy", median_time(lambda: float(np.sum((a_np - b_np) ** 2)), repeat),
              traffic, copy_s)
    if ne is not None:
        table.add(case, "numexpr", median_time(
            lambda: float(ne.evaluate("sum((a-b)**2)", local_dict={"a": a_np, "b": b_np})), repeat), traffic, copy_s)
    if torch is not None:
        ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
        table.add(case, "torch", median_time(lambda: float(((ta - tb) ** 2).sum()), repeat),
                  traffic, copy_s)


def bench_broadcast(table: Table, shape: tuple, repeat: int) -> None:
    n, c, h, w = shape
    rng = np.random.default_rng(2)
    a_np = rng.standard_normal(shape).astype(np.float32)
    b_np = rng.standard_normal((w, h)).astype(np.float32)
    out_np = np.empty_like(a_np)
    traffic = 2 * a_np.nbytes + b_np.nbytes
    copy_s = copy_time(traffic, repeat)
    axes = (ax.Axis("N", n), ax.Axis("C", c), ax.Axis("H", h), ax.Axis("W", w))
    a, out = ax.tensor(a_np, axes), ax.tensor(out_np, axes)
    b = ax.tensor(b_np, "W H")
    case = f"a(N,C,H,W)+b(W,H) f32 {a_np.nbytes / 1e6:.0f} MB"
    table.add(case, "axesarray", median_time(lambda: ax.assign(out, a + b), repeat),
              traffic, copy_s)
    bt = b_np.T
    table.add(case, "numpy", median_time(lambda: np.add(a_np, bt, out=out_np), repeat),
              traffic, copy_s, "b.T broadcast by position")
    if ne is not None:
        b4 = bt[None, None]
        table.add(case, "numexpr", median_time(
            lambda: ne.evaluate("a + b", local_dict={"a": a_np, "b": b4}, out=out_np), repeat), traffic, copy_s)
    if torch is not None:
        ta, tb, to = torch.from_numpy(a_np), torch.from_numpy(bt), torch.from_numpy(out_np)
        table.add(case, "torch", median_time(lambda: torch.add(ta, tb, out=to), repeat),
                  traffic, copy_s)


def bench_small(table: Table, repeat: int) -> dict:
    rng = np.random.default_rng(3)
    a_np = rng.standard_normal(1000).astype(np.float32)
    b_np = rng.standard_normal(1000).astype(np.float32)
    out_np = np.empty_like(a_np)
    a, b, out = ax.tensor(a_np, "I"), ax.tensor(b_np, "I"), ax.tensor(out_np, "I")
    case = "sigmoid(a+b) f32 1e3 (per call)"
    t_np = median_time(lambda: 1 / (1 + np.exp(-(a_np + b_np))), repeat * 3, min_time=2e-3)
    t_assign = median_time(lambda: ax.assign(out, ax.sigmoid(a + b)), repeat * 3,
                           min_time=2e-3)
    t_eval = median_time(lambda: ax.sigmoid(a + b).eval(), repeat * 3, min_time=2e-3)
    table.add(case, "numpy", t_np, 0, 0, "1/(1+np.exp(-(a+b)))")
    table.add(case, "axesarray", t_assign, 0, 0, f"out[...] = e: {t_assign / t_np:.2f}x numpy")
    table.add(case, "axesarray", t_eval, 0, 0, f"e.eval(): {t_eval / t_np:.2f}x numpy")
    if ne is not None:
        t_ne = median_time(lambda: ne.evaluate("1/(1+exp(-(a+b)))", local_dict={"a": a_np, "b": b_np},
                                  out=out_np),
                           repeat * 3, min_time=2e-3)
        table.add(case, "numexpr", t_ne, 0, 0, f"{t_ne / t_np:.2f}x numpy")
    return {"numpy": t_np, "assign": t_assign, "eval": t_eval}


_FIRST_CALL = textwrap.dedent(
    """
    import sys, time
    import numpy as np, axesarray as ax
    if sys.argv[1] == "warm":
        ax.warmup()
    x = ax.tensor(np.linspace(-3, 3, 1000).astype(np.float32), "N")
    t0 = time.perf_counter()
    ax.sigmoid(x * 2 + 1).numpy()
    print(time.perf_counter() - t0)
    """
)


def bench_first_call(table: Table) -> None:
    """A new process evaluating an expression whose kernel an earlier process compiled."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, AXESARRAY_CACHE_DIR=cache)

        def run(mode: str) -> float:
            out = subprocess.run([sys.executable, "-c", _FIRST_CALL, mode], env=env,
                                 capture_output=True, text=True, check=True)
            return float(out.stdout.strip())

        compile_s = run("cold")
        cold = sorted(run("cold") for _ in range(3))[1]
        warm = sorted(run("warm") for _ in range(3))[1]
    case = "first call, new process"
    table.add(case, "axesarray", compile_s, 0, 0, "kernel not cached: compiles")
    table.add(case, "axesarray", cold, 0, 0, "cached kernel, numba start-up included")
    table.add(case, "axesarray", warm, 0, 0, "cached kernel after ax.warmup()")


_PEAK = textwrap.dedent(
    """
    import resource, sys
    import numpy as np, axesarray as ax
    n = int(sys.argv[1])
    ax.sigmoid(ax.tensor(np.zeros(1000, np.float32), "I")).eval()   # compile first
    x = ax.tensor(np.random.default_rng(0).random(n, dtype=np.float32), "I")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    y = ax.sigmoid(x).eval()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(base * 1024, peak * 1024, x.nbytes, y.nbytes)
    """
)


def bench_peak_memory(n: int) -> str:
    out = subprocess.run([sys.executable, "-c", _PEAK, str(n)], capture_output=True,
                         text=True, check=True)
    base, peak, xb, yb = map(int, out.stdout.split())
    extra = peak - base - yb
    return (f"peak memory of sigmoid(x), x = {xb / 2**20:.0f} MiB: grew by "
            f"{(peak - base) / 2**20:.1f} MiB = output + {extra / 2**20:.1f} MiB "
            f"({100 * extra / (xb + yb):.2f}% of input + output)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = p.parse_args(argv)
    big = 1 << 16 if args.quick else 64 << 20
    shape = (2, 8, 16, 16) if args.quick else (8, 64, 224, 224)
    repeat = 3 if args.quick else 7
    print(f"axesarray {ax.__version__}; numpy {np.__version__}; numexpr "
          f"{getattr(ne, '__version__', 'absent')}; torch {getattr(torch, '__version__', 'absent')}"
          f"; {os.cpu_count()} cpus")
    ax.warmup()
    table = Table("Fused engine (median of repeats; 'vs copy' = np.copyto time of the same "
                  "bytes / this time)")
    bench_sigmoid(table, big, repeat)
    bench_sumsq(table, big, repeat)
    bench_broadcast(table, shape, repeat)
    bench_small(table, repeat)
    bench_first_call(table)
    table.show()
    print(bench_peak_memory(1 << 16 if args.quick else 64 << 20))


if __name__ == "__main__":
    main()
