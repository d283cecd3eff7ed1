"""Hypothesis strategies: axes, dtypes, numpy-backed tensors, view chains, expression trees.

Everything a strategy draws is plain data (tuples, ints, strings) so a failing case can be
pinned with ``@example(...)``. Helpers turn that data into a Tensor and, in lockstep, into a
numpy *shadow* computed with numpy alone (tinygrad's CheckingShapeTracker idea): the test
compares the two. The broadcasting rule is re-implemented here from DESIGN §3 on purpose,
as an independent copy of the spec.
"""

from __future__ import annotations

import math
import operator
import warnings
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

import axesarray as ax

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


# --- expression trees ----------------------------------------------------------------------
#
# A Program is (inputs, tree). Each input is an Input (axes, dtype, seed, Source). Tree nodes:
#   ("leaf", i)                       ("unary", fn, x)
#   ("binary", op, a, b, scalar_side) b may be ("scalar", v); scalar_side "l" puts it left
#   ("compare", op, a, b)             ("where", c, a, b)
#   ("astype", dtype, x)              ("reduce", op, names | None, x)
#   ("dot", over, a, b)               ("pad", name, before, after, value, start, rev, x)
#   ("concat", name, a, i, start)     a joined with input i along name, then a window
#   ("transpose", names, x)           ("reverse", name, x)    ("index", name, i, x)
#   ("rename", old, new, x)           ("broadcast", ((name, len), ...), x)


@dataclass(frozen=True)
class Input:
    names: tuple[str, ...]
    lengths: tuple[int, ...]
    dtype: str
    seed: int
    source: Source
    grid: bool = True

    def array(self) -> np.ndarray:
        arr, _ = make_array(self.source, random_values(self.dtype, self.seed, self.grid))
        return arr


@dataclass(frozen=True)
class Program:
    inputs: tuple[Input, ...]
    tree: tuple

    def arrays(self) -> list[np.ndarray]:
        return [i.array() for i in self.inputs]

    def tensors(self, arrays=None) -> list[ax.Tensor]:
        arrays = self.arrays() if arrays is None else arrays
        return [
            ax.tensor(a, [ax.Axis(n, k) for n, k in zip(i.names, i.lengths, strict=True)])
            for i, a in zip(self.inputs, arrays, strict=True)
        ]


@dataclass
class Shadow:
    """numpy's value of a subtree: array, axis names, exactness and an error scale.

    ``exact``: both engines must agree bit for bit (ints, bools, and floats that went only
    through selections); discontinuous ops (floor, comparisons, argmax, float->int casts)
    take only exact operands, so a 1-ulp difference cannot flip their result. ``mag``
    bounds the absolute rounding error in units of the dtype's tolerance (sums: sum|x|).
    """

    arr: np.ndarray
    names: list
    exact: bool
    mag: float

    @property
    def dtype(self):
        return self.arr.dtype


def _absmax(a) -> float:
    a = np.asarray(a)
    if a.size == 0 or a.dtype.kind == "b":
        return 1.0
    with np.errstate(all="ignore"):
        m = float(np.max(np.abs(a.astype(np.float64))))
    return max(1.0, m) if math.isfinite(m) else 1e30


# name -> (axesarray function, numpy function, dtype kinds, needs exact input, keeps exact)
def _sigmoid_np(x):
    dt = np.exp.resolve_dtypes((x.dtype, None))[-1]
    x = x.astype(dt)
    one = dt.type(1)
    return one / (one + np.exp(-x))


