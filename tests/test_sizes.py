"""Sizes: element counts past int64 are refused where axes are formed; allocations that
cannot succeed are refused with our message (the axes and the bytes), not numpy's; data
that has no shape (ragged lists) or no dtype is refused with ours too."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import axesarray as ax
from axesarray import AxesError, Axis
from axesarray.core.axes import MAX_SIZE
from axesarray.storage.memory import AllocationError, allocate
from tests.conftest import assert_close

BIG = 1 << 40  # a broadcast view this long costs nothing; two of them overflow int64


def big_view(name: str) -> ax.Tensor:
    """A 2**40-element broadcast of one value: no memory behind it."""
    return ax.tensor(np.float64(1.0), []).broadcast_to([Axis(name, BIG)])


# --- element counts -----------------------------------------------------------------------


@given(lengths=st.lists(st.integers(0, 1 << 40), min_size=1, max_size=6))
def test_axes_are_refused_exactly_when_the_count_overflows_int64(lengths):
    items = [Axis(f"a{k}", n) for k, n in enumerate(lengths)]
    if math.prod(lengths) <= MAX_SIZE:
        assert ax.Axes(items).size == math.prod(lengths)
        return
    expected = ", ".join(f"a{k}={n}" for k, n in enumerate(lengths))
    with pytest.raises(AxesError) as exc:
        ax.Axes(items)
    assert str(exc.value) == (
        f"Axes: the axes hold {math.prod(lengths):,} elements, more than an int64 can count "
        f"({expected}). Keep the product of the lengths at most {MAX_SIZE:,}."
    )


def test_edges_of_the_count():
    assert ax.Axes([Axis("A", MAX_SIZE)]).size == MAX_SIZE
    assert ax.Axes([Axis("A", 0), Axis("B", 1 << 62), Axis("C", 1 << 62)]).size == 0
    assert ax.Axes([Axis(f"a{k}", 2) for k in range(62)]).size == 1 << 62
    with pytest.raises(AxesError, match=r"^Axes: the axes hold 9,223,372,036,854,775,808 "):
        ax.Axes([Axis(f"a{k}", 2) for k in range(63)])  # many small axes overflow too
    with pytest.raises(
        AxesError,
        match=r"^Axis: the axes hold 9,223,372,036,854,775,808 elements, more than an int64 "
        r"can count \(A=9223372036854775808\)\.",
    ):
        Axis("A", MAX_SIZE + 1)


def test_broadcast_to_past_int64_is_refused():
    x = ax.zeros((Axis("N", 4),))
    with pytest.raises(
        AxesError,
        match=r"^broadcast_to: the axes hold 73,786,976,294,838,206,464 elements, more than an "
        r"int64 can count \(N=4, A=4294967296, B=4294967296\)\.",
    ):
        x.broadcast_to([Axis("N", 4), Axis("A", 1 << 32), Axis("B", 1 << 32)])


def test_broadcasting_two_operands_past_int64_is_refused(engine):
    a, b = big_view("A"), big_view("B")
    assert a.size == BIG  # one of them is fine
    for op in [lambda: a + b, lambda: a * b, lambda: ax.broadcast_axes(a, b, op="add")]:
        with pytest.raises(
            AxesError,
            match=r"the axes hold 1,208,925,819,614,629,174,706,176 elements, more than an "
            r"int64 can count \(A=1099511627776, B=1099511627776\)\.",
        ):
            op()


# --- allocation ----------------------------------------------------------------------------


ZEROS = r"create: cannot allocate 36,893,488,147,419,103,232 bytes: more than an address can span "


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: ax.zeros((Axis("N", 1 << 62),)), ZEROS + r"\(N=4611686018427387904; float64\)\."),
        (lambda: ax.ones((Axis("N", 1 << 61), Axis("C", 2))), ZEROS),
        (lambda: ax.full((Axis("N", 1 << 62),), 2.0), ZEROS),
        (
            lambda: ax.empty((Axis("N", 1 << 57),)),  # 2**60 bytes: fits an address, not a machine
            r"^create: cannot allocate 1,152,921,504,606,846,976 bytes: more than the system "
            r"can give \(N=144115188075855872; float64\)\. Use shorter axes",
        ),
        (
            lambda: ax.arange(Axis("C", 1 << 62)),
            r"^arange: cannot allocate 36,893,488,147,419,103,232 bytes: .* "
            r"\(C=4611686018427387904; int64\)",
        ),
        (
            lambda: ax.random((Axis("N", 1 << 31), Axis("C", 1 << 31))),
            r"^random: cannot allocate 36,893,488,147,419,103,232 bytes: .* "
            r"\(N=2147483648, C=2147483648; float64\)",
        ),
    ],
)
def test_allocations_that_cannot_succeed_are_refused_with_our_message(make, match):
    with pytest.raises(AllocationError, match=match) as exc:
        make()
    assert isinstance(exc.value, AxesError) and isinstance(exc.value, MemoryError)


def test_allocate_without_axes_names_the_count():
    with pytest.raises(
        AllocationError,
        match=r"^allocate: cannot allocate 36,893,488,147,419,103,232 bytes: more than an "
        r"address can span \(4,611,686,018,427,387,904 elements; float64\)\.",
    ):
        allocate(1 << 62, np.dtype("float64"))


@given(
    n=st.integers(0, 70_000),
    start=st.sampled_from([0, 3, -2, 0.5]),
    step=st.sampled_from([1, 3, -1, 0.25]),
    dtype=st.sampled_from([None, "float32", "int8", "uint16"]),
)
def test_arange_equals_numpy(n, start, step, dtype):
    """Filled a piece at a time, the values are numpy's whole-array ones."""
    expected = np.arange(n) * step + start
    if dtype is not None:
        expected = expected.astype(dtype)
    assert_close(ax.arange(Axis("C", n), dtype=dtype, start=start, step=step), expected)


