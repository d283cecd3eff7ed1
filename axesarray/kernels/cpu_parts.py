"""CPU template parts: the source buffer (``_Src``), reads and stores of operands at the
loop indices, index decomposition, per-operand address locals, the scalar body, a
reduction's combine, and the rows-first task loop. Shared by the templates of
``kernels.cpu``, ``kernels.cpu_normalize`` and ``kernels.cuda``.
"""

from __future__ import annotations

import numpy as np

from ..core.reductions_table import REDUCTIONS
from .lower import Lowered
from .scalar import Body, cast_source

__all__ = [
    "ROW_BLOCK",
]


class _Src:
    def __init__(self, split: bool = False) -> None:
        self.lines: list[str] = []
        self.split = split  # the parallel loop runs over jlo..jhi (kernels/threads.py)
        self.count: str | None = None  # its trip count, once split
        # a split full reduction: arrays of partial results made by the caller (their
        # names, and the lines making them) and a last call part(-1, -1, ...) combining them
        self.extra: list[str] = []
        self.prelude: list[str] = []

    def add(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def par_loop(self, indent: int, var: str, count: str, loop: str) -> None:
        """The kernel's parallel loop: ``for var in loop(count)``, or over ``jlo..jhi``
        when split (the caller runs ranges of ``count`` on threads)."""
        if self.split and self.count is None:
            self.count = count
            self.add(indent, f"for {var} in range(jlo, jhi):")
        else:
            self.add(indent, f"for {var} in {loop}({count}):")


def _read(low: Lowered, base: dict, inner: range):
    def read(leaf) -> str:
        k = low.index_of[id(leaf)]
        addr = low.address(k, base[k], inner)
        x = f"A{k}[np.uint64({addr})]"
        if low.is_bf16(k):
            return f"bf16_to_f32({x})"
        return f"f16_to_f32({x})" if low.is_f16(k) else x

    return read


def _stored(low: Lowered, value: str, value_dtype, k: int = 0) -> str:
    """The value as it is written to output operand ``k`` (cast, float16 as its bits)."""
    out = low.operands[k]
    v = cast_source(value_dtype, out.dtype, value) if value_dtype != out.dtype else value
    if low.is_bf16(k):
        return f"f32_to_bf16({v})"
    return f"f32_to_f16({v})" if low.is_f16(k) else v


def _store(low: Lowered, value: str, value_dtype, base: str, inner: range, k: int = 0) -> str:
    v = _stored(low, value, value_dtype, k)
    return f"A{k}[np.uint64({low.address(k, base, inner)})] = {v}"


def _decompose(src: _Src, indent: int, flat: str, dims: list[int]) -> None:
    """Recover loop indices ``i{d}`` for ``dims`` (outer to inner) from a flat index."""
    # Fresh names at each step: numba's parfor pass rejects reassigning a value derived
    # from the prange index.
    prev = flat
    for d in reversed(dims[1:]):
        src.add(indent, f"i{d} = {prev} % n{d}")
        src.add(indent, f"q{d} = {prev} // n{d}")
        prev = f"q{d}"
    src.add(indent, f"i{dims[0]} = {prev}")


def _bases(src: _Src, low: Lowered, indent: int, dims: range, prev: dict, tag: str) -> dict:
    """Per operand, a local with its address so far (only when ``dims`` move it)."""
    new = dict(prev)
    for k in range(len(low.operands)):
        if low.uses_dims(k, dims):
            name = f"p{k}_{tag}"
            src.add(indent, f"{name} = {low.address(k, prev[k], dims)}")
            new[k] = name
    return new


def _emit_body(low: Lowered, base: dict, inner: range, reduce_value=None, prefix="v") -> Body:
    return Body(_read(low, base, inner), low.index, low.scalar, reduce_value, prefix, low.inlined)


def _combine(op: str, acc: str, v: str, index: str, fl: bool, reassoc: bool = False) -> list[str]:
    """Lines folding ``v`` into ``acc`` (the row's ``combine``). ``reassoc``: float sums and
    products use the reassociable intrinsics, so LLVM vectorizes the loop (CPU only)."""
    return REDUCTIONS[op].combine_lines(acc, v, index, fl, reassoc)


ROW_BLOCK = 512  # output elements accumulated together by the rows-first template


def _rows_first(low: Lowered) -> bool:
    """Whether to reduce rows-first: inputs read the innermost output dim contiguously and
    the innermost reduce dim with a stride (``x.sum("N")`` of a row-major ``N F``). Then a
    block of outputs accumulates together, the inner loop running along memory; the usual
    template would walk a column per output element, one cache line per value. An input
    that does not vary along the innermost output dim reads one value per row either way
    (a masked mean's ``pos < lens`` over ``B T`` beside ``x`` over ``B T D``): it does not
    make the reduce dim the inner loop."""
    nest, red = low.nest, low.reduce
    n_out, rank = nest.n_out, nest.rank
    if n_out == 0 or rank == n_out or REDUCTIONS[red.op].index:
        return False
    last, inner = n_out - 1, rank - 1
    inputs = range(1, len(low.operands))
    along_out = any(low.terms[k][last] == f"i{last}" for k in inputs)
    along_red = any(
        low.terms[k][inner] == f"i{inner}" and low.terms[k][last] is not None for k in inputs
    )
    return along_out and not along_red


def _row_blocks(low: Lowered, src: _Src, loop: str, block: int = ROW_BLOCK) -> dict:
    """The task loop of the rows-first templates: one task per block of up to ``block``
    elements of the innermost output dim times the outer output rows; emits ``j0`` (the
    block's first element) and ``m`` (its length) and returns the operands' bases."""
    last = low.nest.n_out - 1
    outer = list(range(last))
    blocks = f"((n{last} + {block - 1}) // {block})"
    src.par_loop(1, "jo", " * ".join([f"n{d}" for d in outer] + [blocks]), loop)
    src.add(2, f"blk = jo % {blocks}")
    src.add(2, f"qr = jo // {blocks}")
    base = {k: f"o{k}" for k in range(len(low.operands))}
    if outer:
        _decompose(src, 2, "qr", outer)
        base = _bases(src, low, 2, range(last), base, "o")
    src.add(2, f"j0 = blk * {block}")
    src.add(2, f"m = min({block}, n{last} - j0)")
    return base


def _read_out(low: Lowered, base: dict, inner: range) -> str:
    """An element of the output (operand 0) read back at the current loop indices."""
    x = f"A0[np.uint64({low.address(0, base[0], inner)})]"
    if low.is_bf16(0):
        return f"bf16_to_f32({x})"
    return f"f16_to_f32({x})" if low.is_f16(0) else x


def _sum_exp(result) -> str:
    """The exp for logsumexp's sum: ``exp_sum_f64`` (3e-13 relative) when the result is
    float32 or narrower, where that error vanishes in the last rounding; else ``exp_f64``."""
    return "exp_sum_f64" if np.dtype(result).itemsize <= 4 else "exp_f64"


def _lse_value(op: str, am: str, acc: str) -> str:
    """logsumexp from the max and the sum of ``exp(x - max)``. The guarded form (the
    shift is 0 where the max is not finite) is the max itself there: ``log(sum(exp(x)))``
    is +inf when some x is +inf, -inf when all are -inf, NaN with a NaN."""
    if op == "logsumexp_guarded":
        return f"({am} + log_f64({acc}) if abs({am}) < np.inf else {am})"
    return f"{am} + log_f64({acc})"
