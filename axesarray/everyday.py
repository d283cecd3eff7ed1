"""Everyday functions built on the primitives: ``stack``, ``einsum``, ``apply``; and the
numpy functions with a named meaning that live above ``tensor`` (``np.where``,
``np.concatenate``, ``np.stack``, ``np.clip``), registered for ``__array_function__``.

``stack`` is a concat of length-1 views (one fused kernel), ``einsum`` a chain of ``dot``
nodes with sums of the axes no later operand needs, ``apply`` one numpy-evaluated ``Call``
node (the escape hatch for any positional function). Imports ``functions`` and below.
"""

from __future__ import annotations

import numpy as np

from .core.axes import Axes, Axis, as_axes, broadcast_axes, parse_names
from .core.dtypes import as_dtype, reduce_dtype
from .dag import nodes as ex
from .errors import AxesError, _Raw, fmt_axes, isel_example, message
from .functions import abs as _abs
from .functions import clip, concat, dot, isfinite, isnan, where
from .storage.memory import wrap_array
from .tensors.calls import Apply, Same
from .tensors.interop import axis_names, implements, write_out
from .tensors.tensor import Tensor

__all__ = ["stack", "einsum", "apply", "isclose", "allclose"]


def _tensors(items, op: str) -> list[Tensor]:
    if isinstance(items, Tensor) or not hasattr(items, "__iter__"):
        raise TypeError(
            message(op, "expects a sequence of tensors", type(items).__name__, "Pass a list")
        )
    ts = list(items)
    if not ts:
        raise ValueError(message(op, "needs at least one tensor"))
    for t in ts:
        if not isinstance(t, Tensor):
            raise TypeError(
                message(op, "expects tensors", type(t).__name__, "Wrap arrays with ax.tensor")
            )
    return ts


def stack(tensors, new_axis, position: int = 0) -> Tensor:
    """Join tensors with the same axes along a new axis (first by default).

    ``new_axis`` is a name or an ``Axis`` of length ``len(tensors)``; the tensors may list
    their axes in any order (the first one's order is kept).

    >>> import axesarray as ax, numpy as np
    >>> a, b = ax.tensor(np.zeros(2), "C"), ax.tensor(np.ones(2), "C")
    >>> s = ax.stack([a, b], "K")
    >>> s.axes, s.numpy().tolist()
    (Axes(Axis('K', 2), Axis('C', 2)), [[0.0, 0.0], [1.0, 1.0]])
    """
    ts = _tensors(tensors, "stack")
    name = new_axis.name if isinstance(new_axis, Axis) else parse_names(new_axis, "stack")
    if not isinstance(new_axis, Axis) and len(name) != 1:
        raise AxesError(message("stack", "give one name for the new axis", f"got {new_axis!r}"))
    name = name if isinstance(name, str) else name[0]
    if isinstance(new_axis, Axis) and new_axis.length != len(ts):
        raise AxesError(
            message(
                "stack",
                f"the new axis has length {new_axis.length} but {len(ts)} tensors were given",
                str(new_axis),
                "Give an Axis of length len(tensors), or a name",
            )
        )
    first = ts[0]
    if name in first.axes:
        raise AxesError(
            message(
                "stack",
                f"the new axis {name!r} is already an axis of the tensors",
                fmt_axes(first.axes),
                "Choose a new name",
            )
        )
    for t in ts[1:]:
        if set(t.axes) != set(first.axes):
            raise AxesError(
                message(
                    "stack",
                    "all tensors must have the same axes",
                    f"first: {fmt_axes(first.axes)}; other: {fmt_axes(t.axes)}",
                    "Broadcast, rename or slice to match",
                )
            )
    if not -first.ndim - 1 <= position <= first.ndim:
        raise AxesError(
            message("stack", f"position {position} is out of range", f"rank {first.ndim}")
        )
    one = Axis(name, 1)
    return concat([t.transpose(first.names).expand_dims(one, position) for t in ts], name)


def _out_names(ts: list[Tensor], out) -> tuple[str, ...]:
    if out is None:  # numpy's implicit mode, by name: the axes only one operand has
        counts: dict[str, int] = {}
        for t in ts:
            for n in t.names:
                counts[n] = counts.get(n, 0) + 1
        return tuple(n for n, c in counts.items() if c == 1)
    if isinstance(out, (Axes, Axis)) or not isinstance(out, str):
        items = [out] if isinstance(out, Axis) else list(out)
        for a in items:
            if isinstance(a, Axis):
                for t in ts:
                    if a.name in t.axes:
                        t.axes.index(a, "einsum")
    return parse_names(out, "einsum")


