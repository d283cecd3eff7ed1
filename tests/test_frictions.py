"""Smaller frictions (issue 20): hints built from the tensor's own axes (and followed
literally, they do what the positional code meant), torch tensors that require grad,
the name of a chunked tensor's DataArray, and plain-text ``--help``."""

from __future__ import annotations

import re

import numpy as np
import pytest

import axesarray as ax
from axesarray.io import cli


def raises(exc, text: str):
    return pytest.raises(exc, match="^" + re.escape(text))


def _hint(err: BaseException) -> str:
    """The code a hint suggests: the text after 'Index by name: ' up to the final period."""
    text = str(err)
    return text[text.index("Index by name: ") + len("Index by name: ") : -1]


KEYS = [0, -1, slice(1, 3), (0, slice(None, None, -1)), (slice(None), 1), [2, 0], ([1], 2)]


@pytest.mark.parametrize("shape", [(3, 4), (1, 1), (3, 0)])
@pytest.mark.parametrize("key", KEYS)
def test_getitem_hint_is_the_named_index(shape, key):
    """x[key] is refused; the hint, run as written, gives numpy's arr[key] by name."""
    arr = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    x = ax.tensor(arr, "rows cols")
    with pytest.raises(ax.AxesError, match=r"^getitem: positional indexing is not supported") as e:
        x[key]
    assert "'C'" not in str(e.value)
    try:
        expected = arr[key]
    except IndexError:  # out of range for numpy: the named index is refused as well
        with pytest.raises((ax.AxesError, IndexError)):
            np.asarray(eval(_hint(e.value), {"x": x}))
        return
    got = eval(_hint(e.value), {"x": x})  # the hint, literally
    np.testing.assert_array_equal(np.asarray(got), expected)


def test_getitem_hint_other_keys_and_0d():
    x = ax.tensor(np.zeros((2, 3)), "A B")
    with raises(
        ax.AxesError,
        "getitem: positional indexing is not supported (got 'A'; axes: A=2, B=3). "
        "Index by name, e.g. x.isel(A=0).",
    ):
        x["A"]
    z = ax.tensor(np.float64(2.5), ())
    with raises(
        ax.AxesError,
        "getitem: positional indexing is not supported (got 0; axes: ()). "
        "A 0-d tensor has no axes to index: x.item() is its value.",
    ):
        z[0]
    assert z.item() == 2.5
    odd = ax.tensor(np.arange(3.0), ("lambda",))  # a keyword cannot be x.isel(lambda=1)
    with pytest.raises(ax.AxesError) as e:
        odd[1]
    assert _hint(e.value) == "x[{'lambda': 1}]"
    assert eval(_hint(e.value), {"x": odd}).item() == 1.0


@pytest.mark.parametrize("n", [0, 1, 3])
def test_iteration_hint_loops_by_name(n):
    """The iteration hint, followed literally, visits what iterating the array would."""
    arr = np.arange(n * 2.0).reshape(n, 2)
    x = ax.tensor(arr, "rows cols")
    with raises(
        TypeError,
        f"iter: tensors are not iterable by position (rows={n}, cols=2). Select by name: "
        "for i in range(x.axes['rows'].length): x.isel(rows=i).",
    ):
        iter(x)
    got = [x.isel(rows=i).numpy() for i in range(x.axes["rows"].length)]
    assert len(got) == len(list(arr))
    for g, a in zip(got, arr, strict=True):
        np.testing.assert_array_equal(g, a)


def test_len_and_0d_hints():
    x = ax.tensor(np.zeros((4, 2)), "rows cols")
    with raises(
        TypeError,
        "len: a tensor has no length by position (rows=4, cols=2). Ask an axis: "
        "x.axes['rows'].length, or x.size for the element count.",
    ):
        len(x)
    assert x.axes["rows"].length == len(np.zeros((4, 2)))
    z = ax.tensor(np.float64(1.0), ())
    with raises(TypeError, "len: a tensor has no length by position (()). A 0-d tensor"):
        len(z)
    with raises(TypeError, "iter: tensors are not iterable by position (()). A 0-d tensor"):
        iter(z)


def test_sort_and_numpy_hints_name_own_axes():
    arr = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    x = ax.tensor(arr, "rows cols")
    with raises(
        ax.AxesError, "sort: name the axis to work along (rows=2, cols=3). x.sort('cols')."
    ):
        x.sort()
    np.testing.assert_array_equal(x.sort("cols").numpy(), np.sort(arr))  # numpy's default axis
    with raises(TypeError, "numpy.where: where(cond) gives positions") as e:
        np.where(x > 1)
    assert "t.isel(rows=mask)" in str(e.value)
    with raises(
        ax.AxesError,
        "numpy.concatenate: flattening first has no named meaning. "
        "Name the axis: np.concatenate(ts, axis='rows').",
    ):
        np.concatenate([x, x], axis=None)
    np.testing.assert_array_equal(
        np.asarray(np.concatenate([x, x], axis="rows")), np.concatenate([arr, arr])
    )


@pytest.mark.parametrize("shape", [(0,), (1,), (2, 3)])
def test_torch_tensor_requiring_grad(shape):
    torch = pytest.importorskip("torch")
    t = torch.ones(shape, requires_grad=True)
    names = "A B"[: 2 * len(shape) - 1]
    text = (
        f"tensor: the torch tensor requires grad; axesarray cannot record torch's autograd "
        f"(shape {shape}, torch.float32). Pass t.detach() (shares memory, no gradient)"
    )
    with raises(TypeError, text):
        ax.tensor(t, names)
    with raises(TypeError, "from_dlpack: the torch tensor requires grad"):
        ax.from_dlpack(t, names)
    x = ax.tensor(t.detach(), names)  # the hint, literally
    np.testing.assert_array_equal(x.numpy(), t.detach().numpy())
    if t.numel():
        x[...] = 3.0
        assert float(t.detach().reshape(-1)[0]) == 3.0  # shared memory


@pytest.mark.parametrize("n", [0, 1, 5])
def test_chunked_from_xarray_keeps_no_task_name(n):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("dask")
    da = xr.DataArray(np.arange(n * 3.0).reshape(n, 3), dims=("a", "b"), name="temp")
    t = ax.from_xarray(da.chunk({"a": 2}))
    back = t.to_xarray()
    assert back.name is None and back.dims == ("a", "b")
    np.testing.assert_array_equal(back.values, da.values)
    assert (t + 1).to_xarray(name="k").name == "k"
    assert ax.tensor(np.zeros(2), "N").chunk({"N": 1}).to_xarray().name is None


def test_help_is_plain_text(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out
    assert "The axesarray command: convert .npy files" in out
