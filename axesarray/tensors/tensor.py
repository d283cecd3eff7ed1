"""The public ``Tensor``: names resolved to positions, operators, evaluation, assignment.

Names live here and above; everything below sees positions. A Tensor is ``(axes, node)``:
an l-tensor when its node is a ``Leaf`` (a strided view of storage), an r-tensor (a lazy
expression) otherwise. Metadata comes from ``metadata``, view methods from ``indexing``,
reductions from ``reductions``, layout methods from ``tensors.layout_methods``; the operators are
generated from ``ops.OPS``; ``a @ b`` contracts the one shared name; assignment through a
gather (``x[mask] = v``, ``x[{"C": [0, 2]}] = v``) writes its source (``index_put``).
Every import points down.
"""

from __future__ import annotations

import weakref

import numpy as np

from .. import engine
from ..core.axes import Axes
from ..core.dtypes import as_dtype, can_assign, check_weak_scalar, is_weak
from ..core.ops import OPS
from ..core.strided import contiguous
from ..dag import build as expr_ops
from ..dag import nodes as ex
from ..dag import views as expr_views
from ..dag.chunked_leaf import Chunked, has_chunked
from ..display.reprs import tensor_html, tensor_repr
from ..errors import AxesError, fmt_axes, message
from ..options import OPTIONS
from ..storage.devices import as_device, device_of
from .base import TensorBase
from .calls import CallMethods, Gather, gathered
from .chunking import ChunkedMethods
from .gradients import GradMethods
from .indexing import ViewMethods, align
from .interop import InteropMethods, array_ufunc
from .layout_methods import LayoutMethods, allocate_leaf, layout_for_axes
from .metadata import DescribeMethods, TensorDescription
from .numbers import ScalarMethods
from .reducing import ReductionMethods
from .structures import PAIRS, contraction, many, pair

__all__ = ["Tensor", "TensorDescription", "assign", "operand_node", "align", "unary_function"]


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


_DIRECT_GET = engine.DIRECT.get  # engine.evaluate's direct runners (see engine.direct)


def _preferred_layout(operands):
    """The layout of the operand with the most elements among those that have one."""
    best = None
    for v in operands:
        if isinstance(v, Tensor) and v._layout is not None and (best is None or v.size > best.size):
            best = v
    return None if best is None else best._layout


_WEAK_TYPES = (int, float, bool)


def _elementwise_fast(op: str, operands: tuple, name: str) -> Tensor | None:
    """The common cases without layouts: one tensor, two tensors (equal axes, or axes
    broadcast as ``structures.PAIRS`` remembers), or a tensor and a Python scalar; None:
    the general path. Under the op's own name the builder's straight lines remember
    structures; another name (``setitem``) takes ``map_op``, whose errors carry it."""
    a = operands[0]
    own = name == op
    if len(operands) == 1:
        if type(a) is Tensor and a._layout is None:
            x = a._node
            node = expr_ops.map1(op, x) if own else expr_ops.map_op(op, (x,), x.shape, name)
            return Tensor(a._axes, node)
        return None
    b = operands[1]
    if type(a) is Tensor and a._layout is None:
        if type(b) is Tensor and b._layout is None:
            x, y = a._node, b._node
            if a._axes is b._axes:
                axes = a._axes
            else:  # by name (equal, or broadcast): result axes and operand views, remembered
                hit = PAIRS.get((id(a._axes), id(b._axes), OPTIONS["broadcast"]))
                if hit is None or hit[0] is not a._axes or hit[1] is not b._axes:
                    hit = pair(a._axes, b._axes, name)
                axes, ma, mb, shape = hit[2], hit[3], hit[4], hit[5]
                if ma is not None:
                    x = expr_views.remap(x, shape, ma)
                if mb is not None:
                    y = expr_views.remap(y, shape, mb)
            t = _new(Tensor)  # Tensor(axes, node) without its __init__ frame
            t._axes, t._layout = axes, None
            t._node = expr_ops.map2(op, x, y) if own else expr_ops.map_op(op, (x, y), x.shape, name)
            return t
        if type(b) in _WEAK_TYPES:
            x = a._node
            node = expr_ops.map_scalar(op, x, b, False) if own else None
            return Tensor(a._axes, node or expr_ops.map_op(op, (x, b), x.shape, name))
    elif type(b) is Tensor and b._layout is None and type(a) in _WEAK_TYPES:
        y = b._node
        node = expr_ops.map_scalar(op, y, a, True) if own else None
        return Tensor(b._axes, node or expr_ops.map_op(op, (a, y), y.shape, name))
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
    # the broadcast axes, left to right, and each operand's view (``structures.many``)
    axes, shape, maps = many(
        tuple(v._axes if isinstance(v, Tensor) else None for v in operands), name
    )
    nodes, laid_out = [], False
    for v, m in zip(operands, maps, strict=True):
        if not isinstance(v, Tensor):
            nodes.append(operand_node(v, axes, name))  # a scalar
            continue
        nodes.append(v._node if m is None else expr_views.remap(v._node, shape, m))
        laid_out = laid_out or v._layout is not None
    layout = _preferred_layout(operands) if laid_out else None
    return Tensor(axes, expr_ops.map_op(op, tuple(nodes), shape, name), layout)


