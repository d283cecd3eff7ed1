"""Python scalars from tensors: ``item``, ``float()``, ``int()``, ``operator.index``,
``bool()``, ``format``, ``round``, ``math.floor/ceil/trunc``, and the refusal of positional
iteration (a mixin of ``Tensor``).

A tensor of exactly one element converts; any other size is refused naming its axes, as
numpy refuses the truth value of an array of several elements.
"""

from __future__ import annotations

import math

import numpy as np

from ..dag.nodes import Leaf
from ..errors import AxesError, fmt_axes, iter_hint, message
from .base import TensorBase

__all__ = ["ScalarMethods"]


class ScalarMethods:
    """Conversions of one-element tensors to Python scalars."""

    __slots__ = ()

    def item(self):
        """The value of a one-element tensor as a Python scalar.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.array([[2.5]]), "N C").item()
        2.5
        """
        if self.size != 1:
            raise AxesError(
                message(
                    "item",
                    "only a tensor of one element converts to a Python scalar",
                    fmt_axes(self.axes),
                    "Reduce or select first",
                )
            )
        # ``float(loss)``: the element read from the storage of the (evaluated) leaf, without
        # ``numpy()``'s host array and reshape (3.5 of 12 us for a full max of 131k floats)
        value = self if self.layout is not None or self.node.kind == "leaf" else self.eval()
        leaf = value.node  # a chunked or device value: its ``numpy()`` below
        if type(leaf) is Leaf and type(leaf.data) is np.ndarray and leaf.view.blocks is None:
            return leaf.data[leaf.view.offset].item()
        return value.numpy().reshape(()).item()

    def __format__(self, spec: str) -> str:
        """``f"{loss:.4f}"``: a one-element tensor formats as its value; an empty
        ``spec`` gives ``str``.

        >>> import axesarray as ax, numpy as np
        >>> loss = ax.tensor(np.array([0.123456, 1.0]), "N").mean()
        >>> f"{loss:.3f}"
        '0.562'
        """
        if not spec:
            return str(self)
        if self.size != 1:
            raise TypeError(
                message(
                    "format",
                    f"only a tensor of one element formats with {spec!r}",
                    fmt_axes(self.axes),
                    "Reduce or select first, or format x.numpy()",
                )
            )
        return format(self.item(), spec)

    def __round__(self, ndigits=None):
        """``round(t)`` and ``round(t, n)``: a tensor without axes rounds to a Python
        number (int without ``n``, as ``round(2.5)``, else float); a tensor with axes gives
        ``t.round(n)`` (a tensor, as numpy arrays).

        >>> import axesarray as ax, numpy as np
        >>> t = ax.tensor(np.array([1.2345, 2.5]), "N")
        >>> round(t.sum(), 2), round(t.max())
        (3.73, 2)
        >>> round(t, 1).numpy()
        array([1.2, 2.5])
        """
        if self.ndim:
            return self.round(0 if ndigits is None else ndigits)
        return round(self.item(), ndigits) if ndigits is not None else round(self.item())

    def _to_int(self, how: str, fn) -> int:
        if self.size != 1:
            raise TypeError(
                message(
                    f"math.{how}",
                    "only a tensor of one element converts to a Python int",
                    fmt_axes(self.axes),
                    f"For every element use ax.{how}(x)" if how != "trunc" else "Reduce first",
                )
            )
        return fn(self.item())

    def __floor__(self) -> int:
        """``math.floor(t)`` of a one-element tensor (``ax.floor`` for every element).

        >>> import axesarray as ax, numpy as np, math
        >>> t = ax.tensor(np.array([-1.5]), "N").sum()
        >>> math.floor(t), math.ceil(t), math.trunc(t)
        (-2, -1, -1)
        """
        return self._to_int("floor", math.floor)

    def __ceil__(self) -> int:
        return self._to_int("ceil", math.ceil)

    def __trunc__(self) -> int:
        return self._to_int("trunc", math.trunc)

    def equals(self, other) -> bool:
        """Whether ``other`` is a tensor with the same axes (names and lengths, in any
        order) and the same values, NaN equal to NaN (xarray's ``equals``; dtypes may
        differ). A Python bool.

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.array([[1.0, np.nan]]), "N C")
        >>> x.equals(x.transpose("C N").copy()), x.equals(x + 1)
        (True, False)
        """
        if not isinstance(other, TensorBase) or set(self.axes) != set(other.axes):
            return False
        both = (self == other) | ((self != self) & (other != other))
        return bool(both.all())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iub":
            raise TypeError(
                message("__index__", "only integer tensors are indices", str(self.dtype))
            )
        return int(self.item())

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(
                message(
                    "bool",
                    "the truth value of a tensor with several elements is ambiguous",
                    fmt_axes(self.axes),
                    "Use (x).any() or (x).all()",
                )
            )
        return bool(self.item())

    def __iter__(self):
        raise TypeError(
            message(
                "iter",
                "tensors are not iterable by position",
                fmt_axes(self.axes),
                iter_hint(self.names),
            )
        )
