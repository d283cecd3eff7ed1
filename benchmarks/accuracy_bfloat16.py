"""Accuracy of bfloat16 results: axesarray (float32 arithmetic, one rounding where stored)
against numpy with ml_dtypes (bfloat16 arithmetic, a rounding after every op) and torch
eager (when installed), each measured against the correctly rounded result (the formula
in float64, rounded once to bfloat16).

python benchmarks/accuracy_bfloat16.py            # 1e6 inputs per formula
python benchmarks/accuracy_bfloat16.py --quick    # 1e4

Prints, per formula and implementation, the largest error in units in the last place of
bfloat16 (ulp) and the share of results that are not the correctly rounded one. The docs'
table (docs/guide/interop.md) is its output; tests/test_bfloat16.py checks the claim that
axesarray's results are never further from the exact ones than ml_dtypes'.
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

import axesarray as ax

BF16 = np.dtype(ml_dtypes.bfloat16)

# name, axesarray/numpy formula (works on tensors and arrays alike), inputs' range
FORMULAS = [
    ("a * b + c", lambda m, a, b, c: a * b + c, (-4, 4)),
    ("(a + b) * (a - b)", lambda m, a, b, c: (a + b) * (a - b), (-4, 4)),
    ("exp(a) * sin(b)", lambda m, a, b, c: m.exp(a) * m.sin(b), (-3, 3)),
    ("a / (1 + b * b) - c", lambda m, a, b, c: a / (1 + b * b) - c, (-4, 4)),
    ("sum over K=256 of a * b", None, (-1, 1)),
]
K = 256


def _inputs(n: int, lo: float, hi: float, seed: int):
    rng = np.random.default_rng(seed)
    return [rng.uniform(lo, hi, n).astype(np.float32).astype(BF16) for _ in range(3)]


def _ulps(got: np.ndarray, exact64: np.ndarray) -> np.ndarray:
    """|got - exact| in ulps of the correctly rounded bfloat16 result."""
    rounded = exact64.astype(BF16)
    bits = rounded.view(np.uint16)
    up = (bits + np.uint16(1)).view(BF16).astype(np.float64)
    ulp = np.abs(up - rounded.astype(np.float64))
    ulp[ulp == 0] = np.inf
    return np.abs(got.astype(np.float64) - exact64) / ulp - 0.0


def _row(name, results: dict, exact64) -> list[str]:
    rounded = exact64.astype(BF16).view(np.uint16)
    cells = []
    for got in results.values():
        if got is None:
            cells.append("-")
            continue
        err = _ulps(got, exact64)
        wrong = (got.view(np.uint16) != rounded).mean()
        cells.append(f"{err.max():.2f} ulp, {100 * wrong:.2f}%")
    return [name] + cells


def measure(n: int) -> tuple[list[str], list[list[str]]]:
    """The table: header and rows (max error in ulps, share not correctly rounded)."""
    try:
        import torch
    except ImportError:
        torch = None
    header = ["formula", "axesarray", "numpy + ml_dtypes", "torch eager"]
    rows = []
    with ax.set_options(tiered=False):  # the kernels, not the numpy tier
        for i, (name, f, (lo, hi)) in enumerate(FORMULAS):
            if f is None:  # a contraction written as a reduction
                a, b, _ = _inputs(n // K * K, lo, hi, i)
                a, b = a.reshape(-1, K), b.reshape(-1, K)
                exact = (a.astype(np.float64) * b.astype(np.float64)).sum(1)
                ours = (ax.tensor(a, "N K") * ax.tensor(b, "N K")).sum("K").numpy()
                per_op = (a * b).sum(1, dtype=BF16)
                tt = None
                if torch is not None:
                    ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
                    tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
                    tt = (ta * tb).sum(1).view(torch.int16).numpy().view(BF16)
            else:
                a, b, c = _inputs(n, lo, hi, i)
                wide = [v.astype(np.float64) for v in (a, b, c)]
                exact = f(np, *wide)
                ours = f(ax, *(ax.tensor(v, "N") for v in (a, b, c))).numpy()
                per_op = f(np, a, b, c)
                tt = None
                if torch is not None:
                    tv = [
                        torch.from_numpy(v.view(np.int16)).view(torch.bfloat16) for v in (a, b, c)
                    ]
                    tt = f(torch, *tv).view(torch.int16).numpy().view(BF16)
            rows.append(_row(name, {"ax": ours, "np": per_op.astype(BF16), "torch": tt}, exact))
    return header, rows


def markdown(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    n = 10_000 if "--quick" in argv else 1_000_000
    header, rows = measure(n)
    print(f"bfloat16 accuracy, {n:,} inputs per formula: max error, share not correctly rounded")
    print(markdown(header, rows))


if __name__ == "__main__":
    main()
