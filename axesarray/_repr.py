"""Text and HTML representations: axes, dtype, memory (strides, layout) and values.

Built on top of ``tensor``; printing an r-tensor evaluates it (the design's rule).
"""

from __future__ import annotations

import html

import numpy as np

from . import expr as ex
from .ops import OPS
from .options import get_option

__all__ = ["tensor_repr", "tensor_html", "formula"]


def formula(node: ex.Node, limit: int = 80) -> str:
    """A one-line formula for an expression, leaves numbered in order of appearance."""
    names: dict[int, str] = {}

    def go(n: ex.Node) -> str:
        if isinstance(n, ex.Leaf):
            names.setdefault(id(n), f"t{len(names)}")
            return names[id(n)]
        if isinstance(n, ex.Const):
            return repr(n.value.item())
        if isinstance(n, ex.Map):
            info = OPS[n.op]
            args = [go(a) for a in n.args]
            if info.symbol and info.arity == 2:
                return f"({args[0]} {info.symbol} {args[1]})"
            if info.symbol and info.arity == 1:
                return f"{info.symbol}{args[0]}"
            return f"{n.op}({', '.join(args)})"
        if isinstance(n, ex.Cast):
            return f"{go(n.arg)}.astype({n.dtype})"
        if isinstance(n, ex.Reduce):
            return f"{n.op}({go(n.arg)}, dims={list(n.axes)})"
        if isinstance(n, ex.Remap):
            return f"view({go(n.arg)})"
        if isinstance(n, ex.Pad):
            return f"pad({go(n.arg)})"
        if isinstance(n, ex.Concat):
            return "concat(" + ", ".join(go(a) for a in n.args) + ")"
        if isinstance(n, ex.Dot):
            return f"dot({go(n.a)}, {go(n.b)})"
        return type(n).__name__

    text = go(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(t) -> str:
    node = t._node
    if isinstance(node, ex.Leaf):
        ro = "" if node.writeable else ", read-only"
        return f"l-tensor{ro}"
    return f"r-tensor = {formula(node)}"


def _header(t) -> str:
    axes = ", ".join(str(a) for a in t.axes) or "scalar"
    parts = [axes, str(t.dtype), _kind(t)]
    if t.layout is not None:
        parts.append(f"layout {t.layout}")
    if t.is_lvalue:
        parts.append("strides " + str(t.strides))
    return "<Tensor " + " | ".join(parts) + ">"


def _values(t) -> str:
    arr = np.asarray(t.numpy())
    return np.array2string(arr, edgeitems=get_option("display_edgeitems"), threshold=200)


def tensor_repr(t) -> str:
    """``<Tensor N=2, C=3 | float64 | l-tensor | strides (24, 8)>`` then the values."""
    return _header(t) + "\n" + _values(t)


def tensor_html(t) -> str:
    """Jupyter view: one row per axis (name, length, byte stride), then the values."""
    rows = []
    strides = t.strides or (None,) * t.ndim
    for a, s in zip(t.axes, strides, strict=True):
        stride = "" if s is None else str(s)
        rows.append(
            f"<tr><td><b>{html.escape(a.name)}</b></td><td>{a.length}</td><td>{stride}</td></tr>"
        )
    table = (
        "<table><tr><th>axis</th><th>length</th><th>stride (bytes)</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    info = html.escape(f"{t.dtype} | {_kind(t)}" + (f" | layout {t.layout}" if t.layout else ""))
    return (
        f"<div><div><code>Tensor</code> {info}</div>{table}"
        f"<pre>{html.escape(_values(t))}</pre></div>"
    )
