"""Argument binders: per kernel step, a generated ``bind(params, temps, dst) -> args``.

Binding a cached schedule to this call's arrays and scalars is the hot path of a small
evaluation, so each step gets straight-line code: plan-time integers (shapes, strides,
offsets) are literals, arrays and scalars are looked up. float16 storage is passed as its
uint16 bits, float16 scalars as float32 (kernels compute float16 in float32 registers).
"""

from __future__ import annotations

import numpy as np

from ..kernels.lower import Lowered
from .schedule import KernelStep

__all__ = ["lowered", "binder", "fresh_runner", "into_runner", "array_of"]

_F16 = np.dtype(np.float16)
_U16 = np.dtype(np.uint16)


def lowered(step: KernelStep, alias: tuple = ()) -> Lowered:
    """The step's argument layout and address terms (computed once per step); ``alias``:
    the parameters read in place through the destination (an in-place variant)."""
    c = step.compiled
    if alias:
        key = ("lowered", alias)
        low = c.aliased.get(key)
        if low is None:
            low = c.aliased[key] = Lowered(
                step.out, step.tree, step.nest, step.extra, frozenset(alias)
            )
        return low
    if c.lowered is None:
        c.lowered = Lowered(step.out, step.tree, step.nest, step.extra)
    return c.lowered


def array_of(src: tuple, params, temps: dict, dst):
    """The storage a kernel leaf's ``src`` names in this run."""
    kind = src[0]
    if kind == "param":
        return params[src[1]].data
    if kind == "dst":
        return dst.data
    return temps[src[1] if kind == "temp" else "alias"]


def _source_expr(src: tuple, temp0: str | None) -> str:
    kind = src[0]
    if kind == "param":
        return f"params[{src[1]}].data"
    if kind == "dst":
        return "dst.data"
    if temp0 is not None and src == ("temp", 0):
        return temp0
    return f"temps[{src[1]!r}]" if kind == "temp" else "temps['alias']"


def _arguments(step: KernelStep, temp0: str | None = None, alias: tuple = ()) -> str:
    """The source of the kernel's argument list (``temp0``: the name temp 0 goes by;
    ``alias``: an in-place variant's, ``lowered``)."""
    low = lowered(step, alias)
    parts = []
    for source in low.recipe:
        if source[0] == "int":
            parts.append(repr(source[1]))
        elif source[0] == "array":
            leaf = low.operands[source[1]]
            expr = _source_expr(leaf.src, temp0)
            bits16 = leaf.dtype == _F16 or leaf.dtype.kind == "V"  # float16, bfloat16
            parts.append(f"{expr}.view(U16)" if bits16 else expr)
        else:
            node = source[1]
            value = f"params[{node.src[1]}].value"
            wide = node.dtype == _F16 or node.dtype.kind == "V"
            parts.append(f"f32({value})" if wide else value)
    return ", ".join(parts)


def _exec(code: str, name: str, where: str, **namespace):
    namespace.update(U16=_U16, f32=np.float32)
    exec(compile(code, where, "exec"), namespace)
    return namespace[name]


def binder(step: KernelStep, alias: tuple = ()):
    """The generated ``bind(params, temps, dst)`` of a step (compiled once; ``alias``: of
    its in-place variant, ``lowered``)."""
    c = step.compiled
    if alias:
        bind = c.aliased.get(("binder", alias))
        if bind is None:
            code = f"def bind(params, temps, dst):\n    return ({_arguments(step, None, alias)},)\n"
            bind = c.aliased[("binder", alias)] = _exec(code, "bind", f"<binder of {step.why}>")
        return bind
    if c.binder is None:
        code = f"def bind(params, temps, dst):\n    return ({_arguments(step)},)\n"
        c.binder = _exec(code, "bind", f"<binder of {step.why}>")
    return c.binder


def fresh_runner(step: KernelStep, call, alloc, n: int, dtype, fresh, view, key: int):
    """Generated ``run(params) -> out``: allocate temp 0 (``alloc(n, dtype)``), call
    ``call`` with the step's arguments and return a new ``fresh`` (the ``Leaf`` class) over
    it, with ``view`` and ``key``, fields as ``Leaf.fresh`` sets them: a whole evaluation of
    a one-kernel schedule in one frame (``executor``'s straight path)."""
    code = (  # ``fresh`` is a leaf class: its fields set inline (a frame per call counts)
        "def run(params):\n"
        f"    buf = alloc({n}, dtype)\n"
        f"    call({_arguments(step, 'buf')})\n"
        "    out = new(fresh)\n"
        "    out.data, out.view, out.shape, out.dtype = buf, view, shape, buf.dtype\n"
        f"    out.writeable, out.origin, out.tag, out.key = True, None, None, {key}\n"
        "    return out\n"
    )
    where = f"<runner of {step.why}>"
    namespace = dict(alloc=alloc, dtype=dtype, call=call, fresh=fresh, view=view)
    return _exec(code, "run", where, new=object.__new__, shape=view.shape, **namespace)


def into_runner(step: KernelStep, call, overlaps, general, inplace=None, candidates=()):
    """Generated ``run(params, dst)``: ``general(params, dst)`` when ``overlaps(params,
    dst)`` (the kernel would read what it writes), ``inplace(params, dst)`` when one of the
    ``candidates`` (parameters read at the output's own view and index) is the
    destination's storage, else ``call`` with the step's arguments (``executor``'s
    straight path for an assignment)."""
    lines = [
        "def run(params, dst):",
        "    if overlaps(params, dst):",
        "        return general(params, dst)",
    ]
    if inplace is not None and candidates:
        test = " or ".join(f"params[{i}].data is o" for i in candidates)
        lines += ["    o = dst.data", f"    if {test}:", "        return inplace(params, dst)"]
    lines.append(f"    call({_arguments(step)})")
    where = f"<runner of {step.why}>"
    namespace = dict(call=call, overlaps=overlaps, general=general, inplace=inplace)
    return _exec("\n".join(lines) + "\n", "run", where, **namespace)
