"""``Tensor``'s graph methods (a mixin): ``kind``, ``trainable``, ``grad``, ``backward``.

A declared tensor (``ax.constant``, ``ax.placeholder``, ``ax.persistent_tensor``,
``ax.variable``) has an ``autograd.Kind`` tag on its storage leaf, shared by its views. A
variable's accumulated gradient is kept on that tag, not on the Tensor object: the loss
reaches variables through nodes (``expr.leaf_roots``), never through Tensor objects, and
Tensor objects stay as small as before. Results are built with ``type(self)``.
"""

from __future__ import annotations

from ..autograd.program import Program
from ..autograd.rules import GRAD_NAMES, gradients
from ..dag import build as expr_ops
from ..dag import nodes as ex
from ..errors import AxesError, fmt_axes, message
from ..storage.memory import fresh
from .base import TensorBase
from .indexing import align
from .layout_methods import allocate_leaf, layout_for_axes

__all__ = ["GradMethods", "seed_node", "grad_buffer"]


def seed_node(loss, seed, op: str) -> ex.Node:
    """The gradient of ``loss`` with respect to itself: ones for a loss without axes, else
    ``seed`` (a tensor with a subset of the loss's axes, or a Python number)."""
    if loss.dtype.kind != "f":
        raise TypeError(
            message(
                op,
                f"the loss must be a float tensor, not {loss.dtype}",
                None,
                "Convert it: loss.astype('float32')",
            )
        )
    if seed is None:
        if loss.ndim:
            raise AxesError(
                message(
                    op,
                    "a loss with axes needs an explicit seed (its own gradient)",
                    f"loss: {fmt_axes(loss.axes)}",
                    "Reduce it first (loss.sum()) or pass seed=ax.ones(loss.axes)",
                )
            )
        seed = 1.0
    if isinstance(seed, (int, float)) and not isinstance(seed, bool):
        return ex.Const(seed, loss.dtype, loss.shape)
    if not isinstance(seed, TensorBase):
        raise TypeError(message(op, "seed must be a tensor or a number", type(seed).__name__))
    extra = [a for a in seed.axes if a.name not in loss.axes.names]
    if extra:
        raise AxesError(
            message(
                op,
                "the seed has axes the loss lacks: " + ", ".join(repr(a.name) for a in extra),
                f"loss: {fmt_axes(loss.axes)}; seed: {fmt_axes(seed.axes)}",
                "Give the seed the loss's axes",
            )
        )
    return expr_ops.cast(align(seed, loss.axes, op), loss.dtype)


def grad_buffer(tag, view, dtype) -> tuple[ex.Leaf, object]:
    """New storage for a gradient laid out like the variable (whose root ``view`` this
    is): in its layout, else in its memory order. Returns (leaf, layout)."""
    if tag.layout is not None:
        layout = layout_for_axes(tag.axes, tag.layout)
        return allocate_leaf(tag.axes, dtype, layout), layout
    order = tuple(sorted(range(view.ndim), key=lambda d: -abs(view.strides[d])))
    return ex.Leaf(*fresh(view.shape, dtype, order)), None


def _declared(t):
    node = t.node
    return node.tag if type(node) is ex.Leaf and node.tag is not None else None


class GradMethods:
    """Kinds (Nervana graph's tensor kinds) and PyTorch-style ``backward``/``grad``."""

    __slots__ = ()

    @property
    def kind(self) -> str | None:
        """``"constant"``, ``"placeholder"``, ``"persistent"``, ``"variable"``, or None for
        a tensor not declared as one (views share their storage's kind).

        >>> import axesarray as ax, numpy as np
        >>> ax.variable(np.zeros(3), "N").kind, ax.tensor(np.zeros(3), "N").kind
        ('variable', None)
        """
        tag = _declared(self)
        return tag.kind if tag is not None else None

    @property
    def trainable(self) -> bool:
        """Whether this is (a view of) a variable: optimizers and ``backward`` update it.

        >>> import axesarray as ax, numpy as np
        >>> w = ax.variable(np.zeros((2, 3)), "N C")
        >>> w.trainable, w.isel(N=0).trainable, ax.constant(np.zeros(3), "N").trainable
        (True, True, False)
        """
        tag = _declared(self)
        return tag is not None and tag.trainable

    @property
    def grad(self):
        """A variable's accumulated gradient (None until ``backward``); None for anything
        else, views of variables included.

        >>> import axesarray as ax, numpy as np
        >>> w = ax.variable(np.array([1.0, 2.0]), "N")
        >>> (w * w).sum().backward()
        >>> w.grad.numpy()
        array([2., 4.])
        """
        node = self.node
        tag = _declared(self)
        return tag.grad if tag is not None and node.origin is None else None

    @grad.setter
    def grad(self, value) -> None:
        tag = _declared(self)
        if tag is None or not tag.trainable or self.node.origin is not None:
            raise TypeError(
                message(
                    "grad",
                    "only a variable holds a gradient",
                    fmt_axes(self.axes),
                    "Create it with ax.variable(initial, axes)",
                )
            )
        if value is not None:
            if not isinstance(value, TensorBase) or set(value.axes) != set(self.axes):
                got = (
                    fmt_axes(value.axes) if isinstance(value, TensorBase) else type(value).__name__
                )
                raise AxesError(
                    message(
                        "grad",
                        "a gradient must have the variable's axes",
                        f"{tag.label}: {fmt_axes(self.axes)}; got {got}",
                        "Assign None to reset it",
                    )
                )
            value = value.transpose(self.names)
        tag.grad = value

    def backward(self, seed=None) -> None:
        """Add the gradient of this loss to ``v.grad`` of every variable it reads.

        One program computes every gradient (values they share are computed once) and
        adds it into the existing ``grad`` storage; ``v.grad = None`` resets.

        >>> import axesarray as ax, numpy as np
        >>> w = ax.variable(np.array([1.0, 2.0]), "K")
        >>> (w * w).sum().backward()
        >>> w.grad.numpy()
        array([2., 4.])
        """
        start = seed_node(self, seed, "backward")
        roots = [r for r in ex.leaf_roots(self.node) if r.tag is not None and r.tag.trainable]
        if not roots:
            raise ValueError(
                message(
                    "backward",
                    "the loss reads no variable",
                    fmt_axes(self.axes),
                    "Create parameters with ax.variable(initial, axes)",
                )
            )
        grads = gradients(self.node, start, roots, "backward")
        outputs, dsts, labels, fresh_tags = [], [], [], []
        for leaf, g in zip(roots, grads, strict=True):
            if g is None:
                continue  # read only through stop_gradient or integer values
            tag = leaf.tag
            old = tag.grad
            if old is not None and old.is_lvalue and old.node.writeable and old.dtype == g.dtype:
                dsts.append(old.node)
                g = expr_ops.map_op("add", (old.node, g), g.shape)
            else:
                if old is not None:
                    g = expr_ops.map_op(
                        "add", (expr_ops.cast(align(old, tag.axes), g.dtype), g), g.shape
                    )
                buf, layout = grad_buffer(tag, leaf.view, g.dtype)
                dsts.append(buf)
                fresh_tags.append((tag, len(outputs), layout))
            outputs.append(g)
            labels.append(f"grad_{tag.name}" if tag.name else f"grad of {tag.label}")
            GRAD_NAMES[g] = labels[-1]
        leaves = Program(outputs, dsts, labels=labels).run()
        for tag, k, layout in fresh_tags:
            tag.grad = type(self)(tag.axes, leaves[k], layout)