class Tensor(
    DescribeMethods,
    ScalarMethods,
    ChunkedMethods,
    ViewMethods,
    ReductionMethods,
    CallMethods,
    LayoutMethods,
    InteropMethods,
    GradMethods,
    TensorBase,
):
    """A named-axis tensor: an l-tensor (strided view of storage) or a lazy r-tensor.

    Build one with ``ax.tensor``, ``ax.zeros`` and friends; arithmetic gives r-tensors.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.arange(6.0).reshape(2, 3), "N C")
    >>> x.axes
    Axes(Axis('N', 2), Axis('C', 3))
    >>> (x + 1).sum("C").numpy()
    array([ 6., 15.])
    """

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # == is elementwise

    # --- pickle and copy --------------------------------------------------------------------

    def __reduce__(self):
        """Pickle (and ``copy.deepcopy``): an l-tensor as its storage, view, layout and kind
        (storage shared with what it is pickled with); a lazy tensor as its value, except
        one reading a declared tensor (its graph would be lost), which is refused."""
        node = self._node
        if type(node) is not ex.Leaf and type(node) is not Chunked:
            declared = [r.tag.label for r in ex.leaf_roots(node) if r.tag is not None]
            if declared:
                raise TypeError(
                    message(
                        "pickle",
                        f"a lazy tensor reading {', '.join(declared)} is not pickled",
                        fmt_axes(self._axes),
                        "Pickle its value, t.eval(), or the tensors it is computed from",
                    )
                )
            return self.eval().__reduce__()
        return (_loaded, (type(self), self._axes, node, self._layout))

    def __copy__(self) -> Tensor:
        return type(self)(self._axes, self._node, self._layout)  # the same storage

    # --- views (methods in views.py) and reductions (reductions.py) -------------------------

    def __setitem__(self, key, value) -> None:
        if key is Ellipsis:  # ``self[...]`` is ``self``: straight to the checks of assign
            node = self._node
            if isinstance(node, ex.Call) and isinstance(node.fn, Gather):
                index_put(self, value)  # ``x.isel(C=[0, 2])[...] = v``
                return
            assign(self, value)
            return
        target = self[key]
        if self.is_lvalue and not target.is_lvalue:  # a gather (list, mask, index tensor)
            index_put(target, value)
            return
        assign(target, value)

    # --- evaluation ------------------------------------------------------------------------

    def eval(self) -> Tensor:
        """Compute an r-tensor into a new l-tensor (an l-tensor returns itself).

        The result is laid out like the dominant input: its layout when it has one, else
        its memory order. A chunked tensor stays chunked (a lazy dask result).

        >>> import axesarray as ax, numpy as np
        >>> y = (ax.tensor(np.arange(3.0), "N") * 2).eval()
        >>> y.is_lvalue, y.numpy()
        (True, array([0., 2., 4.]))
        """
        node = self._node
        if self._layout is None:  # the common case, without detours (it is a hot path)
            run = _DIRECT_GET(node.key)  # one op on plain leaves: numpy's ufunc
            if run is not None:
                out = run(node)
                if out is not None:
                    t = _new(Tensor)  # Tensor(axes, out) without its __init__ frame
                    t._axes, t._node, t._layout = self._axes, out, None
                    return t
            if type(node) is ex.Leaf or type(node) is Chunked:
                return self
            t = _new(Tensor)
            t._axes, t._node, t._layout = self._axes, engine.evaluate(node), None
            return t
        if type(node) is ex.Leaf or type(node) is Chunked:
            return self
        return self.copy()

    def copy(self) -> Tensor:
        """A new l-tensor holding the values, in this tensor's layout or memory order.

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.arange(3.0), "N")
        >>> np.shares_memory(x.copy().numpy(), x.numpy())
        False
        """
        if self._layout is not None and has_chunked(self._node):
            return self.to_layout(layout_for_axes(self._axes, self._layout))
        if self._layout is not None:
            layout = layout_for_axes(self._axes, self._layout)
            leaf = allocate_leaf(self._axes, self.dtype, layout, self.device)
            out = Tensor(self._axes, leaf, layout)
            assign(out, self)
            return out
        return Tensor(self._axes, engine.evaluate(self._node))

    def to(self, device) -> Tensor:
        """A copy on ``device`` ("cpu", "cuda", "cuda:N"); the tensor itself if it is an
        l-tensor there already.

        >>> import axesarray as ax
        >>> x = ax.zeros((ax.Axis("N", 2),))
        >>> x.to("cpu") is x
        True
        """
        target = as_device(device)
        if self.is_lvalue and self.device == target:
            return self
        target.check_available("to")
        leaf = self.eval()._node
        data = device_of(leaf.data).to_host(leaf.data)
        return Tensor(self._axes, ex.Leaf(target.upload(data), leaf.view), self._layout)

    def numpy(self) -> np.ndarray:
        """The values as a numpy array in axis order: a view for l-tensors when possible.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.arange(6).reshape(2, 3), "N C").transpose("C N").numpy()
        array([[0, 3],
               [1, 4],
               [2, 5]])
        """
        return engine.to_numpy(self._node)

    def _plan(self):
        """The engine's plan for an r-tensor (shown by repr, never run); None otherwise."""
        if isinstance(self._node, ex.Leaf):
            return None
        return engine.explain(self._node, None, self.names)

    def __repr__(self) -> str:
        return tensor_repr(self, self._plan())

    def _repr_html_(self) -> str:
        return tensor_html(self, self._plan())

    # --- dtype -----------------------------------------------------------------------------

    def astype(self, dtype) -> Tensor:
        """Convert with numpy's ``astype`` semantics (unsafe casting); an r-tensor.

        ``"bfloat16"`` (needs ml_dtypes) is a storage dtype: ops on it compute in float32
        and round once, where the result is stored.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.array([1.7, -1.7]), "N").astype("int8").numpy()
        array([ 1, -1], dtype=int8)
        >>> b = ax.tensor(np.array([1.0, 1.3]), "N").astype("bfloat16")
        >>> b.numpy(), ((b * 3) / 3).numpy()
        (array([1, 1.29688], dtype=bfloat16), array([1, 1.29688], dtype=bfloat16))
        """
        dt = as_dtype(dtype, "astype")
        node = self._node
        if node.dtype == dt:
            if type(node) is ex.Leaf:
                node = ex.derived_leaf(node, node.view, ("same",), writeable=False)
            return Tensor(self._axes, node, self._layout)
        return Tensor(self._axes, ex.Cast(node, dt), self._layout)

    # --- elementwise methods ---------------------------------------------------------------

    def round(self, decimals: int = 0) -> Tensor:
        """Round half to even, as ``np.round``; integers are returned unchanged.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.array([0.5, 1.5, 2.26]), "N").round(1).numpy()
        array([0.5, 1.5, 2.3])
        """
        if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
            raise TypeError(
                message("round", "decimals must be an integer", f"got {decimals!r}", "e.g. 2")
            )
        if self.dtype.kind in "iub":
            return self.astype(self.dtype)
        if decimals == 0:
            return elementwise("rint", self, name="round")
        scale = 10.0**decimals
        return elementwise("rint", self * scale, name="round") / scale

    def clip(self, lo=None, hi=None) -> Tensor:
        """Limit values to ``[lo, hi]`` (either may be None), as ``np.clip``.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.array([-2.0, 0.5, 9.0]), "N").clip(0, 1).numpy()
        array([0. , 0.5, 1. ])
        """
        if lo is None and hi is None:
            raise ValueError(message("clip", "give lo, hi or both"))
        # numpy's rule: a NaN x stays NaN, a NaN bound gives NaN, and on a tie (-0.0 against
        # 0.0) a scalar bound keeps x (the ``clip_lo``/``clip_hi`` rows: one op that reads
        # its argument once), a tensor bound wins (numpy clips with arrays by another loop;
        # the ``where`` gives the bound the whole gradient at a tie, as torch.clamp).
        out = self
        for bound, scalar_op, tensor_op in ((lo, "clip_lo", "gt"), (hi, "clip_hi", "lt")):
            if bound is None:
                continue
            if type(bound) in _WEAK_TYPES and type(out) is Tensor and out._layout is None:
                # a Python scalar: the remembered structure, as ``x * 2`` (errors say clip)
                x = out._node
                node = expr_ops.map_scalar(scalar_op, x, bound, False, "clip")
                out = Tensor(
                    out._axes, node or expr_ops.map_op(scalar_op, (x, bound), x.shape, "clip")
                )
                continue
            if not isinstance(bound, Tensor):
                out = elementwise(scalar_op, out, bound, name="clip")
                continue
            keep = elementwise(tensor_op, out, bound, name="clip") | elementwise("isnan", out)
            out = elementwise("where", keep, out, bound, name="clip")
        return out

    def where(self, cond, other=np.nan) -> Tensor:
        """This tensor where ``cond`` is true, else ``other`` (NaN by default, as xarray's
        ``where``); broadcasts by name like ``ax.where(cond, self, other)``.

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.array([1.0, 2.0, 3.0]), "N")
        >>> x.where(x > 1.5, 0.0).numpy()
        array([0., 2., 3.])
        """
        return elementwise("where", cond, self, other, name="where")

    # --- operators -------------------------------------------------------------------------

    def _binary(self, other, op: str, reflected: bool = False) -> Tensor:
        if type(other) is not Tensor and not (
            is_weak(other) or isinstance(other, (Tensor, np.generic, np.ndarray))
        ):
            return NotImplemented
        pair = (other, self) if reflected else (self, other)
        # Operators are the hot path of small evaluations: try the fast cases directly.
        fast = _elementwise_fast(op, pair, op)
        return fast if fast is not None else elementwise(op, *pair)

    def __pos__(self):
        return self

    def __matmul__(self, other):
        """``a @ b`` contracts the one axis name ``a`` and ``b`` share (a ``dot``).

        >>> import axesarray as ax, numpy as np
        >>> a = ax.tensor(np.ones((2, 3)), "M K")
        >>> b = ax.tensor(np.ones((3, 4)), "K N")
        >>> (a @ b).axes
        Axes(Axis('M', 2), Axis('N', 4))
        """
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def _inplace(self, other, op: str):
        if not self.is_lvalue:
            return NotImplemented  # r-tensor: Python falls back to x = x (op) other
        assign(self, elementwise(op, self, other))
        return self

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return array_ufunc(elementwise, ufunc, method, inputs, kwargs)


