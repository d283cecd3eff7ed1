"""The ``Reshape`` node: split one dim or merge several, of any node (positions only).

On leaves (and elementwise nodes over them) a reshape is a view: ``expr_views.transform_views``
does it without a node. ``Reshape`` is for the rest: a computed value (a reduction, a dot,
a remap of a computed value) or a leaf whose strides cannot express the result. The
engine computes the argument into a temporary laid out so the reshape is a view of it.
Autograd needs it to map gradients back through ``split``/``flatten`` and to scatter a
gradient through a strided slice; ``Tensor.flatten``/``split`` use it so that reshaping an
r-tensor (or a declared graph tensor) stays lazy instead of copying eagerly.

``step`` is a leaf-origin step: ``("split", dim, lengths)`` (row-major) or ``("merge",
dims, pos)`` (``dims`` major to minor, merged into one dim placed at ``pos`` among the
others), as in ``strided.split_dim`` / ``strided.merge_dims``.
"""

from __future__ import annotations

from .nodes import Node, _defer, _intern, _lazy_over
from .views import transform_views

__all__ = ["Reshape", "reshape", "reshaped_shape", "merge_order"]


class Reshape(Node):
    """``arg`` with dims split or merged by ``step`` (see the module docstring)."""

    __slots__ = ("step",)
    kind = "reshape"

    def __init__(self, arg: Node, step: tuple):
        self.children = (arg,)
        self.step = step
        self.shape = reshaped_shape(arg.shape, step)
        self.dtype = arg.dtype
        if not _lazy_over(self.children):
            self.key, self.params = _intern(("S", step, arg.key)), arg.params
        else:
            _defer(self)

    def own(self) -> tuple:
        return ("S", self.step)

    def rebuild(self, children):
        return Reshape(children[0], self.step)


def reshaped_shape(shape: tuple[int, ...], step: tuple) -> tuple[int, ...]:
    """The shape after ``step``."""
    if step[0] == "split":
        _, d, lengths = step
        return shape[:d] + tuple(lengths) + shape[d + 1 :]
    _, dims, pos = step
    rest = [n for d, n in enumerate(shape) if d not in dims]
    merged = 1
    for d in dims:
        merged *= shape[d]
    rest.insert(pos, merged)
    return tuple(rest)


def merge_order(ndim: int, dims: tuple[int, ...], pos: int) -> tuple[int, ...]:
    """A memory order (outermost first) in which merging ``dims`` at ``pos`` is a view."""
    rest = [d for d in range(ndim) if d not in dims]
    return tuple(rest[:pos]) + tuple(dims) + tuple(rest[pos:])


def reshape(node: Node, step: tuple) -> Node:
    """``node`` reshaped by ``step``: views of the leaves when possible, else a ``Reshape``."""
    shape = reshaped_shape(node.shape, step)
    if shape == node.shape and (step[0] == "split" or step[1] == (step[2],)):
        return node  # splitting into one dim, or merging one dim in place
    done = transform_views(node, shape, step)
    return done if done is not None else Reshape(node, step)
