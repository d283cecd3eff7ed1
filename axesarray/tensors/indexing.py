"""View methods of ``Tensor``: transpose (``T``), isel/indexing, masks, rename, broadcast,
split, flatten, ``reshape`` by names, ``flip``, ``roll``, ``diff``.

Every method returns a view (stride arithmetic, no copy) built with ``strided.remap_view``
through ``expr.remap``, except ``split``/``flatten`` when strides cannot express the result
(then a copy, or an error with ``copy=False``), and ``isel`` with integer lists, boolean
masks or integer tensors, and ``x[mask]`` (a gather: an r-tensor, see ``_gather``; writing
to one writes its source, see ``tensor.index_put``); ``roll`` and ``diff`` are
concatenated / subtracted slices (r-tensors that fuse). A mixin of ``Tensor``;
results are built with ``type(self)``, so this module does not import ``tensor``.
"""

from __future__ import annotations

import math
import operator
from typing import Self

import numpy as np

from ..autograd.rules import in_graph
from ..core.axes import Axes, Axis, as_axes, broadcast_axes, parse_names
from ..core.strided import contiguous
from ..dag import nodes as ex
from ..dag import views as expr_views
from ..dag.reshape import Reshape
from ..errors import AxesError, by_name, fmt_axes, message
from ..storage.layouts import isel_layout
from ..storage.memory import fresh
from .base import TensorBase
from .calls import Gather

__all__ = ["ViewMethods", "align", "resolve_names"]


def resolve_names(axes: Axes, names, op: str) -> list[int]:
    """Positions of ``names`` (a string "H W", a name, an Axis, or a sequence of them)."""
    if names is None:
        return list(range(len(axes)))
    dims = [axes.index(n, op) for n in parse_names(names, op)]
    # An Axis also states a length: check it (Axes.index does when given the Axis).
    given = [names] if isinstance(names, Axis) else [] if isinstance(names, str) else names
    for a in given:
        if isinstance(a, Axis):
            axes.index(a, op)
    return dims


def align(t: ViewMethods, axes: Axes, op: str = "align") -> ex.Node:
    """``t``'s node indexed by ``axes`` (a superset of its axes): transpose + broadcast."""
    if t.axes == axes:
        return t.node
    maps = tuple((axes.index(a.name, op), 0, 1) for a in t.axes)
    return expr_views.remap(t.node, axes.shape, maps)


# (id of the axes, name, start, stop, step) -> (the axes, the view's axes, its maps): an
# ``isel`` of one slice by keyword, remembered (its axes checked by identity). Bounded.
_SLICED: dict = {}


def _sliced_key(t, indexers, kwargs: dict) -> tuple | None:
    """``_SLICED``'s key for ``t.isel(**kwargs)`` of one slice by keyword on a tensor
    without a layout, whose bounds are ints or None (a float bound equals an int as a key,
    but ``slice.indices`` refuses it); else None."""
    if indexers is not None or len(kwargs) != 1 or t._layout is not None:
        return None
    ((name, key),) = kwargs.items()
    if type(key) is not slice:
        return None
    bounds = (key.start, key.stop, key.step)
    if not all(v is None or type(v) is int for v in bounds):
        return None
    return (id(t._axes), name) + bounds


def _is_basic(key) -> bool:
    """A slice or a plain integer (a view); everything else is gathered."""
    if isinstance(key, (TensorBase, list, tuple)):
        return False
    # integers (and whatever isel's integer check then refuses); n-d arrays are gathered
    return not (isinstance(key, np.ndarray) and key.ndim > 0)


