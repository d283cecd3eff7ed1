"""The planner's cost model (engine/cost.py) and the plans it decides, against numpy.

Kernel counts and temporaries come from ``ax.explain``; values from numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.engine import cost

rng = np.random.default_rng(18)


def _t(shape, names, dtype="float32"):
    return ax.tensor(rng.standard_normal(shape).astype(dtype), names)


def test_explain_reports_bytes_and_work_per_kernel():
    x = _t((64, 32), "N C")
    (k,) = ax.explain(x * 2 + 1).kernels
    assert k.est_bytes == 2 * 64 * 32 * 4  # read once, written once
    assert 2 * 64 * 32 <= k.est_flops <= 4 * 64 * 32
    (r,) = ax.explain(ax.exp(x).sum("C")).kernels
    assert r.est_bytes == 64 * 32 * 4 + 64 * 4
    assert r.est_flops >= cost.TRANSCENDENTAL * 64 * 32


def test_blas_and_numpy_steps_have_estimates():
    a, b = _t((16, 8), "M K"), _t((8, 12), "K N")
    (k,) = ax.explain(ax.dot(a, b, over="K")).kernels
    assert k.kind == "blas"
    assert k.est_flops == 2 * 16 * 8 * 12
    assert k.est_bytes == (16 * 8 + 8 * 12 + 16 * 12) * 4


def test_a_reduction_is_never_recomputed_per_element_of_its_consumer():
    x = _t((2, 32, 8, 8), "N C H W")
    e = ax.exp(x - x.max("C"))
    plan = ax.explain(e / e.sum("C"))
    assert len(plan.kernels) == 1  # the max a first sweep of the normalize kernel
    n = 2 * 32 * 8 * 8
    # recomputing the sum per output element would cost 32 times the exp work
    assert sum(k.est_flops for k in plan.kernels) < 4 * cost.TRANSCENDENTAL * n
    xn = x.numpy()
    en = np.exp(xn - xn.max(1, keepdims=True))
    assert_close(e / e.sum("C"), en / en.sum(1, keepdims=True))


def test_cheap_shared_values_are_recomputed_expensive_ones_stored():
    x = _t((16, 64), "N C")
    cheap = x * 2 + 1
    plan = ax.explain(cheap.sum("C") + cheap.max("C"))
    assert all(t[1] != (16, 64) for t in plan.temporaries)  # no full-size temporary
    heavy = ax.exp(ax.tanh(x) * ax.log1p(x * x))
    plan = ax.explain(heavy.sum("C") + heavy.max("C"))
    assert any(t[1] == (16, 64) for t in plan.temporaries)  # computed once, stored
    xn = x.numpy()
    hn = np.exp(np.tanh(xn) * np.log1p(xn * xn))
    assert_close(heavy.sum("C") + heavy.max("C"), hn.sum(1) + hn.max(1))


@pytest.mark.parametrize("uses", [1, 2, 5])
def test_worth_materializing_compares_work_with_a_temporarys_bytes(uses):
    assert not cost.worth_materializing(1000, 10**6, 4, 1)
    assert cost.worth_materializing(1000, 10**6, 4, uses) == (uses > 1)
    assert not cost.worth_materializing(1, 10**6, 4, uses)


def test_the_int8_quantize_is_one_kernel_and_matches_numpy():
    xn = (rng.standard_normal((2, 8, 5, 3)) * 90).astype(np.float32)
    xn[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    x = ax.tensor(xn, "N C H W")
    out = ax.empty_like_layout(x.axes, "int8", ax.Layout.parse("NCHW4"))
    q = ax.clip(ax.round(x / 0.5), -128, 127).astype("int8")
    assert len(ax.explain(q, out).kernels) == 1
    ax.assign(out, q)
    with np.errstate(invalid="ignore"):
        want = np.clip(np.round(xn / np.float32(0.5)), -128, 127).astype(np.int8)
    finite = np.isfinite(xn)
    np.testing.assert_array_equal(out.numpy()[finite], want[finite])


@pytest.mark.parametrize(
    "a_shape, b_shape, a_names, b_names, over",
    [
        ((64, 32), (48, 32), "N D", "M D", "D"),
        ((3, 40, 16), (3, 16, 50), "B T D", "B D S", "D"),
        ((2, 1, 64, 8), (2, 8, 64), "B X T D", "B D S", "D"),
        ((64, 6, 7), (7, 6, 80), "N H D", "D H M", ("D", "H")),
    ],
)
def test_a_sum_of_products_over_a_shared_name_runs_on_blas(
    a_shape, b_shape, a_names, b_names, over
):
    a, b = _t(a_shape, a_names, "float64"), _t(b_shape, b_names, "float64")
    e = (a * b).sum(over)
    assert ax.explain(e).kernels[0].kind == "blas"
    over = (over,) if isinstance(over, str) else over
    want = ax.dot(a, b, over=over)
    assert_close(e, want.transpose(*e.names))


def test_products_that_are_not_matrix_products_stay_fused():
    a, b = _t((64, 600), "N D"), _t((64, 600), "N D")
    assert [k.kind for k in ax.explain((a * b).sum("D")).kernels] == ["reduction"]
    small_a, small_b = _t((4, 8), "N D"), _t((5, 8), "M D")  # 160 products: fused
    assert [k.kind for k in ax.explain((small_a * small_b).sum("D")).kernels] == ["reduction"]
    an, bn = a.numpy(), b.numpy()
    assert_close((a * b).sum("D"), (an * bn).sum(1))
