"""Positional numpy functions run by ``expr.Call`` nodes, and the methods built on them.

A ``Call`` node hands its children to a function as numpy arrays; the functions here are
frozen value objects (their fields are the static arguments), so two equal calls have one
structural key and are planned and computed once. ``CallMethods`` gives ``Tensor``
``cumsum``, ``cumprod``, ``sort``, ``argsort`` and ``topk`` by name (results built with
``type(self)``); ``views`` (vectorized ``isel``), ``reductions`` (``argmax`` over several
axes; ``OverAxes`` for median and quantile) and ``ax.apply`` build their nodes from the
classes below.
"""

from __future__ import annotations

import functools
import math
from typing import Self

import attrs
import numpy as np

from ..core.axes import Axes, Axis
from ..core.dtypes import scan_dtype
from ..dag import nodes as ex
from ..errors import AxesError, fmt_axes, message

__all__ = [
    "AlongAxis",
    "OverAxes",
    "TopK",
    "ArgFlat",
    "Gather",
    "Apply",
    "Same",
    "CallMethods",
    "gathered",
]


@attrs.frozen
class AlongAxis:
    """``func(x, axis=axis, **kwargs)``: numpy functions over one dim that keep the shape
    (``np.cumsum``, ``np.cumprod``, ``np.sort``, ``np.argsort``)."""

    func: object
    axis: int
    kwargs: tuple = ()

    def __call__(self, x):
        return self.func(x, axis=self.axis, **dict(self.kwargs))

    @property
    def grad_rule(self) -> str:
        """Its row of ``autograd.CALL_RULES`` (the numpy function's name)."""
        return self.func.__name__


@attrs.frozen
class OverAxes:
    """``func(x, [q,] axis=dims, **kwargs)``: numpy reductions run as calls (``median``,
    ``quantile``); ``q`` None, a number, or a tuple (a leading result dim)."""

    func: object
    dims: tuple[int, ...]
    q: object = None
    kwargs: tuple = ()

    def __call__(self, x):
        q = () if self.q is None else (np.asarray(self.q),)
        out = self.func(x, *q, axis=self.dims, **dict(self.kwargs))
        return np.asarray(out)


@attrs.frozen
class TopK:
    """The ``k`` largest (or smallest) along ``axis``, best first, ties in index order,
    NaN largest (as torch): their ``indices`` or their values."""

    axis: int
    k: int
    largest: bool
    indices: bool
    grad_rule = "topk"  # its row of ``autograd.CALL_RULES`` (values only: indices are ints)

    def __call__(self, x):
        n = x.shape[self.axis]
        if self.largest:  # stable sort of the reversed row, read backwards
            rev = np.flip(x, self.axis)
            order = np.flip(np.argsort(rev, axis=self.axis, kind="stable"), self.axis)
            order = n - 1 - order
        else:
            order = np.argsort(x, axis=self.axis, kind="stable")
        idx = np.take(order, np.arange(self.k), axis=self.axis)
        return idx if self.indices else np.take_along_axis(x, idx, axis=self.axis)


@attrs.frozen
class ArgFlat:
    """``argmax``/``argmin`` over several dims at once: the index of the first best element
    in row-major order of ``dims`` (as given), for each index of the other dims."""

    func: object  # np.argmax or np.argmin
    dims: tuple[int, ...]

    def __call__(self, x):
        kept = [d for d in range(x.ndim) if d not in self.dims]
        y = x.transpose(kept + list(self.dims))
        n = math.prod(x.shape[d] for d in self.dims)
        return self.func(y.reshape(y.shape[: len(kept)] + (n,)), axis=-1)