def _index_tensor(t, axis: Axis, key):
    """An integer index tensor for ``key`` on ``axis``: an integer tensor as it is; a list,
    a 1-D array or a boolean mask as a new 1-D tensor named like the axis (a mask is read
    now: it decides the length)."""
    if isinstance(key, TensorBase):
        kind = key.dtype.kind
        if kind in "iu":
            return key
        if kind != "b":
            raise TypeError(
                message(
                    "isel",
                    f"the index tensor for axis {axis.name!r} must hold integers or booleans",
                    str(key.dtype),
                    "Convert it: idx.astype('int64')",
                )
            )
        if key.names != (axis.name,) or key.shape != (axis.length,):
            raise AxesError(
                message(
                    "isel",
                    f"a boolean mask for axis {axis.name!r} must have exactly that axis",
                    f"axis {axis}; mask: {fmt_axes(key.axes)}",
                    f"Index with a mask over {axis.name!r} only",
                )
            )
        arr = key.numpy()
    else:
        arr = np.asarray(key)
        if arr.size == 0:
            arr = arr.astype(np.int64)
        if arr.dtype.kind not in "biu":
            raise TypeError(
                message(
                    "isel",
                    f"axis {axis.name!r} takes a slice, an integer, a list of integers, a "
                    "boolean mask or an integer tensor",
                    f"got {arr.dtype} values",
                )
            )
        if arr.ndim != 1:
            raise AxesError(
                message(
                    "isel",
                    "a numpy index array has no axis names",
                    f"shape {arr.shape}",
                    "Wrap it to name its axes: ax.tensor(array, 'K L')",
                )
            )
        if arr.dtype.kind == "b" and arr.shape != (axis.length,):
            raise IndexError(
                message(
                    "isel",
                    f"the boolean mask for axis {axis.name!r} has the wrong length",
                    f"{axis}; mask length {arr.shape[0]}",
                    f"Give {axis.length} booleans",
                )
            )
    arr = np.flatnonzero(arr) if arr.dtype.kind == "b" else np.array(arr, dtype=np.int64)
    Gather._check(arr, axis.length, axis.name)  # a list is checked now, a tensor when read
    device = t.device
    data = arr if device.is_cpu else device.upload(arr)
    return type(t)(
        Axes._trusted((Axis(axis.name, arr.size),)), ex.Leaf(data, contiguous(arr.shape))
    )


def _short(key) -> str:
    """A key for a message: a tensor or an array by its type and axes or shape, never its
    values (a mask can be large)."""
    if isinstance(key, TensorBase):
        return f"a {key.dtype} tensor ({fmt_axes(key.axes)})"
    if isinstance(key, np.ndarray):
        return f"a {key.dtype} array of shape {key.shape}"
    text = repr(key)
    return text if len(text) <= 80 else text[:77] + "..."


def _mask_key(key):
    """``(mask, new axis name)`` for ``x[mask]`` / ``x[mask, "K"]``, else ``(None, None)``."""
    if isinstance(key, TensorBase) and key.dtype.kind == "b":
        return key, None
    if (
        isinstance(key, tuple)
        and len(key) == 2
        and isinstance(key[0], TensorBase)
        and key[0].dtype.kind == "b"
        and isinstance(key[1], str)
    ):
        return key
    return None, None


