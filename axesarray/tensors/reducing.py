"""Reduction methods of ``Tensor``, generated from the rows of
``core.reductions_table.REDUCTIONS`` (sum, prod, max, min, any, all, mean, var, std, the
``nan*`` reductions, median, quantile, with ``skipna=``), and argmax/argmin.

Reductions are lazy ``expr.Reduce`` nodes over named axes, with numpy's result dtypes;
the result keeps the input's layout minus the reduced axes. ``keepdims=True`` keeps each
reduced axis with length 1 in its place. ``var``/``std`` are built from ``mean`` and
``sum`` (two fused reductions); median and quantile are numpy calls (``_over_axes``). A
mixin of ``Tensor``.
"""

from __future__ import annotations

import inspect
import math
import numbers
from typing import Self

import numpy as np

from ..autograd.rules import in_graph
from ..core.axes import Axes, Axis, parse_names
from ..core.reductions_table import REDUCTIONS
from ..dag import build as expr_ops
from ..dag import nodes as ex
from ..dag import views as expr_views
from ..dag.resize import COUNTS
from ..errors import AxesError, fmt_axes, message
from ..storage.layouts import isel_layout
from .calls import ArgFlat, OverAxes
from .indexing import resolve_names

__all__ = ["ReductionMethods"]

_KEEP = "_axesarray_kept_"  # prefix of placeholder axes (renamed back at once)


# ``_reduce``'s checked names per (id of the Axes object, names, op), the entry keeping the
# Axes alive and checked by identity: (axes, dims, result axes, the axes' names). Only
# names given as None, one string or a tuple of strings (hashable, and what a program
# rebuilt each call passes: ``ax.softmax`` passes a tuple); the first build raised any
# error. Bounded.
_REDUCED_AXES: dict = {}


def _plain(names) -> bool:
    """Whether ``names`` can key the memos: None, a string or a tuple of strings."""
    t = type(names)
    return names is None or t is str or (t is tuple and all(type(n) is str for n in names))


# ``_mean``'s checked dims and count per (id of the Axes object, names), as above:
# (axes, dims, count).
_MEAN_COUNTS: dict = {}
_F16 = np.dtype(np.float16)