UNARY = {
    "neg": (operator.neg, np.negative, "iuf", False, True),
    "abs": (ax.abs, np.abs, "biuf", False, True),
    "exp": (
        lambda x: ax.exp(ax.clip(x, -3, 3)),
        lambda x: np.exp(np.clip(x, -3, 3)),
        "f",
        False,
        False,
    ),
    "expm1": (
        lambda x: ax.expm1(ax.clip(x, -3, 3)),
        lambda x: np.expm1(np.clip(x, -3, 3)),
        "f",
        False,
        False,
    ),
    "log": (lambda x: ax.log(abs(x) + 1), lambda x: np.log(np.abs(x) + 1), "f", False, False),
    "log1p": (lambda x: ax.log1p(abs(x)), lambda x: np.log1p(np.abs(x)), "f", False, False),
    "sqrt": (lambda x: ax.sqrt(abs(x) + 1), lambda x: np.sqrt(np.abs(x) + 1), "f", False, False),
    "sin": (ax.sin, np.sin, "f", False, False),
    "cos": (ax.cos, np.cos, "f", False, False),
    "tanh": (ax.tanh, np.tanh, "f", False, False),
    "sigmoid": (ax.sigmoid, _sigmoid_np, "f", False, False),
    "square": (ax.square, np.square, "iuf", False, False),
    "floor": (ax.floor, np.floor, "iuf", True, True),
    "ceil": (ax.ceil, np.ceil, "iuf", True, True),
    "round": (ax.round, np.round, "iuf", True, True),
    "round_method": (lambda x: x.round(), np.round, "f", True, True),
    "sign": (ax.sign, np.sign, "iuf", True, True),
    "relu": (ax.relu, lambda x: np.maximum(x, 0), "iuf", False, True),
    "clip": (lambda x: ax.clip(x, -1, 1), lambda x: np.clip(x, -1, 1), "if", False, True),
    "isfinite": (ax.isfinite, np.isfinite, "f", True, True),
    "logical_not": (ax.logical_not, np.logical_not, "biuf", True, True),
    "invert": (operator.invert, np.invert, "biu", False, True),
}

# name -> (operator on tensors/scalars, dtype kinds, keeps exact for floats)
BINARY = {
    "add": (operator.add, "biuf", False),
    "sub": (operator.sub, "iuf", False),
    "mul": (operator.mul, "biuf", False),
    "truediv": (operator.truediv, "biuf", False),
    "floordiv": (operator.floordiv, "iuf", True),
    "mod": (operator.mod, "iuf", True),
    "pow": (operator.pow, "iuf", False),
    "maximum": (ax.maximum, "biuf", True),
    "minimum": (ax.minimum, "biuf", True),
    "and": (operator.and_, "biu", True),
    "or": (operator.or_, "biu", True),
    "xor": (operator.xor, "biu", True),
}
NP_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "truediv": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.remainder,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}
COMPARE = {
    "eq": (operator.eq, np.equal),
    "ne": (operator.ne, np.not_equal),
    "lt": (operator.lt, np.less),
    "le": (operator.le, np.less_equal),
    "gt": (operator.gt, np.greater),
    "ge": (operator.ge, np.greater_equal),
}
REDUCE = ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "any", "all")


def _safe_denominator(op, b, np_side: bool):
    """Denominators that are never zero (division by zero has its own tests)."""
    if not isinstance(b, (np.ndarray, ax.Tensor)):
        np_side = False  # a Python scalar stays a weak Python scalar on both sides
    if op == "truediv":
        return (np.abs(b) + 0.5) if np_side else (abs(b) + 0.5)
    if op in ("floordiv", "mod"):
        if not isinstance(b, (np.ndarray, ax.Tensor)):
            return max(abs(b), 1)
        return np.maximum(np.abs(b), 1) if np_side else ax.maximum(abs(b), 1)
    return b


def _np_unary(fn, x: Shadow) -> Shadow:
    _, npf, _, _, keeps = UNARY[fn]
    with np.errstate(all="ignore"):
        arr = np.asarray(npf(x.arr))
    exact = x.exact and (keeps or arr.dtype.kind in "biu")
    lip = _absmax(arr) if fn in ("exp", "expm1") else 1.0
    return Shadow(arr, x.names, exact, max(x.mag * lip, _absmax(arr)))


def _np_binary(op, a: Shadow, b, side: str) -> Shadow:
    """numpy's ``a (op) b``; b is a Shadow or a weak Python scalar (left of a if side "l")."""
    if isinstance(b, Shadow):
        names = spec_broadcast(a.names, b.names)
        x, y = np_align(a.arr, a.names, names), np_align(b.arr, b.names, names)
    else:
        names, x, y = a.names, a.arr, b
    if side == "l":
        x, y = y, x
    y = _safe_denominator(op, y, True)
    with np.errstate(all="ignore"):
        arr = np.asarray(NP_BINARY[op](x, y))
    mb = b.mag if isinstance(b, Shadow) else _absmax(np.asarray(b))
    eb = b.exact if isinstance(b, Shadow) else True
    exact = a.exact and eb and (BINARY[op][2] or arr.dtype.kind in "biu")
    if op in ("mul", "pow"):
        mag = a.mag * mb * (3 if op == "pow" else 1)
    elif op == "truediv":
        mag = 4 * a.mag * mb
    else:
        mag = a.mag + mb
    return Shadow(arr, names, exact, max(mag, _absmax(arr)))