def _loaded(cls, axes: Axes, node, layout) -> Tensor:
    """A loaded tensor; it owns a loaded declared storage (``ax.variables`` yields it)."""
    t = cls(axes, node, layout)
    tag = getattr(node, "tag", None)
    if tag is not None and node.origin is None and (tag.owner is None or tag.owner() is None):
        tag.owner = weakref.ref(t)
    return t


# The operators below inline ``expr_ops``'s remembered-structure hit (``map1``, ``map2``,
# ``map_scalar``: see ``dag.build``) and make their Tensor without ``TensorBase.__init__``
# (its three slots set in place): an operator is then one Python frame. A miss, or
# anything unusual, calls the builder, which does the same lookup.
_BUILT_GET = expr_ops.BUILT.get
_new = object.__new__
_Map = ex.Map


def unary_function(op: str):
    """``x -> op(x)`` for an ``ops.OPS`` row of arity 1 (its operator and ``ax.<name>``):
    a plain tensor goes straight to its node, anything else through ``elementwise``."""
    map1 = expr_ops.map1

    def fn(x):
        if type(x) is Tensor and x._layout is None:  # the common case, without detours
            a = x._node
            try:
                hit = _BUILT_GET((op, a.known_key))
            except AttributeError:  # a lazy operand: the builder decides
                hit = None
            if hit is None:
                t = _new(Tensor)  # Tensor(axes, node) without its __init__ frame
                t._axes, t._node, t._layout = x._axes, map1(op, a), None
                return t
            node = _new(_Map)  # map1's hit, inline
            node.op, node.children, node.shape, node.dtype = op, (a,), a.shape, hit[0]
            node.key, node.params = hit[1], (a,) if hit[2] else a.params
            t = _new(Tensor)  # Tensor(axes, node) without its __init__ frame
            t._axes, t._node, t._layout = x._axes, node, None
            return t
        return elementwise(op, x)

    return fn