def einsum(*tensors, out=None) -> Tensor:
    """Sum of products of the operands over every axis not in ``out`` (a generalization
    of ``dot``); ``out`` (names or Axis objects) also orders the result. Without ``out``
    the result keeps the axes that only one operand has.

    Operands are contracted left to right with ``dot`` (BLAS); an axis no later operand
    and not ``out`` needs is summed as soon as possible. Sums follow ``sum``'s dtypes
    (integers in int64), where numpy's ``einsum`` keeps the input dtype.

    >>> import axesarray as ax, numpy as np
    >>> a = ax.tensor(np.arange(6.0).reshape(2, 3), "M K")
    >>> b = ax.tensor(np.ones((3, 4)), "K N")
    >>> ax.einsum(a, b, out="N M").numpy()[0].tolist()
    [3.0, 12.0]
    """
    ts = _tensors(tensors, "einsum")
    # Integers (and bools) sum as ``sum`` does, in int64 (uint64): ``dot`` keeps its
    # operands' dtype (BLAS-like), so an int8 contraction would wrap. Cast on every path,
    # summed or not, so the result's dtype depends on the dtypes alone (as np.sum's).
    common = np.result_type(*(t.dtype for t in ts))
    if common.kind in "biu":
        wide = reduce_dtype("sum", common)
        ts = [t if t.dtype == wide else t.astype(wide) for t in ts]
    union = ts[0].axes
    for t in ts[1:]:
        union = broadcast_axes(union, t.axes, "einsum", "union")  # lengths agree by name
    names = _out_names(ts, out)
    unknown = [n for n in names if n not in union]
    if unknown:
        raise AxesError(
            message(
                "einsum",
                "out names axes no operand has: " + ", ".join(repr(n) for n in unknown),
                f"operands: {'; '.join(fmt_axes(t.axes) for t in ts)}",
                "Name only axes of the operands",
            )
        )
    acc = ts[0]
    for i in range(len(ts)):
        later = set(names).union(*(t.names for t in ts[i + 1 :]))
        if i == 0:
            acc = _sum_unneeded(acc, later)
            continue
        b = ts[i]
        acc = _sum_unneeded(acc, later | set(b.names))
        b = _sum_unneeded(b, later | set(acc.names))
        acc = dot(acc, b, over=[n for n in acc.names if n in b.names and n not in later])
    return acc.transpose(names) if acc.names != names else acc


def _sum_unneeded(t: Tensor, needed: set) -> Tensor:
    drop = [n for n in t.names if n not in needed]
    return t.sum(drop) if drop else t


def _core_specs(tensors: list[Tensor], core) -> list[tuple[str, ...]]:
    """Core names per input: one spec for all, or a list of one spec per input (a list
    whose items are all lists or tuples)."""
    per_input = isinstance(core, list) and core and all(isinstance(c, (list, tuple)) for c in core)
    if not per_input:
        spec = () if core is None else parse_names(core, "apply")
        return [spec] * len(tensors)
    if len(core) != len(tensors):
        raise AxesError(
            message(
                "apply",
                "give one core spec per tensor",
                f"{len(core)} specs for {len(tensors)} tensors",
                "core=[('H', 'W'), ('K',)] for two tensors, or core='H W' for every tensor",
            )
        )
    return [parse_names(c, "apply") for c in core]


