"""Shared test configuration: hypothesis profiles, the tolerance table, the engine fixture.

numpy is the oracle everywhere. ``assert_close`` (from ``axesarray.testing``) is the one
comparison helper: it checks the dtype first, then the values with the tolerance of that
dtype (exact for ints/bool).
"""

from __future__ import annotations

import os
import subprocess
import sys

# CUDA kernels are tested under numba's simulator unless a real GPU is present. The choice
# must be made before numba is first imported (axesarray imports it lazily).
if not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import axesarray as ax
from axesarray.testing import TOL, assert_close

__all__ = ["TOL", "assert_close", "special_rows"]

# The suite runs both ways (``make test``). By default it tests the fused kernels: the
# numpy tier (which answers new cheap expressions while their kernels compile) would
# answer most of its small cases instead. ``pytest --tiered`` keeps the default option
# (``tiered=True``, as users run) and lets the tier answer every evaluation it would take
# (``tiers.ANSWER_ALL``: no compile starts, so it never hands over to the kernels),
# checked against the same oracles and the same tolerance table: no test passes because
# of either tier. The Makefile's second pass runs the files listed in ``TIERED_FILES``
# this way; the hand-over itself is tested in tests/test_tiers.py.
ax.set_options(tiered=False)


def pytest_addoption(parser):
    parser.addoption(
        "--tiered",
        action="store_true",
        help="run with the default tiered=True (the numpy tier answers first evaluations)",
    )


def pytest_configure(config):
    if config.getoption("tiered"):
        from axesarray.engine import tiers

        ax.set_options(tiered=True)
        tiers.ANSWER_ALL = True  # every evaluation the tier takes is its answer, not one


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

# --- one tolerance table -------------------------------------------------------------------
# ``TOL`` and ``assert_close`` live in ``axesarray.testing`` (users check their own code with
# them); the table is the one place tolerances are set. Never loosen one in a test: change
# the table, with a reason.
# The same table's rows for gradients (float64), by what they are compared with.
TOL_GRAD = {
    # float64 central differences (step 1e-6): truncation ~1e-12 and rounding ~1e-10
    # relative to the loss, so atol is scaled by the loss's magnitude.
    "gradcheck": (1e-5, 1e-6),
    # torch autograd (both float64, summed in different orders).
    "torch": (1e-9, 1e-10),
}


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


def special_rows(dtype, length: int) -> np.ndarray:
    """(8, ``length``) random values (x30) whose rows hold the special values a softmax,
    log-softmax or logsumexp over the last axis must keep: a row of -inf, NaN, +inf
    beside finite values and beside a value whose exp overflows, a row of +inf, a row
    partly -inf, NaN and +inf together. ``length`` >= 6."""
    rng = np.random.default_rng(8)
    a = (rng.standard_normal((8, length)) * 30).astype(dtype)
    a[1] = -np.inf  # softmax nan, logsumexp -inf
    a[2, 3] = np.nan
    a[3, 4] = np.inf  # softmax 0 and nan, logsumexp +inf
    a[4, 4] = np.inf
    a[4, 5] = 100.0 if dtype == "float32" else 800.0  # exp overflows beside +inf: nan
    a[5] = np.inf
    a[6, :5] = -np.inf
    a[7, 0] = np.nan
    a[7, 1] = np.inf
    return a


def np_softmax(a, axis):
    """numpy's softmax as its users write it: the max subtracted, exp, divided by the sum."""
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def ax_softmax(x, name):
    """The same softmax written by hand with axesarray, over the axis ``name``."""
    e = ax.exp(x - x.max(name))
    return e / e.sum(name)


def ctrl_c_outcomes(script: str, delays, tmp_path) -> set:
    """Run ``script`` once per delay in a new process with its own empty kernel cache
    (``sys.argv[1]``: the delay before it sends itself SIGINT). Each must exit 0 with
    nothing on stderr and print its first call's outcome, then ``True`` (the next call's
    value right); the set of outcomes ("interrupted", "finished")."""
    outcomes = set()
    for k, delay in enumerate(delays):
        env = dict(os.environ, AXESARRAY_CACHE_DIR=str(tmp_path / str(k)))
        out = subprocess.run(
            [sys.executable, "-c", script, str(delay)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0 and out.stderr == "", out.stderr
        first, again = out.stdout.split()
        assert again == "True"
        outcomes.add(first)
    return outcomes


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


@pytest.fixture
def parallel_kernels(monkeypatch):
    """From ``serial_threshold`` on, kernels run their parallel variant whatever the cost
    estimate says (``dispatch.parallel_pays``): the parallel code on small test data."""
    from axesarray.engine import dispatch

    monkeypatch.setattr(dispatch, "parallel_pays", lambda step: True)
