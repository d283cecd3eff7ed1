"""Scalar code for one element: op translation and the body of a kernel tree.

Owns how each op, cast, guard and reduction is written as Python source that numba compiles
for both the CPU (``njit``) and CUDA (``cuda.jit``): no allocation, no exceptions, explicit
casts so small integer types wrap as numpy's do. Math functions are called by the names in
``MATH`` (bound to ``mathlib`` on the CPU and to device functions on CUDA).

float16 values live in float32 registers and are rounded back to float16 precision after
every op (``R16``), which is what numpy does; in memory they are passed as uint16 bits.
"""

from __future__ import annotations

import numpy as np

from ..expr import Cast, Map, Node
from .ir import KConcat, KConst, KLeaf, KPad, KReduce

__all__ = ["Body", "type_name", "reg_dtype", "acc_dtype", "REDUCE_INIT"]

_F16 = np.dtype(np.float16)
_TRANSCENDENTAL = {"exp", "expm1", "log", "log1p", "tanh", "sigmoid"}


def reg_dtype(dt: np.dtype) -> np.dtype:
    """The dtype a value of ``dt`` has in a register (float16 computes in float32)."""
    return np.dtype(np.float32) if dt == _F16 else dt


def type_name(dt: np.dtype) -> str:
    """numba constructor for a register of dtype ``dt``: ``np.float32`` etc."""
    return "np." + ("bool_" if dt.kind == "b" else reg_dtype(dt).name)


def acc_dtype(op: str, result: np.dtype, value: np.dtype) -> np.dtype:
    """Accumulator dtype: float sums and products accumulate in float64 (more accurate than
    numpy's float32 pairwise sum); argmax/argmin keep the best *value*; else the result's."""
    if op in ("sum", "prod") and result.kind == "f":
        return np.dtype(np.float64)
    if op in ("argmax", "argmin"):
        return reg_dtype(value)
    return reg_dtype(result)


def _limits(dt: np.dtype) -> tuple[str, str]:
    if dt.kind == "f":
        return "-np.inf", "np.inf"
    if dt.kind == "b":
        return "False", "True"
    info = np.iinfo(dt)
    return str(info.min), str(info.max)


def REDUCE_INIT(op: str, dt: np.dtype) -> str:
    """Initial accumulator value, written in source."""
    t = type_name(dt)
    lo, hi = _limits(dt)
    return {
        "sum": f"{t}(0)",
        "prod": f"{t}(1)",
        "max": f"{t}({lo})",
        "min": f"{t}({hi})",
        "argmax": f"{t}({lo})",
        "argmin": f"{t}({hi})",
        "any": "False",
        "all": "True",
    }[op]


def _wrap(dt: np.dtype, expr: str) -> str:
    """Force the register type (wraps small ints as numpy does; rounds float16)."""
    if dt == _F16:
        return f"R16({expr})"
    if dt.kind == "b":
        return f"bool({expr})"
    return f"{type_name(dt)}({expr})"


def op_source(op: str, out: np.dtype, loop: np.dtype, a: list[str]) -> str:
    """Source for ``op(*a)``; ``loop`` is the dtype its inputs have, ``out`` its result."""
    k = loop.kind
    f = k == "f"
    if op in ("add", "mul") and k == "b":
        return f"({a[0]} {'or' if op == 'add' else 'and'} {a[1]})"
    simple = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}
    if op in simple:
        return _wrap(out, f"{a[0]} {simple[op]} {a[1]}")
    if op == "floordiv":
        if f:
            return _wrap(out, f"floordiv_float({a[0]}, {a[1]})")
        if k == "i":
            # a // -1 is -a: avoids the INT_MIN // -1 trap. x // 0 is 0 (error_model numpy).
            return _wrap(out, f"(({a[0]} // {a[1]}) if {a[1]} != -1 else -{a[0]})")
        return _wrap(out, f"{a[0]} // {a[1]}")
    if op == "mod":
        if f:
            return _wrap(out, f"mod_float({a[0]}, {a[1]})")
        if k == "i":
            return _wrap(out, f"(({a[0]} % {a[1]}) if {a[1]} != -1 else 0)")
        return _wrap(out, f"{a[0]} % {a[1]}")
    if op == "pow":
        return _wrap(out, f"{a[0]} ** {a[1]}")
    if op in ("maximum", "minimum"):
        if f:
            return _wrap(out, f"{'fmax_nan' if op == 'maximum' else 'fmin_nan'}({a[0]}, {a[1]})")
        return _wrap(out, f"{'max' if op == 'maximum' else 'min'}({a[0]}, {a[1]})")
    if op in ("and", "or", "xor"):
        if k == "b":
            sym = {"and": "and", "or": "or", "xor": "!="}[op]
            return f"({a[0]} {sym} {a[1]})"
        sym = {"and": "&", "or": "|", "xor": "^"}[op]
        return _wrap(out, f"{a[0]} {sym} {a[1]}")
    cmp = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
    if op in cmp:
        return f"({a[0]} {cmp[op]} {a[1]})"
    x = a[0] if a else ""
    if op == "neg":
        return _wrap(out, f"-{x}")
    if op == "invert":
        return f"(not {x})" if k == "b" else _wrap(out, f"~{x}")
    if op == "abs":
        return x if k == "b" else _wrap(out, f"abs({x})")
    if op == "square":
        return f"({x} and {x})" if k == "b" else _wrap(out, f"{x} * {x}")
    if op == "sign":
        if f:
            return _wrap(out, f"sign_float({x})")
        if k == "u":
            return _wrap(out, f"1 if {x} > 0 else 0")
        return _wrap(out, f"1 if {x} > 0 else (-1 if {x} < 0 else 0)")
    if op in _TRANSCENDENTAL:
        suffix = "f64" if loop == np.float64 else "f32"
        return _wrap(out, f"{op}_{suffix}({x})")
    if op in ("sqrt", "sin", "cos"):
        return _wrap(out, f"np.{op}({x})")
    if op in ("floor", "ceil", "rint"):
        return _wrap(out, f"np.{op}({x})") if f else x
    if op == "isnan":
        return f"({x} != {x})" if f else "False"
    if op == "isinf":
        return f"(abs({x}) == np.inf)" if f else "False"
    if op == "isfinite":
        return f"(abs({x}) < np.inf)" if f else "True"
    if op == "logical_not":
        return f"(not {x})"
    if op == "where":
        return f"({a[1]} if {a[0]} else {a[2]})"
    raise NotImplementedError(f"codegen: op {op!r}")


