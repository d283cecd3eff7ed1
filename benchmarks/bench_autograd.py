"""Autograd benchmarks: forward + backward against the forward alone and torch eager.

    python benchmarks/bench_autograd.py            # full sizes (64M float32 elements)
    python benchmarks/bench_autograd.py --quick    # small sizes, a smoke run

Cases:
- ``sum(tanh(x*w+b)**2)``, x (N, F) float32, w and b (F): loss, grad w, grad b;
- an MLP step (two dense layers, relu, softmax cross-entropy): loss and four gradients;
- per-call overhead of a 3-kernel ``ax.function`` on small inputs, against evaluating the
  same three expressions directly and against numpy.

Goals: forward + backward <= 3x the forward alone; faster than torch eager on the CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_time, optional  # noqa: E402

import axesarray as ax  # noqa: E402

torch = optional("torch")


def _row(case: str, what: str, seconds: float, base: float | None = None, note: str = ""):
    unit = f"{seconds * 1e3:9.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:9.2f} us"
    ratio = f"{seconds / base:6.2f}x" if base else "       "
    print(f"{case:<32} {what:<26} {unit}  {ratio}  {note}")


def bench_tanh(n_rows: int, n_cols: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((n_rows, n_cols), dtype=np.float32)
    w_np = rng.standard_normal(n_cols, dtype=np.float32) * 0.1
    b_np = rng.standard_normal(n_cols, dtype=np.float32) * 0.1
    x = ax.tensor(x_np, "N F")
    w = ax.variable(w_np, "F", name="w")
    b = ax.variable(b_np, "F", name="b")
    loss = (ax.tanh(x * w + b) ** 2).sum()
    forward = ax.function(loss)
    both = ax.function([loss, *ax.grad(loss, [w, b])])
    case = f"sum(tanh(x*w+b)**2) {x_np.size / 2**20:.0f}M"
    t_fwd = median_time(forward, repeat)
    t_both = median_time(both, repeat)
    _row(case, "axesarray forward", t_fwd)
    _row(case, "axesarray forward+backward", t_both, t_fwd, "(x forward; goal <= 3)")
    kernels = len(ax.explain(both).kernels)
    print(f"{'':<32} planned: {kernels} kernels for loss + 2 gradients")
    if torch is not None:
        tx = torch.from_numpy(x_np)
        tw = torch.from_numpy(w_np.copy()).requires_grad_()
        tb = torch.from_numpy(b_np.copy()).requires_grad_()

        def t_forward():
            with torch.no_grad():
                return float((torch.tanh(tx * tw + tb) ** 2).sum())

        def t_step():
            tw.grad = tb.grad = None
            out = (torch.tanh(tx * tw + tb) ** 2).sum()
            out.backward()
            return float(out.detach())

        t_tf = median_time(t_forward, repeat)
        t_tb = median_time(t_step, repeat)
        _row(case, "torch forward", t_tf, t_fwd, "(x axesarray forward)")
        _row(case, "torch forward+backward", t_tb, t_both, "(x axesarray forward+backward)")
        value, gw, gb = both()
        tw.grad = tb.grad = None
        out = (torch.tanh(tx * tw + tb) ** 2).sum()
        out.backward()
        err = np.abs(gw.numpy() - tw.grad.numpy()).max() / np.abs(tw.grad.numpy()).max()
        print(f"{'':<32} grad w vs torch: max relative difference {err:.1e}")


def bench_mlp(n: int, f: int, h: int, k: int, repeat: int) -> None:
    rng = np.random.default_rng(1)
    N, F, H, K = ax.Axis("N", n), ax.Axis("F", f), ax.Axis("H", h), ax.Axis("K", k)
    x_np = rng.standard_normal((n, f), dtype=np.float32)
    y_np = np.eye(k, dtype=np.float32)[rng.integers(0, k, n)]
    init = [
        (rng.standard_normal((f, h)) / np.sqrt(f)).astype(np.float32),
        np.zeros(h, np.float32),
        (rng.standard_normal((h, k)) / np.sqrt(h)).astype(np.float32),
        np.zeros(k, np.float32),
    ]
    w1, b1 = ax.variable(init[0], (F, H), name="w1"), ax.variable(init[1], (H,), name="b1")
    w2, b2 = ax.variable(init[2], (H, K), name="w2"), ax.variable(init[3], (K,), name="b2")
    x, y = ax.placeholder((N, F), "float32", name="x"), ax.placeholder((N, K), "float32", name="y")
    hid = ax.relu(ax.dot(x, w1, over="F") + b1)
    loss = ax.softmax_cross_entropy(ax.dot(hid, w2, over="H") + b2, y, axis="K").mean()
    forward = ax.function(loss, inputs=[x, y])
    both = ax.function([loss, *ax.grad(loss, [w1, b1, w2, b2])], inputs=[x, y])
    case = f"MLP step N={n} F={f} H={h} K={k}"
    t_fwd = median_time(lambda: forward(x_np, y_np), repeat)
    t_both = median_time(lambda: both(x_np, y_np), repeat)
    _row(case, "axesarray forward", t_fwd)
    _row(case, "axesarray forward+backward", t_both, t_fwd, "(x forward; goal <= 3)")
    if torch is not None:
        tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)
        ps = [torch.from_numpy(a.copy()).requires_grad_() for a in init]

        def t_loss():
            hh = torch.relu(tx @ ps[0] + ps[1])
            logits = hh @ ps[2] + ps[3]
            return torch.nn.functional.cross_entropy(logits, ty)

        def t_forward():
            with torch.no_grad():
                return float(t_loss())

        def t_step():
            for p in ps:
                p.grad = None
            out = t_loss()
            out.backward()
            return float(out.detach())

        _row(case, "torch forward", median_time(t_forward, repeat), t_fwd, "(x axesarray forward)")
        _row(
            case,
            "torch forward+backward",
            median_time(t_step, repeat),
            t_both,
            "(x axesarray forward+backward)",
        )


def bench_call_overhead(repeat: int) -> None:
    """A function of three kernels on 1e3 elements: per call, against the same three
    expressions evaluated directly and against numpy."""
    rng = np.random.default_rng(2)
    a_np = rng.standard_normal(1000)
    n = ax.Axis("I", 1000)
    p = ax.placeholder((n,), "float64", name="a")
    w = ax.variable(rng.standard_normal(1000), (n,), name="w")
    outs = [ax.sigmoid(p * w), (p * w).sum(), ax.exp(p) - w]
    f = ax.function(outs, inputs=[p])
    assert len(ax.explain(f).kernels) == 3
    a = ax.tensor(a_np, (n,))
    direct = [ax.sigmoid(a * w), (a * w).sum(), ax.exp(a) - w]
    w_np = w.numpy()

    def numpy_version():
        return 1 / (1 + np.exp(-(a_np * w_np))), (a_np * w_np).sum(), np.exp(a_np) - w_np

    case = "3-kernel function, 1e3 elements"
    t_f = median_time(lambda: f(a_np), repeat * 3, min_time=0.05)
    t_direct = median_time(lambda: [e.eval() for e in direct], repeat * 3, min_time=0.05)
    t_np = median_time(numpy_version, repeat * 3, min_time=0.05)
    _row(case, "f(a)", t_f, t_direct, "(x the 3 expressions evaluated directly)")
    _row(case, "3 evaluations", t_direct)
    _row(case, "numpy", t_np, None)
    print(f"{'':<32} per-call overhead of the function: {(t_f - t_direct) * 1e6:.1f} us")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = p.parse_args(argv)
    repeat = 3 if args.quick else 7
    print(
        f"Autograd benchmarks: axesarray {ax.__version__}; torch "
        f"{getattr(torch, '__version__', 'absent')}; {os.cpu_count()} cpus"
    )
    ax.set_options(tiered=False)  # the kernels, not the numpy tier, are measured
    ax.warmup()
    if args.quick:
        bench_tanh(256, 256, repeat)
        bench_mlp(64, 16, 32, 4, repeat)
    else:
        bench_tanh(1 << 16, 1 << 10, repeat)
        bench_mlp(4096, 512, 1024, 10, repeat)
    bench_call_overhead(repeat)
    print("Goals: forward+backward <= 3x forward; faster than torch eager (CPU).")


if __name__ == "__main__":
    main()
