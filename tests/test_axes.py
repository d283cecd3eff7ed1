"""Axis and Axes value semantics, parsing, and the broadcasting rule of DESIGN §3."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import NAMES, axes, spec_broadcast

import axesarray as ax
from axesarray.core.axes import as_axes, parse_names

N, C, H, W = ax.Axis("N", 2), ax.Axis("C", 3), ax.Axis("H", 4), ax.Axis("W", 5)


# --- Axis --------------------------------------------------------------------------------


def test_axis_equality_compares_name_and_length():
    """Axis is a value: equal iff name and length are equal; hashable and usable as a key."""
    assert ax.Axis("C", 3) == ax.Axis("C", 3)
    assert ax.Axis("C", 3) != ax.Axis("C", 4)
    assert ax.Axis("C", 3) != ax.Axis("K", 3)
    assert len({ax.Axis("C", 3), ax.Axis("C", 3), ax.Axis("C", 4)}) == 2


def test_axis_is_frozen():
    """An Axis cannot be mutated."""
    with pytest.raises(AttributeError):
        C.length = 7  # type: ignore[misc]


def test_axis_text():
    """repr round-trips; str is ``name=length``."""
    assert repr(C) == "Axis('C', 3)"
    assert eval(repr(C), {"Axis": ax.Axis}) == C
    assert str(C) == "C=3"
    assert C.resize(9) == ax.Axis("C", 9)


def test_axis_accepts_numpy_integer_lengths():
    """A numpy integer length is stored as a Python int."""
    a = ax.Axis("C", np.int64(3))
    assert a == C and type(a.length) is int


@pytest.mark.parametrize("length", [0, 1, 5])
def test_axis_small_lengths(length):
    """Lengths 0 and 1 are valid."""
    assert ax.Axis("C", length).length == length


# --- Axes --------------------------------------------------------------------------------


@given(axes())
def test_axes_value_semantics(a):
    """Axes is an ordered tuple: names, shape, size, lookup by name, hash, pickle."""
    assert a.names == tuple(x.name for x in a)
    assert a.shape == tuple(x.length for x in a)
    assert a.size == int(np.prod(a.shape, dtype=np.int64))
    for i, x in enumerate(a):
        assert a[x.name] == x
        assert a.index(x.name) == i
        assert x.name in a and x in a
    assert ax.Axes(list(a)) == a
    assert hash(ax.Axes(list(a))) == hash(a)
    assert pickle.loads(pickle.dumps(a)) == a
    assert isinstance(a[1:], ax.Axes)


def test_axes_order_matters():
    """Two Axes with the same axes in a different order differ."""
    assert ax.Axes([N, C]) != ax.Axes([C, N])


def test_axes_concatenation_checks_names():
    """``Axes + Axes`` is an Axes and rejects a repeated name."""
    assert (ax.Axes([N]) + ax.Axes([C])).names == ("N", "C")
    with pytest.raises(ax.AxesError, match="'N' appears twice"):
        ax.Axes([N]) + ax.Axes([N])


def test_axes_str():
    """Axes print as ``N=2, C=3``; empty as ``()``."""
    assert str(ax.Axes([N, C])) == "N=2, C=3"
    assert str(ax.Axes()) == "()"


# --- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, names",
    [
        ("N C H W", ("N", "C", "H", "W")),
        ("N,C, H  W", ("N", "C", "H", "W")),
        ("", ()),
        ("  ", ()),
        (("N", C), ("N", "C")),
        (C, ("C",)),
        ("H ...", ("H", "...")),
        ("batch feat", ("batch", "feat")),
    ],
)
def test_parse_names(spec, names):
    """Names parse from strings (spaces/commas), sequences of names/Axis, or one Axis."""
    assert parse_names(spec) == names


@given(st.lists(st.sampled_from(NAMES), unique=True))
def test_parse_names_roundtrip(names):
    """Joining names with spaces and parsing gives them back."""
    assert parse_names(" ".join(names)) == tuple(names)


def test_as_axes_accepts_axis_sequences():
    """``as_axes`` takes an Axes, an Axis, or a sequence of Axis."""
    assert as_axes([N, C]) == ax.Axes([N, C])
    assert as_axes(N) == ax.Axes([N])
    a = ax.Axes([N])
    assert as_axes(a) is a


# --- broadcasting ----------------------------------------------------------------------------


@st.composite
def _axis_pair(draw):
    """Two Axes drawn from one name -> length universe, so shared names agree."""
    universe = draw(axes(min_rank=0, max_rank=5))
    pick = st.lists(st.sampled_from(list(universe)) if universe else st.nothing(), unique=True)
    a = ax.Axes(draw(pick)) if universe else ax.Axes()
    b = ax.Axes(draw(pick)) if universe else ax.Axes()
    return a, b


@given(_axis_pair())
def test_broadcast_rule_matches_spec(pair):
    """``broadcast_axes`` follows DESIGN §3 (an independent re-implementation)."""
    a, b = pair
    expected = spec_broadcast(list(a.names), list(b.names))
    assert list(ax.broadcast_axes(a, b).names) == expected
    lengths = {x.name: x.length for x in list(a) + list(b)}
    assert ax.broadcast_axes(a, b).shape == tuple(lengths[n] for n in expected)


@given(_axis_pair())
def test_broadcast_subset_case_is_symmetric(pair):
    """When one operand's names contain the other's, ``a+b`` and ``b+a`` have the same axes."""
    a, b = pair
    sa, sb = set(a.names), set(b.names)
    if (sa <= sb or sb <= sa) and sa != sb:
        assert ax.broadcast_axes(a, b) == ax.broadcast_axes(b, a)


@given(_axis_pair())
def test_broadcast_of_tensors_matches_expression_axes(pair):
    """The axes ``broadcast_axes`` predicts are the axes ``x + y`` gets."""
    a, b = pair
    x, y = ax.zeros(a), ax.ones(b)
    assert (x + y).axes == ax.broadcast_axes(x, y)
    assert (y + x).axes == ax.broadcast_axes(y, x)


def test_broadcast_subset_takes_larger_order():
    """``C + (N, C)`` takes the larger operand's order whichever side it is on."""
    x = ax.zeros((H, C))
    big = ax.zeros((N, C, H))
    assert (x + big).names == ("N", "C", "H")
    assert (big + x).names == ("N", "C", "H")


