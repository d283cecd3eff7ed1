"""Scalar code for one element: op translation and the body of a kernel tree.

Owns how each op, cast, guard and reduction is written as Python source that numba compiles
for both the CPU (``njit``) and CUDA (``cuda.jit``): no allocation, no exceptions, explicit
casts so small integer types wrap as numpy's do. Math functions are called by the names in
``MATH`` (bound to ``mathlib`` on the CPU and to device functions on CUDA).

float16 values live in float32 registers and are rounded back to float16 precision after
every op (``R16``), which is what numpy does; in memory they are passed as uint16 bits.
bfloat16 values live in float32 registers too; no op computes in bfloat16 (``dag.build``
gives ops float32 operands), so only a cast to bfloat16 rounds (``RB16``).
"""

from __future__ import annotations

import numpy as np

from ..core.ops import OPS
from ..core.reductions_table import REDUCTIONS

__all__ = ["Body", "type_name", "reg_dtype", "acc_dtype", "REDUCE_INIT"]

_F16 = np.dtype(np.float16)


def reg_dtype(dt: np.dtype) -> np.dtype:
    """The dtype a value of ``dt`` has in a register (float16 and bfloat16: float32)."""
    return np.dtype(np.float32) if dt == _F16 or dt.kind == "V" else dt


def type_name(dt: np.dtype) -> str:
    """numba constructor for a register of dtype ``dt``: ``np.float32`` etc."""
    return "np." + ("bool_" if dt.kind == "b" else reg_dtype(dt).name)


def acc_dtype(op: str, result: np.dtype, value: np.dtype) -> np.dtype:
    """Accumulator dtype (the row's ``accumulator``): float sums and products accumulate in
    float64 (more accurate than numpy's float32 pairwise sum); argmax/argmin keep the best
    *value*; else the result's."""
    rule = REDUCTIONS[op].accumulator
    if rule == "float64" and result.kind == "f":
        return np.dtype(np.float64)
    if rule == "value":
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
    """Initial accumulator value, written in source (the row's ``init``)."""
    lo, hi = _limits(dt)
    return REDUCTIONS[op].init_source(type_name(dt), lo, hi)


def _wrap(dt: np.dtype, expr: str) -> str:
    """Force the register type (wraps small ints as numpy does; rounds float16)."""
    if dt == _F16:
        return f"R16({expr})"
    if dt.kind == "V":  # bfloat16: only casts produce it (no op computes in it)
        return f"RB16({expr})"
    if dt.kind == "b":
        return f"bool({expr})"
    return f"{type_name(dt)}({expr})"


def op_source(op: str, out: np.dtype, loop: np.dtype, a: list[str], inlined=None) -> str:
    """Source for ``op(*a)`` from its ``ops.Code`` row; ``loop`` is the dtype its inputs
    have, ``out`` its result. ``inlined`` counts, per op, the call sites of the kernel so
    far that used the op's inline variant (see ``ops.Code.inline``)."""
    code = OPS[op].code
    sfx = "f64" if loop == np.float64 else "f32"
    inl = ""
    if code.inline and inlined is not None and inlined.get(op, 0) < code.inline:
        inlined[op] = inlined.get(op, 0) + 1
        inl = "_inline"
    text = code.template(loop.kind).format(*a, sfx=sfx, inl=inl)
    return _wrap(out, text) if code.wrap else text


def cast_source(src: np.dtype, dst: np.dtype, x: str) -> str:
    if dst.kind == "b":
        return f"({x} != 0)"
    if src.kind in "fV" and dst.kind in "iu" and dst.itemsize < 8:
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

    def __init__(
        self,
        read,
        index,
        scalar,
        reduce_value: str | None = None,
        prefix: str = "v",
        inlined: dict | None = None,
    ):
        # per op, the inline variants used so far (shared by a kernel's bodies); None: none
        self.inlined = inlined
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

    def emit(self, node, indent: int, known: dict[int, str]) -> str:
        """Add lines computing ``node``; return the local (or literal) holding it."""
        name = known.get(id(node))
        if name is None:
            name = getattr(self, "_" + node.kind)(node, indent, known)
            known[id(node)] = name
        return name

    def _line(self, indent: int, text: str) -> str:
        name = self._new()
        self.lines.append(f"{'    ' * indent}{name} = {text}")
        return name

    def _leaf(self, node, indent, known) -> str:
        return self._line(indent, self.read(node))

    def _const(self, node, indent, known) -> str:
        return self.scalar(node)

    def _reduce(self, node, indent, known) -> str:
        if self.reduce_value is None:
            raise AssertionError("codegen: a reduction must be the kernel's accumulator")
        return self.reduce_value

    def _swept(self, node, indent, known) -> str:  # its local comes in ``known``
        raise AssertionError("codegen: a swept reduction is the normalize kernel's own local")

    def _map(self, node, indent, known) -> str:
        args = [self.emit(c, indent, known) for c in node.args]
        loop = node.args[0].dtype if node.op != "where" else node.args[1].dtype
        return self._line(indent, op_source(node.op, node.dtype, loop, args, self.inlined))

    def _cast(self, node, indent, known) -> str:
        arg = self.emit(node.arg, indent, known)
        return self._line(indent, cast_source(node.arg.dtype, node.dtype, arg))

    def _pad(self, node, indent, known) -> str:
        name = self._new()
        pad = "    " * indent
        i = self.index(node.dim)
        lo, hi = self.scalar(("lo", node)), self.scalar(("hi", node))
        self.lines.append(f"{pad}if {lo} <= {i} < {hi}:")
        inner = self.emit(node.child, indent + 1, dict(known))
        self.lines.append(f"{pad}    {name} = {inner}")
        self.lines.append(f"{pad}else:")
        self.lines.append(f"{pad}    {name} = {_wrap(node.dtype, self.scalar(node.value))}")
        return name

    def _concat(self, node, indent, known) -> str:
        name = self._new()
        pad = "    " * indent
        i = self.index(node.dim)
        for k, part in enumerate(node.parts):
            if k == len(node.parts) - 1:
                self.lines.append(f"{pad}else:" if k else f"{pad}if True:")
            else:
                kw = "if" if k == 0 else "elif"
                self.lines.append(f"{pad}{kw} {i} < {self.scalar(('bound', node, k + 1))}:")
            inner = self.emit(part, indent + 1, dict(known))
            self.lines.append(f"{pad}    {name} = {inner}")
        return name