def _lengths(a: Shadow, b, names):
    lengths = dict(zip(a.names, a.arr.shape, strict=True))
    if isinstance(b, Shadow):
        lengths.update(zip(b.names, b.arr.shape, strict=True))
    return [lengths[n] for n in names]


def _ax_binary(op, a, b, side: str):
    fn = BINARY[op][0]
    if side == "l":
        return fn(b, _safe_denominator(op, a, False))
    return fn(a, _safe_denominator(op, b, False))


def _np_reduce(op, names, x: Shadow) -> Shadow:
    names_r = list(x.names) if names is None else list(names)
    dims = tuple(x.names.index(n) for n in names_r)
    kept = [n for n in x.names if n not in names_r]
    arr = x.arr
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # mean of an empty slice is nan
        if op in ("argmax", "argmin"):
            out = getattr(np, op)(arr, axis=dims[0])
        else:
            out = getattr(np, op)(arr, axis=dims)
        absum = np.sum(np.abs(arr.astype(np.float64)), axis=dims) if arr.dtype.kind != "b" else 1.0
    out = np.asarray(out)
    exact = x.exact and (
        op in ("max", "min", "argmax", "argmin", "any", "all") or out.dtype.kind in "biu"
    )
    return Shadow(
        out, kept, exact, max(x.mag * _absmax(absum) / max(1.0, _absmax(arr)) + x.mag, _absmax(out))
    )


def _np_dot(over, a: Shadow, b: Shadow) -> Shadow:
    labels = {n: i for i, n in enumerate(dict.fromkeys(a.names + b.names))}
    out_names = [n for n in a.names if n not in over] + [
        n for n in b.names if n not in over and n not in a.names
    ]
    with np.errstate(all="ignore"):
        arr = np.einsum(
            a.arr,
            [labels[n] for n in a.names],
            b.arr,
            [labels[n] for n in b.names],
            [labels[n] for n in out_names],
        )
        arr = np.asarray(arr, dtype=np.result_type(a.arr.dtype, b.arr.dtype))
        terms = np.einsum(
            np.abs(a.arr.astype(np.float64)),
            [labels[n] for n in a.names],
            np.abs(b.arr.astype(np.float64)),
            [labels[n] for n in b.names],
            [labels[n] for n in out_names],
        )
    exact = a.exact and b.exact and arr.dtype.kind in "biu"
    return Shadow(arr, out_names, exact, max(a.mag * b.mag * _absmax(terms), _absmax(arr)))


def shadow_eval(prog: Program, arrays=None) -> Shadow:
    """numpy's result of a program."""
    arrays = prog.arrays() if arrays is None else arrays
    memo: dict = {}
    return _shadow(prog.tree, prog, arrays, memo)


