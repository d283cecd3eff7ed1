"""Dynamic batch axes (issue 20): ``ax.Axis("N", None)`` in a placeholder takes its length
from each call; inputs by keyword. The oracle is the same step written with numpy."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given
from hypothesis import strategies as st

import axesarray as ax
from axesarray.kernels import cache

F = ax.Axis("F", 3)
rng = np.random.default_rng(11)


def raises(exc, text: str):
    return pytest.raises(exc, match="^" + re.escape(text))


def _step(dtype="float64"):
    x = ax.placeholder((ax.Axis("N", None), F), dtype, name="x")
    y = ax.placeholder((ax.Axis("N", None),), dtype, name="y")
    w = ax.variable(np.array([0.5, -1.0, 2.0], dtype), "F", name="w")
    pred = (x * w).sum("F")
    loss = ((pred - y) ** 2).mean("N")
    (gw,) = ax.grad(loss, [w])
    return ax.function([loss, gw, pred], inputs=[x, y]), np.array([0.5, -1.0, 2.0], dtype)


def _oracle(a, b, w):
    r = a @ w - b
    loss = (r**2).mean() if len(a) else np.nan  # numpy warns on the mean of nothing
    return loss, (2 * r[:, None] * a).mean(0) if len(a) else np.zeros(3), a @ w


@pytest.mark.parametrize("lengths", [[2, 32, 20, 1, 0, 32]])
def test_every_batch_length_by_keyword_and_position(lengths):
    step, w = _step()
    for n in lengths:
        a, b = rng.standard_normal((n, 3)), rng.standard_normal(n)
        want = _oracle(a, b, w)
        for loss, gw, pred in (step(x=a, y=b), step(a, b), step(a, y=b)):
            assert pred.axes == ax.Axes([ax.Axis("N", n)])
            if n:
                assert_close(loss, want[0])
            else:
                assert np.isnan(loss.item())  # numpy's mean of nothing
            assert_close(gw, want[1])
            assert_close(pred, want[2])


def test_tensor_values_any_order_and_float32():
    step, w = _step("float32")
    a = rng.standard_normal((7, 3)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    loss, gw, pred = step(ax.tensor(a.T.copy(), "F N"), ax.tensor(b, "N"))
    want = _oracle(a.astype(np.float64), b.astype(np.float64), w.astype(np.float64))
    np.testing.assert_allclose(loss.item(), want[0], rtol=1e-5)
    np.testing.assert_allclose(gw.numpy(), want[1], rtol=1e-5, atol=1e-5)
    assert pred.shape == (7,) and pred.dtype == np.float32


def test_a_new_length_reuses_the_kernels():
    """Kernels are generic in loop lengths: a new batch length plans again, compiles nothing
    (the loop nest is the same when neither length is 1)."""
    step, _ = _step()
    with ax.set_options(tiered=False):
        step(np.ones((32, 3)), np.ones(32))
        before = cache.STATS["compiled"] + cache.STATS["disk_hits"]
        step(np.ones((20, 3)), np.ones(20))
        step(np.ones((9, 3)), np.ones(9))
        assert cache.STATS["compiled"] + cache.STATS["disk_hits"] == before


def test_reductions_broadcasts_and_views_over_the_batch():
    x = ax.placeholder((ax.Axis("N", None), F), "float64", name="x")
    centered = x - x.mean("N")  # a mean broadcast back over N
    out = [centered.transpose("F N"), (x * x).sum("N"), ax.softmax(x, axis="F").max("F")]
    f = ax.function(out, inputs=[x])
    for n in (5, 1, 2):
        a = rng.standard_normal((n, 3))
        t, s, m = f(a)
        assert t.names == ("F", "N") and t.shape == (3, n)
        assert_close(t, (a - a.mean(0)).T)
        assert_close(s, (a * a).sum(0))
        e = np.exp(a - a.max(1, keepdims=True))
        assert_close(m, (e / e.sum(1, keepdims=True)).max(1))


def test_errors():
    step, _ = _step()
    with raises(
        ax.AxesError,
        "function: axis 'N' is bound per call and has two lengths (N=4 in input 0, N=3 in "
        "input 1). Pass the same batch length to every input.",
    ):
        step(np.ones((4, 3)), np.ones(3))
    with raises(
        ax.AxesError,
        "function: input 0 (placeholder 'x') has axes N=any, F=3, shape (any, 3) (got shape "
        "(4, 2)). Pass an array of that shape",
    ):
        step(np.ones((4, 2)), np.ones(4))  # F is not bound per call
    with raises(TypeError, "function: no input is named 'z' (named inputs: 'x', 'y')."):
        step(x=np.ones((2, 3)), z=np.ones(2))
    with raises(TypeError, "function: input 'x' is given twice."):
        step(np.ones((2, 3)), x=np.ones((2, 3)))
    with raises(TypeError, "function: missing input(s) (y)."):
        step(x=np.ones((2, 3)))
    x = ax.placeholder((ax.Axis("N", None), F), "float64", name="x")
    f = ax.function(x[{"N": slice(0, 1)}] * 2, inputs=[x])
    with raises(
        ax.AxesError,
        "function: the outputs use an axis bound per call by its length (N=5; leaf node uses "
        "dim 0 by its length). Slice, pad, reshape or sort along other axes",
    ):
        f(np.ones((5, 3)))
    with raises(ax.AxesError, "create: expected Axis objects (got Axis('N', None)). A length"):
        ax.zeros((ax.Axis("N", None), F))
    assert repr(ax.Axis("N", None)) == "Axis('N', None)"


_F = ax.Axis("F", 4)
_XH = ax.placeholder((ax.Axis("N", None), _F), "float64", name="xh")
_FH = ax.function(
    [ax.sigmoid(_XH * 2 + 1).sum("F"), (_XH - _XH.mean("N")) ** 2, _XH.max("F"), _XH.mean()],
    inputs=[_XH],
)


@given(st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_any_length_matches_numpy(n, seed):
    """One function, called with random batch lengths (each new one rebuilt once)."""
    a = np.random.default_rng(seed).standard_normal((n, 4))
    s, c, m, mean = _FH(a)
    assert_close(s, (1 / (1 + np.exp(-(a * 2 + 1)))).sum(1))
    if n:
        assert_close(c, (a - a.mean(0)) ** 2)
        assert_close(mean, a.mean())
    assert_close(m, a.max(1))
