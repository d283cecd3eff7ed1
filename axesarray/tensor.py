"""The public ``Tensor``: names resolved to positions, views, operators, reductions.

Names live here and above; everything below sees positions. A Tensor is ``(axes, node)``:
an l-tensor when its node is a ``Leaf`` (a strided view of storage), an r-tensor (a lazy
expression) otherwise. Imports ``axes``, ``dtypes``, ``expr``, ``engine``, ``strided``.
"""

from __future__ import annotations

import math
import operator

import attrs
import numpy as np

from . import engine
from . import expr as ex
from .axes import Axes, Axis, as_axes, broadcast_axes, parse_names
from .dtypes import as_dtype, can_assign, check_weak_scalar, is_weak
from .errors import AxesError, fmt_axes, message
from .storage import fresh
from .strided import merge_dims, split_dim

__all__ = ["Tensor", "TensorDescription", "assign", "operand_node", "align"]


@attrs.frozen
class TensorDescription:
    """What is known about a tensor without reading it (Nervana graph's description).

    ``strides`` and ``offset`` are in bytes (numpy's convention) for l-tensors and None for
    r-tensors; a blocked axis has stride None. ``allocated`` counts the storage's elements,
    padding included.
    """

    dtype: np.dtype
    rank: int
    axes: Axes
    read_only: bool
    strides: tuple | None
    offset: int | None
    allocated: int | None
    layout: object = None
    device: str = "cpu"


def _resolve_names(axes: Axes, names, op: str) -> list[int]:
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


def operand_node(value, axes: Axes, op: str):
    """A Node (broadcast to ``axes``) or a weak Python scalar for an operand."""
    if isinstance(value, Tensor):
        return align(value, axes, op)
    if is_weak(value):
        return value
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        dt = as_dtype(value.dtype, op)
        return ex.Const(value[()] if isinstance(value, np.ndarray) else value, dt, axes.shape)
    if isinstance(value, np.ndarray):
        raise AxesError(
            message(
                op,
                "a numpy array has no axis names",
                f"shape {value.shape}",
                "Wrap it first: ax.tensor(array, 'N C ...')",
            )
        )
    raise TypeError(message(op, "unsupported operand type", type(value).__name__))


def align(t: Tensor, axes: Axes, op: str = "align") -> ex.Node:
    """``t``'s node indexed by ``axes`` (a superset of its axes): transpose + broadcast."""
    if t._axes == axes:
        return t._node
    maps = tuple((axes.index(a.name, op), 0, 1) for a in t._axes)
    return ex.remap(t._node, axes.shape, maps)


_NO_AXES = Axes()


def _preferred_layout(operands):
    """The layout of the operand with the most elements among those that have one."""
    best = None
    for v in operands:
        if isinstance(v, Tensor) and v._layout is not None:
            if best is None or v.size > best.size:
                best = v
    return None if best is None else best._layout


_WEAK_TYPES = (int, float, bool)


def _elementwise_fast(op: str, operands: tuple, name: str) -> Tensor | None:
    """The common cases without layouts: one tensor, two tensors with equal axes, or a
    tensor and a Python scalar. None sends the call to the general path."""
    a = operands[0]
    if len(operands) == 1:
        if type(a) is Tensor and a._layout is None:
            return Tensor(a._axes, ex.map_op(op, (a._node,), a._node.shape, name))
        return None
    b = operands[1]
    if type(a) is Tensor:
        if a._layout is not None:
            return None
        if type(b) is Tensor:
            if b._layout is None and (a._axes is b._axes or a._axes == b._axes):
                return Tensor(a._axes, ex.map_op(op, (a._node, b._node), a._node.shape, name))
            return None
        if type(b) in _WEAK_TYPES:
            return Tensor(a._axes, ex.map_op(op, (a._node, b), a._node.shape, name))
        return None
    if type(b) is Tensor and b._layout is None and type(a) in _WEAK_TYPES:
        return Tensor(b._axes, ex.map_op(op, (a, b._node), b._node.shape, name))
    return None


