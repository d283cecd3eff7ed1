"""Every error path: exception type and message, ``<operation>: <fact> (<values>). <hint>``.

Axes are written ``name=length``. ``AxesError`` (a ValueError) for axis problems, TypeError
for dtypes, IndexError for an out-of-range integer index, ValueError for options and
read-only destinations.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import axesarray as ax

N, C, H = ax.Axis("N", 2), ax.Axis("C", 3), ax.Axis("H", 4)


@pytest.fixture
def x():
    return ax.tensor(np.arange(6.0).reshape(2, 3), (N, C))


def raises(exc, pattern):
    """pytest.raises matching the whole message from its start (escaped literal)."""
    return pytest.raises(exc, match="^" + re.escape(pattern))


def test_axes_error_is_value_error():
    """AxesError and LayoutError are ValueErrors, so generic handlers catch them."""
    assert issubclass(ax.AxesError, ValueError)
    assert issubclass(ax.LayoutError, ValueError)


# --- names ------------------------------------------------------------------------------


def test_duplicate_names():
    """A repeated name is refused wherever axes are built, naming the operation."""
    with raises(ax.AxesError, "Axes: axis name 'N' appears twice (N=2, N=3). Rename one axis."):
        ax.Axes([N, ax.Axis("N", 3)])
    with raises(ax.AxesError, "create: axis name 'N' appears twice (N=2, N=2). Rename one axis."):
        ax.zeros((N, N))
    with raises(ax.AxesError, "tensor: axis name 'N' appears twice (names: N N)."):
        ax.tensor(np.zeros((2, 2)), "N N")
    with raises(ax.AxesError, "transpose: axis name 'N' appears twice (names: N N C)."):
        ax.zeros((N, C)).transpose("N N C")


def test_duplicate_names_from_views(x):
    """rename/split/flatten/expand_dims onto an existing name report their own operation."""
    with raises(ax.AxesError, "rename: axis name 'C' appears twice (C=2, C=3). Rename one axis."):
        x.rename(N="C")
    with raises(ax.AxesError, "split: axis name 'N' appears twice (N=2, N=3). Rename one axis."):
        x.split("C", (ax.Axis("N", 3),))
    with raises(ax.AxesError, "flatten: axis name 'C' appears twice (C=2, C=3). Rename one axis."):
        x.flatten("N", "C")
    with raises(ax.AxesError, "expand_dims: axis name 'N' appears twice (N=1, N=2, C=3)."):
        x.expand_dims("N")


@pytest.mark.parametrize(
    "make, pattern",
    [
        (lambda: ax.Axis("1x", 2), "Axis: an axis name must be a Python identifier (got '1x')."),
        (lambda: ax.Axis("", 2), "Axis: an axis name must be a Python identifier (got '')."),
        (
            lambda: ax.Axis("C", -1),
            "Axis: the length of axis 'C' must be a non-negative integer (got -1).",
        ),
        (
            lambda: ax.Axis("C", 2.5),
            "Axis: the length of axis 'C' must be a non-negative integer (got 2.5).",
        ),
        (
            lambda: ax.Axis("C", True),
            "Axis: the length of axis 'C' must be a non-negative integer (got True).",
        ),
        (
            lambda: ax.Axes([1]),
            "Axes: every item must be an Axis (got 1). Use ax.Axis(name, length).",
        ),
        (
            lambda: ax.zeros("N C"),
            "create: axis names alone do not give lengths (got 'N C'). Pass Axis objects.",
        ),
    ],
)
def test_bad_axes(make, pattern):
    """Bad names, lengths and axis specs are refused with the offending value."""
    with raises(ax.AxesError, pattern):
        make()


@pytest.mark.parametrize(
    "call, op",
    [
        (lambda x: x.sum("Q"), "sum"),
        (lambda x: x.mean(("N", "Q")), "mean"),
        (lambda x: x.max("Q"), "max"),
        (lambda x: x.argmax("Q"), "argmax"),
        (lambda x: x.isel(Q=1), "isel"),
        (lambda x: x[{"Q": 1}], "isel"),
        (lambda x: x.rename(Q="R"), "rename"),
        (lambda x: x.split("Q", (ax.Axis("a", 1),)), "split"),
        (lambda x: x.flatten(("N", "Q"), "S"), "flatten"),
        (lambda x: x.squeeze("Q"), "squeeze"),
        (lambda x: ax.pad(x, Q=1), "pad"),
        (lambda x: ax.concat([x, x], "Q"), "concat"),
        (lambda x: ax.dot(x, x, over="Q"), "dot"),
    ],
)
def test_unknown_names(x, call, op):
    """An unknown name is refused by every operation taking names, listing the real ones."""
    with raises(
        ax.AxesError, f"{op}: unknown axis 'Q' (axes: N=2, C=3). Use one of the names: N C."
    ):
        call(x)


def test_axis_lookup_with_wrong_length(x):
    """Passing an Axis whose length differs from the tensor's is refused."""
    with raises(ax.AxesError, "sum: axis 'C' has length 3, not 5 (axes: N=2, C=3)."):
        x.sum(ax.Axis("C", 5))


