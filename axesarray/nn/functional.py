"""Symbolic operators with hand-written gradients: ``softmax``, ``log_softmax``,
``logsumexp`` and ``softmax_cross_entropy``, over named axes.

Each forward pass is built from ordinary ops (so it fuses like anything else) and is
stable for large values: the maximum over the axes is subtracted first (a maximum that is
not finite is replaced by 0, so all ``-inf`` gives ``-inf`` and ``+inf`` gives ``inf``).
That maximum goes through ``stop_gradient``: the results do not depend on it.

The result node is registered with ``autograd.register_symbolic``, so autograd does not
differentiate the formula but uses the simplified gradient (Alea TK's symbolic layer):

- ``softmax``: ``p * (g - sum(g * p))``;
- ``log_softmax``: ``g - softmax * sum(g)``;
- ``logsumexp``: ``softmax * g``;
- ``softmax_cross_entropy``: ``(softmax - labels) * g`` for the logits, ``-logits * g``
  for the labels. It is defined as ``logsumexp(logits) - sum(labels * logits)``, which is
  the cross-entropy ``-sum(labels * log_softmax(logits))`` whenever the labels are a
  distribution over the axes (one-hot or soft labels); for this definition the gradient
  ``softmax - labels`` is exact for any labels.

The gradients reuse the forward's nodes (``exp(x - max)``, its sum), which the engine
computes once when forward and backward are planned together (``ax.function``).

A view of one of these results is pushed into its formula like any view, and autograd
then differentiates the formula (same values, also stable).
"""

from __future__ import annotations

from ..autograd.rules import register_symbolic
from ..dag.nodes import known_names, name_dims
from ..dag.replay import record, replay
from ..errors import AxesError, fmt_axes, message
from ..functions import exp, isfinite, log, stop_gradient, where
from ..options import OPTIONS
from ..tensors.indexing import align, resolve_names
from ..tensors.tensor import Tensor

__all__ = ["softmax", "log_softmax", "logsumexp", "softmax_cross_entropy"]


def _check(x, axis, op: str) -> tuple:
    if not isinstance(x, Tensor):
        raise TypeError(message(op, "expected a Tensor", type(x).__name__))
    if x.dtype.kind != "f":
        raise TypeError(
            message(
                op,
                f"expects a float tensor, not {x.dtype}",
                None,
                "Convert it: x.astype('float32')",
            )
        )
    axes = x.axes
    memo = (axes, axis) if type(axis) is str else None
    names = _NAMES.get(memo) if memo is not None else None
    if names is not None:
        return names
    dims = resolve_names(axes, axis, op)
    names = tuple(axes[d].name for d in dims)
    empty = [axes[d] for d in dims if axes[d].length == 0]
    if empty:
        raise AxesError(
            message(
                op,
                "cannot normalize over an empty axis",
                fmt_axes(empty),
                "Normalize over axes with at least one element",
            )
        )
    if memo is not None:
        if len(_NAMES) >= 1024:
            _NAMES.clear()
        _NAMES[memo] = names
    return names


# ``_check``'s names per (axes, axis given as a string): checked once (the errors are
# raised by the first call, which stores nothing). Bounded.
_NAMES: dict = {}


def _parts(x: Tensor, names: tuple) -> tuple:
    """(shift, e, s): the stable shift, ``exp(x - shift)`` and its sum over ``names``."""
    m = x.max(names)
    shift = stop_gradient(where(isfinite(m), m, 0.0))
    e = exp(x - shift)
    return shift, e, e.sum(names)


# Each formula's recipe (``dag.replay``) per (formula, names, the inputs' axes and keys, the
# broadcast option): a formula rebuilt each call over inputs of the same structure (a
# training loop's logits) is replayed, ~12 us, instead of built again through the
# operators' checks, ~70 us. Bounded.
_RECIPES: dict = {}


def _built(op: str, inputs: tuple, names: tuple, build) -> tuple:
    """``build(*inputs, names)``'s tensors, replayed from the recipe of an earlier build
    over inputs of the same structure when there is one (plain tensors without layouts)."""
    nodes = tuple(t.node for t in inputs)
    try:
        keys = tuple(n.known_key for n in nodes)
    except AttributeError:  # a lazy input (a long program): built anew
        return build(*inputs, names)
    if any(type(t) is not Tensor or t.layout is not None for t in inputs):
        return build(*inputs, names)
    memo = (op, names, tuple(t.axes for t in inputs), keys, OPTIONS["broadcast"])
    hit = _RECIPES.get(memo)
    if hit is not None:
        recipe, axes, input_names = hit
        made = replay(recipe, nodes)
        if made is not None:
            for node, dim_names in zip(nodes, input_names, strict=True):
                if dim_names is not None:  # what the build's reductions named
                    name_dims(node, dim_names)
            return tuple(map(Tensor, axes, made))
    before = [known_names(n) for n in nodes]
    outs = build(*inputs, names)
    after = [known_names(n) for n in nodes]
    recipe = record(nodes, tuple(t.node for t in outs))
    if recipe is not None and all(b is None or b == a for b, a in zip(before, after, strict=True)):
        if len(_RECIPES) >= 1024:
            _RECIPES.clear()
        named = tuple(a if b is None else None for b, a in zip(before, after, strict=True))
        _RECIPES[memo] = (recipe, tuple(t.axes for t in outs), named)
    return outs