def apply(fn, *tensors, core=None, out_axes=None, dtype=None, vectorize: bool = False, kwargs=None):
    """Run a positional numpy function over named core axes (xarray's ``apply_ufunc``).

    Each tensor's ``core`` axes (names, the same for every tensor, or a list with one
    tuple of names per tensor) are moved last, in the order given; the other axes (the
    loop axes, broadcast by name over all tensors) come first, in the same order for
    every array, so ``fn`` receives arrays of shape ``loop + core`` and must return
    ``loop + out``. ``out_axes`` names those trailing output dims: names of core axes
    keep their lengths, a new axis must be an ``Axis``. By default the result has the
    first tensor's core axes. ``dtype`` is the result's (default: numpy's result type of
    the inputs); ``kwargs`` are passed to ``fn``; ``vectorize=True`` loops a function of
    core arrays with ``np.vectorize``. The result is lazy: ``fn`` runs when it is
    evaluated, and its plan is reused while ``fn`` is the same object.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]]), "N T")
    >>> ax.apply(np.median, x, core="T", out_axes=(), kwargs={"axis": -1}).numpy()
    array([2., 4.])
    >>> spectrum = lambda a: np.abs(np.fft.rfft(a))
    >>> ax.apply(spectrum, x, core="T", out_axes=ax.Axis("F", 2)).names
    ('N', 'F')
    """
    ts = _tensors(tensors, "apply")
    if not callable(fn):
        raise TypeError(message("apply", "fn must be callable", type(fn).__name__))
    cores = _core_specs(ts, core)
    loop = None
    for t, spec in zip(ts, cores, strict=True):
        for n in spec:
            t.axes.index(n, "apply")
        rest = Axes._trusted(tuple(a for a in t.axes if a.name not in spec))
        loop = rest if loop is None else broadcast_axes(loop, rest, "apply", "union")
    for spec in cores:
        clash = [n for n in spec if n in loop]
        if clash:
            raise AxesError(
                message(
                    "apply",
                    "an axis is a core axis of one tensor and a loop axis of another: "
                    + ", ".join(repr(n) for n in clash),
                    f"loop axes: {fmt_axes(loop)}",
                    "Rename one of them",
                )
            )
    out = _out_axes(ts, cores, out_axes, loop)
    result = as_axes(tuple(loop) + tuple(out), "apply")
    dt = np.result_type(*(t.dtype for t in ts)) if dtype is None else as_dtype(dtype, "apply")
    perms, shapes, arg_dims = [], [], []
    for t, spec in zip(ts, cores, strict=True):
        present = [a.name for a in loop if a.name in t.axes]
        perms.append(tuple(t.axes.index(n) for n in present + list(spec)))
        shapes.append(
            tuple(a.length if a.name in t.axes else 1 for a in loop)
            + tuple(t.axes[n].length for n in spec)
        )
        arg_dims.append(
            tuple(result.index(a.name) if a.name in result.names else -1 for a in t.axes)
        )
    signature = None
    if vectorize:
        ins = ",".join("(" + ",".join(spec) + ")" for spec in cores)
        signature = f"{ins}->({','.join(a.name for a in out)})"
    kw = tuple(sorted((kwargs or {}).items()))
    try:
        hash(kw)
    except TypeError:  # unhashable values: compared by identity (no plan reuse)
        kw = Same(dict(kwargs))
    otype = dt.char if vectorize else None
    fn_call = Apply(Same(fn), tuple(perms), tuple(shapes), loop.shape, kw, signature, otype)
    name = getattr(fn, "__name__", type(fn).__name__)
    node = ex.Call(fn_call, [t.node for t in ts], result.shape, dt, name, tuple(arg_dims))
    return Tensor(result, node)


def _out_axes(ts, cores, out_axes, loop: Axes) -> Axes:
    if out_axes is None:
        return Axes._trusted(tuple(ts[0].axes[n] for n in cores[0]))
    if isinstance(out_axes, Axis):
        items = [out_axes]
    elif isinstance(out_axes, str):
        items = list(parse_names(out_axes, "apply"))
    else:
        items = list(out_axes)
    known = {}
    for t, spec in zip(ts, cores, strict=True):
        for n in spec:
            known.setdefault(n, t.axes[n])
    axes = []
    for a in items:
        if isinstance(a, Axis):
            axes.append(a)
        elif a in known:
            axes.append(known[a])
        else:
            raise AxesError(
                message(
                    "apply",
                    f"the length of output axis {a!r} is unknown",
                    f"core axes: {fmt_axes(known.values())}",
                    f"Pass an Axis: out_axes=ax.Axis({a!r}, length)",
                )
            )
    clash = [a.name for a in axes if a.name in loop]
    if clash:
        raise AxesError(
            message(
                "apply",
                "an output axis has the name of a loop axis: " + ", ".join(map(repr, clash)),
                f"loop axes: {fmt_axes(loop)}",
                "Rename the output axis",
            )
        )
    return as_axes(axes, "apply")


# --- numpy functions defined above tensor ---------------------------------------------------


def _first_name(t) -> str:
    """The tensor's first axis name for a hint's example ('C' when it has none)."""
    names = getattr(t, "names", ())
    return names[0] if names else "C"


@implements(np.where)
def _np_where(condition, *xy):
    if len(xy) != 2:
        raise TypeError(
            message(
                "numpy.where",
                "where(cond) gives positions, which have no named meaning",
                None,
                "Use np.where(cond, x, y), or mask indexing: "
                + isel_example(("mask",), {_first_name(condition): _Raw("mask")}, "t"),
            )
        )
    return where(condition, *xy)


@implements(np.concatenate)
def _np_concatenate(arrays, axis=0, out=None, *, dtype=None, casting=None):
    ts = _tensors(arrays, "numpy.concatenate")
    if axis is None:
        raise AxesError(
            message(
                "numpy.concatenate",
                "flattening first has no named meaning",
                None,
                f"Name the axis: np.concatenate(ts, axis={_first_name(ts[0])!r})",
            )
        )
    (name,) = axis_names(ts[0], axis, "numpy.concatenate")
    result = concat(ts, name.name if isinstance(name, Axis) else name)
    if dtype is not None:
        result = result.astype(dtype)
    return result if out is None else write_out(result, out, "numpy.concatenate")