# --- binary ops and broadcasting -----------------------------------------------------------


@pytest.mark.parametrize(
    "op, name",
    [
        (lambda a, b: a + b, "add"),
        (lambda a, b: a * b, "mul"),
        (lambda a, b: a < b, "lt"),
        (ax.maximum, "maximum"),
        (lambda a, b: ax.where(a > 0, a, b), "where"),
    ],
)
def test_length_mismatch_in_binary_op(x, op, name):
    """The message names the axis, both lengths and both operands' axes."""
    with raises(
        ax.AxesError,
        f"{name}: axis 'C' has length 3 in the left operand and 32 in the right "
        "(left: N=2, C=3; right: C=32). Slice or rename one operand.",
    ):
        op(x, ax.zeros((ax.Axis("C", 32),)))


def test_design_example_message():
    """DESIGN §3's example message, verbatim."""
    a = ax.zeros((ax.Axis("N", 8), ax.Axis("C", 64)))
    b = ax.zeros((ax.Axis("C", 32),))
    with pytest.raises(ax.AxesError) as info:
        a + b
    assert str(info.value) == (
        "add: axis 'C' has length 64 in the left operand and 32 in the right "
        "(left: N=8, C=64; right: C=32). Slice or rename one operand."
    )


def test_strict_broadcast_error(x):
    """In strict mode the non-subset case is an error with a hint."""
    with (
        ax.set_options(broadcast="subset"),
        raises(
            ax.AxesError,
            "mul: neither operand's axes contain the other's (left: N=2, C=3; right: H=4). "
            "Strict broadcasting (broadcast='subset') is on: "
            "call broadcast_to on one operand first.",
        ),
    ):
        x * ax.zeros((H,))


def test_numpy_array_operand(x):
    """A bare numpy array has no names: refused with a hint to wrap it."""
    with raises(ax.AxesError, "add: a numpy array has no axis names (shape (3,)). Wrap it first"):
        x + np.zeros(3)


def test_unsupported_operand(x):
    """A non-numeric operand is a TypeError."""
    with pytest.raises(TypeError):
        x + "a"
    with raises(TypeError, "dot: both operands must be tensors."):
        ax.dot(x, 1, over="C")


def test_unsupported_dtype_pairs(x):
    """numpy's TypeErrors for dtype combinations surface as TypeError with the operation."""
    b = ax.zeros((N,), "bool")
    with raises(TypeError, "sub: unsupported operand dtypes (bool, bool)."):
        b - b
    with raises(TypeError, "and: unsupported operand dtypes (float64, float64)."):
        x & x


# --- views -----------------------------------------------------------------------------------


def test_transpose_missing_or_extra(x):
    """transpose needs a permutation: missing and unknown names are both reported."""
    with raises(
        ax.AxesError,
        "transpose: the names must be a permutation of the axes: missing 'C' "
        "(axes: N=2, C=3; got N). List every axis once, or use '...' for the rest.",
    ):
        x.transpose("N")
    with raises(
        ax.AxesError, "transpose: the names must be a permutation of the axes: unknown 'H'"
    ):
        x.transpose("N C H")
    with raises(
        ax.AxesError,
        "transpose: the names must be a permutation of the axes: missing 'C'; unknown 'H'",
    ):
        x.transpose("N H")


def test_split_lengths_must_multiply_out(x):
    """split reports the target length and the product it got."""
    with raises(
        ax.AxesError,
        "split: the new lengths do not multiply out to C=3 (a=2, b=2: 2*2=4). "
        "Choose lengths whose product is 3.",
    ):
        x.split("C", (ax.Axis("a", 2), ax.Axis("b", 2)))


def test_flatten_copy_false(x):
    """flatten(copy=False) that cannot be a view raises instead of copying."""
    with raises(
        ax.AxesError, "flatten: the result cannot be a view of this memory (axes C=3, N=2; strides"
    ):
        x.flatten(("C", "N"), "S", copy=False)
    with raises(
        ax.AxesError, "flatten: no axes to merge (axes: N=2, C=3). Name at least one axis."
    ):
        x.flatten((), "S")


