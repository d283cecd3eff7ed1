"""The logsumexp rewrites (engine/rewrite.py) against numpy at large logits: ``x - lse`` is
taken in float64 and rounded once, so a softmax or log-softmax written by hand stays within
the float32 tolerance where ``lse`` rounded to float32 did not (1.5e-5 relative at logits of
300, 4e-3 at 1e5), and the plan keeps its two passes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax

rng = np.random.default_rng(1919)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("center", [0.0, 300.0, -3000.0, 1e5])
@pytest.mark.parametrize("shape", [(16, 40), (1, 1), (3, 1)])
def test_a_softmax_by_hand_at_large_logits_matches_numpy(dtype, center, shape):
    xn = (rng.standard_normal(shape) * 3 + center).astype(dtype)
    x = ax.tensor(xn, "N K")
    e = ax.exp(x - x.max("K"))
    p = e / e.sum("K")
    assert len(ax.explain(p).kernels) == 2
    en = np.exp(xn - xn.max(1, keepdims=True))
    assert_close(p, en / en.sum(1, keepdims=True))


@pytest.mark.parametrize("center", [0.0, 300.0, 1e5])
def test_a_log_softmax_by_hand_at_large_logits_matches_numpy(center):
    xn = (rng.standard_normal((8, 30)) * 3 + center).astype(np.float32)
    x = ax.tensor(xn, "N K")
    m = x.max("K")
    out = (x - m) - ax.log(ax.exp(x - m).sum("K"))
    assert len(ax.explain(out).kernels) == 2
    mn = xn.max(1, keepdims=True)
    want = (xn - mn) - np.log(np.exp(xn - mn).sum(1, keepdims=True))
    assert_close(out, want, scale=8)  # an error of order ulp(|x - max|) near 0