@attrs.frozen
class Gather:
    """Vectorized (pointwise) indexing of ``x`` by integer arrays, as numpy's advanced
    indexing with every dim indexed by an array broadcast to the result.

    ``sources[k]`` is, for dim ``k`` of ``x``, ``("out", d)`` (read along result dim ``d``)
    or ``("index", j)`` (read at the values of index array ``j``); ``index_dims[j]`` are the
    result dims of index array ``j``'s dims. Negative indices count from the end (numpy);
    an index out of range raises ``IndexError`` before anything is written.
    """

    sources: tuple
    index_dims: tuple
    shape: tuple[int, ...]
    names: tuple[str, ...]  # x's axis names, for messages

    grad_rule = "gather"  # its row of ``autograd.CALL_RULES`` (a scatter-add)

    def __call__(self, x, *indices):
        ix = self.index(x.shape, indices)
        return x[ix] if ix else x

    def index(self, shape: tuple[int, ...], indices) -> tuple:
        """numpy's index tuple reading the result from an array of ``shape`` (checked)."""
        nd = len(self.shape)
        ix = []
        for k, (kind, v) in enumerate(self.sources):
            spread = [1] * nd
            if kind == "out":
                spread[v] = shape[k]
                ix.append(np.arange(shape[k]).reshape(spread))
                continue
            idx, dims = indices[v], self.index_dims[v]
            order = sorted(range(len(dims)), key=lambda i: dims[i])
            for i in order:
                spread[dims[i]] = idx.shape[i]
            self._check(idx, shape[k], self.names[k])
            ix.append(idx.transpose(order).reshape(spread))
        return tuple(ix)

    @staticmethod
    def _check(idx: np.ndarray, n: int, name: str) -> None:
        if idx.size == 0:
            return
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise IndexError(
                message(
                    "isel",
                    f"index {bad} is out of range for axis {name!r}",
                    f"{name}={n}",
                    f"Use -{n} <= index < {n}",
                )
            )