def test_out_of_range_integer_index(x):
    """An integer index outside [-n, n) is an IndexError, as in numpy."""
    with raises(
        IndexError, "isel: index 3 is out of range for axis 'C' (C=3). Use -3 <= index < 3."
    ):
        x.isel(C=3)
    with raises(
        IndexError, "isel: index -3 is out of range for axis 'N' (N=2). Use -2 <= index < 2."
    ):
        x[{"N": -3}]
    with raises(IndexError, "isel: index 0 is out of range for axis 'E' (E=0)."):
        ax.zeros((ax.Axis("E", 0),)).isel(E=0)


def test_bad_index_keys(x):
    """Non-integer keys and zero steps are refused."""
    with raises(TypeError, "isel: axis 'C' takes a slice or an integer (got 1.5)."):
        x.isel(C=1.5)
    with raises(ax.AxesError, "isel: the slice step for axis 'C' is zero (got slice(0, 3, 0))."):
        x.isel(C=slice(0, 3, 0))


@pytest.mark.parametrize("key", [0, slice(0, 1), (0, 1), "N", [0]])
def test_positional_indexing(x, key):
    """Positional indexing is refused with a hint to index by name."""
    with raises(ax.AxesError, "getitem: positional indexing is not supported (got"):
        x[key]


def test_broadcast_expand_squeeze_errors(x):
    """broadcast_to must keep every axis; expand_dims positions and squeeze lengths checked."""
    with raises(
        ax.AxesError,
        "broadcast_to: the target lacks axes of the tensor: 'C' (tensor: N=2, C=3; target: N=2).",
    ):
        x.broadcast_to((N,))
    with raises(
        ax.AxesError, "broadcast_to: axis 'C' has length 3 in the left operand and 4 in the right"
    ):
        x.broadcast_to((N, ax.Axis("C", 4)))
    with raises(ax.AxesError, "expand_dims: position 5 is out of range (rank 2)."):
        x.expand_dims("K", 5)
    with raises(ax.AxesError, "squeeze: only axes of length 1 can be squeezed (C=3)."):
        x.squeeze("C")


def test_iteration_refused(x):
    """Tensors are not iterable by position."""
    with raises(TypeError, "iter: tensors are not iterable by position (N=2, C=3)."):
        list(x)


# --- creation ---------------------------------------------------------------------------------


def test_tensor_axes_must_match_data():
    """tensor() checks the rank and each given length against the data."""
    with raises(
        ax.AxesError,
        "tensor: the data has 2 dimensions but 3 axes were given (data shape (2, 3); axes N C H). "
        "Give one axis per dimension of the data.",
    ):
        ax.tensor(np.zeros((2, 3)), "N C H")
    with raises(
        ax.AxesError,
        "tensor: axis 'C' has length 4 but the data has 3 (data shape (2, 3); axes N=2, C=4). "
        "Pass names only to take lengths from the data.",
    ):
        ax.tensor(np.zeros((2, 3)), (N, ax.Axis("C", 4)))
    with raises(ax.AxesError, "tensor: the data has 0 dimensions but 1 axes were given"):
        ax.tensor(3.0, "N")


@pytest.mark.parametrize(
    "make, pattern",
    [
        (
            lambda: ax.zeros((N,), "complex64"),
            "create: dtype complex64 is not supported. Use one of: bool,",
        ),
        (lambda: ax.tensor(np.array(["a"]), "N"), "tensor: dtype <U1 is not supported."),
        (
            lambda: ax.tensor(np.zeros(3), "N", dtype="complex64"),
            "tensor: dtype complex64 is not supported.",
        ),
        (lambda: ax.zeros((N,)).astype("foo"), "astype: not a dtype (got 'foo')."),
        (lambda: ax.random((N,), "int32"), "random: only float dtypes are supported (int32)."),
    ],
)
def test_bad_dtype(make, pattern):
    """Unsupported dtypes are TypeErrors listing the supported ones."""
    with raises(TypeError, pattern):
        make()


def test_arange_needs_axis():
    """arange takes one Axis."""
    with raises(ax.AxesError, "arange: expects one Axis (got 3)."):
        ax.arange(3)


# --- options ----------------------------------------------------------------------------------


