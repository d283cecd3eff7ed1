"""View math in elements, shadowed on ``np.arange(n).reshape(shape)`` (CheckingShapeTracker).

Each element of the shadow holds its own storage address, so after any chain of ops the
view's ``addresses`` must equal the shadow's values element by element.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from axesarray.core import strided as sd
from axesarray.core.strided import Block, View

shapes = st.lists(st.integers(0, 5), min_size=0, max_size=5).map(tuple)


def arange_shadow(shape) -> np.ndarray:
    return np.arange(math.prod(shape), dtype=np.int64).reshape(shape)


def assert_view(v: View, shadow: np.ndarray) -> None:
    """The view addresses exactly the shadow's elements (shape and every address)."""
    assert v.shape == shadow.shape
    np.testing.assert_array_equal(sd.addresses(v), shadow)


def numpy_strides(v: View, shadow: np.ndarray) -> None:
    """For a plain view of a C-contiguous arange, strides equal numpy's (in elements)."""
    for n, s, ns in zip(v.shape, v.strides, shadow.strides, strict=True):
        if n > 1:
            assert s == ns // shadow.itemsize


# --- random op chains ------------------------------------------------------------------------


@st.composite
def remaps(draw, shape):
    """(maps, out_shape, numpy index fn): slices/ints per dim, a permutation, broadcasts."""
    keys = []
    for n in shape:
        if n > 0 and draw(st.integers(0, 3)) == 0:
            keys.append(draw(st.integers(0, n - 1)))
        else:
            step = draw(st.sampled_from([1, 2, 3, -1, -2]))
            keys.append(
                slice(draw(st.integers(-n - 1, n + 1)), draw(st.integers(-n - 1, n + 1)), step)
            )
    kept = [d for d, k in enumerate(keys) if isinstance(k, slice)]
    lengths = {d: len(range(*keys[d].indices(shape[d]))) for d in kept}
    n_new = draw(st.integers(0, 2))
    new_lengths = draw(st.lists(st.integers(0, 3), min_size=n_new, max_size=n_new))
    slots = list(kept) + [-(i + 1) for i in range(n_new)]  # negative: broadcast dims
    order = draw(st.permutations(slots))
    out_shape = tuple(lengths[s] if s >= 0 else new_lengths[-s - 1] for s in order)
    maps = []
    for d, k in enumerate(keys):
        if isinstance(k, slice):
            start, _, step = k.indices(shape[d])
            maps.append((order.index(d), start, step))
        else:
            maps.append((-1, k, 0))

    def shadow_fn(arr):
        sub = arr[tuple(keys)]
        sub = sub.transpose([kept.index(s) for s in order if s >= 0])
        expand = tuple(slice(None) if s >= 0 else None for s in order)
        return np.broadcast_to(sub[expand], out_shape)

    return tuple(maps), out_shape, shadow_fn


