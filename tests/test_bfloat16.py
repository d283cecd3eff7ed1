"""bfloat16 storage (issue 20): ops compute in float32 and round once where the value is
stored. The oracle is numpy in float32, rounded to bfloat16 by ml_dtypes; both engines
(the numpy reference and the fused kernels) must give it."""

from __future__ import annotations

import re
import warnings

import ml_dtypes
import numpy as np
import pytest

import axesarray as ax
from axesarray.testing import assert_close

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.float32
rng = np.random.default_rng(7)


@pytest.fixture(params=["numpy", "kernels"])
def engine(request):
    opts = {"engine": "numpy"} if request.param == "numpy" else {"tiered": False}
    with ax.set_options(**opts):
        yield request.param


def bf(shape, lo=-4.0, hi=4.0):
    """A bfloat16 array and its exact float32 values."""
    a = rng.uniform(lo, hi, shape).astype(F32).astype(BF16)
    return a, a.astype(F32)


def oracle(f, *arrays):
    """numpy in float32, rounded once to bfloat16."""
    with np.errstate(all="ignore"):
        return np.asarray(f(*(a.astype(F32) for a in arrays))).astype(BF16)


# --- conversions: bit-exact with ml_dtypes ----------------------------------------------------


def test_every_bfloat16_widens_exactly(engine):
    bits = np.arange(1 << 16, dtype=np.uint16)
    b = bits.view(BF16)
    got = ax.tensor(b, "N").astype("float32").numpy()
    want = b.astype(F32)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all()
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def test_float32_rounds_to_nearest_even(engine):
    edges = np.array(
        [0.0, -0.0, 1.0, 1.00390625, 1.005859375, 1.0078125, 3.3895314e38, 3.4028235e38,
         np.inf, -np.inf, np.nan, 1e-40, -1e-45, 1.1754944e-38, 65504.0, -2.5],
        dtype=F32,
    )  # fmt: skip
    ties = (np.arange(1, 4096, dtype=np.uint32) << 16 | 0x8000).view(F32)  # exactly halfway
    rand = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32).view(F32)
    for a in (edges, ties, rand, np.zeros(0, F32), np.ones(1, F32)):
        got = ax.tensor(a, "N").astype("bfloat16").numpy()
        with np.errstate(invalid="ignore"):
            want = a.astype(BF16)
        assert got.dtype == BF16
        nan = np.isnan(a)
        assert np.isnan(got.astype(F32)[nan]).all()
        np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


# --- dtypes ----------------------------------------------------------------------------------


def test_result_dtypes():
    b = ax.tensor(np.ones(3, BF16), "N")
    for dtype, want in [
        ("bfloat16", BF16),
        ("float16", np.dtype("float32")),
        ("float32", np.dtype("float32")),
        ("float64", np.dtype("float64")),
        ("int8", BF16),
        ("int64", BF16),
        ("bool", BF16),
    ]:
        other = ax.tensor(np.ones(3, dtype), "N")
        assert (b + other).dtype == want, dtype
        assert (other * b).dtype == want, dtype
    assert (b * 2.0).dtype == BF16 and (2 - b).dtype == BF16 and (b / 3).dtype == BF16
    assert ax.exp(b).dtype == BF16 and (-b).dtype == BF16 and abs(b).dtype == BF16
    assert (b > 0).dtype == np.bool_ and ax.isnan(b).dtype == np.bool_
    assert b.sum().dtype == BF16 and b.max().dtype == BF16 and b.mean().dtype == BF16
    assert b.argmax().dtype == np.int64
    assert ax.where(b > 0, b, 0.0).dtype == BF16
    assert b.astype("float32").dtype == np.float32 and b.astype("int8").dtype == np.int8
    assert ax.zeros((ax.Axis("N", 2),), "bfloat16").dtype == BF16
    assert ax.ones((ax.Axis("N", 2),), ml_dtypes.bfloat16).numpy().tolist() == [1.0, 1.0]


# --- values: float32 arithmetic, one rounding --------------------------------------------------


