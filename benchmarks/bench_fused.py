"""Fused-engine benchmarks (DESIGN §6): ratios to a plain copy, next to numpy, numexpr, torch.

    python benchmarks/bench_fused.py            # full sizes (64M elements, ~100 MB)
    python benchmarks/bench_fused.py --quick    # small sizes, a smoke run

Goals: sigmoid >= 0.75 of copy; sum((a-b)**2) >= 0.9; a(N,C,H,W) + b(W,H) >= 0.7;
softmax in 2 passes; batch norm in 3 passes without a full-size temporary (<= 5 ms into
``out=`` at (32,64,56,56) on the reference machine);
sigmoid(a+b) on 1e3 elements <= 1.5x numpy's time (latency rows: bench_latency.py); peak
memory of sigmoid(x) for a 256 MB input: input + output + < 5%.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Table, interleaved, median_time, optional, run_python  # noqa: E402

import axesarray as ax  # noqa: E402

ne = optional("numexpr")
torch = optional("torch")


def _report(table: Table, case: str, fns: dict, traffic: int, repeat: int, notes=None) -> None:
    # torch in a round of its own, beside numpy: a call right after torch's ran slower,
    # whichever library made it (docs/design.md, "torch in a round of its own")
    times, copy_s = interleaved({k: f for k, f in fns.items() if k != "torch"}, traffic, repeat)
    if "torch" in fns:
        own, _ = interleaved({"numpy": fns["numpy"], "torch": fns["torch"]}, traffic, repeat)
        times["torch"] = own["torch"]
    for engine, t in times.items():
        table.add(case, engine, t, traffic, copy_s, (notes or {}).get(engine, ""))


def bench_sigmoid(table: Table, n: int, repeat: int) -> None:
    x_np = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out_np = np.empty_like(x_np)
    x, out = ax.tensor(x_np, "I"), ax.tensor(out_np, "I")

    def numpy_sigmoid():
        np.negative(x_np, out=out_np)
        np.exp(out_np, out=out_np)
        np.add(out_np, 1, out=out_np)
        np.divide(1, out_np, out=out_np)

    fns = {
        "axesarray": lambda: ax.assign(out, 1 / (1 + ax.exp(-x))),
        "numpy": numpy_sigmoid,
    }
    if ne is not None:
        fns["numexpr"] = lambda: ne.evaluate("1/(1+exp(-x))", local_dict={"x": x_np}, out=out_np)
    if torch is not None:
        tx, to = torch.from_numpy(x_np), torch.from_numpy(out_np)
        fns["torch"] = lambda: torch.sigmoid(tx, out=to)
    _report(
        table,
        f"sigmoid 1/(1+exp(-x)) f32 {n / 2**20:.0f}M",
        fns,
        2 * x_np.nbytes,
        repeat,
        {"numpy": "in place, one pass per op"},
    )


def bench_sumsq(table: Table, n: int, repeat: int) -> None:
    rng = np.random.default_rng(1)
    a_np = rng.standard_normal(n).astype(np.float32)
    b_np = rng.standard_normal(n).astype(np.float32)
    a, b = ax.tensor(a_np, "I"), ax.tensor(b_np, "I")
    fns = {
        "axesarray": lambda: float(((a - b) ** 2).sum()),
        "numpy": lambda: float(np.sum((a_np - b_np) ** 2)),
    }
    if ne is not None:
        fns["numexpr"] = lambda: float(
            ne.evaluate("sum((a-b)**2)", local_dict={"a": a_np, "b": b_np})
        )
    if torch is not None:
        ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
        fns["torch"] = lambda: float(((ta - tb) ** 2).sum())
    _report(table, f"sum((a-b)**2) f32 {n / 2**20:.0f}M", fns, 2 * a_np.nbytes, repeat)


def bench_broadcast(table: Table, shape: tuple, repeat: int) -> None:
    n, c, h, w = shape
    rng = np.random.default_rng(2)
    a_np = rng.standard_normal(shape).astype(np.float32)
    b_np = rng.standard_normal((w, h)).astype(np.float32)
    out_np = np.empty_like(a_np)
    axes = (ax.Axis("N", n), ax.Axis("C", c), ax.Axis("H", h), ax.Axis("W", w))
    a, out = ax.tensor(a_np, axes), ax.tensor(out_np, axes)
    b = ax.tensor(b_np, "W H")
    bt = b_np.T
    b4 = bt[None, None]
    fns = {
        "axesarray": lambda: ax.assign(out, a + b),
        "numpy": lambda: np.add(a_np, bt, out=out_np),
    }
    if ne is not None:
        fns["numexpr"] = lambda: ne.evaluate("a + b", local_dict={"a": a_np, "b": b4}, out=out_np)
    if torch is not None:
        ta, tb, to = torch.from_numpy(a_np), torch.from_numpy(bt), torch.from_numpy(out_np)
        fns["torch"] = lambda: torch.add(ta, tb, out=to)
    _report(
        table,
        f"a(N,C,H,W)+b(W,H) f32 {a_np.nbytes / 1e6:.0f} MB",
        fns,
        2 * a_np.nbytes + b_np.nbytes,
        repeat,
        {"numpy": "b.T broadcast by position"},
    )


def bench_softmax(table: Table, rows: int, k: int, repeat: int) -> None:
    """Softmax over a named axis as users write it (max-subtract, exp, sum, divide): two
    passes over the data (the logsumexp reduction, then the normalization)."""
    x_np = np.random.default_rng(4).standard_normal((rows, k)).astype(np.float32)
    out_np = np.empty_like(x_np)
    x, out = ax.tensor(x_np, "R K"), ax.tensor(out_np, "R K")

    def ours():
        e = ax.exp(x - x.max("K"))
        out[...] = e / e.sum("K")

    def numpy_softmax():
        e = np.exp(x_np - x_np.max(1, keepdims=True))
        np.divide(e, e.sum(1, keepdims=True), out=out_np)

    fns = {"axesarray": ours, "numpy": numpy_softmax}
    if torch is not None:
        tx, to = torch.from_numpy(x_np), torch.from_numpy(out_np)
        fns["torch"] = lambda: to.copy_(torch.softmax(tx, 1))
    xr = optional("xarray")
    if xr is not None:
        xx = xr.DataArray(x_np, dims=("R", "K"))

        def xarray_softmax():
            e = np.exp(xx - xx.max("K"))
            return e / e.sum("K")

        fns["xarray"] = xarray_softmax
    kernels = len(ax.explain(ax.exp(x - x.max("K")) / ax.exp(x - x.max("K")).sum("K")).kernels)
    _report(
        table,
        f"softmax over K, ({rows},{k}) f32",
        fns,
        2 * x_np.nbytes,
        repeat,
        {"axesarray": f"{kernels} kernels: logsumexp pass + normalize pass"},
    )


def bench_batch_norm(table: Table, shape: tuple, repeat: int) -> None:
    """Batch norm over (N, H, W) per C: mean, variance, normalize: three passes over x and
    no full-size temporary."""
    n, c, h, w = shape
    rng = np.random.default_rng(5)
    x_np = rng.standard_normal(shape).astype(np.float32)
    g_np, b_np = (
        rng.standard_normal(c).astype(np.float32),
        rng.standard_normal(c).astype(np.float32),
    )
    out_np = np.empty_like(x_np)
    x, out = ax.tensor(x_np, "N C H W"), ax.tensor(out_np, "N C H W")
    g, b = ax.tensor(g_np, "C"), ax.tensor(b_np, "C")
    r = ("N", "H", "W")

    def expr():
        d = x - x.mean(r)
        return d / ax.sqrt((d * d).mean(r) + 1e-5) * g + b

    def ours():
        out[...] = expr()

    gc, bc = g_np[:, None, None], b_np[:, None, None]

    def numpy_bn():
        d = x_np - x_np.mean((0, 2, 3), keepdims=True)
        np.add(d / np.sqrt((d * d).mean((0, 2, 3), keepdims=True) + 1e-5) * gc, bc, out=out_np)

    fns = {"axesarray": ours, "axesarray eval": lambda: expr().eval(), "numpy": numpy_bn}
    if torch is not None:
        tx, tg, tb = (torch.from_numpy(v) for v in (x_np, g_np, b_np))
        fns["torch"] = lambda: torch.nn.functional.batch_norm(
            tx, None, None, tg, tb, training=True, eps=1e-5
        )
    plan = ax.explain(expr(), out)
    _report(
        table,
        f"batch norm {shape} f32",
        fns,
        2 * x_np.nbytes,
        repeat,
        {
            "axesarray": f"into out=; {len(plan.kernels)} kernels, "
            f"{plan.temporary_bytes} bytes of temporaries",
            "axesarray eval": "fresh output each call",
        },
    )


def bench_small(table: Table, repeat: int) -> dict:
    rng = np.random.default_rng(3)
    a_np = rng.standard_normal(1000).astype(np.float32)
    b_np = rng.standard_normal(1000).astype(np.float32)
    out_np = np.empty_like(a_np)
    a, b, out = ax.tensor(a_np, "I"), ax.tensor(b_np, "I"), ax.tensor(out_np, "I")
    case = "sigmoid(a+b) f32 1e3 (per call)"
    t_np = median_time(lambda: 1 / (1 + np.exp(-(a_np + b_np))), repeat * 3, min_time=2e-3)
    t_assign = median_time(lambda: ax.assign(out, ax.sigmoid(a + b)), repeat * 3, min_time=2e-3)
    t_eval = median_time(lambda: ax.sigmoid(a + b).eval(), repeat * 3, min_time=2e-3)
    table.add(case, "numpy", t_np, 0, 0, "1/(1+np.exp(-(a+b)))")
    table.add(case, "axesarray", t_assign, 0, 0, f"out[...] = e: {t_assign / t_np:.2f}x numpy")
    table.add(case, "axesarray", t_eval, 0, 0, f"e.eval(): {t_eval / t_np:.2f}x numpy")
    if ne is not None:
        t_ne = median_time(
            lambda: ne.evaluate("1/(1+exp(-(a+b)))", local_dict={"a": a_np, "b": b_np}, out=out_np),
            repeat * 3,
            min_time=2e-3,
        )
        table.add(case, "numexpr", t_ne, 0, 0, f"{t_ne / t_np:.2f}x numpy")
    return {"numpy": t_np, "assign": t_assign, "eval": t_eval}


_PEAK = textwrap.dedent(
    """
    import sys, tracemalloc
    import numpy as np, axesarray as ax
    n = int(sys.argv[1])
    ax.set_options(tiered=False)  # the kernels' memory (a first call may take numpy's tier)
    ax.sigmoid(ax.tensor(np.zeros(1 << 20, np.float32), "I")).eval()  # compile both variants
    ax.sigmoid(ax.tensor(np.zeros(1000, np.float32), "I")).eval()
    x = ax.tensor(np.zeros(n, np.float32), "I")
    tracemalloc.start()  # numpy's allocations are traced, so is axesarray's storage
    before = tracemalloc.get_traced_memory()[0]
    y = ax.sigmoid(x).eval()
    peak = tracemalloc.get_traced_memory()[1]
    print(before, peak, x.nbytes, y.nbytes)
    """
)


def bench_peak_memory(n: int) -> str:
    """Memory allocated while evaluating sigmoid(x): the output plus what else?"""
    out = run_python(["-c", _PEAK, str(n)])
    before, peak, xb, yb = map(int, out.split())
    extra = peak - before - yb
    return (
        f"peak memory of sigmoid(x), x = {xb / 2**20:.0f} MiB: input + output + "
        f"{extra / 2**10:.1f} KiB ({100 * extra / (xb + yb):.4f}% of input + output; "
        "traced by tracemalloc)"
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = p.parse_args(argv)
    big = 1 << 16 if args.quick else 64 << 20
    shape = (2, 8, 16, 16) if args.quick else (16, 64, 64, 96)
    repeat = 3 if args.quick else 7
    print(
        f"axesarray {ax.__version__}; numpy {np.__version__}; numexpr "
        f"{getattr(ne, '__version__', 'absent')}; torch {getattr(torch, '__version__', 'absent')}"
        f"; {os.cpu_count()} cpus"
    )
    ax.set_options(tiered=False)  # the kernels, not the numpy tier, are measured
    ax.warmup()
    table = Table(
        "Fused engine (median of repeats; 'vs copy' = np.copyto time of the same bytes / this time)"
    )
    bench_sigmoid(table, big, repeat)
    bench_sumsq(table, big, repeat)
    bench_broadcast(table, shape, repeat)
    bench_softmax(table, 64 if args.quick else 4096, 100 if args.quick else 1000, repeat)
    bench_batch_norm(table, (2, 8, 8, 8) if args.quick else (32, 64, 56, 56), repeat)
    bench_small(table, repeat)
    table.show()
    print(bench_peak_memory(1 << 16 if args.quick else 64 << 20))
    print(
        "Goals: sigmoid >= 0.75 of copy; sum >= 0.9; broadcast >= 0.7; 1e3 elements <= "
        "1.5x numpy; peak memory + < 5%."
    )


if __name__ == "__main__":
    main()
