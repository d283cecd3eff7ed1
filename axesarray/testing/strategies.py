"""Hypothesis strategies: axes, dtypes, numpy-backed tensors, view chains, laid-out tensors.

Everything a strategy draws is plain data (tuples, ints, strings) so a failing case can be
pinned with ``@example(...)``. Helpers turn that data into a Tensor and, in lockstep, into a
numpy *shadow* computed with numpy alone: a test compares the two. The broadcasting rule
is re-implemented here from DESIGN §3 on purpose, as an independent copy of the spec.
Needs ``hypothesis`` (``pip install axesarray[test]``).

>>> from hypothesis import given
>>> import axesarray as ax, numpy as np
>>> from axesarray.testing import assert_close
>>> from axesarray.testing.strategies import numpy_tensors
>>> @given(numpy_tensors(dtype="float64"))
... def test_double(case):
...     t, arr, _ = case
...     assert_close(t * 2, arr * 2)
>>> with ax.set_options(engine="numpy"):  # the reference engine: nothing to compile
...     test_double()
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

import axesarray as ax

__all__ = [
    "NAMES",
    "FLOATS",
    "INTS",
    "DTYPES",
    "dtypes",
    "axes",
    "Source",
    "sources",
    "make_array",
    "random_values",
    "numpy_tensors",
    "view_ops",
    "apply_view_op",
    "shadow_view_op",
    "tensors",
    "spec_broadcast",
    "np_align",
]

# --- axes and dtypes -------------------------------------------------------------------------

# A pool of valid, distinct names: single letters plus a few longer ones and an underscore.
NAMES = tuple("NCHWKLMPQRSTXYZ") + ("batch", "feat", "x1", "_t", "ch")

FLOATS = ("float16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES = ("bool",) + INTS + FLOATS
dtypes = st.sampled_from(DTYPES).map(np.dtype)


@st.composite
def axes(draw, min_rank=0, max_rank=5, min_len=0, max_len=5, names=NAMES):
    """An ``ax.Axes`` of 0-5 axes with unique random names and lengths 0-5."""
    chosen = draw(
        st.lists(st.sampled_from(names), min_size=min_rank, max_size=max_rank, unique=True)
    )
    lengths = draw(
        st.lists(st.integers(min_len, max_len), min_size=len(chosen), max_size=len(chosen))
    )
    return ax.Axes(ax.Axis(n, k) for n, k in zip(chosen, lengths, strict=True))


# --- numpy sources (possibly non-contiguous) ---------------------------------------------------


@dataclass(frozen=True)
class Source:
    """How a numpy array of ``shape`` is cut out of a bigger buffer.

    ``perm[k]`` is the logical dim stored as physical dim k; ``steps[d]`` the slicing step
    of logical dim d (negative: reversed); ``pads[d]`` extra elements in the parent.
    """

    shape: tuple[int, ...]
    perm: tuple[int, ...]
    steps: tuple[int, ...]
    pads: tuple[int, ...]

    @staticmethod
    def contiguous(shape) -> Source:
        n = len(shape)
        return Source(tuple(shape), tuple(range(n)), (1,) * n, (0,) * n)


@st.composite
def sources(draw, shape):
    n = len(shape)
    perm = tuple(draw(st.permutations(range(n))))
    steps = tuple(draw(st.lists(st.sampled_from([1, 1, 2, -1, -2]), min_size=n, max_size=n)))
    pads = tuple(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    return Source(tuple(shape), perm, steps, pads)


def make_array(src: Source, values) -> tuple[np.ndarray, np.ndarray]:
    """(array of ``src.shape``, its contiguous parent). ``values(n)`` fills the parent."""
    phys_shape = []
    for d in src.perm:
        phys_shape.append(src.shape[d] * abs(src.steps[d]) + src.pads[d])
    parent = values(math.prod(phys_shape)).reshape(phys_shape)
    index = []
    for d in src.perm:
        n, step, pad = src.shape[d], src.steps[d], src.pads[d]
        s = abs(step)
        index.append(slice(pad, pad + n * s, s))
    if not index:
        return parent[...], parent  # parent[()] would give a numpy scalar, not a view
    arr = parent[tuple(index)]
    flips = tuple(slice(None, None, -1) if src.steps[d] < 0 else slice(None) for d in src.perm)
    arr = arr[flips]
    arr = arr.transpose(np.argsort(src.perm)) if src.perm else arr
    assert arr.shape == src.shape
    return arr, parent


def random_values(dtype, seed: int, grid: bool = True):
    """A filler ``n -> values`` of ``dtype``: small values, ties on purpose when ``grid``."""
    dtype = np.dtype(dtype)

    def fill(n: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        if dtype.kind == "b":
            return rng.random(n) < 0.5
        if dtype.kind == "u":
            return rng.integers(0, 8, n).astype(dtype)
        if dtype.kind == "i":
            return rng.integers(-5, 6, n).astype(dtype)
        if grid:  # quarters in [-2, 2]: exact in float16, with ties and zeros
            return (rng.integers(-8, 9, n) / 4).astype(dtype)
        return rng.uniform(-2, 2, n).astype(dtype)

    return fill


@st.composite
def numpy_tensors(draw, shape_axes=None, dtype=None):
    """(tensor, numpy array, parent): a tensor wrapping a possibly non-contiguous array."""
    a = draw(axes()) if shape_axes is None else shape_axes
    dt = draw(dtypes) if dtype is None else np.dtype(dtype)
    src = draw(sources(a.shape))
    seed = draw(st.integers(0, 2**16))
    arr, parent = make_array(src, random_values(dt, seed, draw(st.booleans())))
    return ax.tensor(arr, a), arr, parent


# --- view chains ---------------------------------------------------------------------------

# One op is a tuple:
#   ("transpose", names)                  names may contain "..."
#   ("isel", ((name, slice | int), ...))
#   ("rename", ((old, new), ...))
#   ("broadcast_to", ((name, length), ...))   a superset of the axes, any order
#   ("split", name, ((name, length), ...))
#   ("flatten", names, new_name)
#   ("squeeze", names | None)
#   ("expand_dims", ((name, length | None), ...), position)


@st.composite
def _slice_or_int(draw, n: int, allow_int=True):
    if allow_int and n > 0 and draw(st.integers(0, 3)) == 0:
        return draw(st.integers(-n, n - 1))
    step = draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
    start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
    stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
    return slice(start, stop, step)


def _fresh(draw, taken, k=1):
    free = [n for n in NAMES if n not in taken]
    return draw(st.lists(st.sampled_from(free), min_size=k, max_size=k, unique=True))


@st.composite
def view_ops(draw, start: ax.Axes, max_ops=4):
    """A valid chain of view ops for a tensor with axes ``start``."""
    cur = list(zip(start.names, start.shape, strict=True))
    ops = []
    for _ in range(draw(st.integers(1, max_ops))):
        names = [n for n, _ in cur]
        kind = draw(
            st.sampled_from(
                [
                    "transpose",
                    "isel",
                    "rename",
                    "broadcast_to",
                    "split",
                    "flatten",
                    "squeeze",
                    "expand_dims",
                ]
            )
        )
        if kind == "transpose":
            order = list(draw(st.permutations(names)))
            if order and draw(st.booleans()):  # replace a run by "..."
                i = draw(st.integers(0, len(order)))
                j = draw(st.integers(i, len(order)))
                order[i:j] = ["..."]
            ops.append(("transpose", tuple(order)))
            listed = [n for n in order if n != "..."]
            rest = [n for n in names if n not in listed]
            if "..." in order:
                k = order.index("...")
                order[k : k + 1] = rest
            lengths = dict(cur)
            cur = [(n, lengths[n]) for n in order]
        elif kind == "isel" and cur:
            picked = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
            keys = tuple((n, draw(_slice_or_int(dict(cur)[n]))) for n in picked)
            ops.append(("isel", keys))
            kd = dict(keys)
            new = []
            for n, k in cur:
                key = kd.get(n, slice(None))
                if isinstance(key, slice):
                    new.append((n, len(range(*key.indices(k)))))
            cur = new
        elif kind == "rename" and cur:
            old = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
            new_names = _fresh(draw, names, len(old))
            ops.append(("rename", tuple(zip(old, new_names, strict=True))))
            m = dict(zip(old, new_names, strict=True))
            cur = [(m.get(n, n), k) for n, k in cur]
        elif kind == "broadcast_to":
            k = draw(st.integers(0, 2))
            new = [(n, draw(st.integers(0, 3))) for n in _fresh(draw, names, k)]
            target = list(draw(st.permutations(cur + new)))
            ops.append(("broadcast_to", tuple(target)))
            cur = target
        elif kind == "split" and cur:
            i = draw(st.integers(0, len(cur) - 1))
            n, k = cur[i]
            if k == 0:
                parts = [0, draw(st.integers(0, 3))]
            else:
                a = draw(st.sampled_from([d for d in range(1, k + 1) if k % d == 0]))
                parts = [a, k // a]
            draw(st.randoms()).shuffle(parts)
            new_names = _fresh(draw, [m for m in names if m != n], 2)
            new = tuple(zip(new_names, parts, strict=True))
            ops.append(("split", n, new))
            cur = cur[:i] + list(new) + cur[i + 1 :]
        elif kind == "flatten" and len(cur) >= 1:
            picked = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
            rest_names = [m for m in names if m not in picked]
            new_name = _fresh(draw, rest_names, 1)[0]
            ops.append(("flatten", tuple(picked), new_name))
            lengths = dict(cur)
            pos = min(names.index(p) for p in picked)
            rest = [(m, lengths[m]) for m in names if m not in picked]
            rest.insert(pos, (new_name, math.prod(lengths[p] for p in picked)))
            cur = rest
        elif kind == "squeeze":
            ones = [n for n, k in cur if k == 1]
            if ones and draw(st.booleans()):
                chosen = tuple(draw(st.lists(st.sampled_from(ones), min_size=1, unique=True)))
                ops.append(("squeeze", chosen))
            else:
                chosen = tuple(ones)
                ops.append(("squeeze", None))
            cur = [(n, k) for n, k in cur if n not in chosen]
        elif kind == "expand_dims":
            new = [
                (n, draw(st.sampled_from([None, 0, 1, 2, 3])))
                for n in _fresh(draw, names, draw(st.integers(1, 2)))
            ]
            pos = draw(st.integers(-len(cur) - 1, len(cur)))
            ops.append(("expand_dims", tuple(new), pos))
            p = pos % (len(cur) + 1)
            cur = cur[:p] + [(n, 1 if k is None else k) for n, k in new] + cur[p:]
    return tuple(ops)


def apply_view_op(t: ax.Tensor, op) -> ax.Tensor:
    """Apply one view op to a Tensor through the public API."""
    kind = op[0]
    if kind == "transpose":
        return t.transpose(" ".join(op[1])) if op[1] else t.transpose(())
    if kind == "isel":
        return t[dict(op[1])]
    if kind == "rename":
        return t.rename(dict(op[1]))
    if kind == "broadcast_to":
        return t.broadcast_to([ax.Axis(n, k) for n, k in op[1]])
    if kind == "split":
        return t.split(op[1], [ax.Axis(n, k) for n, k in op[2]])
    if kind == "flatten":
        return t.flatten(op[1], op[2])
    if kind == "squeeze":
        return t.squeeze(op[1])
    if kind == "expand_dims":
        items = [n if k is None else ax.Axis(n, k) for n, k in op[1]]
        return t.expand_dims(items, op[2])
    raise AssertionError(kind)


def shadow_view_op(arr: np.ndarray, names: list[str], op) -> tuple[np.ndarray, list[str]]:
    """The same op on a numpy array whose dims are ``names``: numpy only."""
    kind = op[0]
    if kind == "transpose":
        order = list(op[1])
        if "..." in order:
            rest = [n for n in names if n not in order]
            k = order.index("...")
            order[k : k + 1] = rest
        return arr.transpose([names.index(n) for n in order]), order
    if kind == "isel":
        keys = dict(op[1])
        index = tuple(keys.get(n, slice(None)) for n in names)
        kept = [n for n in names if not isinstance(keys.get(n, slice(None)), int)]
        return arr[index], kept
    if kind == "rename":
        m = dict(op[1])
        return arr, [m.get(n, n) for n in names]
    if kind == "broadcast_to":
        target = [n for n, _ in op[1]]
        present = [n for n in target if n in names]
        a = arr.transpose([names.index(n) for n in present])
        a = a[tuple(slice(None) if n in names else None for n in target)]
        return np.broadcast_to(a, tuple(k for _, k in op[1])), target
    if kind == "split":
        d = names.index(op[1])
        lengths = tuple(k for _, k in op[2])
        shape = arr.shape[:d] + lengths + arr.shape[d + 1 :]
        return arr.reshape(shape), names[:d] + [n for n, _ in op[2]] + names[d + 1 :]
    if kind == "flatten":
        picked = list(op[1])
        dims = [names.index(p) for p in picked]
        pos = min(dims)
        rest = [d for d in range(len(names)) if d not in dims]
        order = rest[:pos] + dims + rest[pos:]
        a = arr.transpose(order)
        shape = (
            a.shape[:pos] + (math.prod(arr.shape[d] for d in dims),) + a.shape[pos + len(dims) :]
        )
        new_names = [names[d] for d in rest]
        new_names.insert(pos, op[2])
        return a.reshape(shape), new_names
    if kind == "squeeze":
        ones = [n for n, k in zip(names, arr.shape, strict=True) if k == 1]
        chosen = op[1] if op[1] is not None else ones
        dims = tuple(names.index(n) for n in chosen)
        return np.squeeze(arr, axis=dims), [n for n in names if n not in chosen]
    if kind == "expand_dims":
        p = op[2] % (len(names) + 1)
        new = [(n, 1 if k is None else k) for n, k in op[1]]
        a = arr[(slice(None),) * p + (None,) * len(new)]
        shape = arr.shape[:p] + tuple(k for _, k in new) + arr.shape[p:]
        return np.broadcast_to(a, shape), names[:p] + [n for n, _ in new] + names[p:]
    raise AssertionError(kind)


# --- the broadcasting rule, re-implemented from DESIGN §3 --------------------------------------


def spec_broadcast(a: list[str], b: list[str]) -> list[str]:
    """Result names of ``a (op) b``: the larger operand's order in the subset case."""
    if set(b) <= set(a):
        return list(a)
    if set(a) <= set(b):
        return list(b)
    return list(a) + [n for n in b if n not in a]


