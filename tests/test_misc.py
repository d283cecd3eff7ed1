"""TensorDescription, the options context manager, and the doctests (reprs: test_repr.py)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax

N, C = ax.Axis("N", 2), ax.Axis("C", 3)


@pytest.fixture
def x():
    return ax.tensor(np.arange(6.0).reshape(2, 3), "N C")


# --- description ------------------------------------------------------------------------------


def test_description_of_l_tensor():
    """Byte strides and byte offset as numpy's; allocated counts the storage elements."""
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = base[1:, ::-2]
    d = ax.tensor(v, "N C").description
    assert d.dtype == np.float32 and d.rank == 2
    assert d.axes == ax.Axes([ax.Axis("N", 3), ax.Axis("C", 3)])
    assert d.strides == v.strides and not d.read_only
    # The storage spans from the lowest address the view touches; offset is from there.
    lowest = 1 * 6 + 1  # element (1, 1)
    assert d.offset == (1 * 6 + 5 - lowest) * 4
    assert d.allocated >= v.size
    assert d.device == "cpu" and d.layout is None


def test_description_of_r_tensor(x):
    """An r-tensor is read-only and has no strides, offset or storage."""
    d = (x + 1).description
    assert d.read_only and d.strides is None and d.offset is None and d.allocated is None
    assert d.axes == x.axes and d.dtype == np.float64


def test_description_is_frozen(x):
    """TensorDescription is a value type."""
    d = x.description
    with pytest.raises(AttributeError):
        d.rank = 3  # type: ignore[misc]
    assert d == x.description


def test_tensor_properties(x):
    """shape, size, ndim, nbytes, itemsize and is_lvalue agree with numpy's."""
    a = np.arange(6.0).reshape(2, 3)
    assert (x.shape, x.size, x.ndim, x.rank, x.nbytes, x.itemsize) == (
        a.shape,
        6,
        2,
        2,
        a.nbytes,
        8,
    )
    assert x.is_lvalue and not (x + 1).is_lvalue
    assert (x + 1).strides is None


# --- options ---------------------------------------------------------------------------------


def test_options_context_manager_restores():
    """Options set in a ``with`` block are restored on exit, even after an exception."""
    before = ax.get_option("engine")
    with ax.set_options(engine="numpy", broadcast="subset"):
        assert ax.get_option("engine") == "numpy"
        assert ax.get_option("broadcast") == "subset"
        with ax.set_options(broadcast="union"):
            assert ax.get_option("broadcast") == "union"
        assert ax.get_option("broadcast") == "subset"
    assert ax.get_option("engine") == before and ax.get_option("broadcast") == "union"
    with pytest.raises(RuntimeError), ax.set_options(serial_threshold=5):
        raise RuntimeError
    assert ax.get_option("serial_threshold") == 100_000


def test_set_options_as_a_call():
    """Called without ``with``, set_options sets the option globally."""
    ax.set_options(display_edgeitems=2)  # the autouse fixture restores it afterwards
    assert ax.get_option("display_edgeitems") == 2


def test_engines_agree(x):
    """Both engines give the same result for the same expression."""
    e = ax.sigmoid(x - x.mean("C")).sum("N")
    with ax.set_options(engine="numpy"):
        a = e.numpy()
    with ax.set_options(engine="numba"):
        b = e.numpy()
    assert_close(a, b)


# --- doctests -----------------------------------------------------------------------------------


def _modules():
    names = ["axesarray"]
    for info in pkgutil.walk_packages(ax.__path__, "axesarray."):
        names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_doctests(name):
    """Every docstring example in the package runs and prints what it shows."""
    try:
        module = importlib.import_module(name)
    except ImportError as e:  # an optional dependency (cupy, torch) is missing
        pytest.skip(f"{name}: {e}")
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, (
        f"{results.failed} doctest(s) failed in {name} (see the output above)"
    )
