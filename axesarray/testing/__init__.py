"""Test helpers for code written with axesarray, the ones this project tests itself with.

- ``assert_close(actual, expected)``: a tensor (or array) against numpy's result, dtype
  first, then values with the tolerance of the dtype (``TOL``; exact for ints and bools).
- ``assert_shares_memory(t, other)`` / ``assert_named(t, names)``: zero-copy and axis
  checks.
- ``axesarray.testing.strategies``: hypothesis strategies for axes, dtypes, tensors over
  strided numpy arrays, view chains and tensors in standard layouts
  (``numpy_tensors``, ``view_ops``, ``tensors``...).
- ``axesarray.testing.programs`` / ``axesarray.testing.expressions``: random expression
  programs (``programs``), their numpy shadow (``shadow_eval``) and the same program
  built with axesarray (``build``).

The strategies need ``hypothesis``; this module does not (nor does ``import axesarray``).

>>> import axesarray as ax, numpy as np
>>> from axesarray.testing import assert_close
>>> x = ax.tensor(np.arange(3.0), "N")
>>> assert_close(ax.exp(x), np.exp(np.arange(3.0)))
"""

from __future__ import annotations

from .asserts import TOL, assert_close, assert_named, assert_shares_memory

__all__ = ["TOL", "assert_close", "assert_named", "assert_shares_memory"]