def test_broadcast_equal_name_sets_take_left_order():
    """With the same names in different orders, the left operand's order wins."""
    assert ax.broadcast_axes([N, C], [C, N]).names == ("N", "C")
    assert ax.broadcast_axes([C, N], [N, C]).names == ("C", "N")


def test_broadcast_union_appends_right_new_axes():
    """Non-subset operands: left axes, then the right operand's new axes in its order."""
    assert ax.broadcast_axes([N, C], [W, C, H]).names == ("N", "C", "W", "H")
    assert ax.broadcast_axes([W, C, H], [N, C]).names == ("W", "C", "H", "N")


def test_broadcast_strict_mode():
    """``broadcast="subset"`` rejects the non-subset case and still allows subsets."""
    with ax.set_options(broadcast="subset"):
        assert ax.broadcast_axes([C], [N, C]).names == ("N", "C")
        with pytest.raises(ax.AxesError, match="neither operand's axes contain the other's"):
            ax.broadcast_axes([N, C], [H])
        with pytest.raises(ax.AxesError, match=r"left: N=2; right: H=4"):
            ax.zeros((N,)) + ax.zeros((H,))
    assert ax.broadcast_axes([N], [H]).names == ("N", "H")


def test_broadcast_length_mismatch():
    """Same name, different lengths is an error naming the axis and both lengths."""
    with pytest.raises(
        ax.AxesError,
        match=r"axis 'C' has length 3 in the left operand and 7 in the right "
        r"\(left: N=2, C=3; right: C=7\)\. Slice or rename one operand\.",
    ):
        ax.broadcast_axes([N, C], [ax.Axis("C", 7)])


def test_broadcast_no_positional_length_one():
    """There is no positional length-1 broadcasting: C=1 does not stretch to C=3."""
    with pytest.raises(ax.AxesError, match="axis 'C' has length 3"):
        ax.zeros((N, C)) + ax.zeros((ax.Axis("C", 1),))


def test_broadcast_scalars_and_empty():
    """Zero-rank operands broadcast against anything."""
    assert ax.broadcast_axes([], [N, C]).names == ("N", "C")
    assert ax.broadcast_axes([N, C], []).names == ("N", "C")
    assert ax.broadcast_axes([], []) == ax.Axes()


def test_equal_axes_are_one_object_and_invalid_ones_do_not_touch_it():
    """Axis values are interned (fast comparisons); a hash-equal invalid Axis("N", 8.0)
    is refused without changing the shared Axis("N", 8)."""
    a = ax.Axis("N", 8)
    assert ax.Axis("N", 8) is a
    for bad in (8.0, True, "8"):
        with pytest.raises(ax.AxesError, match=r"Axis: the length of axis 'N'"):
            ax.Axis("N", bad)
    assert a.length == 8 and type(a.length) is int
    assert ax.Axis("N", np.int64(8)) == a
