"""``TensorBase``: the state every tensor has, and the one "is this a tensor?" test.

A tensor is ``(axes, node, layout)``: its named axes, the DAG node that computes it (a
``Leaf`` for an l-tensor) and the layout its storage uses (None for plain strided). The
parts of ``Tensor`` (``metadata``, ``indexing``, ``reducing``...) are mixins over this base;
``isinstance(x, TensorBase)`` is how any of them asks whether ``x`` is a tensor (a mixin is
never a type test). The state is read through ``axes``, ``layout`` (the metadata part) and
``node``: only this module and the class itself (``tensors.tensor``, whose operator paths
are the per-call hot path) touch the slots.
"""

from __future__ import annotations

__all__ = ["TensorBase"]


class TensorBase:
    """The slots of a tensor and the read-only surface its parts use.

    >>> import axesarray as ax, numpy as np
    >>> from axesarray.tensors.base import TensorBase
    >>> t = ax.tensor(np.zeros((2, 3)), "N C")
    >>> isinstance(t, TensorBase), t.node.kind, t.layout is None
    (True, 'leaf', True)
    """

    __slots__ = ("_axes", "_node", "_layout", "__weakref__")

    def __init__(self, axes, node, layout=None):
        self._axes = axes
        self._node = node
        self._layout = layout

    @property
    def node(self):
        """The DAG node that computes this tensor (a ``Leaf`` for an l-tensor).

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.zeros(3), "K")
        >>> x.node.kind, (x + 1).node.kind
        ('leaf', 'map')
        """
        return self._node