def cast_source(src: np.dtype, dst: np.dtype, x: str) -> str:
    if dst.kind == "b":
        return f"({x} != 0)"
    if src.kind == "f" and dst.kind in "iu" and dst.itemsize < 8:
        # numpy converts through a full-width signed integer, so out-of-range values wrap
        # (-1.0 -> uint16 65535); a direct narrow conversion is undefined in LLVM.
        return _wrap(dst, f"np.int64({x})")
    return _wrap(dst, x)


class Body:
    """Emit statements computing a kernel tree's value at the current loop indices.

    ``read(leaf)`` returns the source of an element read for a leaf; ``index(dim)`` the
    source of the loop index of an index dim (for guards); ``scalar(node)`` the argument name
    of a run-time scalar. Common subexpressions are computed once (one local per node).
    """

    def __init__(self, read, index, scalar, reduce_value: str | None = None, prefix: str = "v"):
        self.read = read
        self.index = index
        self.scalar = scalar
        self.reduce_value = reduce_value  # local holding the finished reduction, if any
        self.prefix = prefix  # distinct per body: numba needs one type per local name
        self.lines: list[str] = []
        self._count = 0

    def _new(self) -> str:
        self._count += 1
        return f"{self.prefix}{self._count}"

    def emit(self, node: Node, indent: int, known: dict[int, str]) -> str:
        """Add lines computing ``node``; return the local (or literal) holding it."""
        if id(node) in known:
            return known[id(node)]
        pad = "    " * indent
        if isinstance(node, KLeaf):
            name = self._new()
            self.lines.append(f"{pad}{name} = {self.read(node)}")
        elif isinstance(node, KConst):
            name = self.scalar(node)
        elif isinstance(node, KReduce):
            if self.reduce_value is None:
                raise AssertionError("codegen: a reduction must be the kernel's accumulator")
            name = self.reduce_value
        elif isinstance(node, Map):
            args = [self.emit(c, indent, known) for c in node.args]
            name = self._new()
            loop = node.args[0].dtype if node.op != "where" else node.args[1].dtype
            self.lines.append(f"{pad}{name} = {op_source(node.op, node.dtype, loop, args)}")
        elif isinstance(node, Cast):
            arg = self.emit(node.arg, indent, known)
            name = self._new()
            self.lines.append(f"{pad}{name} = {cast_source(node.arg.dtype, node.dtype, arg)}")
        elif isinstance(node, KPad):
            name = self._new()
            i = self.index(node.dim)
            lo, hi = self.scalar(("lo", node)), self.scalar(("hi", node))
            self.lines.append(f"{pad}if {lo} <= {i} < {hi}:")
            inner = self.emit(node.child, indent + 1, dict(known))
            self.lines.append(f"{pad}    {name} = {inner}")
            self.lines.append(f"{pad}else:")
            self.lines.append(f"{pad}    {name} = {_wrap(node.dtype, self.scalar(node.value))}")
        elif isinstance(node, KConcat):
            name = self._new()
            i = self.index(node.dim)
            for k, part in enumerate(node.parts):
                last = k == len(node.parts) - 1
                if last:
                    self.lines.append(f"{pad}else:" if k else f"{pad}if True:")
                else:
                    kw = "if" if k == 0 else "elif"
                    self.lines.append(f"{pad}{kw} {i} < {self.scalar(('bound', node, k + 1))}:")
                inner = self.emit(part, indent + 1, dict(known))
                self.lines.append(f"{pad}    {name} = {inner}")
        else:
            raise NotImplementedError(f"codegen: node {type(node).__name__}")
        known[id(node)] = name
        return name
