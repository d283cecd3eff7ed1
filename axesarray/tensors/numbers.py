"""Python scalars from tensors: ``item``, ``float()``, ``int()``, ``operator.index``,
``bool()``, and the refusal of positional iteration (a mixin of ``Tensor``).

A tensor of exactly one element converts; any other size is refused naming its axes, as
numpy refuses the truth value of an array of several elements.
"""

from __future__ import annotations

from ..errors import AxesError, fmt_axes, iter_hint, message

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
                    fmt_axes(self._axes),
                    "Reduce or select first",
                )
            )
        return self.numpy().reshape(()).item()

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
                    fmt_axes(self._axes),
                    "Use (x).any() or (x).all()",
                )
            )
        return bool(self.item())

    def __iter__(self):
        raise TypeError(
            message(
                "iter",
                "tensors are not iterable by position",
                fmt_axes(self._axes),
                iter_hint(self.names),
            )
        )