class Same:
    """An object compared by identity (a user's function inside a hashable key): the same
    function object gives the same key on every call, so its plan is reused."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other) -> bool:
        return type(other) is Same and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return f"Same({getattr(self.obj, '__name__', type(self.obj).__name__)})"


@attrs.frozen
class Apply:
    """``ax.apply``: each input transposed to (its loop dims, its core dims), broadcast to
    the full loop shape, then the user's function (``fn.obj``), or ``np.vectorize`` of it
    with ``signature`` when that is set."""

    fn: Same
    perms: tuple  # per input: the transpose putting loop dims (result order) then core
    shapes: tuple  # per input: the shape with length-1 dims for the loop dims it lacks
    loop: tuple[int, ...]  # the loop shape
    kwargs: object = ()  # sorted (name, value) pairs, or Same(dict) when unhashable
    signature: str | None = None
    otype: str | None = None

    def __call__(self, *arrays):
        laid = []
        for a, perm, shape in zip(arrays, self.perms, self.shapes, strict=True):
            b = a.transpose(perm).reshape(shape)
            laid.append(np.broadcast_to(b, self.loop + shape[len(self.loop) :]))
        fn = self.fn.obj
        kwargs = self.kwargs.obj if type(self.kwargs) is Same else dict(self.kwargs)
        if kwargs:
            fn = functools.partial(fn, **kwargs)
        if self.signature is not None:
            fn = np.vectorize(fn, signature=self.signature, otypes=[self.otype])
        return fn(*laid)


class CallMethods:
    """Scans and sorts along one named axis (numpy-evaluated ``Call`` nodes)."""

    __slots__ = ()

    def _along(self, func, name, op: str, dtype, **kwargs) -> Self:
        if name is None:
            if self.ndim != 1:
                raise _name_needed(self, op)
            name = self.names[0]
        d = self.axes.index(name, op)
        fn = AlongAxis(func, d, tuple(sorted(kwargs.items())))
        ident = tuple(range(self.ndim))
        node = ex.Call(fn, (self.node,), self.shape, dtype, op, (ident,))
        return type(self)(self.axes, node)

    def cumsum(self, name=None) -> Self:
        """Running sum along the named axis (numpy's dtype: ints sum in int64).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.array([1, 2, 3]), "N").cumsum("N").numpy()
        array([1, 3, 6])
        """
        return self._along(np.cumsum, name, "cumsum", scan_dtype(np.cumsum, self.dtype))

    def cumprod(self, name=None) -> Self:
        """Running product along the named axis (numpy's dtype).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.array([1, 2, 3, 4]), "N").cumprod("N").numpy()
        array([ 1,  2,  6, 24])
        """
        return self._along(np.cumprod, name, "cumprod", scan_dtype(np.cumprod, self.dtype))

    def sort(self, name=None) -> Self:
        """Values sorted along the named axis (NaN last, as numpy).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.array([3.0, 1.0, 2.0]), "N").sort("N").numpy()
        array([1., 2., 3.])
        """
        return self._along(np.sort, name, "sort", self.dtype, kind="stable")

    def topk(self, k: int, name=None, new_axis: str | None = None, largest: bool = True):
        """``(values, indices)`` of the ``k`` largest elements along the named axis (the
        smallest with ``largest=False``), best first, as ``torch.topk``; the axis becomes
        ``new_axis`` (default: the same name) of length ``k``. NaN counts as largest.

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.array([[3.0, 9.0, 1.0, 7.0]]), "N C")
        >>> values, indices = x.topk(2, "C", "K")
        >>> values.axes, values.numpy(), indices.numpy()
        (Axes(Axis('N', 1), Axis('K', 2)), array([[9., 7.]]), array([[1, 3]]))
        """
        return _topk(self, k, name, new_axis, largest)

    def argsort(self, name=None) -> Self:
        """Indices that sort along the named axis (int64); stable: ties keep their order.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.array([3.0, 1.0, 2.0]), "N").argsort("N").numpy()
        array([1, 2, 0])
        """
        return self._along(np.argsort, name, "argsort", np.dtype(np.int64), kind="stable")


def _topk(self, k, name, new_axis, largest: bool) -> tuple:
    if name is None:
        if self.ndim != 1:
            raise _name_needed(self, "topk")
        name = self.names[0]
    d = self.axes.index(name, "topk")
    axis = self.axes[d]
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= axis.length:
        raise ValueError(
            message(
                "topk",
                f"k must be an integer from 0 to the length of {axis.name!r}",
                f"{axis}; got k={k!r}",
                f"e.g. x.topk({min(axis.length, 1)}, {axis.name!r})",
            )
        )
    new = Axis(new_axis or axis.name, k)
    items = list(self.axes)
    items[d] = new
    out = Axes(items)
    ident = (tuple(range(self.ndim)),)
    node = (self.node,)
    values = ex.Call(TopK(d, k, largest, False), node, out.shape, self.dtype, "topk", ident)
    index = ex.Call(TopK(d, k, largest, True), node, out.shape, np.int64, "topk", ident)
    return type(self)(out, values), type(self)(out, index)


def _name_needed(t, op: str) -> AxesError:
    # numpy's sort/argsort default to the last axis: the example names it.
    example = f"x.{op}({t.names[-1]!r})" if t.names else "A 0-d tensor has no axis: x.item()"
    return AxesError(message(op, "name the axis to work along", fmt_axes(t.axes), example))


def gathered(t):
    """``(source tensor, [(dims of the source, positions per dim, result axis)])`` when
    ``t`` is a gather of an l-tensor by 1-D index arrays (lists, masks, 1-D index
    tensors), else None (``tensors.tensor.index_put`` writes through it)."""
    node = t.node
    if not isinstance(node, ex.Call) or not isinstance(node.fn, Gather):
        return None
    fn, src = node.fn, node.children[0]
    if type(src) is not ex.Leaf or any(len(d) != 1 for d in fn.index_dims):
        return None
    if any(type(c) is not ex.Leaf for c in node.children[1:]):
        return None
    x = type(t)(Axes._trusted(tuple(map(Axis, fn.names, src.shape))), src)
    groups: dict[int, tuple] = {}  # result dim -> (source dims, their index arrays)
    for k, (kind, j) in enumerate(fn.sources):
        if kind == "index":
            dims, arrays = groups.get(fn.index_dims[j][0], ((), ()))
            arr = type(t)(Axes._trusted((Axis("i", fn.shape[fn.index_dims[j][0]]),)),
                         node.children[1 + j]).numpy()  # fmt: skip
            groups[fn.index_dims[j][0]] = (dims + (k,), arrays + (arr % src.shape[k],))
    return x, [(dims, arrays, t.axes[d]) for d, (dims, arrays) in groups.items()]