@st.composite
def chains(draw):
    """A random starting shape and a chain of permute/remap/split/merge applied to it."""
    shape = draw(shapes)
    v = sd.contiguous(shape)
    arr = arange_shadow(shape)
    log = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["permute", "remap", "split", "merge"]))
        if kind == "permute":
            params = tuple(draw(st.permutations(range(v.ndim))))
            v, arr = sd.permute(v, params), arr.transpose(params)
        elif kind == "remap":
            maps, out_shape, fn = draw(remaps(v.shape))
            v, arr = sd.remap_view(v, out_shape, maps), fn(arr)
            params = maps
        elif kind == "split" and v.ndim:
            d = draw(st.integers(0, v.ndim - 1))
            n = v.shape[d]
            a = draw(st.sampled_from([k for k in range(1, n + 1) if n % k == 0] or [0]))
            lengths = (a, n // a) if a else (0, draw(st.integers(0, 3)))
            params = (d, lengths)
            v = sd.split_dim(v, d, lengths)
            arr = arr.reshape(arr.shape[:d] + lengths + arr.shape[d + 1 :])
        elif kind == "merge" and v.ndim:
            dims = tuple(
                draw(st.lists(st.integers(0, v.ndim - 1), min_size=1, max_size=3, unique=True))
            )
            rest = [d for d in range(v.ndim) if d not in dims]
            pos = draw(st.integers(0, len(rest)))
            params = (dims, pos)
            merged = sd.merge_dims(v, dims, pos)
            order = rest[:pos] + list(dims) + rest[pos:]
            t = arr.transpose(order)
            new = t.reshape(
                t.shape[:pos]
                + (math.prod(t.shape[pos : pos + len(dims)]),)
                + t.shape[pos + len(dims) :]
            )
            if merged is None:
                assert not expressible(new), f"merge_dims refused a strided result {dims}, {pos}"
                continue
            v, arr = merged, new
        else:
            continue
        log.append((kind, params))
        assert_view(v, arr)
    return v, arr, log


def expressible(arr: np.ndarray) -> bool:
    """Whether the addresses in ``arr`` follow offset + sum(i_k * s_k) for some strides."""
    if arr.size == 0:
        return True
    for d in range(arr.ndim):
        if arr.shape[d] > 1:
            diffs = np.diff(arr, axis=d)
            if not (diffs == diffs.flat[0]).all():
                return False
    return True


@given(chains())
def test_op_chains_address_like_numpy(chain):
    """Any chain of view ops addresses the same elements as numpy (checked after each op)."""
    v, arr, _ = chain
    assert_view(v, arr)


@given(chains())
def test_span_is_exact_for_plain_views(chain):
    """``span`` is [min address, max address + 1), or None for an empty view."""
    v, arr, _ = chain
    if arr.size == 0:
        assert sd.span(v) is None
    else:
        assert sd.span(v) == (int(arr.min()), int(arr.max()) + 1)


@given(chains())
def test_internal_overlap_is_conservative(chain):
    """False from ``has_internal_overlap`` means unique addresses; a broadcast means True."""
    v, arr, _ = chain
    unique = np.unique(arr).size == arr.size
    if not sd.has_internal_overlap(v):
        assert unique
    if v.size and any(n > 1 and s == 0 for n, s in zip(v.shape, v.strides, strict=True)):
        assert sd.has_internal_overlap(v)


@given(shapes, st.data())
def test_views_without_broadcast_never_overlap(shape, data):
    """Slices, transposes and integer indexing of contiguous memory report no overlap."""
    v = sd.contiguous(shape)
    arr = arange_shadow(shape)
    for _ in range(3):
        maps, out_shape, fn = data.draw(remaps(v.shape))
        kept = {m[0] for m in maps if m[0] >= 0}
        if len(kept) != len(out_shape):  # the remap broadcast: skip
            continue
        v, arr = sd.remap_view(v, out_shape, maps), fn(arr)
    assert_view(v, arr)
    assert not sd.has_internal_overlap(v)


@given(shapes, st.data())
def test_permute_and_remap_strides_are_numpys(shape, data):
    """Permutes and remaps keep numpy's element strides on every dim longer than 1."""
    v, arr = sd.contiguous(shape), arange_shadow(shape)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    v, arr = sd.permute(v, perm), arr.transpose(perm)
    maps, out_shape, fn = data.draw(remaps(v.shape))
    v, arr = sd.remap_view(v, out_shape, maps), fn(arr)
    assert_view(v, arr)
    numpy_strides(v, arr)


# --- individual functions ------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (0,), (1,), (3,), (2, 3), (2, 0, 3), (1, 1, 4)])
def test_contiguous(shape):
    """``contiguous`` has C-order strides and addresses like ``np.arange``."""
    v = sd.contiguous(shape)
    assert_view(v, arange_shadow(shape))
    assert sd.is_contiguous(v)


def test_remap_view_doc_cases():
    """Transpose, a negative-step slice, an integer index and a broadcast."""
    v = sd.contiguous((2, 3))
    arr = arange_shadow((2, 3))
    assert_view(sd.remap_view(v, (3, 2), ((1, 0, 1), (0, 0, 1))), arr.T)
    assert_view(sd.remap_view(v, (2,), ((-1, 1, 0), (0, 2, -2))), arr[1, 2::-2])
    b = sd.remap_view(v, (4, 2, 3), ((1, 0, 1), (2, 0, 1)))
    assert b.strides == (0, 3, 1)
    assert_view(b, np.broadcast_to(arr, (4, 2, 3)))


@pytest.mark.parametrize(
    "shape, d, lengths",
    [
        ((6,), 0, (2, 3)),
        ((2, 6), 1, (3, 2)),
        ((0,), 0, (0, 4)),
        ((4,), 0, (1, 4)),
        ((1,), 0, (1, 1)),
    ],
)
def test_split_dim(shape, d, lengths):
    """``split_dim`` is numpy's reshape of one dim, always a view for plain strides."""
    arr = arange_shadow(shape)
    v = sd.split_dim(sd.contiguous(shape), d, lengths)
    assert_view(v, arr.reshape(shape[:d] + lengths + shape[d + 1 :]))


def test_split_of_broadcast_dim_stays_broadcast():
    """Splitting a stride-0 dim gives stride-0 dims."""
    v = View((6,), (0,), 5)
    assert sd.split_dim(v, 0, (2, 3)).strides == (0, 0)


def test_split_of_reversed_dim():
    """Splitting a negative-stride dim is still a view (strides scale by the sub-lengths)."""
    arr = arange_shadow((6,))[::-1]
    v = View((6,), (-1,), 5)
    assert_view(sd.split_dim(v, 0, (2, 3)), arr.reshape(2, 3))


@pytest.mark.parametrize(
    "shape, perm, dims, pos, mergeable",
    [
        ((2, 3), (0, 1), (0, 1), 0, True),  # contiguous
        ((2, 3), (1, 0), (0, 1), 0, False),  # transposed: no single stride
        ((2, 3), (1, 0), (1, 0), 0, True),  # transposed, merged in memory order
        ((2, 1, 3), (0, 1, 2), (0, 2), 0, True),  # a length-1 dim between is irrelevant
        ((2, 3, 4), (0, 1, 2), (0, 2), 0, False),  # a gap between the merged dims
        ((2, 0), (1, 0), (0, 1), 0, True),  # empty: length 0, stride 0
        # Found by test_span_is_exact_for_plain_views: an empty view (another dim is 0)
        # merges whatever its strides, as numpy reshapes any empty array as a view.
        ((0, 2, 3), (0, 2, 1), (1, 2), 0, True),
        ((3, 1), (1, 0), (1, 0), 0, True),  # length-1 outer dim
    ],
)
def test_merge_dims(shape, perm, dims, pos, mergeable):
    """``merge_dims`` is a view exactly when one stride expresses the merged index."""
    arr = arange_shadow(shape).transpose(perm)
    v = sd.permute(sd.contiguous(shape), perm)
    merged = sd.merge_dims(v, dims, pos)
    rest = [d for d in range(v.ndim) if d not in dims]
    order = rest[:pos] + list(dims) + rest[pos:]
    t = arr.transpose(order)
    merged_len = math.prod(arr.shape[d] for d in dims)
    expected = t.reshape(t.shape[:pos] + (merged_len,) + t.shape[pos + len(dims) :])
    assert (merged is not None) == mergeable
    if merged is not None:
        assert_view(merged, expected)
    else:
        assert not expressible(expected)


def test_merge_of_sliced_dims():
    """A stepped slice stays mergeable when the outer stride is inner stride * length."""
    arr = arange_shadow((4, 6))[:, ::2]  # strides (6, 2), lengths (4, 3): 6 == 2 * 3
    v = View((4, 3), (6, 2), 0)
    assert_view(sd.merge_dims(v, (0, 1), 0), arr.reshape(12))
    w = View((4, 2), (6, 2), 0)  # arr[:, :4:2]: 6 != 2 * 2
    assert sd.merge_dims(w, (0, 1), 0) is None


@pytest.mark.parametrize(
    "v, expected",
    [
        (View((3,), (1,), 2), (2, 5)),
        (View((3,), (-1,), 2), (0, 3)),
        (View((2, 3), (0, 1), 0), (0, 3)),
        (View((0, 3), (3, 1), 0), None),
        (View((), (), 7), (7, 8)),
    ],
)
def test_span(v, expected):
    """``span`` is the half-open address range, None when the view is empty."""
    assert sd.span(v) == expected


@pytest.mark.parametrize(
    "v, overlap",
    [
        (View((3,), (1,), 0), False),
        (View((3,), (0,), 0), True),  # broadcast
        (View((1,), (0,), 0), False),  # length 1: one element
        (View((2, 2), (1, 1), 0), True),  # a diagonal walk revisits addresses
        (View((2, 3), (3, 1), 0), False),
        (View((2, 3), (-3, -1), 5), False),
        (View((2, 3), (2, 1), 0), True),  # rows overlap by one element
        (View((0, 3), (0, 0), 0), False),  # empty
    ],
)
def test_has_internal_overlap(v, overlap):
    """Overlap is reported for broadcasts and self-overlapping strides."""
    assert sd.has_internal_overlap(v) == overlap
    if not overlap and v.size:
        assert np.unique(sd.addresses(v)).size == v.size


def test_is_contiguous_ignores_length_one():
    """A length-1 dim's stride does not matter for contiguity."""
    assert sd.is_contiguous(View((2, 1, 3), (3, 99, 1), 0))
    assert not sd.is_contiguous(View((2, 3), (1, 2), 0))


# --- blocked views (the C of NCHWx) ----------------------------------------------------------


@st.composite
def blocked(draw):
    """A logical (N, C, H) view over NCHx storage and its numpy shadow."""
    n, c, h = draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 3))
    x = draw(st.sampled_from([1, 2, 3, 4]))
    cb = -(-c // x)
    phys = arange_shadow((n, cb, h, x))
    logical = phys[:, np.arange(c) // x, :, np.arange(c) % x]  # fancy: (C, N, H)
    logical = np.moveaxis(logical, 0, 1)
    v = View((n, c, h), (cb * h * x, h * x, x), 0, (None, Block(x, 1), None))
    return v, logical


@given(blocked(), st.data())
def test_blocked_remaps_address_like_numpy(bv, data):
    """Slicing (any step), indexing and permuting a blocked view matches numpy."""
    v, arr = bv
    assert_view(v, arr)
    for _ in range(2):
        maps, out_shape, fn = data.draw(remaps(v.shape))
        r = sd.remap_view(v, out_shape, maps)
        if r is None:  # a blocked axis used twice (a diagonal) is not expressible
            continue
        v, arr = r, fn(arr)
        assert_view(v, arr)
        if v.size:
            lo, hi = sd.span(v)
            assert lo <= arr.min() and arr.max() < hi