PROGRAMS = [
    ("add_mul", lambda x, y: (x + y) * 3, lambda x, y: (x + y) * F32(3)),
    ("div_sub", lambda x, y: x / (abs(y) + 1) - y, lambda x, y: x / (np.abs(y) + 1) - y),
    ("square", lambda x, y: x * x + y * y, lambda x, y: x * x + y * y),
    ("where", lambda x, y: ax.where(x > y, x, -y), lambda x, y: np.where(x > y, x, -y)),
    ("minmax", lambda x, y: ax.maximum(x, 0.5) - ax.minimum(y, 0), None),
]


@pytest.mark.parametrize("name, f, npf", PROGRAMS, ids=[p[0] for p in PROGRAMS])
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (7, 33)])
def test_exact_arithmetic_rounds_once(engine, name, f, npf, shape):
    """+ - * / max min where are exact in float32 arithmetic both in numpy and in kernels,
    so the bfloat16 result is bit-exact with the oracle."""
    a, _ = bf(shape)
    b, _ = bf(shape)
    npf = npf or (lambda x, y: np.maximum(x, F32(0.5)) - np.minimum(y, F32(0)))
    x, y = ax.tensor(a, "N C"), ax.tensor(b, "N C")
    got = f(x, y).numpy()
    want = oracle(npf, a, b)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_rounding_happens_once_not_per_op(engine):
    """(x * 3) / 3 gives x back in float32; rounding after the product would not."""
    a = np.arange(0x3F80, 0x4100, dtype=np.uint16).view(BF16)  # every bfloat16 in [1, 8)
    x = ax.tensor(a, "N")
    got = ((x * 3) / 3).numpy()
    np.testing.assert_array_equal(got.view(np.uint16), a.view(np.uint16))
    per_op = (a * BF16.type(3)) / BF16.type(3)  # ml_dtypes: rounds after every op
    assert (per_op != a).sum() == 63  # ml_dtypes' per-op rounding loses 63 of the 384
    # A stored value is rounded: evaluating the product first gives ml_dtypes' result, and
    # so does a float32 formula cast to bfloat16 by the user.
    y = (x * 3).eval() / 3
    np.testing.assert_array_equal(y.numpy().view(np.uint16), per_op.view(np.uint16))
    y = (x.astype("float32") * 3).astype("bfloat16") / 3
    np.testing.assert_array_equal(y.numpy().view(np.uint16), per_op.view(np.uint16))


@pytest.mark.parametrize("shape", [(0,), (1,), (1000,)])
def test_transcendental_within_one_ulp(engine, shape):
    a, _ = bf(shape, -3, 3)
    x = ax.tensor(a, "N")
    for f, npf in [
        (lambda t: ax.exp(t) * ax.sin(t), lambda t: np.exp(t) * np.sin(t)),
        (lambda t: ax.sigmoid(t), lambda t: 1 / (1 + np.exp(-t))),
        (lambda t: ax.tanh(t) + ax.log1p(abs(t)), lambda t: np.tanh(t) + np.log1p(np.abs(t))),
    ]:
        assert_close(f(x), oracle(npf, a))


@pytest.mark.parametrize("shape", [(0, 4), (1, 1), (5, 300)])
def test_reductions(engine, shape):
    a, _ = bf(shape)
    x = ax.tensor(a, "N C")
    for names, axis in [("C", 1), ("N", 0), (None, None)]:
        assert_close(x.sum(names), oracle(lambda t, axis=axis: t.sum(axis), a), scale=shape[-1])
        with warnings.catch_warnings():  # numpy warns on the mean of nothing (nan)
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = oracle(lambda t, axis=axis: t.mean(axis), a)
        assert_close(x.mean(names), mean)
        if a.size and (axis is None or a.shape[axis]):
            np.testing.assert_array_equal(
                x.max(names).numpy().view(np.uint16), a.max(axis).view(np.uint16)
            )
            along = (names, axis) if names else ("C", 1)
            assert_close(x.argmin(along[0]), a.argmin(along[1]))
    assert_close((x * x).sum("C"), oracle(lambda t: (t * t).sum(1), a), scale=shape[-1] * 16)


