"""The hypothesis strategy ``programs``: random expression trees (unary and binary ops,
comparisons, where, casts, reductions, dot, pad, concat, views) whose numpy shadow is
well defined, drawn node by node while the shadow is evaluated alongside.

>>> from hypothesis import given, settings
>>> import axesarray as ax
>>> from axesarray.testing import assert_close
>>> from axesarray.testing.programs import build, shadow_eval
>>> @settings(max_examples=5)
... @given(programs(max_depth=2))
... def test_program(prog):
...     arrays = prog.arrays()
...     expected = shadow_eval(prog, arrays)
...     assert_close(build(prog, prog.tensors(arrays)), expected.arr, scale=expected.mag)
>>> with ax.set_options(engine="numpy"):
...     test_program()
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from .programs import (
    BINARY,
    COMPARE,
    REDUCE,
    UNARY,
    Input,
    ProgramSpec,
    Shadow,
    _absmax,
    _np_binary,
    _np_dot,
    _np_reduce,
    _np_unary,
    _shadow,
)
from .strategies import DTYPES, NAMES, sources

__all__ = ["programs"]


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
            kind = x.dtype.kind  # a pad value must fit the dtype's kind (pad refuses 2.5 for ints)
            choices = [0, 1, 2.5] if kind == "f" else [0, 1, 2] if kind in "iu" else [False, True]
            value = d(st.sampled_from(choices))
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

    def _prog(self) -> ProgramSpec:
        return ProgramSpec(tuple(self.inputs), ("leaf", 0))


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
    return ProgramSpec(tuple(gen.inputs), tree)