def _shadow(t, prog, arrays, memo) -> Shadow:
    kind = t[0]
    if kind == "leaf":
        arr = arrays[t[1]]
        return Shadow(arr, list(prog.inputs[t[1]].names), True, _absmax(arr))
    if kind == "unary":
        return _np_unary(t[1], _shadow(t[2], prog, arrays, memo))
    if kind == "binary":
        a = _shadow(t[2], prog, arrays, memo)
        b = t[3][1] if t[3][0] == "scalar" else _shadow(t[3], prog, arrays, memo)
        return _np_binary(t[1], a, b, t[4])
    if kind == "compare":
        a = _shadow(t[2], prog, arrays, memo)
        if t[3][0] == "scalar":
            b_arr, b_names = t[3][1], None
        else:
            b = _shadow(t[3], prog, arrays, memo)
            b_arr, b_names = b.arr, b.names
        names = a.names if b_names is None else spec_broadcast(a.names, b_names)
        x = np_align(a.arr, a.names, names)
        y = b_arr if b_names is None else np_align(b_arr, b_names, names)
        arr = np.asarray(COMPARE[t[1]][1](x, y))
        return Shadow(_full(arr, names, a, None if b_names is None else b), names, True, 1.0)
    if kind == "where":
        parts = [p[1] if p[0] == "scalar" else _shadow(p, prog, arrays, memo) for p in t[1:4]]
        names = None
        for p in parts:
            if isinstance(p, Shadow):
                names = list(p.names) if names is None else spec_broadcast(names, p.names)
        names = names or []
        vals = [np_align(p.arr, p.names, names) if isinstance(p, Shadow) else p for p in parts]
        arr = np.asarray(np.where(*vals))
        shadows = [p for p in parts if isinstance(p, Shadow)]
        lengths = {}
        for p in shadows:
            lengths.update(zip(p.names, p.arr.shape, strict=True))
        arr = np.broadcast_to(arr, tuple(lengths[n] for n in names)).copy()
        exact = all(p.exact for p in shadows)
        mag = max([p.mag for p in shadows[1:]] + [1.0])
        return Shadow(arr, names, exact, mag)
    if kind == "astype":
        x = _shadow(t[2], prog, arrays, memo)
        with np.errstate(all="ignore"):
            arr = x.arr.astype(t[1])
        return Shadow(arr, x.names, x.exact, max(x.mag, _absmax(arr)))
    if kind == "reduce":
        return _np_reduce(t[1], t[2], _shadow(t[3], prog, arrays, memo))
    if kind == "dot":
        return _np_dot(t[1], _shadow(t[2], prog, arrays, memo), _shadow(t[3], prog, arrays, memo))
    if kind == "pad":
        _, name, before, after, value, start, rev, sub = t
        x = _shadow(sub, prog, arrays, memo)
        d = x.names.index(name)
        width = [(0, 0)] * x.arr.ndim
        width[d] = (before, after)
        padded = np.pad(x.arr, width, constant_values=value)
        return Shadow(_window(padded, d, start, x.arr.shape[d], rev), x.names, x.exact, x.mag)
    if kind == "concat":
        _, name, sub, i, start = t
        x = _shadow(sub, prog, arrays, memo)
        other = arrays[i]
        o_names = list(prog.inputs[i].names)
        other = other.transpose([o_names.index(n) for n in x.names])
        d = x.names.index(name)
        joined = np.concatenate([x.arr, other.astype(np.result_type(x.arr, other))], axis=d)
        joined = joined.astype(np.result_type(x.arr.dtype, other.dtype))
        return Shadow(
            _window(joined, d, start, x.arr.shape[d], False),
            x.names,
            x.exact,
            max(x.mag, _absmax(other)),
        )
    if kind == "transpose":
        x = _shadow(t[2], prog, arrays, memo)
        return Shadow(x.arr.transpose([x.names.index(n) for n in t[1]]), list(t[1]), x.exact, x.mag)
    if kind == "reverse":
        x = _shadow(t[2], prog, arrays, memo)
        d = x.names.index(t[1])
        return Shadow(np.flip(x.arr, d), x.names, x.exact, x.mag)
    if kind == "index":
        x = _shadow(t[3], prog, arrays, memo)
        d = x.names.index(t[1])
        return Shadow(
            np.take(x.arr, t[2], axis=d), [n for n in x.names if n != t[1]], x.exact, x.mag
        )
    if kind == "rename":
        x = _shadow(t[3], prog, arrays, memo)
        return Shadow(x.arr, [t[2] if n == t[1] else n for n in x.names], x.exact, x.mag)
    if kind == "broadcast":
        x = _shadow(t[2], prog, arrays, memo)
        names = [n for n, _ in t[1]]
        arr = np.broadcast_to(np_align(x.arr, x.names, names), tuple(k for _, k in t[1]))
        return Shadow(arr, names, x.exact, x.mag)
    raise AssertionError(kind)


def _full(arr, names, a: Shadow, b: Shadow | None):
    lengths = dict(zip(a.names, a.arr.shape, strict=True))
    if b is not None:
        lengths.update(zip(b.names, b.arr.shape, strict=True))
    return np.broadcast_to(arr, tuple(lengths[n] for n in names)).copy()


def _window(arr, d, start, n, rev):
    index = [slice(None)] * arr.ndim
    index[d] = slice(start, start + n)
    out = arr[tuple(index)]
    return np.flip(out, d) if rev else out


def build(prog: Program, tensors) -> ax.Tensor:
    """The program through axesarray's public API (lazy: nothing computed here)."""
    return _build(prog.tree, prog, tensors)