@given(
    shape=st.lists(st.integers(0, 300), min_size=1, max_size=3),
    dtype=st.sampled_from(["float16", "float32", "float64"]),
    seed=st.integers(0, 3),
)
def test_random_equals_numpy(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    expected = rng.random(shape, dtype="float64" if dtype == "float16" else dtype).astype(dtype)
    axes = [Axis(f"a{k}", n) for k, n in enumerate(shape)]
    assert_close(ax.random(axes, dtype, seed=seed), expected)


# --- data without a shape or a dtype -------------------------------------------------------


@pytest.mark.parametrize(
    "data, where",
    [
        ([[1, 2], [3]], "lengths 1, 2 after shape (2,)"),
        ([[1, [2]], [3, 4]], "lists mixed with scalars after shape (2, 2)"),
        ([[[1], [2, 3]], [[4], [5]]], "lengths 1, 2 after shape (2, 2)"),
        ([np.zeros(2), np.zeros(3)], "lengths 2, 3 after shape (2,)"),
    ],
)
def test_ragged_lists_are_refused_with_our_message(data, where):
    with pytest.raises(AxesError) as exc:
        ax.tensor(data, "N C")
    assert str(exc.value) == (
        f"tensor: the nested lists are ragged, so they have no shape ({where}). "
        "Give every list at one depth the same length."
    )


@pytest.mark.parametrize(
    "data, dtype, shown",
    [
        (["a"], "float32", "['a']"),
        ([2**70], "int64", "[1180591620717411303424]"),
        ([1.5, "x"], "float64", "[1.5, 'x']"),
    ],
)
def test_values_the_dtype_cannot_hold_are_a_type_error(data, dtype, shown):
    with pytest.raises(TypeError) as exc:
        ax.tensor(data, "N", dtype=dtype)
    assert str(exc.value) == (
        f"tensor: the data cannot be converted to {dtype} ({shown}). "
        "Pass numbers that fit the dtype."
    )


def test_mixed_names_and_axes_name_the_mismatch():
    with pytest.raises(
        AxesError,
        match=r"^tensor: axis 'N' has length 3 but the data has 2 \(data shape \(2, 3\); "
        r"axes N=3, C\)\. Pass names only",
    ):
        ax.tensor(np.zeros((2, 3)), [Axis("N", 3), "C"])
