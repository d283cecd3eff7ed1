"""The benchmark runners run (small sizes): every speed claim must have a working runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_benchmarks_run_in_quick_mode():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]  # the runner's traceback, if any
    out = proc.stdout
    for case in (
        "sigmoid 1/(1+exp(-x))",
        "sum((a-b)**2)",
        "a(N,C,H,W)+b(W,H)",
        "sigmoid(a+b) f32 1e3",
        "peak memory",
        "softmax over K",
        "batch norm",
        "ax (a+b).eval()",
        "compile: chain",
        "first result in a new process",
        "fresh environment",
        "axesarray NCHW -> NCHW32",
        "plain dask copy",
        "axesarray vs dask",
        "sum(tanh(x*w+b)**2)",
        "forward+backward",
        "3-kernel function",
        "softmax by hand over C",
        "explain(gw) T=",
        "first gw.numpy()",
        "numpy BPTT",
        "calls/s, 1 thread / 4 threads",
        "sum of the kernels alone",
        "xarray on ax.array_api (lazy)",
        "transcendental sums, one loop vs buffered",
        "layer norms, one kernel vs three",
        "single operations",
        "x.argmax('K')",
    ):
        assert case in out
    assert "NCHW" in out and "CHWN4" in out


def test_workload_suite_runs_at_tiny_sizes(capsys):
    """Every program of benchmarks/bench_workloads.py runs, matches numpy and is reported."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_workloads
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rows = bench_workloads.run(quick=True, repeat=1)
    assert len(rows) >= 12
    bandwidth = bench_workloads.copy_bandwidth(1, nbytes=1 << 20)
    assert bandwidth > 0
    bench_workloads.report(rows, bandwidth)
    out = capsys.readouterr().out
    assert "x roof" in out and "GB/s" in out
    for w in bench_workloads.workloads(quick=True):
        assert w.name in out
    for r in rows:
        assert r["kernels"] >= 1 and r["times"]["axesarray"] > 0


def test_the_workload_suite_has_a_mid_size_of_the_same_programs():
    """``bench_workloads.py --mid``: the suite's programs at ~1e5 elements, the smallest size
    the target covers."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_workloads
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    full, mid = bench_workloads.workloads(False), bench_workloads.workloads(False, mid=True)
    assert [w.name for w in mid] == [w.name for w in full]
    assert all(5e4 <= w.elements() <= 3e5 for w in mid)


def test_the_workload_suite_times_torch_in_a_round_of_its_own(monkeypatch):
    """A call right after torch's runs slower whoever makes it (docs/design.md, "torch in a
    round of its own"): axesarray is timed beside numpy only, torch beside numpy in another
    round, and the row's torch time is the one from that round."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_workloads
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rounds = []

    def recorded(fns, repeat, seconds=0.0):
        rounds.append(sorted(fns))
        return {k: 1e-3 * (1 + len(rounds)) for k in fns}

    w = bench_workloads.workloads(quick=True)[0]
    w.torch_fn = lambda: None
    monkeypatch.setattr(bench_workloads, "_interleaved", recorded)
    monkeypatch.setattr(bench_workloads, "torch", _NoGrad())
    row = bench_workloads.measure(w, 1)
    assert rounds == [["numpy", "tier"], ["axesarray", "numpy"], ["numpy", "torch"]]
    assert row["times"]["axesarray"] == pytest.approx(3e-3)  # from its round with numpy
    assert row["times"]["torch"] == pytest.approx(4e-3)  # from torch's own round


def test_the_fused_benchmarks_time_torch_in_a_round_of_its_own(monkeypatch):
    """``bench_fused.py`` as the workload suite: torch is timed beside numpy only, and its
    row's time is the one from that round."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_fused
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rounds = []

    def recorded(fns, traffic, repeat):
        rounds.append(sorted(fns))
        return {k: 1e-3 * (1 + len(rounds)) for k in fns}, 1e-3

    monkeypatch.setattr(bench_fused, "interleaved", recorded)
    table = bench_fused.Table("t")
    fns = dict.fromkeys(("axesarray", "numpy", "numexpr", "torch"), lambda: None)
    bench_fused._report(table, "case", fns, 8, 1)
    assert rounds == [["axesarray", "numexpr", "numpy"], ["numpy", "torch"]]
    times = {row[1]: row[2] for row in table.rows}
    assert times["axesarray"] == pytest.approx(2e-3) and times["torch"] == pytest.approx(3e-3)


class _NoGrad:
    """A stand-in for torch: ``no_grad()`` as a decorator that changes nothing."""

    @staticmethod
    def no_grad():
        return lambda fn: fn


def test_the_expensive_ops_costs_are_measured_beside_the_table():
    """``bench_op_work.py`` times every op it lists (each an expensive row of the op table)
    and prints the table's weight beside the measure."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_op_work
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from axesarray.core.ops import OPS

    rows = bench_op_work.measure(repeat=1)
    assert set(rows) == set(bench_op_work.CASES)
    assert all(OPS[op].expensive for op in rows)
    for op, (ns, flops, weight) in rows.items():
        assert ns >= 0 and flops >= 0 and weight == (OPS[op].work or 4)


def test_the_measured_op_weights_leave_the_suites_plans_as_they_were(monkeypatch):
    """The op table's measured weights (``Op.work``: tanh 24, pow 100...) move the one-core
    estimate a kernel goes on threads by; the workload suite's programs (``--mid``
    sizes) plan the same kernels with every expensive op weighed 4."""
    import attrs

    import axesarray as ax
    from axesarray.core import ops
    from axesarray.engine import executor

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_workloads
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))

    def plans():
        executor._PLANS.clear()
        found = []
        for w in bench_workloads.workloads(False, mid=True):
            for out, e in w.ax_program():
                plan = ax.explain(e, out)
                found.append((w.name, [(k.kind, k.writes) for k in plan.kernels]))
        return found

    weighed = plans()
    for name, row in list(ops.OPS.items()):
        if row.work:
            monkeypatch.setitem(ops.OPS, name, attrs.evolve(row, work=0))
    assert plans() == weighed
    executor._PLANS.clear()
