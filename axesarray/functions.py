"""Free functions: elementwise math, ``where``, ``clip``, ``dot``, ``pad``, ``concat``.

The elementwise functions (``exp``, ``hypot``...) are generated from the rows of
``ops.OPS`` that name a public function, docstrings included. Every function builds a lazy
r-tensor; names are resolved to positions here, then the ``expr`` constructors take over.
Imports ``tensor`` and below.
"""

from __future__ import annotations

import operator

import numpy as np

from . import engine
from .core.axes import Axes, Axis, parse_names
from .core.dtypes import check_weak_scalar, is_weak
from .core.ops import OPS
from .core.reductions_table import REDUCTIONS
from .dag import build as expr_ops
from .dag import nodes as ex
from .dag.chunked_leaf import has_chunked
from .errors import AxesError, fmt_axes, message
from .tensors.tensor import (
    Tensor,
    align,
    checked_assignment,
    contract,
    elementwise,
    unary_function,
)


def _elementwise_function(row):
    """The public function of an ``ops.OPS`` row: lazy, broadcasting by name."""
    op = row.name
    if row.arity == 1:
        fn = unary_function(op)
    else:

        def fn(*args):
            if len(args) != row.arity:
                raise TypeError(
                    message(row.public, f"takes {row.arity} arguments", f"got {len(args)}")
                )
            return elementwise(op, *args, name=row.public)

    fn.__name__ = fn.__qualname__ = row.public
    fn.__doc__ = row.doc
    fn.__module__ = "axesarray"
    return fn