def test_assignment_and_views(engine):
    a, _ = bf((4, 6))
    out = ax.zeros((ax.Axis("N", 4), ax.Axis("C", 6)), "bfloat16")
    x = ax.tensor(a, "N C")
    out[...] = x.transpose("C N") * 2 + 1
    np.testing.assert_array_equal(
        out.numpy().view(np.uint16), oracle(lambda t: t * 2 + 1, a).view(np.uint16)
    )
    out[{"C": slice(0, 3)}] = ax.tensor(np.full((4, 3), 0.1, F32), "N C")  # float32 into bf16
    assert (out.numpy()[:, :3] == np.full((4, 3), 0.1, F32).astype(BF16)).all()
    r = x[{"C": slice(None, None, -2)}].eval()
    np.testing.assert_array_equal(r.numpy().view(np.uint16), a[:, ::-2].view(np.uint16))
    p = ax.pad(x, C=(1, 1), value=0.5).numpy()
    np.testing.assert_array_equal(p, np.pad(a, ((0, 0), (1, 1)), constant_values=BF16.type(0.5)))
    c = ax.concat([x, x * 2], "C").numpy()
    np.testing.assert_array_equal(c, np.concatenate([a, oracle(lambda t: t * 2, a)], 1))


@pytest.mark.parametrize("layout", ["NCHW4", "NHWC", "CHWN4"])
def test_layouts(engine, layout):
    a, _ = bf((2, 5, 3, 2))
    x = ax.tensor(a, "N C H W")
    y = x.to_layout(layout)
    assert y.dtype == BF16
    np.testing.assert_array_equal(y.numpy().view(np.uint16), a.view(np.uint16))
    z = ax.zeros(x.axes, "bfloat16", layout=layout)
    z[...] = x * 2
    np.testing.assert_array_equal(z.numpy(), oracle(lambda t: t * 2, a))
    big = ax.tensor(bf((4, 64, 32, 32))[0], "N C H W")  # >= 256 KiB: the repack kernels
    np.testing.assert_array_equal(big.to_layout(layout).numpy(), big.numpy())


def test_explain_is_one_kernel():
    a, _ = bf((8, 16))
    x, y = ax.tensor(a, "N C"), ax.tensor(a, "N C")
    assert len(ax.explain(ax.exp(x) * y + x / 3).kernels) == 1


# --- interop -----------------------------------------------------------------------------------


def test_numpy_and_repr():
    a, _ = bf((2, 3))
    x = ax.tensor(a, "N C")
    assert np.shares_memory(x.numpy(), a) and np.asarray(x).dtype == BF16
    assert "bfloat16" in repr(x) and "bfloat16" in x._repr_html_()
    assert x.astype("bfloat16").dtype == BF16 and x.itemsize == 2
    x[{"N": 0}] = 2.0
    assert a[0].tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("shape", [(0,), (1,), (3, 4)])
def test_dlpack_round_trip_with_numpy_bits(shape):
    """numpy reads no bfloat16 capsule; our capsule carries DLPack's bfloat16 code."""
    a, _ = bf(shape)
    names = "A B"[: 2 * len(shape) - 1]
    x = ax.tensor(a, names)
    back = ax.from_dlpack(x, names)  # our own capsule, relabelled on the way in
    assert back.dtype == BF16 and (np.shares_memory(back.numpy(), a) or not a.size)
    with pytest.raises((RuntimeError, BufferError, TypeError)):
        np.from_dlpack(x)  # numpy has no bfloat16: its own error


@pytest.mark.parametrize("shape", [(0,), (1,), (3, 4)])
def test_torch_round_trip_keeps_bfloat16(shape):
    torch = pytest.importorskip("torch")
    names = "A B"[: 2 * len(shape) - 1]
    t = torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape).to(torch.bfloat16) / 3
    x = ax.tensor(t, names)
    y = ax.from_dlpack(t, names)
    want = t.float().numpy().astype(BF16)
    for z in (x, y):
        assert z.dtype == BF16
        np.testing.assert_array_equal(z.numpy().view(np.uint16), want.view(np.uint16))
    back = torch.from_dlpack(x)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)
    if t.numel():
        assert back.data_ptr() == t.data_ptr()  # zero-copy both ways
        x[...] = 5.0
        assert float(t.reshape(-1)[0]) == 5.0
    s = (ax.tensor(t, names) * 2).sum()
    assert torch.from_dlpack(s.eval()).dtype == torch.bfloat16
    assert abs(float(s) - float((t.float() * 2).sum())) <= 0.01 * max(1.0, float(s))


# --- errors ------------------------------------------------------------------------------------


