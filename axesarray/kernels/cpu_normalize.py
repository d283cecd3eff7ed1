"""The CPU normalize kernel: ``f(E, reduce(E))`` with ``E`` stored once in the output
(``KReduce.stores``), a reduction ``E`` reads over the same dims its first sweep
(``KSwept``); the planner's half is ``engine.normalize``.
"""

from __future__ import annotations

import numpy as np

from ..core.reductions_table import REDUCTIONS
from .cpu_parts import (
    _bases,
    _combine,
    _decompose,
    _emit_body,
    _lse_value,
    _read_out,
    _row_blocks,
    _rows_first,
    _Src,
    _store,
    _sum_exp,
)
from .ir import computed_from, kernel_nodes
from .lower import Lowered
from .scalar import REDUCE_INIT, acc_dtype, type_name

__all__ = ["NORMALIZE_BLOCK", "normalize_kernel"]


NORMALIZE_BLOCK = 1024  # outputs per task of the rows-first normalize kernel


def normalize_kernel(low: Lowered, src: _Src, loop: str) -> None:
    """``f(E, reduce(E))`` with ``E`` stored once (``KReduce.stores``; softmax written by
    hand: ``e / e.sum(K)``). The index space is the output's: kept dims, then reduced dims.
    Per task, a first sweep computes ``E`` (the user's value, in the output's dtype),
    writes it to the output and folds it into the accumulator; a second sweep, over the
    same elements while they are in cache, reads ``E`` back and writes ``f``. One
    evaluation of ``E`` per element (one exp for a softmax), against two when the sum is
    a kernel of its own.

    Tasks: rows-first (``_rows_first``: the reduced dim strided, the innermost output dim
    contiguous) a block of up to ``NORMALIZE_BLOCK`` outputs, one accumulator each, each
    row of ``E`` written and then folded in loops of their own, vectorized across
    outputs; else one output, where a float sum, product, max or min first writes the
    innermost row of ``E`` (a loop with no carried value: the exp vectorizes) and then
    folds it back with the reassociable combine."""
    red, nest = low.reduce, low.nest
    n_out, rank = nest.n_out, nest.rank
    row = REDUCTIONS[red.op]
    # logsumexp of E (``x - logsumexp(x)``, log-softmax): E stored while its max is found,
    # then read back for the sum of ``exp(E - max)`` (``_lse_value``: its special values)
    lse = row.kernel == "logsumexp"
    e_t = type_name(red.child.dtype)  # E in a register (float16: float32)
    acc_dt = np.dtype(np.float64) if lse else acc_dtype(red.op, red.dtype, red.child.dtype)
    acc_t = type_name(acc_dt)
    init = "np.float64(0)" if lse else REDUCE_INIT(red.op, acc_dt)
    fl = red.child.dtype.kind == "f"
    ex = _sum_exp(red.dtype) if lse else None
    convert = (lambda v: f"{acc_t}({v})") if row.convert else (lambda v: v)
    finish = (lambda a: a) if red.dtype.kind == "b" else (lambda a: f"{type_name(red.dtype)}({a})")
    rows_first = _rows_first(low)

    swept = next((n for n in kernel_nodes(red.child) if n.kind == "swept"), None)
    if swept is not None:
        p_dt = acc_dtype(swept.op, swept.dtype, swept.child.dtype)
        p_t = type_name(p_dt)
        p_init = REDUCE_INIT(swept.op, p_dt)
        p_fl = swept.child.dtype.kind == "f"
        p_row = REDUCTIONS[swept.op]
        p_reassoc = p_row.combine_reassoc is not None and p_t in ("np.float64", "np.float32")
        p_res_t = "np.bool_" if swept.dtype.kind == "b" else type_name(swept.dtype)

        def p_convert(v):
            return f"{p_t}({v})" if p_row.convert else v

        def p_finish(a):
            return a if swept.dtype.kind == "b" else f"{p_res_t}({a})"

    def sweep_value(indent: int, b: dict, inner: range, tag: str) -> str:
        """The swept reduction's child at the current indices; returns its local."""
        body = _emit_body(low, b, inner, prefix=f"{tag}_")
        v = body.emit(swept.child, indent, {})
        src.lines.extend(body.lines)
        return p_convert(v)

    def known(indent: int, tag: str, value: str | None) -> dict:
        """The swept reduction's finished value as a local of this sweep."""
        if swept is None:
            return {}
        src.add(indent, f"{tag}m = {value}")
        return {id(swept): f"{tag}m"}

    def compute(indent: int, b: dict, inner: range, tag: str, m=None) -> str:
        """``E`` at the current indices, written to the output; returns its local."""
        seen = known(indent, tag, m)
        seen.update(e_fixed)
        body = _emit_body(low, b, inner, prefix=f"{tag}_")
        v = body.emit(red.child, indent, seen)
        src.lines.extend(body.lines)
        src.add(indent, _store(low, v, red.child.dtype, b[0], inner))
        return v

    def finish_value(indent: int, b: dict, inner: range, tag: str, m=None, fixed=None) -> None:
        """``f`` at the current indices, ``E`` read back from the output, ``r`` the
        finished reduction; ``fixed``: locals already holding some of ``f``'s nodes."""
        seen = known(indent, tag, m)
        seen.update(fixed or {})
        src.add(indent, f"{tag}e = {_read_out(low, b, inner)}")
        body = _emit_body(low, b, inner, reduce_value="r", prefix=f"{tag}_")
        seen[id(red.child)] = f"{tag}e"
        value = body.emit(low.tree, indent, seen)
        src.lines.extend(body.lines)
        src.add(indent, _store(low, value, low.tree.dtype, b[0], inner))

    def reduce_loops(indent: int, b: dict, dims, tag: str) -> tuple[int, dict]:
        for d in dims:
            src.add(indent, f"for i{d} in range(n{d}):")
            indent += 1
            b = _bases(src, low, indent, range(d, d + 1), b, f"{tag}{d}")
        return indent, b

    def per_output(b: dict, tree, tag: str, with_r: bool = True) -> dict:
        """Rows-first: the parts of ``tree`` computed from the reductions and constants
        only (a mean's division, ``sqrt(var + eps)``; without ``with_r``, from the swept
        one only), once per output of the block into arrays of their own, where a sweep
        would compute them at every element (there they vary along its innermost loop,
        which LLVM cannot hoist them out of). Returns the locals reading them."""
        order = kernel_nodes(tree)
        fixed = computed_from(order, lambda n: n is swept or (with_r and n is red))
        above: dict = {}  # id -> whether some node that is not fixed reads it
        for n in order:
            for c in n.children:
                above[id(c)] = above.get(id(c), False) or id(n) not in fixed
        nodes = [
            n
            for n in order
            if n.kind in ("map", "cast")
            and id(n) in fixed
            and above.get(id(n), True)
            and id(n) not in e_fixed  # (E's, made already)
        ]
        out: dict = {k: v for k, v in e_fixed.items() if k in fixed}
        for j, n in enumerate(nodes):
            name = f"{tag}{j}"
            src.add(2, f"{name} = np.empty({NORMALIZE_BLOCK}, {type_name(n.dtype)})")
            src.add(2, "for k in range(m):")
            if with_r:
                src.add(3, "r = res[k]")
            seen = known(3, f"{name}_", "pres[k]")
            seen.update(e_fixed)
            body = _emit_body(low, b, inner, reduce_value="r", prefix=f"{name}_")
            v = body.emit(n, 3, seen)
            src.lines.extend(body.lines)
            src.add(3, f"{name}[k] = {v}")
            out[id(n)] = f"{name}[k]"
        return out

    e_fixed: dict = {}  # rows-first: E's parts computed per output (``per_output``)
    if rows_first:
        last = n_out - 1
        inner = range(last, last + 1)
        base = _row_blocks(low, src, loop, NORMALIZE_BLOCK)

        def outputs(indent: int) -> int:
            """The loop over the block's outputs (vectorized across them)."""
            src.add(indent, "for k in range(m):")
            src.add(indent + 1, f"i{last} = j0 + k")
            return indent + 1

        def block_sweep(tag, acc, acc_t, init, fold, res, res_t, finish) -> None:
            """A sweep over the block's rows: ``acc[k]`` set to ``init``, the reduced dims'
            loops around ``fold(indent, b)``, then ``res[k] = finish(acc[k])``."""
            src.add(2, f"{acc} = np.empty({NORMALIZE_BLOCK}, {acc_t})")
            src.add(2, "for k in range(m):")
            src.add(3, f"{acc}[k] = {init}")
            fold(*reduce_loops(2, base, range(n_out, rank), tag))
            src.add(2, f"{res} = np.empty({NORMALIZE_BLOCK}, {res_t})")
            src.add(2, "for k in range(m):")
            src.add(3, f"{res}[k] = {finish(f'{acc}[k]')}")

        def fold_swept(indent: int, b: dict) -> None:
            indent = outputs(indent)
            v = sweep_value(indent, b, inner, "p")
            for line in _combine(swept.op, "pacc[k]", v, "0", p_fl):
                src.add(indent, line)

        def fold_stored(indent: int, b: dict) -> None:
            compute(outputs(indent), b, inner, "s", "pres[k]")
            # folded in a loop of its own: with the store to the output in the same loop,
            # LLVM cannot tell the accumulators from the output and keeps it scalar
            indent = outputs(indent)
            for line in _combine(red.op, "acc[k]", convert(_read_out(low, b, inner)), "0", fl):
                src.add(indent, line)

        def fold_stored_max(indent: int, b: dict) -> None:
            compute(outputs(indent), b, inner, "s", "pres[k]")
            indent = outputs(indent)
            src.add(indent, f"amx[k] = rmax(amx[k], {e_t}({_read_out(low, b, inner)}))")

        def fold_exp(indent: int, b: dict) -> None:
            indent = outputs(indent)
            e = f"np.float64({_read_out(low, b, inner)})"
            src.add(indent, f"acc[k] = radd(acc[k], {ex}({e} - am[k]))")

        if swept is not None:  # the first sweep: the block's rows, read from memory
            block_sweep("px", "pacc", p_t, p_init, fold_swept, "pres", p_res_t, p_finish)
            e_fixed.update(per_output(base, red.child, "ex", with_r=False))
        res_t = "np.bool_" if red.dtype.kind == "b" else type_name(red.dtype)
        if lse:  # E stored and its max, then the sum of exp(E - max), E from cache
            to_f64 = lambda a: f"np.float64({a})"  # noqa: E731
            block_sweep("sx", "amx", e_t, f"{e_t}(-np.inf)", fold_stored_max, "am",
                        "np.float64", to_f64)  # fmt: skip
            lse_of = lambda a: finish(_lse_value(red.op, "am[k]", a))  # noqa: E731
            block_sweep("ex", "acc", acc_t, init, fold_exp, "res", res_t, lse_of)
        else:
            block_sweep("sx", "acc", acc_t, init, fold_stored, "res", res_t, finish)
        fixed = per_output(base, low.tree, "fx")
        indent, b = reduce_loops(2, base, range(n_out, rank), "nx")
        indent = outputs(indent)
        src.add(indent, "r = res[k]")
        finish_value(indent, b, inner, "n", "pres[k]", fixed)
        return
    base = {k: f"o{k}" for k in range(len(low.operands))}
    if n_out:
        outer = list(range(n_out))
        src.par_loop(1, "jo", " * ".join(f"n{d}" for d in outer), loop)
        _decompose(src, 2, "jo", outer)
        base = _bases(src, low, 2, range(n_out), base, "o")
    else:  # one task (a 1-D softmax): the same loop, once
        src.par_loop(1, "jo", "1", loop)
    red_dims = list(range(n_out, rank))
    if swept is not None:  # the first sweep: the output's rows, read from memory
        src.add(2, f"pacc = {p_init}")
        if red_dims:
            d = red_dims[-1]
            indent, b = reduce_loops(2, base, red_dims[:-1], "px")
            src.add(indent, f"for i{d} in range(n{d}):")
            v = sweep_value(indent + 1, b, range(d, d + 1), "p")
            for line in _combine(swept.op, "pacc", v, "0", p_fl, p_reassoc):
                src.add(indent + 1, line)
        else:
            v = sweep_value(2, base, range(0), "p")
            for line in _combine(swept.op, "pacc", v, "0", p_fl):
                src.add(2, line)
        src.add(2, f"pres = {p_finish('pacc')}")
    src.add(2, f"acc = {init}")
    if lse:
        src.add(2, f"am_ = {e_t}(-np.inf)")
    if not red_dims:  # every reduced dim has length 1
        v = compute(2, base, range(0), "s", "pres")
        if lse:
            src.add(2, f"am = np.float64({v})")
            src.add(2, f"acc = {ex}(np.float64({v}) - am)")
            src.add(2, f"r = {finish(_lse_value(red.op, 'am', 'acc'))}")
        else:
            for line in _combine(red.op, "acc", convert(v), "0", fl):
                src.add(2, line)
            src.add(2, f"r = {finish('acc')}")
        finish_value(2, base, range(0), "n", "pres")
        return
    d = red_dims[-1]
    inner = range(d, d + 1)
    reassoc = row.combine_reassoc is not None and acc_t in ("np.float64", "np.float32")
    indent, b = reduce_loops(2, base, red_dims[:-1], "sx")
    src.add(indent, f"for i{d} in range(n{d}):")
    v = compute(indent + 1, b, inner, "s", "pres")
    if lse:  # each row of E folded into the max in a loop of its own, then the exp sum
        src.add(indent, f"for i{d} in range(n{d}):")
        src.add(indent + 1, f"am_ = rmax(am_, {e_t}({_read_out(low, b, inner)}))")
        src.add(2, "am = np.float64(am_)")
        indent, b = reduce_loops(2, base, red_dims[:-1], "ex")
        src.add(indent, f"for i{d} in range(n{d}):")
        e = f"np.float64({_read_out(low, b, inner)})"
        src.add(indent + 1, f"acc = radd(acc, {ex}({e} - am))")
        src.add(2, f"r = {finish(_lse_value(red.op, 'am', 'acc'))}")
    elif reassoc:  # fold the row back in a loop of its own (this one then vectorizes)
        src.add(indent, f"for i{d} in range(n{d}):")
        v = convert(_read_out(low, b, inner))
        for line in _combine(red.op, "acc", v, "0", fl, True):
            src.add(indent + 1, line)
    else:
        for line in _combine(red.op, "acc", convert(v), "0", fl):
            src.add(indent + 1, line)
    if not lse:
        src.add(2, f"r = {finish('acc')}")
    indent, b = reduce_loops(2, base, red_dims[:-1], "nx")
    src.add(indent, f"for i{d} in range(n{d}):")
    finish_value(indent + 1, b, inner, "n", "pres")
