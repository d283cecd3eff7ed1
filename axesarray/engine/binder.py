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

__all__ = ["lowered", "binder", "array_of"]

_F16 = np.dtype(np.float16)
_U16 = np.dtype(np.uint16)


def lowered(step: KernelStep) -> Lowered:
    """The step's argument layout and address terms (computed once per step)."""
    c = step.compiled
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


def _source_expr(src: tuple) -> str:
    kind = src[0]
    if kind == "param":
        return f"params[{src[1]}].data"
    if kind == "dst":
        return "dst.data"
    return f"temps[{src[1]!r}]" if kind == "temp" else "temps['alias']"


def binder(step: KernelStep):
    """The generated ``bind(params, temps, dst)`` of a step (compiled once)."""
    c = step.compiled
    if c.binder is None:
        low = lowered(step)
        parts = []
        for source in low.recipe:
            if source[0] == "int":
                parts.append(repr(source[1]))
            elif source[0] == "array":
                leaf = low.operands[source[1]]
                expr = _source_expr(leaf.src)
                parts.append(f"{expr}.view(U16)" if leaf.dtype == _F16 else expr)
            else:
                node = source[1]
                value = f"params[{node.src[1]}].value"
                parts.append(f"f32({value})" if node.dtype == _F16 else value)
        code = f"def bind(params, temps, dst):\n    return ({', '.join(parts)},)\n"
        namespace = {"U16": _U16, "f32": np.float32}
        exec(compile(code, f"<binder of {step.why}>", "exec"), namespace)
        c.binder = namespace["bind"]
    return c.binder
