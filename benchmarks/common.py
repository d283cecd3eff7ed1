"""Shared benchmark helpers: robust timing, the copy baseline, and the report table.

Every number is a median over repeats, next to ``np.copyto`` of the same number of bytes
(read + written) measured in the same run, because the machine is shared and noisy.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time

import numpy as np

__all__ = ["median_time", "copy_time", "round_robin", "interleaved", "Table", "optional"]


def median_time(fn, repeat: int = 7, warmup: int = 1, min_time: float = 0.0) -> float:
    """Median seconds per call of ``fn`` (after ``warmup`` calls)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    if min_time and statistics.median(times) < min_time:
        # Short calls: time batches so the clock's resolution does not matter.
        n = max(1, int(min_time / max(statistics.median(times), 1e-9)))
        batch = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            batch.append((time.perf_counter() - t0) / n)
        return statistics.median(batch)
    return statistics.median(times)


def copy_time(traffic_bytes: int, repeat: int = 7) -> float:
    """Seconds for ``np.copyto`` moving ``traffic_bytes`` (half read, half written)."""
    n = max(1, traffic_bytes // 2)
    src = np.ones(n, np.uint8)
    dst = np.empty_like(src)
    return median_time(lambda: np.copyto(dst, src), repeat)


def round_robin(fns: dict, repeat: int, seconds: float = 0.0, most: int = 201) -> dict:
    """Median seconds per call of each function, after one warm-up call of each (compile,
    first touch of the pages), the functions timed in round-robin so that a slow moment of
    the (shared) machine hits all of them alike. Each round runs them in a new (seeded)
    order: a call that leaves threads spinning (torch's OpenMP pool, OpenBLAS, ~0.1 s)
    slows whichever call comes next, and in a fixed order that was always the same one
    (the MLP workload measured 0.94-0.99x numpy right after torch, 1.10x alone).

    ``seconds``: at least ``repeat`` rounds, more (up to ``most``) while they fit in that
    time, as the warm-up round measured it: programs of ~0.1 ms get the rounds a median
    needs on a shared machine, those of ~0.1 s do not take minutes."""
    t0 = time.perf_counter()
    for fn in fns.values():
        fn()
    if seconds > 0:
        per_round = max(time.perf_counter() - t0, 1e-9)
        repeat = max(repeat, min(most, int(seconds / per_round)))
    times: dict = {k: [] for k in fns}
    order = list(fns.items())
    shuffle = random.Random(0).shuffle
    for _ in range(repeat):
        shuffle(order)
        for k, fn in order:
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def interleaved(fns: dict, traffic_bytes: int, repeat: int = 9) -> tuple[dict, float]:
    """Median seconds of each function and of ``np.copyto`` of ``traffic_bytes``, timed in
    round-robin (``round_robin``) with them."""
    n = max(1, traffic_bytes // 2)
    src = np.ones(n, np.uint8)
    dst = np.empty_like(src)
    times = round_robin(dict(fns, copy=lambda: np.copyto(dst, src)), repeat)
    copy = times.pop("copy")
    return times, copy


def optional(name: str):
    """Import a peer library if installed, else None."""
    # Peers measured round-robin: OpenMP threads that spin after each call (torch's, by
    # default) would steal the next library's cores on a small machine.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        return __import__(name)
    except ImportError:
        return None


class Table:
    """Rows of (case, engine, seconds, bytes, copy seconds) printed with GB/s and ratios."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[tuple] = []

    def add(
        self, case: str, engine: str, seconds: float, traffic: int, copy_s: float, note: str = ""
    ) -> None:
        self.rows.append((case, engine, seconds, traffic, copy_s, note))

    def show(self) -> None:
        print(f"\n{self.title}")
        head = f"{'case':<34} {'engine':<12} {'time':>10} {'GB/s':>7} {'vs copy':>8}  note"
        print(head)
        print("-" * len(head))
        for case, engine, s, traffic, copy_s, note in self.rows:
            gbs = traffic / s / 1e9 if s and traffic else float("nan")
            ratio = copy_s / s if s and copy_s else float("nan")
            unit = f"{s * 1e3:8.2f} ms" if s >= 1e-3 else f"{s * 1e6:8.2f} us"
            print(f"{case:<34} {engine:<12} {unit:>10} {gbs:7.2f} {ratio:8.2f}  {note}")


def run_python(args: list, env: dict | None = None) -> str:
    """Run ``python *args`` in a new process; its stdout. A failure raises with the end of
    its stderr (``check=True`` alone gave only the exit signal)."""
    out = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"python {args[0]} ... exited {out.returncode}:\n{out.stderr[-3000:]}")
    return out.stdout