class ReductionMethods:
    """Reductions over axes given by name (all axes when None)."""

    __slots__ = ()

    def _reduce(self, op: str, names, keepdims: bool = False) -> Self:
        axes_in, memo, hit = self.axes, None, None
        if not keepdims and _plain(names):
            memo = (id(axes_in), names, op)
            hit = _REDUCED_AXES.get(memo)
            if hit is not None and hit[0] is not axes_in:
                hit = None
        if hit is None:
            dims = resolve_names(axes_in, names, op)
            self._check_identity(op, dims)
            if keepdims:
                reduced = [axes_in[d].name for d in dims]
                return self._with_placeholders(dims)._reduce(op, reduced)._placeholders_named()
            out_axes = Axes._trusted(tuple(a for d, a in enumerate(axes_in) if d not in dims))
            hit = (axes_in, tuple(dims), out_axes, axes_in.names)
            if memo is not None:
                if len(_REDUCED_AXES) >= 1024:
                    _REDUCED_AXES.clear()
                _REDUCED_AXES[memo] = hit
        _, dims, axes, in_names = hit
        node = expr_ops.reduce(op, self.node, dims)
        ex.name_dims(self.node, in_names)  # the reduced dims keep their names
        layout = self.layout
        if layout is not None:  # the result is laid out like the input, minus reduced axes
            layout = isel_layout(layout, self.axes, {self.axes[d].name: 0 for d in dims})
        return type(self)(axes, node, layout)

    def _check_identity(self, op: str, dims) -> None:
        if not REDUCTIONS[op].empty:
            empty = [self.axes[d] for d in dims if self.axes[d].length == 0]
            if empty:
                raise AxesError(
                    message(
                        op,
                        "cannot reduce over an empty axis, which has no identity",
                        fmt_axes(empty),
                        "Use sum, or guard the empty case",
                    )
                )

    def _with_placeholders(self, dims) -> Self:
        """A view with a length-1 placeholder axis after each of ``dims``: reducing ``dims``
        leaves the placeholders where the reduced axes were. The view is pushed down to the
        leaves, so the reduction still fuses its input."""
        items, maps = [], []
        for d, a in enumerate(self.axes):
            maps.append((len(items), 0, 1))
            items.append(a)
            if d in dims:
                items.append(Axis(_KEEP + a.name, 1))
        axes = Axes._trusted(tuple(items))
        return type(self)(axes, expr_views.remap(self.node, axes.shape, tuple(maps)))

    def _placeholders_named(self) -> Self:
        items = tuple(
            Axis(a.name.removeprefix(_KEEP), 1) if a.name.startswith(_KEEP) else a
            for a in self.axes
        )
        return type(self)(Axes._trusted(items), self.node)

    def _mean(self, names=None, keepdims: bool = False) -> Self:
        """The ``mean`` row's build: ``sum / n``."""
        if self.node.dtype == _F16:
            # numpy sums float16 in float32 for a mean (a float16 sum overflows at 65504).
            return self.astype("float32").mean(names, keepdims).astype("float16")
        axes_in, memo, hit = self.axes, None, None
        if _plain(names):  # as ``_REDUCED_AXES``
            memo = (id(axes_in), names)
            hit = _MEAN_COUNTS.get(memo)
        if hit is None or hit[0] is not axes_in:
            dims = tuple(resolve_names(axes_in, names, "mean"))
            hit = (axes_in, dims, math.prod(axes_in[d].length for d in dims))
            if memo is not None:
                if len(_MEAN_COUNTS) >= 1024:
                    _MEAN_COUNTS.clear()
                _MEAN_COUNTS[memo] = hit
        _, dims, count = hit
        total = self._reduce("sum", names, keepdims)
        if count == 0:
            return total / (float("nan") if total.dtype.kind == "f" else 0.0)
        mean = total / count
        if in_graph(self.node):
            mean = self._counted(mean, dims)
        return mean

    def _counted(self, mean, dims) -> Self:
        """``mean`` with a divisor of its own, registered as the count of ``dims`` of this
        tensor: a function whose placeholder has an axis bound per call (a batch) then
        divides by the call's count (``dag.resize``)."""
        node = mean.node
        if not isinstance(node, ex.Map) or type(node.children[1]) is not ex.Const:
            return mean  # a bfloat16 mean (a rounding cast on top) keeps the built count
        c = node.children[1]
        fresh = ex.Const(c.value, c.dtype, c.shape)  # Consts are shared: this one is not
        COUNTS[fresh] = (self.node, tuple(dims), None)
        return type(self)(
            mean.axes, ex.Map(node.op, (node.children[0], fresh), node.dtype), mean.layout
        )

    def _var(self, names=None, ddof=0, keepdims: bool = False) -> Self:
        """The ``var`` row's build: ``sum((x - mean)**2) / max(n - ddof, 0)``."""
        if not isinstance(ddof, numbers.Real) or isinstance(ddof, bool):
            raise TypeError(message("var", "ddof must be a number", f"got {ddof!r}"))
        if self.dtype == np.float16:
            return self.astype("float32").var(names, ddof, keepdims).astype("float16")
        x = self.astype("float64") if self.dtype.kind in "biu" else self
        dims = resolve_names(self.axes, names, "var")
        count = math.prod(self.axes[d].length for d in dims)
        dev = x - x.mean(names)  # the mean broadcasts back by name: x keeps its order
        return (dev * dev)._reduce("sum", names, keepdims) / max(count - ddof, 0)

    def _std(self, names=None, ddof=0, keepdims: bool = False) -> Self:
        """The ``std`` row's build: the square root of ``var``."""
        v = self.var(names, ddof, keepdims)
        if v.dtype == np.float16:  # numpy takes the root of the float16 variance
            return (v.astype("float32") ** 0.5).astype("float16")
        return v**0.5

    def _over_axes(
        self, op: str, func, names, keepdims: bool, q, kwargs: dict, quantile: bool = False
    ) -> Self:
        """``func(x, [q,] axis=dims, **kwargs)`` as a numpy call (median, quantile): the
        reduced axes go; a list of ``q`` gives a leading axis ``quantile``."""
        qs = None
        if quantile:
            try:
                qs = np.asarray(q, dtype=np.float64)
            except (TypeError, ValueError):
                qs = np.full(2, np.nan)  # refused below
            if qs.ndim > 1 or not np.all((qs >= 0) & (qs <= 1)):
                raise ValueError(
                    message(op, "q must be a number or a list of numbers in [0, 1]",
                            f"got {q!r}", "e.g. x.quantile([0.25, 0.75], 'C')")  # fmt: skip
                )
            qs = float(qs) if qs.ndim == 0 else tuple(float(v) for v in qs)
        dims = resolve_names(self.axes, names, op)
        self._check_identity(op, dims)
        if keepdims:
            reduced = [self.axes[d].name for d in dims]
            x = self._with_placeholders(dims)
            out = x._over_axes(op, func, reduced, False, q, kwargs, quantile)
            return out._placeholders_named()
        kept = tuple(a for d, a in enumerate(self.axes) if d not in dims)
        if isinstance(qs, tuple):
            kept = (Axis("quantile", len(qs)),) + kept
        axes = Axes(kept)
        fn = OverAxes(func, tuple(dims), qs, tuple(sorted(kwargs.items())))
        try:  # numpy's result dtype, and its checks of the arguments, on a tiny sample
            sample = fn.func(np.ones(2, self.dtype), *(() if qs is None else (0.5,)), **kwargs)
        except (TypeError, ValueError) as e:
            raise ValueError(message(op, "numpy refuses the arguments", str(e))) from None
        dtype = np.asarray(sample).dtype
        return type(self)(axes, ex.Call(fn, (self.node,), axes.shape, dtype, op))

    def _arg(self, op: str, name, keepdims: bool):
        if name is None:
            if self.ndim != 1:
                raise AxesError(message(op, "name the axis to search along", fmt_axes(self.axes)))
            name = self.names[0]
        names = parse_names(name, op)
        if isinstance(name, (str, Axis)) and len(names) == 1:
            return self._reduce(op, names, keepdims)
        if not names:
            raise AxesError(message(op, "name at least one axis", fmt_axes(self.axes)))
        return self._arg_several(op, names, keepdims)

    def _flat_arg(self, op: str, names, keepdims: bool = False) -> Self:
        """The flat index of the first best element over the axes ``names`` (row-major in
        the order given): a fused reduction over the axes merged as a view when strides
        allow it, else a numpy call. With ``keepdims`` a length-1 placeholder axis takes
        the place of the first of them."""
        dims = resolve_names(self.axes, names, op)
        self._check_identity(op, dims)
        flat_name = _KEEP + "flat"
        try:  # merging the axes as a view keeps the reduction fused with its input
            return self.flatten(names, flat_name, copy=False)._reduce(op, [flat_name], keepdims)
        except AxesError:
            pass
        fn = ArgFlat(np.argmax if op == "argmax" else np.argmin, tuple(dims))
        axes = Axes._trusted(tuple(a for d, a in enumerate(self.axes) if d not in dims))
        flat = type(self)(axes, ex.Call(fn, (self.node,), axes.shape, np.int64, op))
        return flat.expand_dims([Axis(flat_name, 1)], min(dims)) if keepdims else flat

    def _arg_several(self, op: str, names: tuple, keepdims: bool) -> dict:
        """One index tensor per axis: the flat index unravelled by division and remainder."""
        flat = self._flat_arg(op, names, keepdims)
        lengths = [self.axes[n].length for n in names]
        out = {}
        for k, n in enumerate(lengths):
            inner = math.prod(lengths[k + 1 :])
            index = flat // inner if inner != 1 else flat
            out[names[k]] = index % n if k else index
        if keepdims:
            out = {n: t._one_keepdims(self, names) for n, t in out.items()}
        return out

    def _one_keepdims(self, source, names) -> Self:
        """A keepdims=True result of several axes: the flat placeholder becomes the reduced
        axes, each of length 1, in their places in ``source``."""
        flat = _KEEP + "flat"
        kept = [a.name for a in self.axes if a.name != flat]
        t = self.squeeze(flat)
        order = [a.name for a in source.axes]
        t = t.expand_dims([Axis(n, 1) for n in names])
        return t.transpose(" ".join(n for n in order if n in kept or n in names))

    def argmax(self, name=None, keepdims: bool = False):
        """Index of the maximum along one named axis (int64; the first one on ties, NaN
        first as numpy).

        Over several axes (a list, or a string naming several) the result is a dict of
        one index tensor per axis, so ``x.isel(x.argmax(["H", "W"]))`` picks the maxima:

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.array([[1, 9], [7, 3]]), "H W")
        >>> {n: int(i) for n, i in x.argmax(["H", "W"]).items()}
        {'H': 0, 'W': 1}
        """
        return self._arg("argmax", name, keepdims)

    def argmin(self, name=None, keepdims: bool = False):
        """Index of the minimum: as ``argmax``.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.array([[3, 1, 2], [0, 5, 4]]), "N C").argmin("C").numpy()
        array([1, 0])
        """
        return self._arg("argmin", name, keepdims)