def _binary_operator(op: str, reflected: bool):
    """``self (op) o`` (``o (op) self`` when ``reflected``): tensor op tensor with the same
    axes and tensor op Python scalar straight to the node, the rest through ``_binary``."""
    map2, map_scalar = expr_ops.map2, expr_ops.map_scalar

    def operator(self, o):
        if (  # tensor op tensor with the same axes: the hot path, straight to the node
            not reflected
            and type(o) is Tensor
            and (self._axes is o._axes or self._axes == o._axes)
            and self._layout is None
            and o._layout is None
        ):
            a, b = self._node, o._node
            try:
                hit = _BUILT_GET((op, a.known_key, b.known_key))
            except AttributeError:  # a lazy operand: the builder decides
                hit = None
            # map2's hit for two distinct leaves, inline; other hits check sharing there
            if hit is not None and hit[2] and a is not b:
                node = _new(_Map)
                node.op, node.children, node.shape, node.dtype = op, (a, b), a.shape, hit[0]
                node.key, node.params = hit[1], node.children  # one tuple: both are (a, b)
                t = _new(Tensor)  # Tensor(axes, node) without its __init__ frame
                t._axes, t._node, t._layout = self._axes, node, None
                return t
            t = _new(Tensor)  # Tensor(axes, node) without its __init__ frame
            t._axes, t._node, t._layout = self._axes, map2(op, a, b), None
            return t
        if type(o) in _WEAK_TYPES and self._layout is None:
            a = self._node
            try:  # map_scalar's memo key (zeros by repr: -0.0 is not 0.0)
                hit = _BUILT_GET((op, a.known_key, type(o), reflected, o if o else repr(o)))
            except AttributeError:
                hit = None
            if hit is not None:  # map_scalar's hit, inline
                c, out, keys, own = hit
                pa = (a,) if own else a.params
                if c not in pa:
                    key = keys.get(-1)
                    params = (c,) + pa if reflected else pa + (c,)
                else:  # ``1 / (1 + x)``: the Const is already a param; the key says where
                    pos = pa.index(c)
                    key = keys.get(pos)
                    params = (c,) + pa[:pos] + pa[pos + 1 :] if reflected else pa
                if key is not None:
                    node = _new(_Map)
                    node.op, node.children = op, (c, a) if reflected else (a, c)
                    node.shape, node.dtype, node.key, node.params = a.shape, out, key, params
                    t = _new(Tensor)  # Tensor(axes, node) without its __init__ frame
                    t._axes, t._node, t._layout = self._axes, node, None
                    return t
            t = _new(Tensor)  # Tensor(axes, node) without its __init__ frame
            t._axes, t._node, t._layout = self._axes, map_scalar(op, a, o, reflected), None
            return t
        if type(o) is Tensor and self._layout is None and o._layout is None:
            # other axes (a broadcast by name): ``_binary``'s fast case, without its checks
            return _elementwise_fast(op, (o, self) if reflected else (self, o), op)
        return self._binary(o, op, reflected)

    return operator


