"""Exception types and the helpers that format their messages.

Owns: ``AxesError``, ``LayoutError`` and the message format
``<operation>: <fact> (<values>). <hint>``. Imports nothing from the package.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable

__all__ = [
    "AxesError",
    "LayoutError",
    "fmt_axes",
    "message",
    "by_name",
    "isel_example",
    "iter_hint",
]


class AxesError(ValueError):
    """An axis problem: unknown or duplicate names, mismatched lengths, bad splits.

    >>> import axesarray as ax
    >>> issubclass(ax.AxesError, ValueError)
    True
    """


class LayoutError(ValueError):
    """A layout problem: unknown layout, a block that does not fit, an unreadable buffer.

    >>> import axesarray as ax
    >>> try:
    ...     ax.Layout.parse("NCHWx")
    ... except ax.LayoutError as e:
    ...     print(type(e).__name__, issubclass(type(e), ValueError))
    LayoutError True
    """


def fmt_axes(axes: Iterable) -> str:
    """Write axes as ``N=8, C=64``; an empty list is written ``()``.

    Accepts ``Axis`` objects or ``(name, length)`` pairs.
    """
    parts = []
    for a in axes:
        name, length = (a.name, a.length) if hasattr(a, "name") else a
        parts.append(f"{name}={length}")
    return ", ".join(parts) if parts else "()"


def message(op: str, fact: str, values: str | None = None, hint: str | None = None) -> str:
    """Build ``<op>: <fact> (<values>). <hint>`` with the optional parts left out."""
    msg = f"{op}: {fact}"
    if values:
        msg += f" ({values})"
    msg += "."
    if hint:
        msg += " " + hint.rstrip(".") + "."
    return msg


def _fmt_key(k) -> str:
    if isinstance(k, slice):
        parts = [repr(k.start), repr(k.stop)] + ([repr(k.step)] if k.step is not None else [])
        return f"slice({', '.join(parts)})"
    return repr(k)


def isel_example(names, picks: dict, var: str = "x") -> str:
    """``x.isel(A=0)`` (or ``x[{'lambda': 0}]`` for a Python keyword) for ``picks``
    (name -> index); hints build their examples from the tensor's own names with it.

    >>> isel_example(("N", "C"), {"C": slice(0, 2)})
    'x.isel(C=slice(0, 2))'
    >>> isel_example(("lambda",), {"lambda": 0})
    "x[{'lambda': 0}]"
    """
    if not any(keyword.iskeyword(n) for n in picks):
        return f"{var}.isel(" + ", ".join(f"{n}={_fmt_key(k)}" for n, k in picks.items()) + ")"
    return f"{var}[{{" + ", ".join(f"{n!r}: {_fmt_key(k)}" for n, k in picks.items()) + "}]"


def _is_int(k) -> bool:
    return isinstance(k, int) and not isinstance(k, bool)


def by_name(names, key) -> str:
    """A hint rewriting a positional index ``key`` of a tensor with axes ``names`` (in logical
    order) by name: ``x[0, 1:3]`` on ``A B`` is ``x.isel(A=0, B=slice(1, 3))``.

    >>> by_name(("A", "B"), (0, slice(1, 3)))
    'Index by name: x.isel(A=0, B=slice(1, 3))'
    >>> by_name((), 0)
    'A 0-d tensor has no axes to index: x.item() is its value'
    """
    names = tuple(names)
    if not names:
        return "A 0-d tensor has no axes to index: x.item() is its value"
    parts = key if isinstance(key, tuple) else (key,)
    if len(parts) <= len(names) and all(
        isinstance(k, slice)
        or _is_int(k)
        or (isinstance(k, list) and all(_is_int(i) for i in k))  # isel takes integer lists
        for k in parts
    ):
        picks = {n: k for n, k in zip(names, parts, strict=False) if k != slice(None)}
        return "Index by name: " + (isel_example(names, picks) if picks else "x[...]")
    return "Index by name, e.g. " + isel_example(names, {names[0]: 0})


def iter_hint(names) -> str:
    """How to loop over a tensor's first axis by name (iteration is refused).

    >>> iter_hint(("A", "B"))
    "Select by name: for i in range(x.axes['A'].length): x.isel(A=i)"
    """
    names = tuple(names)
    if not names:
        return "A 0-d tensor has no axes to iterate over: x.item() is its value"
    return f"Select by name: for i in range(x.axes[{names[0]!r}].length): " + isel_example(
        names, {names[0]: _Raw("i")}
    )


class _Raw(str):
    """A name written as code (``i``), not as a string literal."""

    def __repr__(self) -> str:
        return str(self)