def _skipping(row, self) -> bool:
    return row.skipna is not None and self.dtype.kind in "fc"


def _method(row):
    """The ``Tensor`` method of a row of ``reductions_table.REDUCTIONS``: a ``Reduce`` node
    for kernel rows, the row's ``build`` for composed ones; ``skipna=True`` on floats uses
    the row named by ``skipna`` (None or False: numpy's rule, NaN propagates)."""
    name = row.name
    if row.is_kernel:
        cast = None if row.input_dtype is None else np.dtype(row.input_dtype)

        def method(self, names=None, keepdims: bool = False, *, skipna=None):
            if skipna and _skipping(row, self):
                return REDUCTIONS[row.skipna].build(self, names, keepdims)
            x = self if cast is None or self.dtype == cast else self.astype(cast)
            return x._reduce(name, names, keepdims)

        params = [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("names", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
            inspect.Parameter("keepdims", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=False),
        ]
    else:
        build = row.build

        def method(self, *args, skipna=None, **kwargs):
            if skipna and _skipping(row, self):
                return REDUCTIONS[row.skipna].build(self, *args, **kwargs)
            return build(self, *args, **kwargs)

        params = list(inspect.signature(build).parameters.values())
        params[0] = params[0].replace(name="self")
    if row.skipna is not None:
        params.append(inspect.Parameter("skipna", inspect.Parameter.KEYWORD_ONLY, default=None))
    method.__signature__ = inspect.Signature(params)
    method.__name__ = name
    method.__qualname__ = f"ReductionMethods.{name}"
    method.__doc__ = row.doc.replace("{f}", f"x.{name}(")
    return method


for _row in REDUCTIONS.values():
    if _row.generated:
        setattr(ReductionMethods, _row.name, _method(_row))
