"""Assertion helpers: values against numpy with one tolerance table, memory, names."""

from __future__ import annotations

import numpy as np

import axesarray as ax

__all__ = ["TOL", "TOL_BFLOAT16", "assert_close", "assert_named", "assert_shares_memory"]

# (rtol, atol) per float dtype; integers and bools compare exactly. float16 gets room for a
# fused engine that computes in float32 and rounds once where numpy rounds at every step;
# float32 for sums accumulated in a different order than numpy's pairwise sum.
TOL = {
    np.dtype("float16"): (1e-2, 1e-2),
    np.dtype("float32"): (2e-5, 1e-5),
    np.dtype("float64"): (1e-11, 1e-12),
}
# bfloat16 (8 significant bits, kept out of TOL so that importing it needs no ml_dtypes):
# one unit in the last place, as a float32 result within an ulp of numpy's can round to
# the neighbouring bfloat16.
TOL_BFLOAT16 = (1e-2, 1e-2)


def assert_close(actual, expected, *, dtype=True, scale: float = 1.0, err_msg: str = "") -> None:
    """Assert ``actual`` (Tensor or array) equals numpy's ``expected``, dtype included.

    ``scale`` multiplies atol for results whose rounding error grows with the inputs
    (a sum's error is proportional to sum|x|, not to the result).

    >>> import axesarray as ax, numpy as np
    >>> assert_close(ax.tensor(np.ones(2), "N").sum(), np.float64(2.0))
    """
    if isinstance(actual, ax.Tensor):
        actual = actual.numpy()
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if dtype:
        assert actual.dtype == expected.dtype, (
            f"dtype {actual.dtype} != numpy's {expected.dtype}. {err_msg}"
        )
    assert actual.shape == expected.shape, (
        f"shape {actual.shape} != numpy's {expected.shape}. {err_msg}"
    )
    tol = TOL.get(expected.dtype) if expected.dtype.kind != "V" else TOL_BFLOAT16
    if tol is None:
        np.testing.assert_array_equal(actual, expected, err_msg=err_msg, strict=dtype)
    else:
        rtol, atol = tol
        np.testing.assert_allclose(
            actual.astype(np.float64),
            expected.astype(np.float64),
            rtol=rtol,
            atol=atol * scale,
            equal_nan=True,
            err_msg=err_msg,
        )


def _host(x) -> np.ndarray:
    if isinstance(x, ax.Tensor):
        if not x.is_lvalue:
            raise AssertionError("an r-tensor has no memory of its own")
        return x.numpy()
    return np.asarray(x)


def assert_shares_memory(a, b) -> None:
    """Assert two tensors or arrays (or anything ``np.asarray`` reads without copying, as
    a DLPack or xarray result) overlap in memory: a zero-copy check.

    >>> import axesarray as ax, numpy as np
    >>> arr = np.zeros((2, 3))
    >>> assert_shares_memory(ax.tensor(arr, "N C").transpose("C N"), arr)
    """
    assert np.shares_memory(_host(a), _host(b)), "the two do not share memory"


def assert_named(t, names) -> None:
    """Assert a tensor's axis names (a string ``"N C"`` or a sequence), in order."""
    expected = tuple(names.split()) if isinstance(names, str) else tuple(names)
    assert t.names == expected, f"axes {t.names} != {expected}"
