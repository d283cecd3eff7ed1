"""repr and HTML views, TensorDescription, the options context manager, and the doctests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import numpy as np
import pytest

import axesarray as ax

N, C = ax.Axis("N", 2), ax.Axis("C", 3)


@pytest.fixture
def x():
    return ax.tensor(np.arange(6.0).reshape(2, 3), "N C")


# --- repr ----------------------------------------------------------------------------------


def test_repr_of_l_tensor(x):
    """The header shows axes as name=length, dtype, kind and byte strides; then the values."""
    head, body = repr(x).split("\n", 1)
    assert head == "<Tensor N=2, C=3 | float64 | l-tensor | strides (24, 8)>"
    assert body == np.array2string(np.arange(6.0).reshape(2, 3))


def test_repr_of_r_tensor_evaluates_and_shows_formula(x):
    """An r-tensor prints its formula and its computed values."""
    text = repr(ax.exp(x).sum("C"))
    assert text.startswith("<Tensor N=2 | float64 | r-tensor = sum(exp(t0), dims=[1])>")
    assert "223.0968" in text


@pytest.mark.parametrize(
    "t, head",
    [
        (ax.tensor(np.float32(3.0), ""), "<Tensor scalar | float32 | l-tensor | strides ()>"),
        (
            ax.zeros((ax.Axis("E", 0), C)),
            "<Tensor E=0, C=3 | float64 | l-tensor | strides (24, 8)>",
        ),
        (
            ax.zeros((C,)).broadcast_to((N, C)),
            "<Tensor N=2, C=3 | float64 | l-tensor, read-only | strides (0, 8)>",
        ),
    ],
    ids=["scalar", "empty", "broadcast"],
)
def test_repr_edge_cases(t, head):
    """Scalars, empty tensors and read-only broadcasts print readably."""
    assert repr(t).split("\n", 1)[0] == head


def test_repr_elides_long_axes():
    """Long axes are elided with '...' using ``display_edgeitems``."""
    t = ax.arange(ax.Axis("N", 1000))
    assert "0   1   2 ... 997 998 999" in repr(t)
    with ax.set_options(display_edgeitems=1):
        assert "[  0 ... 999]" in repr(t)


def test_repr_html(x):
    """The HTML view has one row per axis with its byte stride, and escapes text."""
    html = x._repr_html_()
    assert html.startswith("<div>") and html.endswith("</div>")
    assert "<tr><td><b>N</b></td><td>2</td><td>24</td></tr>" in html
    assert "<tr><td><b>C</b></td><td>3</td><td>8</td></tr>" in html
    r = (x < 2)._repr_html_()
    assert "&lt;" in r and "(t0 < 2" not in r  # the formula is escaped
    assert "<td><b>N</b></td><td>2</td><td></td>" in r  # r-tensors have no strides


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
    np.testing.assert_allclose(a, b, rtol=1e-12)


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