def _operators(cls) -> None:
    """Give ``Tensor`` one operator per ``ops.OPS`` row with a ``dunder``: binary ops get
    ``__op__``, ``__rop__`` and ``__iop__`` (comparisons only ``__op__``), unary ``__op__``."""
    for row in OPS.values():
        if row.dunder is None:
            continue
        op, name = row.name, row.dunder
        if row.arity == 1:
            setattr(cls, f"__{name}__", unary_function(op))
            continue
        setattr(cls, f"__{name}__", _binary_operator(op, False))
        if row.symbol in ("==", "!=", "<", "<=", ">", ">="):
            continue

        def inplace(self, o, op=op):
            return self._inplace(o, op)

        setattr(cls, f"__r{name}__", _binary_operator(op, True))
        setattr(cls, f"__i{name}__", inplace)


_operators(Tensor)


def contract(a: Tensor, b: Tensor, over_names: tuple, op: str) -> Tensor:
    """``ax.dot``: contract ``over_names``; other shared axes batch. The result has ``a``'s
    remaining axes followed by ``b``'s new ones."""
    an, bn = a._node, b._node
    hit = contraction(a._axes, b._axes, over_names, an.dtype, bn.dtype, op)
    _, _, out_axes, a_names, b_names, a_labels, b_labels, out_labels, shape, loop = hit
    ca, cb = expr_ops.cast(an, loop[0]), expr_ops.cast(bn, loop[1])
    ex.name_dims(ca, a_names)  # the contracted dims keep their names (display)
    ex.name_dims(cb, b_names)
    node = expr_ops.dot(ca, cb, a_labels, b_labels, out_labels, shape, loop[-1])
    t = _new(Tensor)  # Tensor(axes, node) without its __init__ frame
    t._axes, t._node, t._layout = out_axes, node, None
    return t


