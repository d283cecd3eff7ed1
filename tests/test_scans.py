"""Running sums and products by compiled loops (``kernels.scans``): numpy's values bit for
bit on every dtype the loops take, over views, in place, read-only; numpy's call for the
rest; the plan says which."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import axesarray as ax
from axesarray.engine import executor
from axesarray.kernels import scans

LOOP_DTYPES = ("bool", "int8", "uint8", "int32", "int64", "float32", "float64")


def _values(rng, shape, dtype):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 5, shape).astype(dtype)  # products wrap: numpy's way too
    a = rng.uniform(0.5, 1.5, shape).astype(dtype)
    a.flat[:: max(1, a.size // 3)] *= -1
    return a


def _kinds(t) -> list[str]:
    return [k.kind for k in ax.explain(t).kernels]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(LOOP_DTYPES),
    st.lists(st.integers(1, 6), min_size=1, max_size=4),
    st.sampled_from(["cumsum", "cumprod"]),
    st.integers(0, 3),
    st.sampled_from(["whole", "transposed", "sliced", "reversed"]),
    st.integers(0, 2**32 - 1),
)
def test_scans_are_numpys_bit_for_bit(dtype, shape, op, at, how, seed):
    """Any dim of any view (transposed, reversed, sliced, a view the dims before or after
    the scan's do not merge in: numpy's call), sizes 1 and up, against numpy's exact
    values."""
    rng = np.random.default_rng(seed)
    a = _values(rng, tuple(shape), dtype)
    names = " ".join("ABCD"[: len(shape)])
    t = ax.tensor(a, names)
    if how == "transposed":
        t, a = t.transpose(*reversed(t.names)), a.transpose()
    elif how == "sliced" and shape[0] > 1:
        t, a = t.isel(A=slice(None, None, 2)), a[::2]
    elif how == "reversed":  # negative strides (a gradient's flipped running sum)
        last = t.names[-1]
        t, a = t.isel({last: slice(None, None, -1)}), a[..., ::-1]
    name = t.names[at % t.ndim]
    with ax.set_options(tiered=False):
        before = scans.STATS["scans"]
        got = getattr(t, op)(name)
        want = getattr(np, op)(a, axis=at % t.ndim)
        values = got.numpy()
        assert values.dtype == want.dtype
        np.testing.assert_array_equal(values, want)
        ran = scans.STATS["scans"] - before
        assert ran == (_kinds(got) == ["scan"])


def test_each_loop_and_what_stays_numpys():
    """A middle dim (the inner dim side by side), the last dim (rows side by side), a
    single row; float16 and a zero-length axis stay numpy's call; float NaN, inf and
    subnormal values run through the loop as numpy's adds do."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 33, 17)).astype(np.float32)
    a[1, 3, 2], a[2, 5, 0], a[3, 0, 1], a[0, 7, 9] = np.nan, np.inf, -np.inf, 1e-45
    t = ax.tensor(a, "B T K")
    with ax.set_options(tiered=False):
        loops = (("T", 1, "scan_inner"), ("K", 2, "scan_rows"), ("B", 0, "scan_inner"))
        for name, d, loop in loops:
            for op in ("cumsum", "cumprod"):
                r = getattr(t, op)(name)
                assert _kinds(r) == ["scan"]
                assert ax.explain(r).kernels[0].computes == f"{op} (a compiled scan)"
                np.testing.assert_array_equal(r.numpy(), getattr(np, op)(a, axis=d))
                (step,) = executor._PLANS[r.node.key].steps
                assert step.scan.loop == loop
        row = ax.tensor(a[0, 0], "K")
        np.testing.assert_array_equal(row.cumsum("K").numpy(), np.cumsum(a[0, 0]))
        half = ax.tensor(a.astype(np.float16), "B T K").cumsum("T")
        empty = ax.tensor(np.ones((0, 3), np.float32), "N K").cumsum("K")
        for r, want in ((half, np.cumsum(a.astype(np.float16), 1)), (empty, np.ones((0, 3)))):
            assert _kinds(r) == ["numpy"]
            np.testing.assert_array_equal(r.numpy(), want)


def test_a_scan_into_its_own_input_and_from_read_only_memory():
    """``x[...] = x.cumsum(T)`` reads x whole before writing it (the loop steps aside when
    the storages may overlap); a read-only input compiles its own signature once."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 40, 9)).astype(np.float32)
    want = np.cumsum(a, 1)
    x = ax.tensor(a.copy(), "B T K")
    frozen = a.copy()
    frozen.flags.writeable = False
    ro = ax.tensor(frozen, "B T K")
    with ax.set_options(tiered=False):
        x[...] = x.cumsum("T")
        np.testing.assert_array_equal(x.numpy(), want)
        before = scans.STATS["scans"]
        np.testing.assert_array_equal(ro.cumsum("T").numpy(), want)
        assert scans.STATS["scans"] == before + 1
        assert any(key[-1] for key in scans.LOOPS)  # the read-only signature


@pytest.mark.parametrize("tiered", [True, False])
def test_scans_in_programs_keep_numpys_values(tiered):
    """A scan between fused kernels (it reads a computed temp, a reduction reads it), both
    tiers: the values of numpy's own program."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 50, 12)).astype(np.float32)
    x = ax.tensor(a, "B T K")
    with ax.set_options(tiered=tiered):
        for _ in range(3):
            got = ((x * 2).cumsum("T") - x).sum("K").numpy()
    want = (np.cumsum(a * 2, 1) - a).sum(2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