def _reduction_function(row):
    """The public function of a ``reductions_table`` row: ``ax.nansum(x, "C")`` is
    ``x.nansum("C")``."""
    name = row.name

    def fn(x, *args, **kwargs):
        if not isinstance(x, Tensor):
            raise TypeError(
                message(
                    name,
                    "takes a tensor",
                    f"got {type(x).__name__}",
                    f"Wrap it: ax.{name}(ax.tensor(a, 'N C'), ...)",
                )  # fmt: skip
            )
        return getattr(x, name)(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = row.doc.replace("{f}", f"ax.{name}(x, ")
    fn.__module__ = "axesarray"
    return fn


GENERATED = {row.public: _elementwise_function(row) for row in OPS.values() if row.public}
GENERATED |= {r.name: _reduction_function(r) for r in REDUCTIONS.values() if r.function}
globals().update(GENERATED)

__all__ = sorted(GENERATED) + [
    "relu",
    "round",
    "clip",
    "where",
    "dot",
    "pad",
    "concat",
    "explain",
    "precompile",
]


def round(x, decimals: int = 0):  # noqa: A001 - the numpy name
    """Round half to even (numpy's ``np.round``); integers are unchanged.

    >>> import axesarray as ax, numpy as np
    >>> ax.round(ax.tensor(np.array([0.5, 1.5, 2.25]), "N"), 1).numpy()
    array([0.5, 1.5, 2.2])
    """
    if not isinstance(x, Tensor):
        raise TypeError(message("round", "expected a Tensor", type(x).__name__))
    return x.round(decimals)


def relu(x):
    """max(x, 0) elementwise (nan stays nan, as ``np.maximum``).

    >>> import axesarray as ax, numpy as np
    >>> ax.relu(ax.tensor(np.array([-1.0, 0.0, 2.0, np.nan]), "N")).numpy()
    array([ 0.,  0.,  2., nan])
    """
    return elementwise("maximum", x, 0, name="relu")


def clip(x, lo=None, hi=None):
    """Limit values to ``[lo, hi]`` (either may be None), as ``np.clip``.

    >>> import axesarray as ax, numpy as np
    >>> ax.clip(ax.tensor(np.array([-2.0, 0.5, 9.0]), "N"), 0, 1).numpy()
    array([0. , 0.5, 1. ])
    """
    if not isinstance(x, Tensor):
        raise TypeError(message("clip", "expected a Tensor", type(x).__name__))
    return x.clip(lo, hi)


def where(cond, a, b):
    """``a`` where ``cond`` is true, else ``b``; broadcasts all three by name.

    The result axes follow the rule of ``broadcast_axes`` applied left to right over
    ``cond, a, b``. ``cond`` is converted to bool as numpy does (non-zero is true).

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.array([-2.0, 3.0]), "N")
    >>> ax.where(x > 0, x, ax.tensor(np.array([10.0, 20.0]), "C")).numpy()
    array([[10., 20.],
           [ 3.,  3.]])
    """
    return elementwise("where", cond, a, b)


def dot(a: Tensor, b: Tensor, over) -> Tensor:
    """Contract the named axes ``over``; other shared axes are batch axes.

    The result has ``a``'s remaining axes followed by ``b``'s new ones.

    >>> import axesarray as ax
    >>> M, K, N = ax.Axis("M", 2), ax.Axis("K", 3), ax.Axis("N", 4)
    >>> ax.dot(ax.ones((M, K)), ax.ones((K, N)), over="K").numpy()[0, 0]
    np.float64(3.0)
    """
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(message("dot", "both operands must be tensors"))
    if over is None:
        raise TypeError(
            message(
                "dot", "name the axes to contract", "over=None", "Use e.g. ax.dot(a, b, over='K')"
            )
        )
    return contract(a, b, parse_names(over, "dot"), "dot")


def pad(x: Tensor, widths: dict | None = None, value=0, **kwargs) -> Tensor:
    """Pad named axes: ``ax.pad(x, H=(1, 1), W=2, value=0.0)`` (an int pads both sides).

    >>> import axesarray as ax
    >>> ax.pad(ax.ones((ax.Axis("W", 2),)), W=(1, 0)).numpy()
    array([0., 1., 1.])
    """
    if not isinstance(x, Tensor):
        raise TypeError(message("pad", "expected a Tensor", type(x).__name__))
    if not (is_weak(value) or isinstance(value, np.generic)):
        raise TypeError(
            message("pad", "the pad value must be a scalar", f"got {value!r}", "Use e.g. value=0.0")
        )
    if widths is not None and not isinstance(widths, dict):
        raise TypeError(
            message("pad", "widths are given per axis name", f"got {widths!r}", "Use e.g. H=(1, 1)")
        )
    spec = dict(widths or {}, **kwargs)
    node = x.node
    new_axes = list(x.axes)
    for name, width in spec.items():
        d = x.axes.index(name, "pad")
        before, after = _pad_widths(name, width)
        check_weak_scalar(value, x.dtype, "pad")
        node = ex.Pad(node, d, before, after, value)
        new_axes[d] = Axis(name, new_axes[d].length + before + after)
    return Tensor(Axes(new_axes), node)


def _pad_widths(name: str, width) -> tuple[int, int]:
    """``(before, after)`` from an int or a pair of ints, validated."""
    pair = (width, width) if isinstance(width, (int, np.integer)) else width
    try:
        before, after = (operator.index(w) for w in pair)
    except (TypeError, ValueError):
        raise TypeError(
            message(
                "pad",
                f"the width of axis {name!r} must be an integer or a pair of integers",
                f"got {width!r}",
                f"Use e.g. {name}=2 or {name}=(1, 0)",
            )
        ) from None
    if before < 0 or after < 0:
        raise AxesError(
            message(
                "pad",
                f"pad widths must be non-negative for axis {name!r}",
                f"got ({before}, {after})",
                "Slice with isel to crop",
            )
        )
    return before, after


def concat(tensors, name: str) -> Tensor:
    """Join tensors along the named axis; every other axis must match by name and length.

    >>> import axesarray as ax
    >>> C1, C2 = ax.Axis("C", 1), ax.Axis("C", 2)
    >>> ax.concat([ax.zeros((C1,)), ax.ones((C2,))], "C").numpy()
    array([0., 1., 1.])
    """
    items = list(tensors) if isinstance(tensors, (list, tuple)) else None
    if items is None or not all(isinstance(t, Tensor) for t in items):
        raise TypeError(
            message(
                "concat",
                "expects a list or tuple of tensors",
                f"got {tensors!r}"[:80],
                "Use e.g. ax.concat([a, b], 'C')",
            )
        )
    if not items:
        raise ValueError(message("concat", "needs at least one tensor"))
    first = items[0]
    first.axes.index(name, "concat")
    others = Axes([a for a in first.axes if a.name != name])
    for t in items[1:]:
        t.axes.index(name, "concat")
        rest = Axes([a for a in t.axes if a.name != name])
        if set(rest) != set(others):
            raise AxesError(
                message(
                    "concat",
                    f"all tensors must have the same axes besides {name!r}",
                    f"first: {fmt_axes(first.axes)}; other: {fmt_axes(t.axes)}",
                    "Broadcast, rename or slice to match",
                )
            )
    dtype = np.result_type(*(t.dtype for t in items))
    nodes = []
    for t in items:
        target = Axes([a if a.name != name else t.axes[name] for a in first.axes])
        nodes.append(expr_ops.cast(align(t, target, "concat"), dtype))
    d = first.axes.index(name)
    total = sum(t.axes[name].length for t in items)
    axes = Axes([a if a.name != name else Axis(name, total) for a in first.axes])
    return Tensor(axes, ex.Concat(tuple(nodes), d))


def explain(expr: Tensor, out: Tensor | None = None, *, timed: bool = False, repeat: int = 3):
    """The fused engine's plan for ``expr.eval()`` (or ``out[...] = expr``), not run.

    Shows the kernels in order (each with its loop nest by axis name after dropping and
    merging dims, the arrays it reads, which input set the output's memory order, whether
    its compiled code is in memory, on disk or still to compile, and estimates of the bytes
    it moves and its work) and the temporaries. With ``timed=True`` the kernels are
    compiled and the plan runs ``repeat`` times (into ``out`` when given): each kernel
    shows its best measured time (``time_s``), a profile of the expression.

    >>> import axesarray as ax
    >>> a = ax.ones((ax.Axis("N", 8), ax.Axis("C", 4)))
    >>> plan = ax.explain((a * 2).sum("C"))
    >>> [k.kind for k in plan.kernels], plan.kernels[0].loops
    (['reduction'], ((8, 'N'), (4, 'C')))
    >>> ax.explain((a * 2).sum("C"), timed=True).kernels[0].time_s > 0
    True
    """
    if timed:
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise ValueError(
                message(
                    "explain", f"repeat must be a positive int, not {repeat!r}", None,
                    "Pass repeat=3 (the best of three runs is shown)",
                )
            )  # fmt: skip
        node, dst, names = _planned("explain", expr, out)
        if has_chunked(node):
            raise TypeError(
                message(
                    "explain", "timed=True times in-memory kernels; this expression is chunked",
                    f"axes: {fmt_axes(expr.axes)}",
                    "Time expr.compute() instead, or explain without timed=True",
                )
            )  # fmt: skip
        return engine.profile(node, dst, names, repeat)
    return engine.explain(*_planned("explain", expr, out))


def precompile(expr: Tensor, out: Tensor | None = None):
    """Compile (or load from the disk cache) the kernels of ``expr.eval()`` (or of
    ``out[...] = expr``) now, so the first run neither waits nor takes the numpy tier.
    Returns the plan, as ``explain``.

    >>> import axesarray as ax
    >>> a = ax.ones((ax.Axis("N", 8),))
    >>> ax.precompile(a * 2 + 1).tier
    'kernels'
    """
    return engine.precompile(*_planned("precompile", expr, out))


def _planned(op: str, expr, out) -> tuple:
    """(node, destination leaf or None, result names) of ``out[...] = expr``, validated."""
    if not isinstance(expr, Tensor):
        raise TypeError(
            message(op, "expected a Tensor (an expression)", f"got {type(expr).__name__}")
        )
    if out is None:
        return expr.node, None, expr.names
    dst, node = checked_assignment(out, expr)
    return node, dst, out.names
