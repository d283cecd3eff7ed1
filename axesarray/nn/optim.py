"""Optimizers: ``SGD`` (with momentum) and ``Adam``, updating variables in place.

``step()`` writes each parameter (and its state, kept in ``persistent_tensor``s laid out
like the parameter) with fused kernels planned once per structure; the learning rate and
Adam's bias corrections are run-time scalars, so changing them plans nothing new.
``ax.explain(opt)`` shows the kernels of one step. ``zero_grad()`` sets every ``grad`` to
None (the next ``backward`` allocates it again).

>>> import axesarray as ax, numpy as np
>>> w = ax.variable(np.array([1.0, -2.0]), "K")
>>> opt = ax.optim.Adam([w], lr=0.1)
>>> for _ in range(3):
...     opt.zero_grad()
...     (w * w).sum().backward()
...     opt.step()
>>> w.numpy().round(2)
array([ 0.7, -1.7])
"""

from __future__ import annotations

import math

from ..autograd.program import Program, ProgramPlan
from ..creation import zeros
from ..errors import fmt_axes, message
from ..tensors.indexing import align
from ..tensors.tensor import Tensor
from .graph import persistent_tensor

__all__ = ["Optimizer", "SGD", "Adam"]


def _number(value, op: str, what: str, low: float, high: float = math.inf, open_high=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(message(op, f"{what} must be a number", repr(value)))
    ok = low <= value < high if open_high else low <= value <= high
    if not ok or math.isnan(value):
        bound = f"[{low}, {high}{')' if open_high else ']'}"
        raise ValueError(message(op, f"{what} must be in {bound}", f"got {value}"))
    return float(value)


class Optimizer:
    """The parameters (variables, each once) and the update loop; subclasses give the
    assignments of one parameter's step."""

    name = "optimizer"

    def __init__(self, params):
        items = [params] if isinstance(params, Tensor) else list(params)
        if not items:
            raise ValueError(message(self.name, "got no parameters"))
        seen = set()
        for k, p in enumerate(items):
            ok = isinstance(p, Tensor) and p.trainable and p.node.origin is None
            if not ok:
                what = fmt_axes(p.axes) if isinstance(p, Tensor) else type(p).__name__
                raise TypeError(
                    message(
                        self.name,
                        f"parameter {k} is not a variable",
                        what,
                        "Optimize tensors made by ax.variable(initial, axes)",
                    )
                )
            if id(p.node) in seen:
                raise ValueError(message(self.name, f"parameter {k} is listed twice"))
            seen.add(id(p.node))
        self.params = items
        self.steps = 0  # step() calls
        # Updates per parameter (torch's ``state["step"]``): a parameter without a gradient
        # is not updated and not counted, so its bias correction starts at its first update.
        self.counts = [0] * len(items)

    def _state(self, p: Tensor) -> Tensor:
        """A zero persistent tensor laid out like ``p``."""
        z = zeros(p.axes, p.dtype)
        return persistent_tensor(z.to_layout(p.layout) if p.layout is not None else z)

    def _program(self, counts: list) -> Program | None:
        """One step's program; ``counts`` are the update counts this step uses."""
        outputs, dsts, labels, fuse = [], [], [], []
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            name = p.node.tag.name or f"param {i}"
            for dst, value, what in self._updates(i, p, g, counts[i]):
                outputs.append(value.node if value.axes == dst.axes else _aligned(value, dst))
                dsts.append(dst.node)
                labels.append(f"{what} of {name}")
                fuse.append(i)  # a parameter's updates: one multi-output kernel
        return Program(outputs, dsts, labels=labels, fuse=fuse) if outputs else None

    def step(self) -> None:
        """Update every parameter that has a gradient, in place.

        >>> import axesarray as ax, numpy as np
        >>> w = ax.variable(np.array([1.0]), "K")
        >>> opt = ax.optim.SGD([w], lr=0.25)
        >>> (w * 2).sum().backward(); opt.step()
        >>> w.numpy()
        array([0.5])
        """
        self.steps += 1
        counts = self._next_counts()
        prog = self._program(counts)
        if prog is not None:
            prog.run()
        self.counts = counts

    def _next_counts(self) -> list:
        """The update counts after this step: one more for each parameter with a gradient."""
        return [n + (p.grad is not None) for n, p in zip(self.counts, self.params, strict=True)]

    def zero_grad(self) -> None:
        """Forget the gradients: every parameter's ``grad`` becomes None.

        >>> import axesarray as ax, numpy as np
        >>> w = ax.variable(np.array([1.0]), "K")
        >>> opt = ax.optim.SGD([w], lr=0.1)
        >>> w.sum().backward(); opt.zero_grad()
        >>> w.grad is None
        True
        """
        for p in self.params:
            p.grad = None

    def explain(self) -> ProgramPlan:
        """The kernels one ``step()`` runs now (parameters without a gradient are skipped).

        >>> import axesarray as ax, numpy as np
        >>> w = ax.variable(np.array([1.0]), "K")
        >>> opt = ax.optim.SGD([w], lr=0.1)
        >>> w.sum().backward()
        >>> "kernel" in str(opt.explain())
        True
        """
        prog = self._program(self._next_counts())
        return prog.explain() if prog is not None else ProgramPlan(())


def _aligned(value: Tensor, dst: Tensor):
    return align(value, dst.axes)


class SGD(Optimizer):
    """Stochastic gradient descent: ``w -= lr * g``; with momentum ``mu``, the velocity
    ``v = mu * v + g`` and ``w -= lr * v`` (PyTorch's formulation).

    >>> import axesarray as ax, numpy as np
    >>> w = ax.variable(np.array([1.0, 2.0]), "K")
    >>> opt = ax.optim.SGD([w], lr=0.5)
    >>> (w * w).sum().backward(); opt.step()
    >>> w.numpy()
    array([0., 0.])
    """

    name = "SGD"

    def __init__(self, params, lr: float, momentum: float = 0.0):
        super().__init__(params)
        self.lr = _number(lr, "SGD", "lr", 0.0)
        self.momentum = _number(momentum, "SGD", "momentum", 0.0, 1.0, open_high=True)
        self.velocity = [self._state(p) for p in self.params] if self.momentum else None

    def _updates(self, i: int, p: Tensor, g: Tensor, count: int) -> list:
        if not self.momentum:
            return [(p, p - self.lr * g, "update")]
        v = self.velocity[i]
        v_new = self.momentum * v + g
        return [(v, v_new, "velocity"), (p, p - self.lr * v_new, "update")]


class Adam(Optimizer):
    """Adam (Kingma and Ba): moments ``m = b1*m + (1-b1)*g``, ``v = b2*v + (1-b2)*g**2``,
    then ``w -= lr * m_hat / (sqrt(v_hat) + eps)`` with bias-corrected ``m_hat``, ``v_hat``.
    The correction's ``t`` is each parameter's own update count (``counts``), as torch's:
    a ``step()`` without a gradient neither moves nor counts a parameter.

    >>> import axesarray as ax, numpy as np
    >>> w = ax.variable(np.array([1.0, -1.0]), "K")
    >>> opt = ax.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w.numpy().round(6)
    array([ 0.9, -0.9])
    """

    name = "Adam"

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8):
        super().__init__(params)
        self.lr = _number(lr, "Adam", "lr", 0.0)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(message("Adam", "betas must be a pair of numbers", repr(betas)))
        self.betas = tuple(
            _number(b, "Adam", f"betas[{k}]", 0.0, 1.0, open_high=True) for k, b in enumerate(betas)
        )
        self.eps = _number(eps, "Adam", "eps", 0.0)
        self.m = [self._state(p) for p in self.params]
        self.v = [self._state(p) for p in self.params]

    def _updates(self, i: int, p: Tensor, g: Tensor, count: int) -> list:
        b1, b2 = self.betas
        m, v = self.m[i], self.v[i]
        m_new = b1 * m + (1.0 - b1) * g
        v_new = b2 * v + (1.0 - b2) * (g * g)
        c1 = 1.0 - b1**count  # this parameter's own count (torch, and the paper)
        c2 = 1.0 - b2**count
        step = (self.lr / c1) * m_new / ((v_new / c2) ** 0.5 + self.eps)
        return [(m, m_new, "first moment"), (v, v_new, "second moment"), (p, p - step, "update")]