@implements(np.stack)
def _np_stack(arrays, axis=0, out=None, *, dtype=None, casting=None):
    if not isinstance(axis, (str, Axis)):
        raise TypeError(
            message(
                "numpy.stack",
                "the new axis needs a name",
                f"got axis={axis!r}",
                "np.stack(ts, axis='K') or ax.stack(ts, 'K')",
            )
        )
    result = stack(arrays, axis)
    if dtype is not None:
        result = result.astype(dtype)
    return result if out is None else write_out(result, out, "numpy.stack")


@implements(np.clip)
def _np_clip(
    a,
    a_min=np._NoValue,
    a_max=np._NoValue,
    out=None,
    *,
    min=np._NoValue,  # noqa: A002
    max=np._NoValue,
    **kwargs,
):  # noqa: A002
    if kwargs:
        raise TypeError(
            message("numpy.clip", "unsupported argument(s): " + ", ".join(kwargs), None)
        )
    lo = min if a_min is np._NoValue else a_min
    hi = max if a_max is np._NoValue else a_max
    result = clip(a, None if lo is np._NoValue else lo, None if hi is np._NoValue else hi)
    return result if out is None else write_out(result, out, "numpy.clip")


# --- comparing tensors ---------------------------------------------------------------------
# One rule for every function that compares (``ax.isclose``/``allclose``, ``x.equals``,
# ``np.isclose``/``np.allclose``/``np.array_equal`` on tensors): tensors are matched by
# axis name (broadcast by name as arithmetic); a numpy array or list beside a tensor is
# read in that tensor's logical order (its shape must be the tensor's, as ``assign`` reads
# arrays). ``np.testing.assert_allclose(t, a)`` already follows it (it converts through
# ``np.asarray``, the logical order).


def _operands(a, b, op: str) -> tuple:
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(message(op, "needs at least one tensor", f"got {type(a).__name__}, "
                                f"{type(b).__name__}"))  # fmt: skip
    ref = a if isinstance(a, Tensor) else b

    def named(v):
        if isinstance(v, Tensor) or np.ndim(v) == 0:
            return v
        arr = np.asarray(v)
        if arr.shape != ref.shape:
            raise AxesError(
                message(
                    op,
                    "an array beside a tensor is read in the tensor's axis order and needs "
                    "its shape",
                    f"tensor: {fmt_axes(ref.axes)}; array shape {arr.shape}",
                    "Wrap the array with its names: ax.tensor(array, 'N C')",
                )
            )
        return Tensor(ref.axes, ex.Leaf(*wrap_array(np.ascontiguousarray(arr))))

    a, b = named(a), named(b)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        broadcast_axes(a.axes, b.axes, op=op)  # same names, different lengths: say so here
    return a, b


def isclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Elementwise ``|a - b| <= atol + rtol * |b|`` with numpy's rules for infinities and
    NaN (``np.isclose``), matching axes by name; a lazy bool tensor.

    >>> import axesarray as ax, numpy as np
    >>> a = ax.tensor(np.array([[1.0, 2.0]]), "N C")
    >>> ax.isclose(a, a.transpose("C N") + 1e-9).numpy()
    array([[ True,  True]])
    """
    return _isclose(a, b, rtol, atol, equal_nan, "isclose")


def _isclose(a, b, rtol, atol, equal_nan, op: str) -> Tensor:
    a, b = (
        v.astype("float64") if isinstance(v, Tensor) and v.dtype.kind in "biu" else v
        for v in _operands(a, b, op)
    )  # numpy compares integers as floats (no wrapping differences)
    finite = isfinite(a) & isfinite(b)
    close = where(finite, _abs(a - b) <= atol + rtol * _abs(b), a == b)
    if equal_nan:
        close = close | (isnan(a) & isnan(b))
    return close


def allclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element is close (``isclose``), matching axes by name: a Python bool,
    as ``np.allclose``. Same names with different lengths are an error (``AxesError``).

    >>> import axesarray as ax, numpy as np
    >>> a = ax.tensor(np.arange(6.0).reshape(2, 3), "N C")
    >>> ax.allclose(a, a.transpose("C N").copy()), ax.allclose(a, a + 1)
    (True, False)
    """
    return bool(_isclose(a, b, rtol, atol, equal_nan, "allclose").all())


@implements(np.isclose)
def _np_isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _isclose(a, b, rtol, atol, equal_nan, "numpy.isclose")


@implements(np.allclose)
def _np_allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(_isclose(a, b, rtol, atol, equal_nan, "numpy.allclose").all())


@implements(np.array_equal)
def _np_array_equal(a1, a2, equal_nan=False):
    a1, a2 = _operands(a1, a2, "numpy.array_equal")
    if isinstance(a1, Tensor) and isinstance(a2, Tensor) and set(a1.axes) != set(a2.axes):
        return False
    same = a1 == a2
    if equal_nan:
        same = same | (isnan(a1) & isnan(a2))
    return bool(same.all())
