"""Random expression programs as plain data, their numpy shadow, and the same program built
through axesarray's API (for property tests of whole expressions).

A ``ProgramSpec`` is ``(inputs, tree)``; ``shadow_eval`` computes it with numpy alone (with a
bound on its rounding error), ``build`` with axesarray. ``testing.expressions.programs``
draws them.
"""

from __future__ import annotations

import math
import operator
import warnings
from dataclasses import dataclass

import numpy as np

import axesarray as ax

from .strategies import Source, make_array, np_align, random_values, spec_broadcast

__all__ = [
    "Input",
    "ProgramSpec",
    "Shadow",
    "UNARY",
    "BINARY",
    "NP_BINARY",
    "COMPARE",
    "REDUCE",
    "shadow_eval",
    "build",
]

# --- expression trees ----------------------------------------------------------------------
#
# A ProgramSpec is (inputs, tree). Each input is an Input (axes, dtype, seed, Source). Tree nodes:
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
class ProgramSpec:
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


def shadow_eval(prog: ProgramSpec, arrays=None) -> Shadow:
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


def build(prog: ProgramSpec, tensors) -> ax.Tensor:
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