def test_unsupported_dtype_message_lists_bfloat16():
    with pytest.raises(TypeError, match=re.escape("Use one of: bool,") + ".*bfloat16"):
        ax.zeros((ax.Axis("N", 2),), "complex64")


def test_accuracy_table_claim():
    """The docs' table: axesarray's bfloat16 results are never further from the correctly
    rounded ones than numpy with ml_dtypes (which rounds after every op)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import accuracy_bfloat16

    header, rows = accuracy_bfloat16.measure(4096)
    assert header[1:3] == ["axesarray", "numpy + ml_dtypes"]
    for row in rows:
        ours, per_op = (float(cell.split(" ulp")[0]) for cell in row[1:3])
        assert ours <= per_op, row
        if row[0] != "a / (1 + b * b) - c":  # float32's own cancellation there
            assert ours <= 0.5 and row[1].endswith(" 0.00%"), row  # correctly rounded


@pytest.mark.parametrize("n", [0, 1, 5])
def test_gradient_through_bfloat16(n):
    """ax.grad of a float32 loss reaches a float32 variable through bfloat16 casts."""
    a = np.linspace(-1, 1, n, dtype=F32).astype(BF16)
    x = ax.tensor(a, "N")
    w = ax.variable(np.full(n, 0.5, F32), "N", name="w")
    (g,) = ax.grad((w.astype("bfloat16") * x).astype("float32").sum(), [w])
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g.numpy(), a.astype(F32))
    with pytest.raises(TypeError, match=r"^grad: the loss must be a float tensor, not bfloat16"):
        ax.grad((w.astype("bfloat16") * x).sum(), [w])


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int64", "float16", "float64"])
def test_casts_to_and_from_every_dtype(engine, dtype):
    """astype both ways gives ml_dtypes' (numpy's) conversion, sizes 0, 1 and more."""
    vals = np.array([0, 1, 3, 100, 127, 250, -7, 1e10, -2.5, 300.7, np.inf], np.float64)
    for n in (0, 1, len(vals)):
        b = vals[:n].astype(F32).astype(BF16)
        with np.errstate(all="ignore"):
            want = b.astype(dtype)
            src = vals[:n].astype(dtype)
        np.testing.assert_array_equal(ax.tensor(b, "N").astype(dtype).numpy(), want)
        got = ax.tensor(src, "N").astype("bfloat16").numpy()
        np.testing.assert_array_equal(got.astype(np.float64), src.astype(BF16).astype(np.float64))


@pytest.mark.parametrize("n", [1, 5])
def test_chunked_bfloat16_matches_in_memory(n):
    """A dask-chunked bfloat16 tensor: each chunk's kernel computes in float32 and rounds
    once, as in memory (the recipe carries the dtype by name)."""
    pytest.importorskip("dask")
    a, _ = bf((n, 6))
    x = ax.tensor(a, "N C")
    c = x.chunk({"N": 2})
    for f in (lambda t: ax.exp(t) * 3 - t, lambda t: t.sum("N"), lambda t: t.mean("C")):
        got = f(c).numpy()
        assert got.dtype == BF16
        np.testing.assert_array_equal(got.view(np.uint16), f(x).numpy().view(np.uint16))


@pytest.mark.parametrize("layout", [None, "NCHW4"])
def test_save_load_and_convert_keep_bfloat16(tmp_path, layout):
    """The .npy holds bfloat16 as 2-byte voids; the sidecar names the dtype, so load and
    the CLI give bfloat16 back."""
    from axesarray.io import cli

    a, _ = bf((2, 3, 1, 2))
    t = ax.tensor(a, "N C H W")
    ax.save(tmp_path / "b.npy", t if layout is None else t.to_layout(layout))
    for mmap in (None, "r"):
        back = ax.load(tmp_path / "b.npy", mmap_mode=mmap)
        assert back.dtype == BF16 and str(back.layout) == str(layout)
        np.testing.assert_array_equal(back.numpy().view(np.uint16), a.view(np.uint16))
    assert (
        cli.main(["convert", str(tmp_path / "b.npy"), str(tmp_path / "o.npy"), "--to", "NHWC"]) == 0
    )
    out = ax.load(tmp_path / "o.npy")
    assert out.dtype == BF16 and str(out.layout) == "NHWC"
    np.testing.assert_array_equal(out.numpy().view(np.uint16), a.view(np.uint16))