def _build(t, prog, ts):
    kind = t[0]
    if kind == "leaf":
        return ts[t[1]]
    if kind == "scalar":
        return t[1]
    if kind == "unary":
        return UNARY[t[1]][0](_build(t[2], prog, ts))
    if kind == "binary":
        return _ax_binary(t[1], _build(t[2], prog, ts), _build(t[3], prog, ts), t[4])
    if kind == "compare":
        return COMPARE[t[1]][0](_build(t[2], prog, ts), _build(t[3], prog, ts))
    if kind == "where":
        return ax.where(*(_build(p, prog, ts) for p in t[1:4]))
    if kind == "astype":
        return _build(t[2], prog, ts).astype(t[1])
    if kind == "reduce":
        x = _build(t[3], prog, ts)
        names = t[2]
        if t[1] in ("argmax", "argmin"):
            return getattr(x, t[1])(names[0])
        return getattr(x, t[1])(None if names is None else " ".join(names))
    if kind == "dot":
        return ax.dot(_build(t[2], prog, ts), _build(t[3], prog, ts), over=t[1])
    if kind == "pad":
        _, name, before, after, value, start, rev, sub = t
        x = _build(sub, prog, ts)
        n = x.axes[name].length
        padded = ax.pad(x, {name: (before, after)}, value=value)
        window = padded[{name: slice(start, start + n)}]
        return window[{name: slice(None, None, -1)}] if rev else window
    if kind == "concat":
        _, name, sub, i, start = t
        x = _build(sub, prog, ts)
        n = x.axes[name].length
        return ax.concat([x, ts[i]], name)[{name: slice(start, start + n)}]
    if kind == "transpose":
        return _build(t[2], prog, ts).transpose(t[1])
    if kind == "reverse":
        return _build(t[2], prog, ts)[{t[1]: slice(None, None, -1)}]
    if kind == "index":
        return _build(t[3], prog, ts).isel({t[1]: t[2]})
    if kind == "rename":
        return _build(t[3], prog, ts).rename({t[1]: t[2]})
    if kind == "broadcast":
        return _build(t[2], prog, ts).broadcast_to([ax.Axis(n, k) for n, k in t[1]])
    raise AssertionError(kind)