def elementwise(op: str, *operands, name: str | None = None) -> Tensor:
    """Apply an ``ops.OPS`` op to tensors and scalars, broadcasting by name.

    The result remembers the layout of its biggest laid-out operand: ``eval()`` allocates
    in that layout (DESIGN §4: the output layout follows the dominant input).
    """
    name = name or op
    if len(operands) <= 2:
        fast = _elementwise_fast(op, operands, name)
        if fast is not None:
            return fast
    axes = None
    shape = None
    laid_out = False
    for v in operands:  # the broadcast axes, left to right (fast when they are all equal)
        if isinstance(v, Tensor):
            laid_out = laid_out or v._layout is not None
            if axes is None:
                axes, shape = v._axes, v._node.shape
            elif v._axes is not axes and v._axes != axes:
                axes, shape = broadcast_axes(axes, v._axes, op=name), None
    if axes is None:
        axes = _NO_AXES
    if shape is None:
        shape = axes.shape
    nodes = tuple(
        (v._node if v._axes is axes else align(v, axes, name))
        if isinstance(v, Tensor)
        else operand_node(v, axes, name)
        for v in operands
    )
    layout = _preferred_layout(operands) if laid_out else None
    return Tensor(axes, ex.map_op(op, nodes, shape, name), layout)


class Tensor:
    """A named-axis tensor: an l-tensor (strided view of storage) or a lazy r-tensor.

    Build one with ``ax.tensor``, ``ax.zeros`` and friends; arithmetic gives r-tensors.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.arange(6.0).reshape(2, 3), "N C")
    >>> x.axes
    Axes(Axis('N', 2), Axis('C', 3))
    >>> (x + 1).sum("C").numpy()
    array([ 6., 15.])
    """

    __slots__ = ("_axes", "_node", "_layout", "__weakref__")
    __hash__ = None  # type: ignore[assignment]  # == is elementwise

    def __init__(self, axes: Axes, node: ex.Node, layout=None):
        self._axes = axes
        self._node = node
        self._layout = layout

    # --- description -----------------------------------------------------------------------

    @property
    def axes(self) -> Axes:
        return self._axes

    @property
    def names(self) -> tuple[str, ...]:
        return self._axes.names

    @property
    def shape(self) -> tuple[int, ...]:
        return self._node.shape

    @property
    def ndim(self) -> int:
        return len(self._axes)

    rank = ndim

    @property
    def size(self) -> int:
        return math.prod(self._node.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._node.dtype

    @property
    def itemsize(self) -> int:
        return self._node.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def is_lvalue(self) -> bool:
        """True for an l-tensor (has storage, can be assigned to), False for an r-tensor."""
        return isinstance(self._node, ex.Leaf)

    @property
    def strides(self) -> tuple | None:
        """Byte strides per axis (numpy's convention); None for an r-tensor.

        A blocked axis (the C of NCHWx) has no single stride and reports None.
        """
        node = self._node
        if not isinstance(node, ex.Leaf):
            return None
        size = node.dtype.itemsize
        blocks = node.view.blocks or (None,) * node.ndim
        return tuple(
            s * size if b is None else None for s, b in zip(node.view.strides, blocks, strict=True)
        )

    @property
    def layout(self):
        """The layout tag (see ``ax.Layout``), or None for plain strided tensors."""
        return self._layout

    @property
    def device(self) -> str:
        from .storage import device_of

        node = self._node
        if isinstance(node, ex.Leaf):
            return device_of(node.data)
        for n in ex.walk(node):
            if isinstance(n, ex.Leaf):
                return device_of(n.data)
        return "cpu"

    @property
    def description(self) -> TensorDescription:
        node = self._node
        lvalue = isinstance(node, ex.Leaf)
        return TensorDescription(
            dtype=self.dtype,
            rank=self.ndim,
            axes=self._axes,
            read_only=not (lvalue and node.writeable),
            strides=self.strides,
            offset=node.view.offset * node.dtype.itemsize if lvalue else None,
            allocated=node.data.size if lvalue else None,
            layout=self._layout,
            device=self.device,
        )

    # --- views -----------------------------------------------------------------------------

    def _remapped(self, axes: Axes, maps: tuple, layout=None) -> Tensor:
        return Tensor(axes, ex.remap(self._node, axes.shape, maps), layout)

    def transpose(self, *names) -> Tensor:
        """Reorder axes by name (a view). ``...`` stands for the other axes in order.

        >>> import axesarray as ax
        >>> x = ax.zeros((ax.Axis("N", 2), ax.Axis("C", 3), ax.Axis("H", 4)))
        >>> x.transpose("H ...").names
        ('H', 'N', 'C')
        """
        spec = names[0] if len(names) == 1 and not isinstance(names[0], Axis) else names
        wanted = list(parse_names(spec, "transpose"))
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
                    f"axes: {fmt_axes(self._axes)}; got {' '.join(wanted)}",
                    "List every axis once, or use '...' for the rest",
                )
            )
        new_axes = Axes._trusted(tuple(self._axes[n] for n in wanted))
        maps = tuple((wanted.index(a.name), 0, 1) for a in self._axes)
        return self._remapped(new_axes, maps, self._layout)

    def isel(self, indexers: dict | None = None, **kwargs) -> Tensor:
        """Select by name with slices (any step) or integers (which drop the axis); a view.

        >>> import axesarray as ax
        >>> x = ax.arange(ax.Axis("C", 6))
        >>> x.isel(C=slice(None, None, -2)).numpy()
        array([5, 3, 1])
        """
        ind = dict(indexers or {}, **kwargs)
        for name in ind:
            self._axes.index(name, "isel")
        maps = []
        new_axes = []
        for axis in self._axes:
            key = ind.get(axis.name, slice(None))
            if isinstance(key, slice):
                if key.step == 0:
                    raise AxesError(
                        message("isel", f"the slice step for axis {axis.name!r} is zero", f"got {key!r}")
                    )
                start, stop, step = key.indices(axis.length)
                n = len(range(start, stop, step))
                maps.append((len(new_axes), start, step))
                new_axes.append(Axis(axis.name, n))
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
        layout = self._layout
        if layout is not None:
            from .layouts import isel_layout

            # Integers drop their axis from the tag; a cut through blocks marks it partial.
            layout = isel_layout(layout, self._axes, ind)
        return self._remapped(Axes._trusted(tuple(new_axes)), tuple(maps), layout)

    def __getitem__(self, key) -> Tensor:
        if key is Ellipsis:
            return self
        if isinstance(key, dict):
            return self.isel(key)
        raise AxesError(
            message(
                "getitem",
                "positional indexing is not supported",
                f"got {key!r}; axes: {fmt_axes(self._axes)}",
                "Index by name: x[{'C': slice(0, 4), 'H': 3}] or x.isel(C=slice(0, 4))",
            )
        )

    def __setitem__(self, key, value) -> None:
        assign(self[key], value)

    def rename(self, mapping: dict | None = None, **kwargs) -> Tensor:
        """Rename axes (a view: same data, new names).

        >>> import axesarray as ax
        >>> ax.zeros((ax.Axis("C", 2),)).rename(C="K").names
        ('K',)
        """
        ren = dict(mapping or {}, **kwargs)
        for old in ren:
            self._axes.index(old, "rename")
        new = as_axes([Axis(ren.get(a.name, a.name), a.length) for a in self._axes], "rename")
        layout = None if self._layout is None else self._layout.renamed(ren)
        return Tensor(new, self._node, layout)

    def broadcast_to(self, axes) -> Tensor:
        """View with the given axes (a superset of this tensor's); new axes have stride 0.

        The result is read-only when it is an l-tensor, as in numpy.
        """
        target = as_axes(axes.axes if isinstance(axes, Tensor) else axes, "broadcast_to")
        names = set(target.names)
        missing = [a for a in self._axes if a.name not in names]
        if missing:
            raise AxesError(
                message(
                    "broadcast_to",
                    "the target lacks axes of the tensor: "
                    + ", ".join(repr(a.name) for a in missing),
                    f"tensor: {fmt_axes(self._axes)}; target: {fmt_axes(target)}",
                    "Include every axis of the tensor in the target",
                )
            )
        broadcast_axes(self._axes, target, op="broadcast_to")  # length check
        node = align(self, target, "broadcast_to")
        if isinstance(node, ex.Leaf) and target.size > self.size:
            node = ex.Leaf(node.data, node.view, writeable=False)
        return Tensor(target, node)

    def expand_dims(self, axes, position: int = 0) -> Tensor:
        """Insert new axes at ``position``: a name adds a length-1 axis, an Axis broadcasts."""
        items = [axes] if isinstance(axes, (str, Axis)) else list(axes)
        new = [a if isinstance(a, Axis) else Axis(a, 1) for a in items]
        if not -self.ndim - 1 <= position <= self.ndim:
            raise AxesError(
                message("expand_dims", f"position {position} is out of range", f"rank {self.ndim}")
            )
        position %= self.ndim + 1
        target = as_axes(
            tuple(self._axes)[:position] + tuple(new) + tuple(self._axes)[position:], "expand_dims"
        )
        return self.broadcast_to(target)

    def squeeze(self, names=None) -> Tensor:
        """Drop length-1 axes (all of them, or the named ones); a view."""
        if names is None:
            dims = [d for d, a in enumerate(self._axes) if a.length == 1]
        else:
            dims = _resolve_names(self._axes, names, "squeeze")
            bad = [self._axes[d] for d in dims if self._axes[d].length != 1]
            if bad:
                raise AxesError(
                    message(
                        "squeeze",
                        "only axes of length 1 can be squeezed",
                        fmt_axes(bad),
                        "Select one index with isel instead",
                    )
                )
        return self.isel({self._axes[d].name: 0 for d in dims})

    def split(self, name, axes, copy: bool | None = None) -> Tensor:
        """Unflatten one axis into several whose lengths multiply to its length (a view).

        >>> import axesarray as ax
        >>> x = ax.arange(ax.Axis("C", 6))
        >>> x.split("C", (ax.Axis("Co", 2), ax.Axis("ci", 3))).names
        ('Co', 'ci')
        """
        d = self._axes.index(name, "split")
        new = as_axes(axes, "split")
        old = self._axes[d]
        if new.size != old.length:
            raise AxesError(
                message(
                    "split",
                    f"the new lengths do not multiply out to {old}",
                    f"{fmt_axes(new)}: {'*'.join(str(n) for n in new.shape)}={new.size}",
                    f"Choose lengths whose product is {old.length}",
                )
            )
        target = as_axes(tuple(self._axes)[:d] + tuple(new) + tuple(self._axes)[d + 1 :], "split")

        def view_fn(v):
            return split_dim(v, d, new.shape)

        return self._reshaped(target, view_fn, copy, "split", (d,))

    def flatten(self, names, new_name: str, copy: bool | None = None) -> Tensor:
        """Merge axes (major to minor, in the order given) into one axis named ``new_name``.

        A view when the strides allow it, a copy otherwise; ``copy=False`` raises instead
        of copying and ``copy=True`` always copies. The new axis takes the place of the
        first merged axis.

        >>> import axesarray as ax
        >>> x = ax.zeros((ax.Axis("N", 2), ax.Axis("H", 3), ax.Axis("W", 4)))
        >>> x.flatten(("H", "W"), "S").axes
        Axes(Axis('N', 2), Axis('S', 12))
        """
        dims = _resolve_names(self._axes, names, "flatten")
        if not dims:
            raise AxesError(
                message("flatten", "no axes to merge", f"axes: {fmt_axes(self._axes)}", "Name at least one axis")
            )
        pos = min(dims)
        rest = [a for d, a in enumerate(self._axes) if d not in dims]
        merged = Axis(new_name, math.prod(self._axes[d].length for d in dims))
        rest.insert(pos, merged)
        target = as_axes(rest, "flatten")

        def view_fn(v):
            return merge_dims(v, tuple(dims), pos)

        return self._reshaped(target, view_fn, copy, "flatten", tuple(dims))

    def _reshaped(self, target: Axes, view_fn, copy, op: str, dims) -> Tensor:
        """Apply a reshaping view function to every leaf; copy when it cannot be a view."""
        node = None if copy else ex.transform_views(self._node, target.shape, view_fn)
        if node is not None:
            return Tensor(target, node)
        if copy is False:
            involved = fmt_axes(self._axes[d] for d in dims)
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
        out = Tensor(self._axes, ex.Leaf(*fresh(self.shape, self.dtype, order)))
        assign(out, self)
        return Tensor(target, ex.transform_views(out._node, target.shape, view_fn))

    # --- evaluation ------------------------------------------------------------------------

    def eval(self) -> Tensor:
        """Compute an r-tensor into a new l-tensor (an l-tensor returns itself).

        The result is laid out like the dominant input: its layout when it has one, else
        its memory order.
        """
        if isinstance(self._node, ex.Leaf):
            return self
        return self.copy()

    def copy(self) -> Tensor:
        """A new l-tensor holding the values, in this tensor's layout or memory order."""
        if self._layout is not None:
            from .layouts import empty_like_layout

            out = empty_like_layout(self._axes, self.dtype, self._layout, self.device)
            assign(out, self)
            return out
        return Tensor(self._axes, engine.evaluate(self._node))

    # --- layouts and devices (implemented in layouts.py / devices.py) ------------------------

    def to_layout(self, layout, **roles) -> Tensor:
        """A copy stored in ``layout`` ("NHWC", "NCHW32", ``ax.Layout(...)``); see layouts."""
        from .layouts import to_layout

        return to_layout(self, layout, **roles)

    @property
    def physical(self) -> np.ndarray:
        """The physical array of a laid-out l-tensor, e.g. shape (N, Cb, H, W, 4) for NCHW4."""
        from .layouts import physical

        return physical(self)

    def to(self, device: str) -> Tensor:
        """A copy on ``device`` ("cpu" or "cuda"); the same tensor if it is there already."""
        from .devices import to_device

        return to_device(self, device)

    def numpy(self) -> np.ndarray:
        """The values as a numpy array in axis order: a view for l-tensors when possible."""
        return engine.to_numpy(self._node)

    def __array__(self, dtype=None, copy=None):
        if copy is False and not isinstance(self._node, ex.Leaf):
            raise ValueError(
                message("__array__", "an r-tensor must be computed", None, "Allow a copy")
            )
        arr = self.numpy()
        if dtype is not None:
            arr = arr.astype(dtype, copy=False)
        return arr.copy() if copy else arr

    def item(self):
        if self.size != 1:
            raise AxesError(
                message(
                    "item",
                    "only a tensor of one element converts to a Python scalar",
                    fmt_axes(self._axes),
                    "Reduce or select first",
                )
            )
        return self.numpy().reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iub":
            raise TypeError(message("__index__", "only integer tensors are indices", str(self.dtype)))
        return int(self.item())

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(
                message(
                    "bool",
                    "the truth value of a tensor with several elements is ambiguous",
                    fmt_axes(self._axes),
                    "Use (x).any() or (x).all()",
                )
            )
        return bool(self.item())

    def __iter__(self):
        raise TypeError(
            message("iter", "tensors are not iterable by position", None, "Select by name: x.isel(C=i)")
        )

    def __repr__(self) -> str:
        from ._repr import tensor_repr

        return tensor_repr(self)

    def _repr_html_(self) -> str:
        from ._repr import tensor_html

        return tensor_html(self)

    # --- dtype -----------------------------------------------------------------------------

    def astype(self, dtype) -> Tensor:
        """Convert with numpy's ``astype`` semantics (unsafe casting); an r-tensor."""
        dt = as_dtype(dtype, "astype")
        node = self._node
        if node.dtype == dt:
            if isinstance(node, ex.Leaf):
                node = ex.Leaf(node.data, node.view, writeable=False)
            return Tensor(self._axes, node, self._layout)
        return Tensor(self._axes, ex.Cast(node, dt), self._layout)

    # --- reductions ------------------------------------------------------------------------

    def _reduce(self, op: str, names) -> Tensor:
        dims = _resolve_names(self._axes, names, op)
        if op in ("max", "min", "argmax", "argmin"):
            empty = [self._axes[d] for d in dims if self._axes[d].length == 0]
            if empty:
                raise AxesError(
                    message(
                        op,
                        "cannot reduce over an empty axis, which has no identity",
                        fmt_axes(empty),
                        "Use sum, or guard the empty case",
                    )
                )
        node = ex.reduce(op, self._node, tuple(dims))
        axes = Axes._trusted(tuple(a for d, a in enumerate(self._axes) if d not in dims))
        layout = self._layout
        if layout is not None:  # the result is laid out like the input, minus reduced axes
            from .layouts import isel_layout

            layout = isel_layout(layout, self._axes, {self._axes[d].name: 0 for d in dims})
        return Tensor(axes, node, layout)

    def sum(self, names=None) -> Tensor:
        """Sum over the named axes (all when None). ``x.sum("C")``, ``x.sum(("H", "W"))``."""
        return self._reduce("sum", names)

    def prod(self, names=None) -> Tensor:
        return self._reduce("prod", names)

    def max(self, names=None) -> Tensor:
        return self._reduce("max", names)

    def min(self, names=None) -> Tensor:
        return self._reduce("min", names)

    def any(self, names=None) -> Tensor:
        return self.astype(bool)._reduce("any", names) if self.dtype != bool else self._reduce(
            "any", names
        )

    def all(self, names=None) -> Tensor:
        return self.astype(bool)._reduce("all", names) if self.dtype != bool else self._reduce(
            "all", names
        )

    def mean(self, names=None) -> Tensor:
        """Arithmetic mean over the named axes, with numpy's result dtype."""
        if self.dtype == np.float16:
            # numpy sums float16 in float32 for a mean (a float16 sum overflows at 65504).
            return self.astype("float32").mean(names).astype("float16")
        dims = _resolve_names(self._axes, names, "mean")
        count = math.prod(self._axes[d].length for d in dims)
        total = self._reduce("sum", names)
        if count == 0:
            return elementwise("truediv", total, float("nan") if total.dtype.kind == "f" else 0.0)
        return total / count

    def _arg(self, op: str, name) -> Tensor:
        if name is None:
            if self.ndim != 1:
                raise AxesError(
                    message(op, "name the axis to search along", fmt_axes(self._axes))
                )
            name = self.names[0]
        names = parse_names(name, op)
        if len(names) != 1:
            raise AxesError(message(op, "takes exactly one axis", f"got {' '.join(names)}"))
        return self._reduce(op, names)

    def argmax(self, name=None) -> Tensor:
        """Index of the maximum along one named axis (int64)."""
        return self._arg("argmax", name)

    def argmin(self, name=None) -> Tensor:
        return self._arg("argmin", name)

    # --- elementwise methods ---------------------------------------------------------------

    def round(self, decimals: int = 0) -> Tensor:
        """Round half to even, as ``np.round``; integers are returned unchanged."""
        if self.dtype.kind in "iub":
            return self.astype(self.dtype)
        if decimals == 0:
            return elementwise("rint", self, name="round")
        scale = 10.0**decimals
        return elementwise("rint", self * scale, name="round") / scale

    def clip(self, lo=None, hi=None) -> Tensor:
        from .functions import clip

        return clip(self, lo, hi)

    # --- operators -------------------------------------------------------------------------

    def _binary(self, other, op: str, reflected: bool = False) -> Tensor:
        if not isinstance(other, Tensor) and not (
            is_weak(other) or isinstance(other, (np.generic, np.ndarray))
        ):
            return NotImplemented
        pair = (other, self) if reflected else (self, other)
        return elementwise(op, *pair)

    def __add__(self, o):
        return self._binary(o, "add")

    def __radd__(self, o):
        return self._binary(o, "add", True)

    def __sub__(self, o):
        return self._binary(o, "sub")

    def __rsub__(self, o):
        return self._binary(o, "sub", True)

    def __mul__(self, o):
        return self._binary(o, "mul")

    def __rmul__(self, o):
        return self._binary(o, "mul", True)

    def __truediv__(self, o):
        return self._binary(o, "truediv")

    def __rtruediv__(self, o):
        return self._binary(o, "truediv", True)

    def __floordiv__(self, o):
        return self._binary(o, "floordiv")

    def __rfloordiv__(self, o):
        return self._binary(o, "floordiv", True)

    def __mod__(self, o):
        return self._binary(o, "mod")

    def __rmod__(self, o):
        return self._binary(o, "mod", True)

    def __pow__(self, o):
        return self._binary(o, "pow")

    def __rpow__(self, o):
        return self._binary(o, "pow", True)

    def __and__(self, o):
        return self._binary(o, "and")

    def __rand__(self, o):
        return self._binary(o, "and", True)

    def __or__(self, o):
        return self._binary(o, "or")

    def __ror__(self, o):
        return self._binary(o, "or", True)

    def __xor__(self, o):
        return self._binary(o, "xor")

    def __rxor__(self, o):
        return self._binary(o, "xor", True)

    def __eq__(self, o):  # type: ignore[override]
        return self._binary(o, "eq")

    def __ne__(self, o):  # type: ignore[override]
        return self._binary(o, "ne")

    def __lt__(self, o):
        return self._binary(o, "lt")

    def __le__(self, o):
        return self._binary(o, "le")

    def __gt__(self, o):
        return self._binary(o, "gt")

    def __ge__(self, o):
        return self._binary(o, "ge")

    def __neg__(self):
        return elementwise("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return elementwise("abs", self)

    def __invert__(self):
        return elementwise("invert", self)

    def _inplace(self, other, op: str):
        if not self.is_lvalue:
            return NotImplemented  # r-tensor: Python falls back to x = x (op) other
        assign(self, elementwise(op, self, other))
        return self

    def __iadd__(self, o):
        return self._inplace(o, "add")

    def __isub__(self, o):
        return self._inplace(o, "sub")

    def __imul__(self, o):
        return self._inplace(o, "mul")

    def __itruediv__(self, o):
        return self._inplace(o, "truediv")

    def __ifloordiv__(self, o):
        return self._inplace(o, "floordiv")

    def __imod__(self, o):
        return self._inplace(o, "mod")

    def __ipow__(self, o):
        return self._inplace(o, "pow")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from .functions import UFUNC_OPS

        op = UFUNC_OPS.get(ufunc.__name__)
        if op is None or method != "__call__" or kwargs:
            return NotImplemented
        if any(isinstance(v, np.ndarray) and v.ndim > 0 for v in inputs):
            return NotImplemented
        return elementwise(op, *inputs, name=ufunc.__name__)


def assign(out: Tensor, value) -> None:
    """Write ``value`` into the l-tensor ``out``: ``ax.assign(out, e)`` is ``out[...] = e``.

    ``value``'s axes must be a subset of ``out``'s (missing ones broadcast), with the same
    lengths; its dtype must cast to ``out``'s under numpy's ``same_kind`` rule. Every check
    runs before the first write, so a failed assignment leaves ``out`` unchanged, and the
    result is as if ``value`` were computed before writing (numpy's aliasing rule).

    >>> import axesarray as ax
    >>> out = ax.zeros((ax.Axis("N", 2), ax.Axis("C", 3)))
    >>> ax.assign(out, ax.arange(ax.Axis("C", 3)) * 2.0)
    >>> out.numpy()
    array([[0., 2., 4.],
           [0., 2., 4.]])
    """
    dst, node = checked_assignment(out, value)
    engine.assign(dst, node)


def checked_assignment(out: Tensor, value) -> tuple[ex.Leaf, ex.Node]:
    """Validate ``out[...] = value``; return the destination leaf and the aligned value."""
    if (
        isinstance(value, Tensor)
        and isinstance(out, Tensor)
        and (value._axes is out._axes or value._axes == out._axes)
        and type(out._node) is ex.Leaf
        and out._node.writeable
        and value._node.dtype == out._node.dtype
    ):
        return out._node, value._node  # the common case, with nothing to check or align
    if not isinstance(out, Tensor) or not out.is_lvalue:
        raise TypeError(
            message(
                "assign",
                "the destination must be an l-tensor (a view of storage)",
                f"got {'an r-tensor' if isinstance(out, Tensor) else type(out).__name__}",
                "Evaluate it into storage first: y = e.eval()",
            )
        )
    dst = out._node
    if not dst.writeable:
        raise ValueError(
            message(
                "assign",
                "the destination is read-only",
                fmt_axes(out.axes),
                "Broadcast views and read-only arrays cannot be written; copy() first",
            )
        )
    if isinstance(value, Tensor):
        extra = [a for a in value.axes if a.name not in out.axes]
        if extra:
            raise AxesError(
                message(
                    "assign",
                    "the value has axes the destination lacks: "
                    + ", ".join(repr(a.name) for a in extra),
                    f"destination: {fmt_axes(out.axes)}; value: {fmt_axes(value.axes)}",
                    "Reduce, select or rename those axes first",
                )
            )
        for a in value.axes:
            length = out.axes[a.name].length
            if length != a.length:
                raise AxesError(
                    message(
                        "assign",
                        f"axis {a.name!r} has length {length} in the destination "
                        f"and {a.length} in the value",
                        f"destination: {fmt_axes(out.axes)}; value: {fmt_axes(value.axes)}",
                        "Slice or rename the value",
                    )
                )
        if not can_assign(value.dtype, out.dtype):
            raise TypeError(
                message(
                    "assign",
                    f"cannot cast {value.dtype} to {out.dtype} under the same_kind rule",
                    None,
                    f"Convert explicitly: value.astype('{out.dtype}')",
                )
            )
        node = align(value, out.axes, "assign")
    else:
        node = operand_node(value, out.axes, "assign")
        if not isinstance(node, ex.Node):
            if not can_assign(value, out.dtype):
                raise TypeError(
                    message(
                        "assign",
                        f"cannot cast {type(value).__name__} {value!r} to {out.dtype} "
                        "under the same_kind rule",
                    )
                )
            check_weak_scalar(value, out.dtype, "assign")
            node = ex.Const(value, out.dtype, out.shape)
        elif not can_assign(node.dtype, out.dtype):
            raise TypeError(
                message("assign", f"cannot cast {node.dtype} to {out.dtype} under the same_kind rule")
            )
    return dst, node