def test_bad_option():
    """Unknown options and bad values are ValueErrors listing what is allowed."""
    with raises(
        ValueError,
        "set_options: bad value for 'engine' (got 'cuda'). Use one of ('numba', 'numpy').",
    ):
        ax.set_options(engine="cuda")
    with raises(ValueError, "set_options: unknown option 'foo' (options: engine, broadcast,"):
        ax.set_options(foo=1)
    with raises(ValueError, "set_options: bad value for 'display_edgeitems' (got 0)."):
        ax.set_options(display_edgeitems=0)
    assert ax.get_option("engine") in ("numba", "numpy")


def test_failed_set_options_changes_nothing():
    """A rejected set_options call leaves every option as it was."""
    before = ax.get_option("broadcast")
    with pytest.raises(ValueError):
        ax.set_options(broadcast="subset", engine="bad")
    assert ax.get_option("broadcast") == before


# --- assignment -----------------------------------------------------------------------------


def test_assignment_mismatched_axes(x):
    """Extra axes, lengths and dtypes are checked with destination/value wording."""
    with raises(
        ax.AxesError,
        "assign: the value has axes the destination lacks: 'H' "
        "(destination: N=2, C=3; value: H=4). Reduce, select or rename those axes first.",
    ):
        x[...] = ax.zeros((H,))
    with raises(
        ax.AxesError,
        "assign: axis 'C' has length 3 in the destination and 4 in the value "
        "(destination: N=2, C=3; value: C=4). Slice or rename the value.",
    ):
        x[...] = ax.zeros((ax.Axis("C", 4),))
    with raises(
        TypeError,
        "assign: cannot cast float64 to int8 under the same_kind rule. Convert explicitly",
    ):
        ax.zeros((N,), "int8")[...] = ax.ones((N,))
    with raises(OverflowError, "assign: Python integer 300 is out of bounds for uint8."):
        ax.zeros((N,), "uint8")[...] = 300
    with raises(
        ValueError, "assign: the destination is read-only (H=4, N=2, C=3). Broadcast views"
    ):
        x.broadcast_to((H, N, C))[...] = 1.0


# --- reductions and functions -------------------------------------------------------------------


def test_reduction_errors(x):
    """arg-reductions name their axes; empty axes have no max."""
    with raises(ax.AxesError, "argmax: name at least one axis (N=2, C=3)."):
        x.argmax(())
    with raises(ax.AxesError, "argmin: name the axis to search along (N=2, C=3)."):
        x.argmin()
    with raises(
        ax.AxesError, "max: cannot reduce over an empty axis, which has no identity (E=0)."
    ):
        ax.zeros((ax.Axis("E", 0),)).max()


def test_normalizing_function_errors(x):
    """softmax and its friends: the operand, its dtype, the axis (unknown, or empty) and the
    labels' axes; each raised again on a second call, after a call that succeeded (the
    checked names are remembered only for a success)."""
    ax.softmax(x, "C")
    empty = ax.tensor(np.zeros((2, 0)), (N, ax.Axis("E", 0)))
    for _ in range(2):
        with raises(TypeError, "softmax: expected a Tensor (ndarray)."):
            ax.softmax(np.zeros(3), "C")
        with raises(
            TypeError,
            "log_softmax: expects a float tensor, not int32. Convert it: x.astype('float32').",
        ):
            ax.log_softmax(x.astype("int32"), "C")
        with raises(
            ax.AxesError,
            "logsumexp: cannot normalize over an empty axis (E=0). Normalize over axes with "
            "at least one element.",
        ):
            ax.logsumexp(empty, "E")
        with raises(ax.AxesError, "softmax: unknown axis 'K' (axes: N=2, C=3)."):
            ax.softmax(x, "K")
        with raises(
            ax.AxesError,
            "softmax_cross_entropy: the labels must have the logits' axes (logits: N=2, C=3; "
            "labels: C=3). One-hot encode class indices over the class axis.",
        ):
            ax.softmax_cross_entropy(x, ax.tensor(np.zeros(3), (C,)), "C")


def test_function_argument_errors(x):
    """pad widths, concat axes, clip bounds and scalar conversions are checked."""
    with raises(
        ax.AxesError,
        "pad: pad widths must be non-negative for axis 'C' (got (-1, 0)). Slice with isel to crop.",
    ):
        ax.pad(x, C=(-1, 0))
    with raises(
        ax.AxesError,
        "concat: all tensors must have the same axes besides 'C' "
        "(first: N=2, C=3; other: H=4, C=3).",
    ):
        ax.concat([x, ax.zeros((H, C))], "C")
    with raises(ValueError, "concat: needs at least one tensor."):
        ax.concat([], "C")
    with raises(ValueError, "clip: give lo, hi or both."):
        ax.clip(x)
    with raises(
        ax.AxesError, "item: only a tensor of one element converts to a Python scalar (N=2, C=3)."
    ):
        float(x)
    with raises(
        ValueError,
        "bool: the truth value of a tensor with several elements is ambiguous (N=2, C=3).",
    ):
        bool(x)
    with raises(TypeError, "__index__: only integer tensors are indices (float64)."):
        [0][x.sum()]