class _Gen:
    """Draws a program node by node, evaluating numpy's shadow as it goes to stay valid."""

    def __init__(self, draw, universe: dict, dtype_pool, max_nodes: int):
        self.draw = draw
        self.universe = universe
        self.dtype_pool = dtype_pool
        self.inputs: list[Input] = []
        self.arrays: list[np.ndarray] = []
        self.budget = max_nodes

    def leaf(self, names=None, lengths=None, dtype=None):
        d = self.draw
        if names is None:
            pool = list(self.universe)
            names = d(
                st.lists(
                    st.sampled_from(pool),
                    min_size=min(1, len(pool)),
                    max_size=min(4, len(pool)),
                    unique=True,
                )
            )
        if lengths is None:
            lengths = [self.universe[n] for n in names]
        dt = dtype or d(st.sampled_from(self.dtype_pool))
        src = d(sources(tuple(lengths)))
        inp = Input(
            tuple(names), tuple(lengths), dt, d(st.integers(0, 2**16)), src, d(st.booleans())
        )
        self.inputs.append(inp)
        self.arrays.append(inp.array())
        i = len(self.inputs) - 1
        arr = self.arrays[i]
        return ("leaf", i), Shadow(arr, list(names), True, _absmax(arr))

    def node(self, depth: int, top: bool = False):
        d = self.draw
        self.budget -= 1
        if depth <= 0 or self.budget <= 0:
            return self.leaf()
        kinds = [
            "unary",
            "binary",
            "binary",
            "compare",
            "where",
            "astype",
            "reduce",
            "reduce",
            "dot",
            "pad",
            "concat",
            "view",
        ]
        kind = d(st.sampled_from(kinds if top else ["leaf"] + kinds))
        if kind == "leaf":
            return self.leaf()
        if kind == "unary":
            t, x = self.node(depth - 1)
            fns = [
                f
                for f, (_, _, kinds, needs_exact, _) in UNARY.items()
                if x.dtype.kind in kinds
                and (x.exact or not needs_exact)
                and (not self._reduced(x) or f in ("neg", "abs", "relu"))
            ]
            if not fns:
                return t, x
            fn = d(st.sampled_from(fns))
            return ("unary", fn, t), _np_unary(fn, x)
        if kind == "binary":
            ta, a = self.node(depth - 1)
            ops = [o for o, (_, kinds, _) in BINARY.items() if a.dtype.kind in kinds]
            op = d(st.sampled_from(ops))
            if d(st.booleans()) and op != "pow":
                tb, b = self.node(depth - 1)
                if b.dtype.kind not in BINARY[op][1]:
                    return ta, a
                discontinuous = op in ("floordiv", "mod") and "f" in a.dtype.kind + b.dtype.kind
                if discontinuous and not (a.exact and b.exact):
                    return ta, a
                side = "r"
            else:
                tb, b = self._scalar(op, a)
                side = d(st.sampled_from("lr")) if op != "pow" else "r"
                if op in ("floordiv", "mod") and a.dtype.kind == "f" and not a.exact:
                    return ta, a
            if self._reduced(a) and op in ("pow", "floordiv", "mod", "truediv"):
                return ta, a
            try:
                with np.errstate(all="ignore"):
                    s = _np_binary(op, a, b if isinstance(b, Shadow) else tb[1], side)
            except (TypeError, OverflowError, ValueError):
                return ta, a
            return ("binary", op, ta, tb, side), s
        if kind == "compare":
            ta, a = self.node(depth - 1)
            if not a.exact:
                return ta, a
            op = d(st.sampled_from(sorted(COMPARE)))
            if d(st.booleans()):
                tb, b = self.node(depth - 1)
                if not b.exact:
                    return ta, a
            else:
                tb, _ = self._scalar("add", a)
            return ("compare", op, ta, tb), _shadow(
                ("compare", op, ta, tb), self._prog(), self.arrays, {}
            )
        if kind == "where":
            tc, c = self.node(depth - 1)
            if not c.exact:
                return tc, c
            ta, a = self.node(depth - 1)
            tb, _ = self.node(depth - 1) if d(st.booleans()) else self._scalar("add", a)
            t = ("where", tc, ta, tb)
            try:
                return t, _shadow(t, self._prog(), self.arrays, {})
            except (TypeError, OverflowError):
                return tc, c
        if kind == "astype":
            tx, x = self.node(depth - 1)
            target = d(st.sampled_from(self.dtype_pool + ("bool",)))
            if x.dtype.kind == "f" and np.dtype(target).kind in "biu":
                if not x.exact or np.dtype(target).kind == "u":
                    return tx, x
                # float -> int is undefined out of range: clip first (clip keeps exactness).
                tx = ("unary", "clip", tx)
                x = _np_unary("clip", x)
            t = ("astype", target, tx)
            return t, _shadow(t, self._prog(), self.arrays, {})
        if kind == "reduce":
            tx, x = self.node(depth - 1)
            if not x.names:
                return tx, x
            op = d(st.sampled_from(REDUCE))
            if op in ("argmax", "argmin"):
                names = (d(st.sampled_from(x.names)),)
            elif d(st.integers(0, 4)) == 0:
                names = None
            else:
                names = tuple(d(st.lists(st.sampled_from(x.names), min_size=1, unique=True)))
            reduced = x.names if names is None else names
            lengths = dict(zip(x.names, x.arr.shape, strict=True))
            if op in ("max", "min", "argmax", "argmin") and any(lengths[n] == 0 for n in reduced):
                return tx, x
            if op in ("argmax", "argmin", "any", "all") and not x.exact:
                return tx, x
            if op == "prod" and x.dtype.kind == "f":
                if self._reduced(x):
                    return tx, x
                tx = ("unary", "clip", tx)  # keep products finite
                x = _np_unary("clip", x)
            t = ("reduce", op, names, tx)
            return t, _np_reduce(op, names, x)
        if kind == "dot":
            ta, a = self.node(depth - 1)
            shared = [n for n in a.names]
            if not shared or a.dtype.kind in "b" or a.dtype == np.float16:
                return ta, a
            over = tuple(d(st.lists(st.sampled_from(shared), min_size=1, max_size=2, unique=True)))
            others = [n for n in self.universe if n not in a.names]
            extra = d(st.lists(st.sampled_from(others), max_size=2, unique=True)) if others else []
            keep = [n for n in a.names if n not in over and d(st.booleans())]
            names = list(d(st.permutations(list(over) + keep + extra)))
            dt = d(
                st.sampled_from(
                    [p for p in self.dtype_pool if p not in ("bool", "float16")] or ["float64"]
                )
            )
            tb, b = self.leaf(names, None, dt)
            return ("dot", over, ta, tb), _np_dot(over, a, b)
        if kind == "pad":
            tx, x = self.node(depth - 1)
            if not x.names:
                return tx, x
            name = d(st.sampled_from(x.names))
            before, after = d(st.integers(0, 2)), d(st.integers(0, 2))
            value = d(st.sampled_from([0, 1, 2.5])) if x.dtype.kind != "b" else d(st.booleans())
            start = d(st.integers(0, before + after))
            rev = d(st.booleans())
            t = ("pad", name, before, after, value, start, rev, tx)
            return t, _shadow(t, self._prog(), self.arrays, {})
        if kind == "concat":
            tx, x = self.node(depth - 1)
            if not x.names:
                return tx, x
            name = d(st.sampled_from(x.names))
            m = d(st.integers(0, 3))
            lengths = dict(zip(x.names, x.arr.shape, strict=True))
            lengths[name] = m
            order = list(d(st.permutations(x.names)))
            dt = d(st.sampled_from(self.dtype_pool))
            ti, _ = self.leaf(order, [lengths[n] for n in order], dt)
            start = d(st.integers(0, m))
            t = ("concat", name, tx, ti[1], start)
            s = _shadow(t, self._prog(), self.arrays, {})
            return t, s
        # view ops on a computed node
        tx, x = self.node(depth - 1)
        choice = d(st.sampled_from(["transpose", "reverse", "index", "rename", "broadcast"]))
        if choice == "transpose":
            t = ("transpose", tuple(d(st.permutations(x.names))), tx)
        elif choice == "reverse" and x.names:
            t = ("reverse", d(st.sampled_from(x.names)), tx)
        elif choice == "index" and x.names:
            name = d(st.sampled_from(x.names))
            n = dict(zip(x.names, x.arr.shape, strict=True))[name]
            if n == 0:
                return tx, x
            t = ("index", name, d(st.integers(-n, n - 1)), tx)
        elif choice == "rename" and x.names:
            old = d(st.sampled_from(x.names))
            free = [n for n in NAMES if n not in self.universe]
            new = d(st.sampled_from(free))
            self.universe[new] = self.universe[old]
            t = ("rename", old, new, tx)
        elif choice == "broadcast":
            extra = [n for n in self.universe if n not in x.names]
            add = d(st.lists(st.sampled_from(extra), max_size=2, unique=True)) if extra else []
            target = list(d(st.permutations(list(x.names) + add)))
            t = ("broadcast", tuple((n, self.universe[n]) for n in target), tx)
        else:
            return tx, x
        return t, _shadow(t, self._prog(), self.arrays, {})

    def _scalar(self, op, a: Shadow):
        d = self.draw
        if op == "pow":
            return ("scalar", d(st.sampled_from([2, 3]))), None
        kind = a.dtype.kind
        if kind == "b":
            v = d(st.sampled_from([True, False, 2, 1.5]))
        elif kind == "u":
            v = d(st.sampled_from([0, 1, 3, 0.5, 2.0]))
        else:
            v = d(st.sampled_from([0, 1, -2, 3, 0.5, -1.5, 2.0]))
        return ("scalar", v), None

    @staticmethod
    def _reduced(x: Shadow) -> bool:
        """An inexact value with accumulated error: keep further ops error-linear."""
        return not x.exact and x.mag > 8

    def _prog(self) -> Program:
        return Program(tuple(self.inputs), ("leaf", 0))


@st.composite
def programs(draw, max_depth=3, max_nodes=8, dtype_pool=None):
    """A random expression program (plain data) whose numpy shadow is well defined."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    universe = {n: draw(st.integers(0, 5)) for n in names}
    pool = dtype_pool or tuple(
        draw(st.lists(st.sampled_from(DTYPES), min_size=1, max_size=2, unique=True))
    )
    gen = _Gen(draw, universe, tuple(pool), max_nodes)
    tree, _ = gen.node(draw(st.integers(2, max_depth)), top=True)
    return Program(tuple(gen.inputs), tree)
