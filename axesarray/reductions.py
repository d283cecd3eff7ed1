"""Reduction methods of ``Tensor``: sum, prod, max, min, any, all, mean, argmax, argmin.

Reductions are lazy ``expr.Reduce`` nodes over named axes, with numpy's result dtypes;
the result keeps the input's layout minus the reduced axes. A mixin of ``Tensor``.
"""

from __future__ import annotations

import math
from typing import Self

import numpy as np

from . import expr as ex
from .axes import Axes, parse_names
from .errors import AxesError, fmt_axes, message
from .layouts import isel_layout
from .views import resolve_names

__all__ = ["ReductionMethods"]


class ReductionMethods:
    """Reductions over axes given by name (all axes when None)."""

    __slots__ = ()

    def _reduce(self, op: str, names) -> Self:
        dims = resolve_names(self._axes, names, op)
        if op in ("max", "min", "argmax", "argmin"):
            empty = [self._axes[d] for d in dims if self._axes[d].length == 0]
            if empty:
                raise AxesError(
                    message(
                        op,
                        "cannot reduce over an empty axis, which has no identity",
                        fmt_axes(empty),
                        "Use sum, or guard the empty case",
                    )
                )
        node = ex.reduce(op, self._node, tuple(dims))
        axes = Axes._trusted(tuple(a for d, a in enumerate(self._axes) if d not in dims))
        layout = self._layout
        if layout is not None:  # the result is laid out like the input, minus reduced axes
            layout = isel_layout(layout, self._axes, {self._axes[d].name: 0 for d in dims})
        return type(self)(axes, node, layout)

    def sum(self, names=None) -> Self:
        """Sum over the named axes (all when None). ``x.sum("C")``, ``x.sum(("H", "W"))``."""
        return self._reduce("sum", names)

    def prod(self, names=None) -> Self:
        return self._reduce("prod", names)

    def max(self, names=None) -> Self:
        return self._reduce("max", names)

    def min(self, names=None) -> Self:
        return self._reduce("min", names)

    def any(self, names=None) -> Self:
        return (
            self.astype(bool)._reduce("any", names)
            if self.dtype != bool
            else self._reduce("any", names)
        )

    def all(self, names=None) -> Self:
        return (
            self.astype(bool)._reduce("all", names)
            if self.dtype != bool
            else self._reduce("all", names)
        )

    def mean(self, names=None) -> Self:
        """Arithmetic mean over the named axes, with numpy's result dtype."""
        if self.dtype == np.float16:
            # numpy sums float16 in float32 for a mean (a float16 sum overflows at 65504).
            return self.astype("float32").mean(names).astype("float16")
        dims = resolve_names(self._axes, names, "mean")
        count = math.prod(self._axes[d].length for d in dims)
        total = self._reduce("sum", names)
        if count == 0:
            return total / (float("nan") if total.dtype.kind == "f" else 0.0)
        return total / count

    def _arg(self, op: str, name) -> Self:
        if name is None:
            if self.ndim != 1:
                raise AxesError(message(op, "name the axis to search along", fmt_axes(self._axes)))
            name = self.names[0]
        names = parse_names(name, op)
        if len(names) != 1:
            raise AxesError(message(op, "takes exactly one axis", f"got {' '.join(names)}"))
        return self._reduce(op, names)

    def argmax(self, name=None) -> Self:
        """Index of the maximum along one named axis (int64)."""
        return self._arg("argmax", name)

    def argmin(self, name=None) -> Self:
        return self._arg("argmin", name)