def test_argument_errors_found_by_outside_testing(x):
    """Each names its operation and says what it wanted, instead of Python's own text."""
    with raises(
        TypeError,
        "pad: the width of axis 'C' must be an integer or a pair of integers (got (1,)). "
        "Use e.g. C=2 or C=(1, 0).",
    ):
        ax.pad(x, C=(1,))
    with raises(TypeError, "pad: the width of axis 'C' must be an integer or a pair"):
        ax.pad(x, C=(1.5, 0))
    with raises(TypeError, "pad: the pad value must be a scalar (got 'a'). Use e.g. value=0.0."):
        ax.pad(x, C=1, value="a")
    with raises(OverflowError, "pad: Python integer 300 is out of bounds for int8"):
        ax.pad(x.astype("int8"), C=1, value=300)
    with raises(TypeError, "dot: name the axes to contract (over=None)."):
        ax.dot(x, x, over=None)
    with raises(TypeError, "sum: axis names must be a string or a sequence of names (got 3)."):
        x.sum(3)
    with raises(TypeError, "explain: expected a Tensor, a list of tensors or a function (int)."):
        ax.explain(3)
    with raises(ax.AxesError, "transpose: axis 'N' has length 2, not 5"):
        x.transpose(ax.Axis("N", 5), "C")
    with raises(ax.AxesError, "isel: axis 'N' has length 2, not 5"):
        x.isel({ax.Axis("N", 5): 0})
    with raises(
        ax.LayoutError,
        "to_layout: the tensor has no 'W' (layout NCHW4; axes: N=2, C=3, H=4). The layout "
        "orders 4 axes and the tensor has 3: add the missing ones (expand_dims) or choose a "
        "layout without 'W'.",
    ):
        ax.zeros((N, C, H)).to_layout("NCHW4")


def test_an_untagged_out_with_the_layouts_strides_is_that_layout():
    t = ax.tensor(np.arange(24.0).reshape(2, 3, 2, 2), "N C H W")
    nhwc = t.to_layout("NHWC")
    out = ax.zeros(t.axes)  # plain row-major N C H W: exactly NCHW
    assert ax.repack(nhwc, "NCHW", out=out) is out
    np.testing.assert_array_equal(out.numpy(), t.numpy())
    with raises(ax.LayoutError, "repack: out is not stored in the requested layout"):
        ax.repack(t, "NHWC", out=ax.zeros(t.axes))  # row-major is not NHWC
    with raises(ax.LayoutError, "repack: out is not stored in the requested layout"):
        ax.repack(t, "NCHW4", out=ax.zeros(t.axes))  # a plain view holds no padding


_BAD_ARGUMENTS = [None, 3, "Q", 1.5, np.zeros(3), [1, 2], {"a": 1}, object()]


def test_every_public_function_names_itself_on_bad_arguments(x, tmp_path, monkeypatch):
    """The class behind the outside reports: whatever a user passes by mistake, the error
    starts with the operation's name (Python's own arity errors aside), never a bare
    'object is not iterable' or numpy's text. Run in a temporary directory: a string
    argument is a valid path to ``to_zarr`` (it once left a store ``Q/`` in the checkout)."""
    monkeypatch.chdir(tmp_path)
    leaks = []
    skip = {"set_options", "get_option", "warmup", "load", "save", "random", "Device"}
    for name in ax.__all__:
        fn = getattr(ax, name)
        if not callable(fn) or isinstance(fn, type) or name in skip:
            continue
        for bad in _BAD_ARGUMENTS:
            for args in [(bad,), (x, bad), (bad, x)]:
                try:
                    fn(*args)
                except TypeError as e:
                    if "positional argument" not in str(e) and not re.match(r"^[\w.]+: ", str(e)):
                        leaks.append(f"{name}{args!r:.40}: {e}")
                except Exception as e:  # noqa: BLE001 - every type is checked the same way
                    if not re.match(r"^[\w.]+: ", str(e)):
                        leaks.append(f"{name}{args!r:.40}: {type(e).__name__}: {e}")
    assert not leaks, "\n".join(leaks[:20])
