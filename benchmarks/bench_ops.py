"""Single operations as users write them (``(x - y).eval()``, ``ax.clip``, ``x.max()``,
``ax.tanh``...), each against numpy's spelling of it, at ~1e5 and ~2e6 elements.

The workload suite (``bench_workloads.py``) times programs; this times the one-liners
between them, where per-call costs and the kernels' math library show. Default options
with ``tiered=False`` (steady state: kernels compiled); each row is timed in round-robin
with numpy's (``common.round_robin``), medians. A row below numpy's speed says so.

python benchmarks/bench_ops.py
python benchmarks/bench_ops.py --quick     # tiny sizes: checks that it runs
python benchmarks/bench_ops.py --only clip,tanh
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import round_robin  # noqa: E402

import axesarray as ax  # noqa: E402


def cases(b: int, t: int, k: int):
    """``(name, axesarray's call, numpy's call)`` over float32 ``B T K`` tensors."""
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((b, t, k)).astype(np.float32)
    yn = rng.standard_normal((b, t, k)).astype(np.float32)
    x, y = ax.tensor(xn, "B T K"), ax.tensor(yn, "B T K")
    on = np.empty_like(xn)
    out = ax.tensor(on, "B T K")

    def ema():
        out[...] = out * 0.9 + x * 0.1

    return [
        ("(x - y).eval()", lambda: (x - y).eval(), lambda: xn - yn),
        ("ax.clip(x, -1, 1).eval()", lambda: ax.clip(x, -1, 1).eval(), lambda: np.clip(xn, -1, 1)),
        ("out[...] = out * 0.9 + x * 0.1", ema, lambda: np.add(on * 0.9, xn * 0.1, out=on)),
        (
            "x.isel(T=1:) - x.isel(T=:-1)",
            lambda: (x.isel(T=slice(1, None)) - x.isel(T=slice(None, -1))).eval(),
            lambda: xn[:, 1:] - xn[:, :-1],
        ),
        ("ax.sqrt(ax.abs(x))", lambda: ax.sqrt(ax.abs(x)).eval(), lambda: np.sqrt(np.abs(xn))),
        ("x.mean('K')", lambda: x.mean("K").eval(), lambda: xn.mean(-1)),
        ("x.std('K')", lambda: x.std("K").eval(), lambda: xn.std(-1)),
        ("x.sum()", lambda: float(x.sum()), lambda: float(xn.sum())),
        ("x.max()", lambda: float(x.max()), lambda: float(xn.max())),
        ("x.argmax('K')", lambda: x.argmax("K").eval(), lambda: xn.argmax(-1)),
        ("(x * y).sum('K')", lambda: (x * y).sum("K").eval(), lambda: (xn * yn).sum(-1)),
        ("ax.sigmoid(x)", lambda: ax.sigmoid(x).eval(), lambda: 1 / (1 + np.exp(-xn))),
        ("ax.tanh(x)", lambda: ax.tanh(x).eval(), lambda: np.tanh(xn)),
        ("ax.log1p(ax.abs(x))", lambda: ax.log1p(ax.abs(x)).eval(), lambda: np.log1p(np.abs(xn))),
        (
            "ax.log1p(ax.exp(x))",
            lambda: ax.log1p(ax.exp(x)).eval(),
            lambda: np.log1p(np.exp(xn)),
        ),
        ("x.cumsum('T')", lambda: x.cumsum("T").eval(), lambda: np.cumsum(xn, axis=1)),
        ("x.cumsum('K') (last dim)", lambda: x.cumsum("K").eval(), lambda: np.cumsum(xn, axis=2)),
        ("x.astype('float16')", lambda: x.astype("float16").eval(), lambda: xn.astype(np.float16)),
    ]


def _check(got, want) -> None:
    """A wrong fast result is no result (an in-place row returns nothing to compare)."""
    if got is None:
        return
    got = got.numpy() if isinstance(got, ax.Tensor) else got
    np.testing.assert_allclose(
        np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=2e-3, atol=1e-4
    )


def run(sizes: list, repeat: int, only: str = "") -> list:
    keys = [k.strip() for k in only.split(",") if k.strip()]
    rows = []
    with ax.set_options(tiered=False):
        for shape in sizes:
            for name, fa, fn in cases(*shape):
                if keys and not any(k in name for k in keys):
                    continue
                _check(fa(), fn())
                t = round_robin({"ax": fa, "numpy": fn}, repeat)
                rows.append((name, int(np.prod(shape)), t["ax"], t["numpy"]))
    return rows


def report(rows: list) -> None:
    print("\nsingle operations (tiered=False, steady state; median of round-robin calls)")
    print(f"{'operation':<34} {'elements':>9} {'axesarray':>11} {'numpy':>11} {'x numpy':>8}")
    for name, n, ta, tn in rows:
        note = "  below numpy's speed" if tn / ta < 1 else ""
        print(f"{name:<34} {n:9.1e} {ta * 1e6:8.1f} us {tn * 1e6:8.1f} us {tn / ta:8.2f}{note}")
    print("x numpy: numpy's time / axesarray's (> 1: axesarray faster)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="", help="comma-separated name fragments")
    p.add_argument("--repeat", type=int, default=0)
    args = p.parse_args(argv)
    sizes = [(2, 4, 8)] if args.quick else [(8, 256, 64), (8, 4096, 64)]
    repeat = args.repeat or (3 if args.quick else 61)
    report(run(sizes, repeat, args.only))


if __name__ == "__main__":
    main()
