"""Shared test configuration: hypothesis profiles, the tolerance table, the engine fixture.

numpy is the oracle everywhere. ``assert_close`` is the one comparison helper: it checks
the dtype first, then the values with the tolerance of that dtype (exact for ints/bool).
"""

from __future__ import annotations

import os

# CUDA kernels are tested under numba's simulator unless a real GPU is present. The choice
# must be made before numba is first imported (axesarray imports it lazily).
if not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import axesarray as ax

# --- hypothesis profiles ------------------------------------------------------------------
# deadline=None: the fused engine compiles a numba kernel on the first example of a new
# expression structure, which takes seconds. The Makefile selects "ci".
_COMMON = dict(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # option fixtures hold for every example
    ],
    print_blob=True,
)
settings.register_profile("dev", max_examples=50, **_COMMON)
settings.register_profile("ci", max_examples=40, derandomize=True, **_COMMON)
settings.register_profile("thorough", max_examples=500, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# --- one tolerance table --------------------------------------------------------------------
# (rtol, atol) per float dtype; integers and bools compare exactly. Never loosen a tolerance
# in a test: change it here, with a reason. float16 gets room for a fused engine that
# computes in float32 and rounds once where numpy rounds at every step; float32 for sums
# accumulated in a different order than numpy's pairwise sum.
TOL = {
    np.dtype("float16"): (1e-2, 1e-2),
    np.dtype("float32"): (2e-5, 1e-5),
    np.dtype("float64"): (1e-11, 1e-12),
}
# The same table's rows for gradients (float64), by what they are compared with.
TOL_GRAD = {
    # float64 central differences (step 1e-6): truncation ~1e-12 and rounding ~1e-10
    # relative to the loss, so atol is scaled by the loss's magnitude.
    "gradcheck": (1e-5, 1e-6),
    # torch autograd (both float64, summed in different orders).
    "torch": (1e-9, 1e-10),
}


def assert_close(actual, expected, *, dtype=True, scale: float = 1.0, err_msg: str = "") -> None:
    """Assert ``actual`` (Tensor or array) equals numpy's ``expected``, dtype included.

    ``scale`` multiplies atol for results whose rounding error grows with the inputs
    (a sum's error is proportional to sum|x|, not to the result).
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
    tol = TOL.get(expected.dtype)
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


def assert_grad_close(
    actual, expected, *, table: str = "gradcheck", scale: float = 1.0, err_msg: str = ""
) -> None:
    """Assert a gradient equals a reference (central differences or torch), same shape."""
    if isinstance(actual, ax.Tensor):
        actual = actual.numpy()
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}. {err_msg}"
    rtol, atol = TOL_GRAD[table]
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol * scale, err_msg=err_msg)


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(params=["numpy", "numba"])
def engine(request):
    """Run the test under each engine; "numba" falls back to the reference until it lands."""
    with ax.set_options(engine=request.param):
        yield request.param


@pytest.fixture(autouse=True)
def _default_options():
    """Each test starts from the default options, whatever an earlier test left set."""
    saved = dict(ax.options.OPTIONS)
    yield
    ax.options.OPTIONS.update(saved)