def _split_parts(axis: Axis, parts) -> Axes:
    """``reshape``'s parts of ``axis``: Axis objects, ``(name, length)`` pairs or names;
    one bare name takes the rest of the length."""
    items = [parts] if isinstance(parts, (str, Axis)) else list(parts)
    known, bare = 1, []
    out: list = []
    for p in items:
        if isinstance(p, Axis):
            out.append(p)
            known *= p.length
        elif isinstance(p, tuple) and len(p) == 2:
            out.append(Axis(p[0], p[1]))
            known *= p[1]
        elif isinstance(p, str):
            bare.append(len(out))
            out.append(p)
        else:
            raise TypeError(message("reshape", "a part is a name, an Axis or (name, length)",
                                    f"got {p!r}"))  # fmt: skip
    if len(bare) > 1:
        raise AxesError(
            message(
                "reshape",
                f"only one part of {axis.name!r} may leave its length out",
                f"{axis}; parts {parts!r}",
                "Give every part but one a length: (name, length) or an Axis",
            )
        )
    if bare:
        if known == 0 or axis.length % known:
            raise AxesError(
                message(
                    "reshape",
                    f"the given lengths do not divide {axis}",
                    f"parts {parts!r}",
                    f"Choose lengths whose product divides {axis.length}",
                )
            )
        out[bare[0]] = Axis(out[bare[0]], axis.length // known)
    return Axes(out)


class ViewMethods:
    """Views of a tensor, by axis name."""

    __slots__ = ()

    def _remapped(self, axes: Axes, maps: tuple, layout=None) -> Self:
        return type(self)(axes, expr_views.remap(self.node, axes.shape, maps), layout)

    def transpose(self, *names) -> Self:
        """Reorder axes by name (a view). ``...`` stands for the other axes in order; no
        names reverse the order, as numpy's ``transpose()`` (``x.T``).

        >>> import axesarray as ax
        >>> x = ax.zeros((ax.Axis("N", 2), ax.Axis("C", 3), ax.Axis("H", 4)))
        >>> x.transpose("H ...").names, x.transpose().names
        (('H', 'N', 'C'), ('H', 'C', 'N'))
        """
        if not names:
            names = (tuple(reversed(self.names)),)
        spec = names[0] if len(names) == 1 and not isinstance(names[0], Axis) else names
        wanted = list(parse_names(spec, "transpose"))
        for item in (spec,) if isinstance(spec, Axis) else () if isinstance(spec, str) else spec:
            if isinstance(item, Axis) and item.name in self.axes:
                self.axes.index(item, "transpose")  # an Axis states a length: check it
        if "..." in wanted:
            listed = {n for n in wanted if n != "..."}
            rest = [n for n in self.names if n not in listed]
            i = wanted.index("...")
            wanted[i : i + 1] = rest
        if sorted(wanted) != sorted(self.names):
            missing = [n for n in self.names if n not in wanted]
            extra = [n for n in wanted if n not in self.names]
            fact = []
            if missing:
                fact.append("missing " + ", ".join(repr(n) for n in missing))
            if extra:
                fact.append("unknown " + ", ".join(repr(n) for n in extra))
            raise AxesError(
                message(
                    "transpose",
                    "the names must be a permutation of the axes: " + "; ".join(fact),
                    f"axes: {fmt_axes(self.axes)}; got {' '.join(wanted)}",
                    "List every axis once, or use '...' for the rest",
                )
            )
        new_axes = Axes._trusted(tuple(self.axes[n] for n in wanted))
        maps = tuple((wanted.index(a.name), 0, 1) for a in self.axes)
        return self._remapped(new_axes, maps, self.layout)

    @property
    def T(self) -> Self:
        """The axes in reverse order (a view), as numpy's ``.T``.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((2, 3)), "N C").T.names
        ('C', 'N')
        """
        return self.transpose()

    @property
    def sel(self):
        """Not built: a tensor has axes, not coordinate labels, so there is no selection by
        label; the ``AttributeError`` names ``isel`` (so ``hasattr(x, "sel")`` is False).

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.zeros((2, 3)), "N C")
        >>> hasattr(x, "sel"), x.isel(C=1).names
        (False, ('N',))
        """
        raise AttributeError(
            message(
                "sel",
                "tensors have axes, not coordinate labels, so there is no label-based "
                "selection",
                None,
                "Select by position with x.isel(C=...) or x[{'C': ...}]; keep labels in "
                "xarray (x.to_xarray(coords=...).sel(...))",
            )
        )

    def reshape(self, spec=None, **kwargs) -> Self:
        """Split and merge axes by name in one call: ``{"C": ("G", "Cg")}`` splits ``C``
        (the parts are ``Axis`` objects, ``(name, length)`` pairs or names; one bare name
        takes the rest of the length, as numpy's -1) and ``{("H", "W"): "S"}`` merges
        ``H`` and ``W`` into ``S``. Each step is ``split`` / ``flatten``: a view when the
        strides allow it, else a copy (lazy for an r-tensor).

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.zeros((2, 6, 4, 5)), "N C H W")
        >>> y = x.reshape({"C": (("G", 2), "Cg"), ("H", "W"): "S"})
        >>> y.axes
        Axes(Axis('N', 2), Axis('G', 2), Axis('Cg', 3), Axis('S', 20))
        """
        if spec is not None and not isinstance(spec, dict) or kwargs and spec is not None:
            raise TypeError(
                message(
                    "reshape",
                    "reshape takes a mapping of axis names, not a shape",
                    f"got {spec!r}; axes: {fmt_axes(self.axes)}",
                    "Split with {'C': ('G', 'Cg')} and merge with {('H', 'W'): 'S'}",
                )
            )
        out = self
        for key, value in dict(spec or {}, **kwargs).items():
            if isinstance(key, str) and not isinstance(value, str):
                d = out.axes.index(key, "reshape")
                out = out.split(key, _split_parts(out.axes[d], value))
            elif isinstance(value, str):
                names = parse_names(key, "reshape")
                out = out.flatten(names, value)
            else:
                raise TypeError(
                    message(
                        "reshape",
                        "each entry splits a name into parts or merges names into one",
                        f"got {key!r}: {value!r}",
                        "Use {'C': ('G', 'Cg')} or {('H', 'W'): 'S'}",
                    )
                )
        return out

    def flip(self, names=None) -> Self:
        """Reverse the order along the named axes (all when None): a view, as ``np.flip``.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.arange(3), "N").flip("N").numpy()
        array([2, 1, 0])
        """
        dims = resolve_names(self.axes, names, "flip")
        return self.isel({self.axes[d].name: slice(None, None, -1) for d in dims})

    def roll(self, shifts: dict | None = None, **kwargs) -> Self:
        """Shift elements along named axes, wrapping around (``np.roll``; xarray's
        ``roll(N=1)``): ``x.roll(N=1)[i] == x[i - 1]``. Two slices joined (fused when read).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.arange(5), "N").roll(N=2).numpy()
        array([3, 4, 0, 1, 2])
        """
        out = self
        for name, shift in dict(shifts or {}, **kwargs).items():
            d = out.axes.index(name, "roll")
            n = out.axes[d].length
            try:
                k = operator.index(shift) % n if n else 0
            except TypeError:
                raise TypeError(
                    message("roll", f"the shift of {name!r} must be an integer",
                            f"got {shift!r}", f"e.g. x.roll({name}=1)")  # fmt: skip
                ) from None
            if k == 0:
                continue
            head, tail = out.isel({name: slice(n - k, None)}), out.isel({name: slice(0, n - k)})
            out = type(self)(out.axes, ex.Concat((head.node, tail.node), d))
        return out

    def diff(self, name, n: int = 1) -> Self:
        """The ``n``-th difference along the named axis, ``x[i + 1] - x[i]`` (``np.diff``;
        booleans give ``!=``); the axis keeps its name, ``n`` shorter. Fused.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.array([1, 4, 9, 16]), "N").diff("N").numpy()
        array([3, 5, 7])
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(message("diff", "n must be a non-negative integer", f"got {n!r}"))
        out = self
        d = self.axes.index(name, "diff")
        name = self.axes[d].name
        for _ in range(n):
            if out.axes[d].length == 0:
                break
            upper, lower = out.isel({name: slice(1, None)}), out.isel({name: slice(None, -1)})
            out = (upper != lower) if out.dtype.kind == "b" else upper - lower
        return out

    def isel(self, indexers: dict | None = None, **kwargs) -> Self:
        """Select by name with slices (any step) or integers (which drop the axis); a view.

        >>> import axesarray as ax
        >>> x = ax.arange(ax.Axis("C", 6))
        >>> x.isel(C=slice(None, None, -2)).numpy()
        array([5, 3, 1])

        An integer list, a 1-D boolean mask or an integer tensor selects a copy (an
        r-tensor). A list or mask keeps the axis name with its new length; an index
        tensor's axes replace the indexed axis (vectorized indexing, as xarray's), and an
        index axis named like another axis of ``x`` reads along it pointwise:

        >>> x.isel(C=[4, 0, 0]).numpy()
        array([4, 0, 0])
        >>> idx = ax.tensor(np.array([[0, 5], [1, 2]]), "K L")
        >>> x.isel(C=idx).names, x.isel(C=idx).numpy().tolist()
        (('K', 'L'), [[0, 5], [1, 2]])
        """
        # one slice by keyword (``x.isel(T=slice(1, None))``, a shifted view built each
        # call): the axes and maps its first build worked out, by the axes' identity
        memo = _sliced_key(self, indexers, kwargs)
        if memo is not None:
            hit = _SLICED.get(memo)
            if hit is not None and hit[0] is self._axes:
                return self._remapped(hit[1], hit[2])
        ind = dict(indexers or {}, **kwargs)
        for name in ind:
            self.axes.index(name, "isel")
        advanced = {n: k for n, k in ind.items() if not _is_basic(k)}
        if advanced:
            basic = {n: k for n, k in ind.items() if n not in advanced}
            return (self.isel(basic) if basic else self)._gather(advanced)
        maps = []
        new_axes = []
        for axis in self.axes:
            key = ind.get(axis.name, slice(None))
            if isinstance(key, slice):
                if key.step == 0:
                    raise AxesError(
                        message(
                            "isel", f"the slice step for axis {axis.name!r} is zero", f"got {key!r}"
                        )
                    )
                start, stop, step = key.indices(axis.length)
                n = len(range(start, stop, step))
                maps.append((len(new_axes), start, step))
                new_axes.append(axis if n == axis.length else Axis._known(axis.name, n))
                continue
            try:
                i = operator.index(key)
            except TypeError:
                raise TypeError(
                    message(
                        "isel",
                        f"axis {axis.name!r} takes a slice or an integer",
                        f"got {key!r}",
                    )
                ) from None
            if not -axis.length <= i < axis.length:
                raise IndexError(
                    message(
                        "isel",
                        f"index {i} is out of range for axis {axis.name!r}",
                        f"{axis}",
                        f"Use -{axis.length} <= index < {axis.length}",
                    )
                )
            maps.append((-1, i % axis.length, 0))
        layout = self.layout
        if layout is not None:
            # Integers drop their axis from the tag; a cut through blocks marks it partial.
            layout = isel_layout(layout, self.axes, ind)
        axes, maps = Axes._trusted(tuple(new_axes)), tuple(maps)
        if memo is not None:
            if len(_SLICED) >= 1024:
                _SLICED.clear()
            _SLICED[memo] = (self._axes, axes, maps)  # keeps the axes: their id stays theirs
        return self._remapped(axes, maps, layout)

    def _gather(self, keys: dict) -> Self:
        """Vectorized indexing: ``keys`` maps axis names to index tensors (or lists, masks).

        The index tensors broadcast together by name; their axes take the place of the
        first indexed axis, except those named like another axis of this tensor (same
        length required), which are read pointwise along it.
        """
        indices = {n: _index_tensor(self, self.axes[n], k) for n, k in keys.items()}
        joint = None
        for t in indices.values():
            joint = t.axes if joint is None else broadcast_axes(joint, t.axes, "isel", "union")
        kept = [a for a in self.axes if a.name not in indices]
        kept_names = {a.name for a in kept}
        for a in joint:
            if a.name in kept_names and a != self.axes[a.name]:
                raise AxesError(
                    message(
                        "isel",
                        f"index axis {a.name!r} has length {a.length}, but the tensor's "
                        f"axis {a.name!r} has length {self.axes[a.name].length}",
                        f"tensor: {fmt_axes(self.axes)}; index: {fmt_axes(joint)}",
                        "Rename the index axis to add a new axis, or match the lengths",
                    )
                )
        first = min(self.axes.index(n) for n in indices)
        before = [a for a in kept if self.axes.index(a.name) < first]
        after = [a for a in kept if self.axes.index(a.name) > first]
        out = as_axes(before + [a for a in joint if a.name not in kept_names] + after, "isel")
        order = list(indices)
        sources = tuple(
            ("index", order.index(a.name)) if a.name in indices else ("out", out.index(a.name))
            for a in self.axes
        )
        index_dims = tuple(tuple(out.index(a.name) for a in indices[n].axes) for n in order)
        fn = Gather(sources, index_dims, out.shape, self.names)
        arg_dims = (tuple(-1 if k == "index" else v for k, v in sources),) + index_dims
        args = (self.node,) + tuple(indices[n].node for n in order)
        return type(self)(out, ex.Call(fn, args, out.shape, self.dtype, "isel", arg_dims))

    def __getitem__(self, key) -> Self:
        if key is Ellipsis:
            return self
        if isinstance(key, dict):
            return self.isel(key)
        mask, new_name = _mask_key(key)
        if mask is not None:
            return self.masked(mask, new_name)
        raise AxesError(
            message(
                "getitem",
                "positional indexing is not supported",
                f"got {_short(key)}; axes: {fmt_axes(self.axes)}",
                by_name(self.names, key),
            )
        )

    def masked(self, mask, new_axis: str | None = None) -> Self:
        """The elements where the boolean tensor ``mask`` (over some of this tensor's
        axes) is true: the mask's axes become one new axis ``new_axis`` (default: the
        mask's names joined by ``_``, or its one name) in place of the first of them,
        row-major in this tensor's order, as numpy's ``x[mask]``. ``x[mask]`` and
        ``x[mask, "K"]`` are this; ``x[mask] = v`` writes in place. The mask is read now
        (it sets the length); the result is a copy (a gather).

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.arange(6.0).reshape(2, 3), "N C")
        >>> y = x[x > 2.5, "K"]
        >>> y.axes, y.numpy()
        (Axes(Axis('K', 3)), array([3., 4., 5.]))
        """
        if not isinstance(mask, TensorBase) or mask.dtype.kind != "b":
            raise TypeError(
                message(
                    "getitem",
                    "a mask is a boolean tensor",
                    f"got {_short(mask)}",
                    "Compare to make one: x[x > 0]",
                )
            )
        lacking = [a for a in mask.axes if a.name not in self.axes]
        if lacking or any(self.axes[a.name] != a for a in mask.axes):
            raise AxesError(
                message(
                    "getitem",
                    "the mask's axes must be axes of the tensor, with the same lengths",
                    f"tensor: {fmt_axes(self.axes)}; mask: {fmt_axes(mask.axes)}",
                    "Build the mask from this tensor's axes, or rename the mask's",
                )
            )
        names = [n for n in self.names if n in mask.axes]
        if not names:
            raise AxesError(
                message(
                    "getitem",
                    "a mask without axes selects no axis",
                    f"tensor: {fmt_axes(self.axes)}",
                    "Use x.where(cond, other) for a condition without axes",
                )
            )
        if new_axis is None:
            new_axis = "_".join(names)
        where = np.nonzero(mask.transpose(names).numpy())
        new = Axes._trusted((Axis(new_axis, len(where[0])),))
        device = self.device
        keys = {}
        for n, pos in zip(names, where, strict=True):
            arr = np.ascontiguousarray(pos, dtype=np.int64)
            data = arr if device.is_cpu else device.upload(arr)
            keys[n] = type(self)(new, ex.Leaf(data, contiguous(arr.shape)))
        return self._gather(keys)

    def rename(self, mapping: dict | None = None, **kwargs) -> Self:
        """Rename axes (a view: same data, new names).

        >>> import axesarray as ax
        >>> ax.zeros((ax.Axis("C", 2),)).rename(C="K").names
        ('K',)
        """
        ren = dict(mapping or {}, **kwargs)
        for old in ren:
            self.axes.index(old, "rename")
        new = as_axes([Axis(ren.get(a.name, a.name), a.length) for a in self.axes], "rename")
        layout = None if self.layout is None else self.layout.renamed(ren)
        return type(self)(new, self.node, layout)

    def broadcast_to(self, axes) -> Self:
        """View with the given axes (a superset of this tensor's); new axes have stride 0.

        The result is read-only when it is an l-tensor, as in numpy.

        >>> import axesarray as ax, numpy as np
        >>> y = ax.tensor(np.arange(3.0), "C").broadcast_to((ax.Axis("N", 2), ax.Axis("C", 3)))
        >>> y.axes, y.strides
        (Axes(Axis('N', 2), Axis('C', 3)), (0, 8))
        """
        target = as_axes(axes.axes if isinstance(axes, TensorBase) else axes, "broadcast_to")
        names = set(target.names)
        missing = [a for a in self.axes if a.name not in names]
        if missing:
            raise AxesError(
                message(
                    "broadcast_to",
                    "the target lacks axes of the tensor: "
                    + ", ".join(repr(a.name) for a in missing),
                    f"tensor: {fmt_axes(self.axes)}; target: {fmt_axes(target)}",
                    "Include every axis of the tensor in the target",
                )
            )
        broadcast_axes(self.axes, target, op="broadcast_to")  # length check
        node = align(self, target, "broadcast_to")
        if type(node) is ex.Leaf and target.size > self.size:
            node = ex.derived_leaf(node, node.view, ("same",), writeable=False)
        return type(self)(target, node)

    def expand_dims(self, axes, position: int = 0) -> Self:
        """Insert new axes at ``position``: a name adds a length-1 axis, an Axis broadcasts.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.arange(3.0), "C").expand_dims(["N", ax.Axis("K", 2)], 1).axes
        Axes(Axis('C', 3), Axis('N', 1), Axis('K', 2))
        """
        items = [axes] if isinstance(axes, (str, Axis)) else list(axes)
        new = [a if isinstance(a, Axis) else Axis(a, 1) for a in items]
        if not -self.ndim - 1 <= position <= self.ndim:
            raise AxesError(
                message("expand_dims", f"position {position} is out of range", f"rank {self.ndim}")
            )
        position %= self.ndim + 1
        target = as_axes(
            tuple(self.axes)[:position] + tuple(new) + tuple(self.axes)[position:], "expand_dims"
        )
        return self.broadcast_to(target)

    def squeeze(self, names=None) -> Self:
        """Drop length-1 axes (all of them, or the named ones); a view.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((1, 3, 1)), "N C W").squeeze("W").names
        ('N', 'C')
        """
        if names is None:
            dims = [d for d, a in enumerate(self.axes) if a.length == 1]
        else:
            dims = resolve_names(self.axes, names, "squeeze")
            bad = [self.axes[d] for d in dims if self.axes[d].length != 1]
            if bad:
                raise AxesError(
                    message(
                        "squeeze",
                        "only axes of length 1 can be squeezed",
                        fmt_axes(bad),
                        "Select one index with isel instead",
                    )
                )
        return self.isel({self.axes[d].name: 0 for d in dims})

    def split(self, name, axes, copy: bool | None = None) -> Self:
        """Unflatten one axis into several whose lengths multiply to its length (a view).

        >>> import axesarray as ax
        >>> x = ax.arange(ax.Axis("C", 6))
        >>> x.split("C", (ax.Axis("Co", 2), ax.Axis("ci", 3))).names
        ('Co', 'ci')
        """
        d = self.axes.index(name, "split")
        new = as_axes(axes, "split")
        old = self.axes[d]
        if new.size != old.length:
            raise AxesError(
                message(
                    "split",
                    f"the new lengths do not multiply out to {old}",
                    f"{fmt_axes(new)}: {'*'.join(str(n) for n in new.shape)}={new.size}",
                    f"Choose lengths whose product is {old.length}",
                )
            )
        target = as_axes(tuple(self.axes)[:d] + tuple(new) + tuple(self.axes)[d + 1 :], "split")

        return self._reshaped(target, ("split", d, new.shape), copy, "split", (d,))

    def flatten(self, names, new_name: str, copy: bool | None = None) -> Self:
        """Merge axes (major to minor, in the order given) into one axis named ``new_name``.

        A view when the strides allow it, a copy otherwise (for an r-tensor or a graph
        tensor, a lazy reshape done when it is evaluated); ``copy=False`` raises instead
        of copying and ``copy=True`` always copies. The new axis takes the place of the
        first merged axis.

        >>> import axesarray as ax
        >>> x = ax.zeros((ax.Axis("N", 2), ax.Axis("H", 3), ax.Axis("W", 4)))
        >>> x.flatten(("H", "W"), "S").axes
        Axes(Axis('N', 2), Axis('S', 12))
        """
        dims = resolve_names(self.axes, names, "flatten")
        if not dims:
            raise AxesError(
                message(
                    "flatten",
                    "no axes to merge",
                    f"axes: {fmt_axes(self.axes)}",
                    "Name at least one axis",
                )
            )
        pos = min(dims)
        rest = [a for d, a in enumerate(self.axes) if d not in dims]
        merged = Axis(new_name, math.prod(self.axes[d].length for d in dims))
        rest.insert(pos, merged)
        target = as_axes(rest, "flatten")

        return self._reshaped(target, ("merge", tuple(dims), pos), copy, "flatten", tuple(dims))

    def _reshaped(self, target: Axes, step: tuple, copy, op: str, dims) -> Self:
        """Reshape every leaf by ``step`` (see ``expr_views.transform_views``); copy when it
        cannot be a view."""
        node = None if copy else expr_views.transform_views(self.node, target.shape, step)
        if node is not None:
            return type(self)(target, node)
        if copy is None and (type(self.node) is not ex.Leaf or in_graph(self.node)):
            # An r-tensor (or a declared graph tensor: placeholder, variable...) stays
            # lazy: an eager copy would cut it off from later values and from autograd.
            return type(self)(target, Reshape(self.node, step))
        if copy is False:
            involved = fmt_axes(self.axes[d] for d in dims)
            raise AxesError(
                message(
                    op,
                    "the result cannot be a view of this memory",
                    f"axes {involved}; strides {self.strides}",
                    "Pass copy=True (or leave copy unset) to allow a copy",
                )
            )
        # Copy with the reshaped dims adjacent and in the requested order (``flatten`` may
        # merge them in any order): then the reshape of the copy is a view.
        rest = [d for d in range(self.ndim) if d not in dims]
        pos = min(dims)
        order = tuple(rest[:pos]) + tuple(dims) + tuple(rest[pos:])
        out = type(self)(self.axes, ex.Leaf(*fresh(self.shape, self.dtype, order)))
        out[...] = self
        return type(self)(target, expr_views.transform_views(out.node, target.shape, step))
