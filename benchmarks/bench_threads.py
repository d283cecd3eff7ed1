"""Parallel kernel launches (kernels/threads.py) and the serial/parallel choice
(engine/dispatch.py ``parallel_pays``).

    python benchmarks/bench_threads.py              # every row
    python benchmarks/bench_threads.py --repeat 301

Rows:
- launch: ``run_parts`` with a part that does nothing, against a direct call and against
  a ``ThreadPoolExecutor`` hand-off (the previous implementation, kept here as the
  reference). ``run_parts`` less the direct call: the hand-over alone (a part that does
  nothing is done by the caller before a helper wakes).
- kernels: one kernel per row, its serial and parallel variants timed interleaved, next
  to the one-core time the cost model estimates (``cost.serial_seconds``), the time it
  estimates threads save (``cost.threads_save``) and the variant ``dispatch.variant``
  picks. "best" is the faster measured variant. The fit below it
  (``parallel = a * serial + b``) gives the one-core time from which threads pay, the
  measure ``cost.LAUNCH_SECONDS`` stands for.
- BLAS spin: the CPU time numpy's BLAS threads (every thread but this one) use in each
  25 ms after a threaded ``np.matmul`` returns, from /proc (Linux): the window
  ``threads.BLAS_SPIN_SECONDS`` stands for.
- after BLAS: ``relu(h + b)`` (256x1024 float32) timed right after, or some time after, a
  threaded ``np.matmul`` (256x512 by 512x1024), its serial and parallel variants: the
  parallel one against OpenBLAS's spinning threads (``threads.BLAS_SPIN_SECONDS``).
- neighbour: numpy's logsumexp by hand (128x1024 float32, ~0.2 ms, one core) timed right
  after a parallel launch, while its helper waits for the next one
  (``threads.SPIN_SECONDS``), and after the helper has gone to sleep: what a waiting
  helper costs the code the caller runs next.
- oversubscribed: a parallel kernel in a loop, in one process and in two at once.
Medians of ``--repeat`` samples, round-robin so the machine's load hits each alike.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import axesarray as ax
from axesarray.engine import executor
from axesarray.engine.binder import binder
from axesarray.engine.cost import LAUNCH_SECONDS, serial_seconds, step_seconds, threads_save
from axesarray.engine.dispatch import kernel_for, variant
from axesarray.kernels import threads
from axesarray.kernels.threads import RANGES_PER_THREAD, num_threads, run_parts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import round_robin  # noqa: E402

_EXECUTOR: list = []


def executor_run_parts(part, count: int, args: tuple) -> None:
    """The previous ``run_parts``: helpers through a ThreadPoolExecutor and Futures."""
    threads = num_threads()
    if not _EXECUTOR:
        _EXECUTOR.append(ThreadPoolExecutor(threads - 1))
    ranges = min(count, RANGES_PER_THREAD * threads)
    bounds = [count * r // ranges for r in range(ranges + 1)]
    taken = itertools.count()

    def work() -> None:
        for r in iter(taken.__next__, None):
            if r >= ranges:
                return
            part(bounds[r], bounds[r + 1], *args)

    helpers = [_EXECUTOR[0].submit(work) for _ in range(threads - 1)]
    work()
    for h in helpers:
        h.result()


def bench_launch(repeat: int) -> None:
    def noop(lo, hi):
        pass

    m = round_robin(
        {
            "direct call": lambda: noop(0, 1000),
            "run_parts": lambda: run_parts(noop, 1000, ()),
            "ThreadPoolExecutor (before)": lambda: executor_run_parts(noop, 1000, ()),
        },
        repeat,
    )
    print(f"launch of a no-op part, {num_threads()} threads (median us):")
    for k, v in m.items():
        print(f"  {k:<30} {v * 1e6:8.1f}")
    overhead = m["run_parts"] - m["direct call"]
    print(f"  {'launch overhead (run_parts - direct)':<30} {overhead * 1e6:8.1f}")


def _kernel_times(e, out, repeat: int) -> tuple:
    plan, _ = executor.schedule_for(e.node, out.node)
    (step,) = plan.steps
    args = binder(step)(e.node.params, {}, out.node)
    fns = {v: kernel_for(step, plan.device, v) for v in ("serial", "parallel")}
    m = round_robin({v: (lambda f=f: f(*args)) for v, f in fns.items()}, repeat)
    saved = threads_save(step_seconds(step), num_threads())
    chosen = variant(step, plan.device, args[0])
    # the parallel variant called back to back (a loop of launches: the helper has just
    # finished the last one), where the round-robin's calls alternate with serial ones
    par = fns["parallel"]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        par(*args)
        times.append(time.perf_counter() - t0)
    b2b = statistics.median(times)
    return serial_seconds(step), saved, m["serial"], m["parallel"], b2b, chosen


def _cases():
    rng = np.random.default_rng(0)
    for rows in (16, 64, 256, 1024):
        h = ax.tensor(rng.standard_normal((rows, 1024)).astype(np.float32), "B H")
        b = ax.tensor(rng.standard_normal(1024).astype(np.float32), "H")
        yield f"relu(h + b) {rows}x1024 f32", ax.maximum(h + b, 0), ax.zeros(h.axes, "float32")
    for rows in (64, 256, 1024):
        x = ax.tensor(rng.standard_normal((rows, 1024)).astype(np.float32), "N K")
        yield f"tanh(x) {rows}x1024 f32", ax.tanh(x), ax.zeros(x.axes, "float32")
        out = ax.zeros(x.axes[:1], "float32")
        yield f"x.sum('K') {rows}x1024 f32", x.sum("K"), out
        yield f"x.max('K') {rows}x1024 f32", x.max("K"), out
    x = ax.tensor(rng.standard_normal((4096, 1024)).astype(np.float32), "N K")
    yield "x.max('K') 4096x1024 f32", x.max("K"), ax.zeros(x.axes[:1], "float32")
    for rows in (128, 256, 512, 1024, 2048):  # bound by bytes: in cache, then from memory
        x, y = (ax.tensor(rng.standard_normal((rows, 1024)).astype(np.float32), "N K")
                for _ in range(2))  # fmt: skip
        yield f"x - y {rows}x1024 f32", x - y, ax.zeros(x.axes, "float32")


def bench_kernels(repeat: int) -> None:
    print(f"\nkernels, serial vs parallel variant ({num_threads()} threads, median us):")
    print(
        f"  {'kernel':<28} {'est 1 core':>10} {'est saved':>9} {'serial':>8} {'parallel':>8}"
        f" {'b2b':>8}  chosen   best"
    )
    pairs, b2b_pairs = [], []
    for name, e, out in _cases():
        est, saved, ser, par, b2b, chosen = _kernel_times(e, out, repeat)
        best = "serial" if ser <= par else "parallel"
        pairs.append((ser, par))
        b2b_pairs.append((ser, b2b))
        print(
            f"  {name:<28} {est * 1e6:10.1f} {saved * 1e6:9.1f} {ser * 1e6:8.1f} {par * 1e6:8.1f}"
            f" {b2b * 1e6:8.1f}  {chosen:<8} {best}"
        )
    print("  (b2b: the parallel variant called back to back, not alternating with serial)")
    _launch_fit(pairs)
    _launch_fit(b2b_pairs, "back to back")


def _launch_fit(pairs: list, label: str = "") -> None:
    """The line ``parallel = a * serial + b`` through the rows whose serial time is under
    2 ms (least squares): ``b`` is what a parallel run costs beyond its share (waking the
    helpers, handing ranges over), ``a`` the share; threads pay from ``b / (1 - a)`` of
    one-core time, which ``cost.threads_pay`` reads as ``LAUNCH_SECONDS`` (for a kernel
    whose work or bytes the threads share out: ``serial * (1 - 1 / threads) >
    LAUNCH_SECONDS``)."""
    pts = [(s, p) for s, p in pairs if s < 2e-3]
    if len(pts) < 3:
        return
    ms, mp = statistics.fmean(s for s, _ in pts), statistics.fmean(p for _, p in pts)
    a = sum((s - ms) * (p - mp) for s, p in pts) / sum((s - ms) ** 2 for s, _ in pts)
    b = mp - a * ms
    fit = f"fit ({label})" if label else "fit"
    if not 0 < a < 1:
        print(f"  {fit}: parallel = {a:.2f} x serial + {b * 1e6:.0f} us (threads never pay)")
        return
    even = b / (1 - a)
    threads = num_threads()
    print(
        f"  {fit}: parallel = {a:.2f} x serial + {b * 1e6:.0f} us: threads pay from "
        f"{even * 1e6:.0f} us of one-core time, LAUNCH_SECONDS = "
        f"{even * (1 - 1 / threads) * 1e6:.0f} us (cost.LAUNCH_SECONDS: "
        f"{LAUNCH_SECONDS * 1e6:.0f} us)"
    )


def _thread_cpu() -> dict:
    """CPU seconds per thread of this process (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        found[t] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return found


def bench_blas_spin(trials: int = 3) -> None:
    if not os.path.isdir("/proc/self/task"):
        return
    x = np.ones((256, 512), np.float32)
    w = np.ones((512, 1024), np.float32)
    me = str(threading.get_native_id())
    print("\nCPU ms used by the BLAS threads in each 25 ms after np.matmul 256x512x1024:")
    for _ in range(trials):
        time.sleep(0.5)  # the threads from the last call sleep again
        x @ w
        prev, used = _thread_cpu(), []
        for _ in range(8):
            time.sleep(0.025)
            now = _thread_cpu()
            used.append(sum(v - prev.get(k, 0) for k, v in now.items() if k != me))
            prev = now
        print("  " + " ".join(f"{u * 1e3:4.0f}" for u in used))


def bench_after_blas(repeat: int) -> None:
    rng = np.random.default_rng(0)
    h = ax.tensor(rng.standard_normal((256, 1024)).astype(np.float32), "B H")
    b = ax.tensor(rng.standard_normal(1024).astype(np.float32), "H")
    e, out = ax.maximum(h + b, 0), ax.zeros(h.axes, "float32")
    plan, _ = executor.schedule_for(e.node, out.node)
    (step,) = plan.steps
    args = binder(step)(e.node.params, {}, out.node)
    fns = {v: kernel_for(step, plan.device, v) for v in ("serial", "parallel")}
    x = rng.standard_normal((256, 512)).astype(np.float32)
    w = rng.standard_normal((512, 1024)).astype(np.float32)
    print("\nrelu(h + b) 256x1024 f32 after np.matmul 256x512x1024 (median us):")
    print(f"  {'delay after BLAS':<18} {'serial':>8} {'parallel':>8}")
    for delay in (0.0, 1e-3, 2e-2, 0.2, None):
        times: dict = {v: [] for v in fns}
        for _ in range(repeat if delay is None or delay < 0.1 else max(5, repeat // 10)):
            for v, fn in fns.items():
                if delay is not None:
                    x @ w
                    time.sleep(delay)
                t0 = time.perf_counter()
                fn(*args)
                times[v].append(time.perf_counter() - t0)
        m = {v: statistics.median(t) * 1e6 for v, t in times.items()}
        label = "no BLAS" if delay is None else f"{delay * 1e3:g} ms"
        print(f"  {label:<18} {m['serial']:8.1f} {m['parallel']:8.1f}")


_LOOP = """
import sys, time
import numpy as np
import axesarray as ax
ax.set_options(tiered=False)
x = ax.tensor(np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32), "N K")
out = ax.zeros(x.axes, "float32")
for _ in range(5):
    out[...] = ax.tanh(x)
seconds, n, t0 = float(sys.argv[1]), 0, time.perf_counter()
while time.perf_counter() - t0 < seconds:
    out[...] = ax.tanh(x)
    n += 1
print(n / seconds)
"""


def bench_oversubscribed(seconds: float = 3.0) -> None:
    """``tanh`` of 512x1024 float32 (a parallel kernel, ~0.5 ms) in a loop, in one process
    and in two at once: with more threads than cores, a launch whose caller waits for its
    helpers by spinning would keep them off the cores they need."""
    import subprocess

    print(f"\nout[...] = ax.tanh(x), 512x1024 f32, in a loop for {seconds:g} s (calls/s):")
    for procs in (1, 2):
        running = [
            subprocess.Popen(
                [sys.executable, "-c", _LOOP, str(seconds)], stdout=subprocess.PIPE, text=True
            )
            for _ in range(procs)
        ]
        rates = [float(p.communicate()[0]) for p in running]
        print(
            f"  {procs} process{'es' if procs > 1 else ''}: " + ", ".join(f"{r:.0f}" for r in rates)
        )


def bench_neighbour(repeat: int) -> None:
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((128, 1024)).astype(np.float32)
    x = ax.tensor(rng.standard_normal((1024, 1024)).astype(np.float32), "N K")
    out = ax.zeros(x.axes, "float32")

    def program() -> float:
        t0 = time.perf_counter()
        m = xs.max(axis=1, keepdims=True)
        m + np.log(np.exp(xs - m).sum(axis=1, keepdims=True))
        return time.perf_counter() - t0

    def launch() -> None:
        out[...] = ax.tanh(x)  # a parallel kernel (~0.5 ms on two cores)

    launch()
    times: dict = {"no launch": [], "helper waiting": [], "helper asleep": []}
    for _ in range(repeat):
        time.sleep(0.005)
        times["no launch"].append(program())
        launch()
        times["helper waiting"].append(program())
        launch()
        time.sleep(max(0.005, 5 * threads.SPIN_SECONDS))
        times["helper asleep"].append(program())
    print("\nnumpy's logsumexp by hand, 128x1024 f32, after a parallel launch (median us):")
    for k, v in times.items():
        print(f"  {k:<16} {statistics.median(v) * 1e6:8.1f}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=101, help="samples per median")
    a = p.parse_args(argv)
    ax.set_options(tiered=False)
    bench_launch(a.repeat * 10)
    bench_kernels(a.repeat)
    bench_blas_spin()
    bench_after_blas(a.repeat)
    bench_neighbour(a.repeat)
    bench_oversubscribed()


if __name__ == "__main__":
    main()