def _softmax(x: Tensor, names: tuple) -> tuple:
    _, e, s = _parts(x, names)
    return (e / s,)


def _log_softmax(x: Tensor, names: tuple) -> tuple:
    shift, e, s = _parts(x, names)
    return x - (shift + log(s)), e, s


def _logsumexp(x: Tensor, names: tuple) -> tuple:
    shift, e, s = _parts(x, names)
    return shift + log(s), e, s


def _cross_entropy(logits: Tensor, y: Tensor, names: tuple) -> tuple:
    shift, e, s = _parts(logits, names)
    return shift + log(s) - (y * logits).sum(names), e, s


def _node_of(t: Tensor, like: Tensor):
    """``t``'s node laid out in ``like``'s axes (``t`` has a subset of them)."""
    return align(t, like.axes)


def softmax(x: Tensor, axis) -> Tensor:
    """``exp(x) / sum(exp(x))`` over the named axis (or axes), computed stably.

    >>> import axesarray as ax, numpy as np
    >>> p = ax.softmax(ax.tensor(np.array([[1.0, 1.0], [0.0, 1000.0]]), "N K"), axis="K")
    >>> p.numpy()
    array([[0.5, 0.5],
           [0. , 1. ]])
    """
    names = _check(x, axis, "softmax")
    (p,) = _built("softmax", (x,), names, _softmax)
    axes = p.axes

    def backward(g, node):  # ``node`` is p's (a closure over p would keep it alive)
        gt, pt = Tensor(axes, g), Tensor(axes, node)
        return (_node_of(pt * (gt - (gt * pt).sum(names)), x),)

    register_symbolic(p.node, (x.node,), backward)
    return p


def log_softmax(x: Tensor, axis) -> Tensor:
    """``x - logsumexp(x)`` over the named axis (or axes): log-probabilities, stable.

    >>> import axesarray as ax, numpy as np
    >>> ax.log_softmax(ax.tensor(np.array([0.0, 0.0]), "K"), axis="K").numpy()
    array([-0.69314718, -0.69314718])
    """
    names = _check(x, axis, "log_softmax")
    out, e, s = _built("log_softmax", (x,), names, _log_softmax)
    axes = out.axes

    def backward(g, node):
        gt = Tensor(axes, g)
        return (_node_of(gt - (e / s) * gt.sum(names), x),)

    register_symbolic(out.node, (x.node,), backward)
    return out


def logsumexp(x: Tensor, axis) -> Tensor:
    """``log(sum(exp(x)))`` over the named axis (or axes), without overflow.

    >>> import axesarray as ax, numpy as np
    >>> float(ax.logsumexp(ax.tensor(np.array([1000.0, 1000.0]), "K"), axis="K"))
    1000.6931471805599
    """
    names = _check(x, axis, "logsumexp")
    out, e, s = _built("logsumexp", (x,), names, _logsumexp)
    axes = out.axes

    def backward(g, node):
        return (_node_of((e / s) * Tensor(axes, g), x),)

    register_symbolic(out.node, (x.node,), backward)
    return out


def softmax_cross_entropy(logits: Tensor, labels: Tensor, axis) -> Tensor:
    """Cross-entropy of ``softmax(logits)`` against ``labels`` (a distribution over the
    named axis: one-hot or soft), one value per remaining axis. Stable for large logits;
    its gradient is ``softmax(logits) - labels``.

    >>> import axesarray as ax, numpy as np
    >>> z = ax.tensor(np.array([[2.0, 0.0], [0.0, 2.0]]), "N K")
    >>> y = ax.tensor(np.array([[1.0, 0.0], [1.0, 0.0]]), "N K")
    >>> ax.softmax_cross_entropy(z, y, axis="K").numpy().round(4)
    array([0.1269, 2.1269])
    """
    names = _check(logits, axis, "softmax_cross_entropy")
    if not isinstance(labels, Tensor) or set(labels.axes) != set(logits.axes):
        got = fmt_axes(labels.axes) if isinstance(labels, Tensor) else type(labels).__name__
        raise AxesError(
            message(
                "softmax_cross_entropy",
                "the labels must have the logits' axes",
                f"logits: {fmt_axes(logits.axes)}; labels: {got}",
                "One-hot encode class indices over the class axis",
            )
        )
    y = Tensor(logits.axes, _node_of(labels, logits))  # labels in the logits' order (a view)
    loss, e, s = _built("softmax_cross_entropy", (logits, y), names, _cross_entropy)
    axes = loss.axes

    def backward(g, node):
        gt = Tensor(axes, g)
        d_logits = _node_of((e / s - y) * gt, logits)
        d_labels = _node_of(-logits * gt, logits) if y.dtype.kind == "f" else None
        return (d_logits, d_labels)

    register_symbolic(loss.node, (logits.node, y.node), backward)
    return loss
