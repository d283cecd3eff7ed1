"""Engines: evaluate a node into fresh storage, or assign it into an existing l-tensor.

``engine="numpy"`` runs the reference engine; ``engine="numba"`` the fused engine
(``executor``, imported on first use because it imports numba). Both allocate results in
the order ``order.result_order`` picks.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..devices import host_array
from ..errors import fmt_axes, message
from ..expr import Leaf, Node
from ..options import OPTIONS
from ..storage import fresh
from . import reference
from .order import result_order

__all__ = [
    "evaluate",
    "assign",
    "to_numpy",
    "explain",
    "result_order",
    "warmup",
    "UNBOUND",
    "check_bound",
]


_FUSED: list = []  # the executor module, imported on first use (it imports numba)


def _executor():
    if not _FUSED:
        from . import executor

        _FUSED.append(executor)
    return _FUSED[0]


def allocate_for(root: Node) -> Leaf:
    """A fresh, writeable leaf shaped like ``root``, in its dominant input's memory order."""
    order, _ = result_order(root)
    data, view = fresh(root.shape, root.dtype, order)
    return Leaf(data, view)


# Tags (``autograd.Kind``) of placeholders that have no value now: filled from above (a
# placeholder is bound only during a call of its ``ax.function``). Reading one is an error.
UNBOUND: weakref.WeakSet = weakref.WeakSet()


def check_bound(root: Node, op: str = "evaluate") -> None:
    """Refuse an expression reading a placeholder that has no value now."""
    for p in root.params:
        if type(p) is Leaf and p.tag is not None and p.tag in UNBOUND:
            tag = p.tag
            raise ValueError(
                message(
                    op,
                    f"{tag.label} has no value outside a call of its function",
                    fmt_axes(tag.axes),
                    "Compile with f = ax.function(outputs, inputs=[...]) and call f(values)",
                )
            )


def evaluate(root: Node) -> Leaf:
    """Compute ``root`` into newly allocated storage."""
    if UNBOUND:
        check_bound(root)
    if OPTIONS["engine"] == "numba":
        return _executor().evaluate(root)
    out = allocate_for(root)
    reference.assign(out, root)
    return out


def assign(dst: Leaf, root: Node) -> None:
    """Write ``root`` into ``dst`` (same shape, castable dtype, already validated)."""
    if UNBOUND:
        check_bound(root, "assign")
    if OPTIONS["engine"] == "numba":
        _executor().assign(dst, root)
    else:
        reference.assign(dst, root)


def explain(root: Node, dst: Leaf | None = None, names=None):
    """The fused engine's public ``Plan`` for ``root`` (into ``dst`` when given)."""
    return _executor().explain(root, dst, names)


def to_numpy(root: Node) -> np.ndarray:
    """The value in logical order: a view for plain leaves, else a computed array."""
    if UNBOUND:
        check_bound(root, "numpy")
    if isinstance(root, Leaf):
        return host_array(root.data, root.view, root.writeable)
    leaf = evaluate(root)
    return host_array(leaf.data, leaf.view)


def warmup() -> None:
    """Pay numba's one-time start-up now: import it and load its CPU target's registries.

    The first evaluation in a new process otherwise includes that (about a second here);
    after it, loading a kernel compiled by an earlier process takes milliseconds. Useful in
    a notebook's first cell or a server's start-up.

    >>> import axesarray as ax
    >>> ax.warmup()
    """
    from ..numba_private import load_cpu_target

    _executor()  # imports the code generator and the math library
    load_cpu_target()
