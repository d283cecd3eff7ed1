"""Exception types and the helpers that format their messages.

Owns: ``AxesError``, ``LayoutError`` and the message format
``<operation>: <fact> (<values>). <hint>``. Imports nothing from the package.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["AxesError", "LayoutError", "fmt_axes", "message"]


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
