"""Programs, not expressions (DESIGN §13): a recurrent loop and its gradients.

    python benchmarks/bench_programs.py            # the issue's sizes (T up to 800)
    python benchmarks/bench_programs.py --quick    # small sizes, a smoke run
    python benchmarks/bench_programs.py --only planning,function --sizes 20,40,80

The program: ``h = tanh(h * w + x.isel(T=k) * u)`` for ``k < T`` (B=4, H=8, float64),
``loss = (h * h).sum()``, gradients of ``w`` and ``u``; kernels only (``tiered=False``),
except the first "lazy" row (default options).
Rows:

- planning: ``ax.explain`` of the lazy gradient per T, and the ratio between sizes
  (linear planning: doubling T at most 2.5x the time);
- lazy: the first ``gw.numpy()`` (the README's own way) in a new process: empty kernel
  cache and default options (what a user gets), then ``tiered=False`` with the empty
  cache (compiles) and warm (kernels loaded from disk);
- function: ``ax.function([loss, gw, gu])`` build + first call, then each later call,
  against a hand-written numpy BPTT (and torch eager when installed), same run;
- backward: ``loss.backward()``;
- threads: calls per second of one compute-bound function from 1 and from 4 threads;
- overhead: a 3-kernel function on 1e3 elements against the sum of its kernels' times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_time, optional, run_python  # noqa: E402

import axesarray as ax  # noqa: E402

torch = optional("torch")
B, H = 4, 8


def _row(case: str, what: str, seconds: float, base: float | None = None, note: str = ""):
    if seconds >= 1:
        unit = f"{seconds:9.3f} s "
    elif seconds >= 1e-3:
        unit = f"{seconds * 1e3:9.2f} ms"
    else:
        unit = f"{seconds * 1e6:9.2f} us"
    ratio = f"{seconds / base:7.2f}x" if base else "        "
    print(f"{case:<22} {what:<34} {unit} {ratio}  {note}", flush=True)


def _data(steps: int):
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((steps, B, H)),
        rng.standard_normal(H) * 0.5,
        rng.standard_normal(H) * 0.5,
    )


def build(steps: int):
    """The recurrent program of ``steps`` steps: (x, w, u, loss) tensors."""
    x_np, w_np, u_np = _data(steps)
    x = ax.tensor(x_np, "T B H")
    w = ax.variable(w_np, "H", name="w")
    u = ax.variable(u_np, "H", name="u")
    h = ax.tensor(np.zeros((B, H)), "B H")
    for k in range(steps):
        h = ax.tanh(h * w + x.isel(T=k) * u)
    return x, w, u, (h * h).sum()


def numpy_bptt(x, w, u):
    """Loss and gradients of w and u by hand: forward keeping every h, then backward."""
    h = np.zeros((B, H))
    hs = [h]
    for k in range(x.shape[0]):
        h = np.tanh(h * w + x[k] * u)
        hs.append(h)
    loss = (h * h).sum()
    dh = 2 * h
    gw, gu = np.zeros(H), np.zeros(H)
    for k in range(x.shape[0] - 1, -1, -1):
        da = dh * (1 - hs[k + 1] * hs[k + 1])
        gw += (da * hs[k]).sum(0)
        gu += (da * x[k]).sum(0)
        dh = da * w
    return loss, gw, gu


def torch_step(x, w, u):
    tx = torch.from_numpy(x)
    tw = torch.from_numpy(w.copy()).requires_grad_()
    tu = torch.from_numpy(u.copy()).requires_grad_()

    def step():
        tw.grad = tu.grad = None
        h = torch.zeros((B, H), dtype=torch.float64)
        for k in range(tx.shape[0]):
            h = torch.tanh(h * tw + tx[k] * tu)
        loss = (h * h).sum()
        loss.backward()
        return float(loss.detach())

    return step


def bench_planning(sizes: list[int]) -> None:
    prev = None
    for steps in sizes:
        _, w, u, loss = build(steps)
        gw, _ = ax.grad(loss, [w, u])
        t0 = time.perf_counter()
        plan = ax.explain(gw)
        t = time.perf_counter() - t0
        note = f"{len(plan.kernels)} kernels"
        note += "  (x previous T)" if prev else ""
        _row("planning", f"explain(gw) T={steps}", t, prev, note)
        prev = t


def lazy_child(steps: int, tiered: bool) -> None:
    """In a new process (``--lazy-child``): build the recurrence, take the gradient and time
    its first ``gw.numpy()``; print the time, the error against numpy BPTT and the seconds
    the imports took (not part of the first call)."""
    t0 = time.perf_counter()
    ax.set_options(tiered=tiered)
    x_np, w_np, u_np = _data(steps)
    _, w, u, loss = build(steps)
    gw, _ = ax.grad(loss, [w, u])
    t1 = time.perf_counter()
    value = gw.numpy()
    first = time.perf_counter() - t1
    err = np.abs(value - numpy_bptt(x_np, w_np, u_np)[1]).max()
    print(f"{first} {err} {t1 - t0}")


def _lazy_in_new_process(steps: int, tiered: bool, cache: str) -> tuple[float, float, float]:
    env = dict(os.environ, AXESARRAY_CACHE_DIR=cache)
    t0 = time.perf_counter()
    mode = "tiered" if tiered else "untiered"
    out = run_python([__file__, "--lazy-child", mode, "--lazy-steps", str(steps)], env)
    process = time.perf_counter() - t0
    first, err, _ = (float(v) for v in out.split()[-3:])
    return first, err, process


def bench_lazy(steps: int) -> None:
    """The first ``gw.numpy()`` as a user meets it: a new process with an empty kernel
    cache and default options (the numpy tier answers while kernels compile in the
    background), then ``tiered=False`` with that empty cache (every distinct kernel
    compiles before the answer) and with the cache those compiles left (kernels loaded)."""
    _, w, u, loss = build(steps)
    gw, _ = ax.grad(loss, [w, u])
    plan = ax.explain(gw)
    kernels = f"{len(plan.kernels)} kernels"
    with tempfile.TemporaryDirectory() as cache:
        what = f"first gw.numpy() T={steps}"
        first, err, process = _lazy_in_new_process(steps, True, cache)
        note = f"empty cache, default options; |err| {err:.1e}; process {process:.1f} s"
        _row("lazy", what, first, None, note)
        first, err, process = _lazy_in_new_process(steps, False, cache)
        _row("lazy", what, first, None, f"empty cache, tiered=False (compiles); {kernels}")
        first, err, process = _lazy_in_new_process(steps, False, cache)
        note = f"warm cache, tiered=False; |err| {err:.1e}; process {process:.1f} s"
        _row("lazy", what, first, None, note)
    print(f"{'':<22} (each lazy row: a new process, imports not counted)")


def bench_function(steps: int, repeat: int) -> None:
    x_np, w_np, u_np = _data(steps)
    t0 = time.perf_counter()
    _, w, u, loss = build(steps)
    gw, gu = ax.grad(loss, [w, u])
    f = ax.function([loss, gw, gu])
    t1 = time.perf_counter()
    value, g1, g2 = f()
    t2 = time.perf_counter()
    ref = numpy_bptt(x_np, w_np, u_np)
    err = max(abs(float(value.item()) - ref[0]), np.abs(g1.numpy() - ref[1]).max())
    t_np = median_time(lambda: numpy_bptt(x_np, w_np, u_np), repeat)
    t_f = median_time(f, repeat)
    case = f"function T={steps}"
    _row(case, "build + first call", t2 - t0, None, f"(build {t1 - t0:.2f} s); |err| {err:.1e}")
    _row(case, "each later call", t_f, t_np, "(x numpy BPTT)")
    _row(case, "numpy BPTT (by hand)", t_np)
    if torch is not None:
        t_t = median_time(torch_step(x_np, w_np, u_np), repeat)
        _row(case, "torch eager forward+backward", t_t, t_f, "(x axesarray call)")
    print(
        f"{'':<22} {len(ax.explain(f).kernels)} kernels per call; "
        f"{_python_calls(f)} Python calls per later call (the generated runner)",
        flush=True,
    )


def _python_calls(fn) -> int:
    """Python function calls one ``fn()`` makes (a count of work: the kernels of a program
    are called from one generated function, not one Python frame each)."""
    count = [0]

    def hook(frame, event, arg):
        count[0] += event == "call"

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count[0]


def bench_backward(steps: int) -> None:
    _, w, u, loss = build(steps)
    t0 = time.perf_counter()
    loss.backward()
    t = time.perf_counter() - t0
    _row("backward", f"loss.backward() T={steps}", t)


def bench_threads(repeat: int, calls: int = 40) -> None:
    """A compute-bound function (transcendentals on 2e4 elements, one serial kernel): calls
    per second from one thread and from four."""
    n = ax.Axis("I", 20_000)
    p = ax.placeholder((n,), "float64", name="a")
    y = p
    for _ in range(6):
        y = ax.sin(ax.exp(ax.tanh(y)) * 1.1)
    f = ax.function(y.sum(), inputs=[p])
    values = [np.random.default_rng(k).standard_normal(20_000) for k in range(4)]
    expected = [float(f(v).item()) for v in values]

    def worker(k: int, out: list) -> None:
        for _ in range(calls):
            out.append(float(f(values[k]).item()) == expected[k])

    def run(threads: int) -> float:
        outs: list = [[] for _ in range(threads)]
        ts = [threading.Thread(target=worker, args=(k, outs[k])) for k in range(threads)]
        t0, c0 = time.perf_counter(), time.process_time()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        if not all(all(o) for o in outs):
            raise AssertionError("a concurrent call gave a wrong result")
        return threads * calls / elapsed, cpu / elapsed

    one, four = [], []
    for _ in range(max(3, repeat // 2)):
        one.append(run(1))
        four.append(run(4))
    r1, r4 = statistics.median(r for r, _ in one), statistics.median(r for r, _ in four)
    busy1, busy4 = statistics.median(b for _, b in one), statistics.median(b for _, b in four)
    print(
        f"{'threads':<22} {'calls/s, 1 thread / 4 threads':<34} {r1:9.0f} / {r4:.0f}"
        f"  {r4 / r1:.2f}x  (goal >= 1.5x on 2 cores; {os.cpu_count()} cpus)",
        flush=True,
    )
    # On a loaded machine the wall-clock ratio says more about the other processes: the
    # process's CPU seconds per wall second show whether the calls ran at once.
    print(f"{'':<22} CPU seconds per second: {busy1:.2f} (1 thread), {busy4:.2f} (4 threads)")


def bench_overhead(repeat: int) -> None:
    rng = np.random.default_rng(2)
    a_np = rng.standard_normal(1000)
    n = ax.Axis("I", 1000)
    p = ax.placeholder((n,), "float64", name="a")
    w = ax.variable(rng.standard_normal(1000), (n,), name="w")
    f = ax.function([ax.sigmoid(p * w), (p * w).sum(), ax.exp(p) - w], inputs=[p])
    kernels = kernel_time(f, a_np, repeat)
    t_f = median_time(lambda: f(a_np), repeat * 3, min_time=0.05)
    case = "overhead 3 kernels"
    _row(case, "f(a), 1e3 elements", t_f, kernels + 5e-6, "(x kernels + 5 us; goal <= 2)")
    _row(case, "sum of the kernels alone", kernels)


def kernel_time(f, a_np, repeat: int) -> float:
    """Sum of the median times of the function's kernels, each called on its own with
    arguments bound once (what a call cannot avoid)."""
    bound = {f.inputs[0]._node: np.ascontiguousarray(a_np).reshape(-1)}
    total = 0.0
    for call in f.program.kernel_calls(bound):
        total += median_time(call, repeat * 3, min_time=0.02)
    return total


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--only", default="planning,lazy,function,backward,threads,overhead")
    p.add_argument("--sizes", default=None, help="planning sizes, e.g. 20,40,80,160")
    p.add_argument("--lazy-steps", type=int, default=None)
    p.add_argument("--function-steps", default=None, help="e.g. 200,800")
    p.add_argument("--backward-steps", type=int, default=None)
    p.add_argument("--lazy-child", choices=("tiered", "untiered"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.lazy_child:  # one measurement of the "lazy" rows, in its own process
        lazy_child(args.lazy_steps or 200, args.lazy_child == "tiered")
        return
    only = set(args.only.split(","))
    repeat = 3 if args.quick else 7
    sizes = args.sizes or ("10,20,40" if args.quick else "20,40,80,160")
    print(
        f"Program benchmarks: axesarray {ax.__version__}; torch "
        f"{getattr(torch, '__version__', 'absent')}; {os.cpu_count()} cpus; "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    ax.set_options(tiered=False)  # the kernels, not the numpy tier, are measured
    ax.warmup()
    if "planning" in only:
        bench_planning([int(s) for s in sizes.split(",")])
    if "lazy" in only:
        bench_lazy(args.lazy_steps or (40 if args.quick else 200))
    if "function" in only:
        for steps in (args.function_steps or ("40" if args.quick else "200,800")).split(","):
            bench_function(int(steps), repeat)
    if "backward" in only:
        bench_backward(args.backward_steps or (40 if args.quick else 800))
    if "threads" in only:
        bench_threads(repeat, 10 if args.quick else 40)
    if "overhead" in only:
        bench_overhead(repeat)
    print(
        "Goals: explain(gw) T=80 <= 0.3 s, 160/80 <= 2.5x; first gw.numpy() T=200 <= 3 s; "
        "function T=800 build+first <= 10 s, later calls faster than numpy BPTT and torch; "
        "backward T=800 <= 5 s; 4 threads >= 1.5x; overhead <= 2x kernels + 5 us."
    )


if __name__ == "__main__":
    main()