def np_align(arr, names, target):
    """Transpose + insert length-1 dims so numpy broadcasting lines ``arr`` up by name."""
    arr = np.asarray(arr)
    if not names:
        return arr.reshape((1,) * len(target)) if target else arr
    perm = [names.index(n) for n in target if n in names]
    arr = arr.transpose(perm)
    return arr[tuple(slice(None) if n in names else None for n in target)]


# --- tensors with random views and layouts ---------------------------------------------------

_LAYOUTS = ("NCHW", "NHWC", "NCHW4", "NCHW32", "CHWN4", "NCHWx")


@st.composite
def tensors(draw, dtype=None, max_len=5, layouts=True, views=True):
    """(tensor, numpy array of its values in axis order): a tensor over a possibly
    non-contiguous array, then (maybe) a chain of views, or (maybe) stored in a standard
    layout (NCHW4, CHWN4...: four axes named N C H W, blocks padded).

    >>> from hypothesis import given
    >>> @given(tensors())
    ... def test_values(case):
    ...     t, arr = case
    ...     assert t.shape == arr.shape
    >>> with ax.set_options(engine="numpy"):  # also while drawing (to_layout copies)
    ...     test_values()
    """
    if layouts and draw(st.integers(0, 2)) == 0:
        shape = tuple(draw(st.lists(st.integers(0, max_len), min_size=4, max_size=4)))
        a = ax.Axes(ax.Axis(n, k) for n, k in zip("NCHW", shape, strict=True))
        t, arr, _ = draw(numpy_tensors(a, dtype))
        name = draw(st.sampled_from(_LAYOUTS))
        if name == "NCHWx":
            name = f"NCHW{draw(st.integers(2, 5))}"
        return t.to_layout(name), arr
    t, arr, _ = draw(numpy_tensors(draw(axes(max_len=max_len)), dtype))
    if views and draw(st.booleans()):
        names = list(t.names)
        for op in draw(view_ops(t.axes)):
            t = apply_view_op(t, op)
            arr, names = shadow_view_op(arr, names, op)
    return t, arr
