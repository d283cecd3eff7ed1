"""CUDA kernels: the same generated bodies in grid-stride kernels, against numpy.

Without a GPU these run under numba's CUDA simulator (conftest.py sets
``NUMBA_ENABLE_CUDASIM=1`` before numba is imported): tiny shapes, few examples, since the
simulator runs one Python thread per CUDA thread. It checks indexing and reduction logic,
not speed or races; ``gpu``-marked tests need a real device and skip otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close
from hypothesis import given, settings
from strategies import build, programs, shadow_eval

import axesarray as ax

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not ax.Device("cuda").available(), reason="no CUDA device and no simulator"),
]

N, C, H = ax.Axis("N", 2), ax.Axis("C", 3), ax.Axis("H", 5)
rng = np.random.default_rng(3)


def _simulated() -> bool:
    from numba import config

    return bool(config.ENABLE_CUDASIM)


def on_gpu(shape_axes, dtype="float64"):
    arr = rng.standard_normal([a.length for a in shape_axes]).astype(dtype)
    return ax.tensor(arr, shape_axes).to("cuda"), arr


@pytest.fixture(autouse=True)
def _fused():
    with ax.set_options(engine="numba"):
        yield


@settings(max_examples=max(5, settings.default.max_examples // 5))
@given(prog=programs(max_depth=2, max_nodes=5))
def test_random_programs_on_the_device(prog):
    """Random expression trees evaluated on the device give numpy's values."""
    arrays = prog.arrays()
    expected = shadow_eval(prog, arrays)
    result = build(prog, [t.to("cuda") for t in prog.tensors(arrays)])
    assert result.device == "cuda" or result.ndim == 0 and not prog.inputs
    assert_close(result, expected.arr, scale=expected.mag)


def test_round_trip_and_device_results():
    x, xn = on_gpu((N, C, H))
    assert x.device == "cuda"
    y = (ax.exp(x) * 2).eval()
    assert y.device == "cuda"
    back = y.to("cpu")
    assert back.device == "cpu"
    assert_close(back, np.exp(xn) * 2)


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod", "argmax", "argmin", "mean"])
def test_reductions(op):
    x, xn = on_gpu((N, C, H))
    ref = {
        "sum": np.sum,
        "max": np.max,
        "min": np.min,
        "prod": np.prod,
        "mean": np.mean,
        "argmax": np.argmax,
        "argmin": np.argmin,
    }[op]
    if op.startswith("arg"):
        assert_close(getattr(x, op)("H"), ref(xn, axis=2))
        assert_close(getattr(x, op)("N"), ref(xn, axis=0))
    else:
        assert_close(getattr(x, op)("C"), ref(xn, axis=1))
        assert_close(getattr(x, op)(), ref(xn))


def test_argmax_ties_and_nan_take_the_first_index():
    L = ax.Axis("L", 11)
    a = np.array([1.0, 5, 5, 2, np.nan, 5, np.nan, 0, 5, 1, 2])
    x = ax.tensor(a, (L,)).to("cuda")
    assert int(x.argmax("L")) == 4
    b = np.array([3, 7, 7, 1, 7, 0, 0, 7, 2, 2, 1], dtype=np.int32)
    y = ax.tensor(b, (L,)).to("cuda")
    assert int(y.argmax("L")) == 1 and int(y.argmin("L")) == 5


def test_dot_pad_concat_and_float16():
    K = ax.Axis("K", 4)
    a, an = on_gpu((N, K))
    b, bn = on_gpu((K, C))
    assert_close(ax.dot(a + 1, b, over="K"), (an + 1) @ bn)
    assert_close(
        ax.pad(a, K=(1, 2), value=-1.0), np.pad(an, ((0, 0), (1, 2)), constant_values=-1.0)
    )
    assert_close(ax.concat([a, a * 2], "K"), np.concatenate([an, an * 2], axis=1))
    h, hn = on_gpu((N, C), "float16")
    assert_close(h * 3 + 1, hn * np.float16(3) + np.float16(1))


def test_aliasing_on_the_device():
    L = ax.Axis("L", 9)
    x, xn = on_gpu((L,))
    x[{"L": slice(1, None)}] = x[{"L": slice(None, -1)}] + 1
    expected = xn.copy()
    expected[1:] = xn[:-1] + 1
    assert_close(x, expected)


@pytest.mark.gpu
@pytest.mark.skipif(_simulated(), reason="needs a real GPU")
def test_large_shapes_on_a_real_gpu():
    big = ax.Axis("B", 1 << 22)
    x, xn = on_gpu((big,), "float32")
    assert_close(ax.sigmoid(x), 1 / (1 + np.exp(-xn)))
    assert_close(
        ((x - 1) ** 2).sum(),
        np.sum((xn.astype(np.float64) - 1) ** 2).astype(np.float32),
        scale=float(np.abs(xn).sum()),
    )