def matmul(a, b) -> Tensor:
    """``a @ b``: contract the one axis name the operands share (xarray's ``dot`` rule for
    one shared name); none or several shared names are an error naming them."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        return NotImplemented
    shared = [n for n in a.names if n in b.axes]
    if len(shared) != 1:
        fact = (
            "the operands share no axis name"
            if not shared
            else "the operands share several axis names (" + ", ".join(map(repr, shared)) + ")"
        )
        if shared:
            hint = f"Say which to contract (the others batch): ax.dot(a, b, over={shared[-1]!r})"
        else:  # numpy's pairing: a's last axis with b's first one of the same length
            pair = next(
                ((x, y) for x in reversed(a.axes) for y in b.axes if x.length == y.length), None
            )
            hint = (
                f"Rename an axis so both have it: a @ b.rename({pair[1].name}={pair[0].name!r})"
                if pair
                else "Rename an axis of one operand so both have it"
            )
        raise AxesError(
            message("matmul", fact, f"left: {fmt_axes(a.axes)}; right: {fmt_axes(b.axes)}", hint)
        )
    return contract(a, b, (shared[0],), "matmul")


def index_put(target: Tensor, value) -> None:
    """``x[mask] = v``, ``x[{"C": [0, 2]}] = v``, ``x.isel(C=[0, 2])[...] = v``: write
    ``value`` (broadcast to the selection's axes) at the selected elements of the source
    tensor, as numpy's index assignment (a repeated index takes the last value).

    One fused assignment ``x[...] = where(hit, value gathered back, x)``: the checks of
    ``assign`` run before anything is written and reading ``x`` in ``value`` is safe."""
    found = gathered(target)
    if found is None:
        raise TypeError(
            message(
                "setitem",
                "this selection cannot be written: only lists, masks and 1-D index tensors "
                "of an l-tensor write in place",
                fmt_axes(target.axes),
                "Write through a mask with where: x[...] = x.where(~mask, value)",
            )
        )
    x, groups = found
    if isinstance(value, Tensor):
        extra = [a for a in value.axes if a.name not in target.axes]
        wrong = [a for a in value.axes if a.name in target.axes and target.axes[a.name] != a]
        if extra or wrong:
            raise AxesError(
                message(
                    "setitem",
                    "the value's axes must be axes of the selection, with the same lengths",
                    f"selection: {fmt_axes(target.axes)}; value: {fmt_axes(value.axes)}",
                    "Select or rename the value to the selection's axes",
                )
            )
    if any(axis.length == 0 for _, _, axis in groups):  # nothing selected: only the checks
        checked_assignment(x, x)
        dtype = value.dtype if isinstance(value, Tensor) else None
        if dtype is not None and not can_assign(dtype, x.dtype):
            raise TypeError(message("setitem", f"cannot cast {dtype} to {x.dtype} under the "
                                    "same_kind rule"))  # fmt: skip
        return
    device = x.device

    def leaf(arr):  # a leaf's data is its 1-D storage
        flat = arr.reshape(-1)
        return ex.Leaf(flat if device.is_cpu else device.upload(flat), contiguous(arr.shape))

    hit, keys = None, {}
    for dims, arrays, axis in groups:
        shape = tuple(x.shape[d] for d in dims)
        inv = np.zeros(shape, np.int64)
        inv[arrays] = np.arange(axis.length)  # numpy's order: the last write wins
        mark = np.zeros(shape, bool)
        mark[arrays] = True
        axes = Axes._trusted(tuple(x.axes[d] for d in dims))
        keys[axis.name] = Tensor(axes, leaf(inv))
        m = Tensor(axes, leaf(mark))
        hit = m if hit is None else hit & m
    if isinstance(value, Tensor):
        present = {n: k for n, k in keys.items() if n in value.axes}
        value = value.isel(present) if present else value
    assign(x, elementwise("where", hit, value, x, name="setitem"))


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
    if type(value) is Tensor and type(out) is Tensor:  # a ready plan's runner, checks inline
        dst, node = out._node, value._node
        if (
            (value._axes is out._axes or value._axes == out._axes)
            and type(dst) is ex.Leaf
            and dst.writeable
            and node.dtype == dst.dtype
        ):  # ``checked_assignment``'s common case: nothing to check or align
            run = _ASSIGNS_GET((node.key, dst.key))
            if run is not None and run(node, dst):
                return
    dst, node = checked_assignment(out, value)
    engine.assign(dst, node)


_ASSIGNS_GET = engine.ASSIGNS.get


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
    if dst.tag is not None and dst.tag.kind in ("constant", "placeholder"):
        raise TypeError(
            message(
                "assign",
                f"the destination is the {dst.tag.label}, which cannot be written",
                fmt_axes(out.axes),
                "Constants are immutable and placeholders are bound at call time: copy() first",
            )
        )
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
                message(
                    "assign", f"cannot cast {node.dtype} to {out.dtype} under the same_kind rule"
                )
            )
    return dst, node
