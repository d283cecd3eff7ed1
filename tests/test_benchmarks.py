"""The benchmark runners run (small sizes): every speed claim must have a working runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_benchmarks_run_in_quick_mode():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick"],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    ).stdout
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
        "explain(gw) T=",
        "first gw.numpy()",
        "numpy BPTT",
        "calls/s, 1 thread / 4 threads",
        "sum of the kernels alone",
        "xarray on ax.array_api (lazy)",
    ):
        assert case in out
    assert "NCHW" in out and "CHWN4" in out
