"""One elementwise op on plain leaves, evaluated by numpy's own ufunc (the eager fast path).

``(a + b).eval()`` on small arrays costs mostly per-call overhead: planning is cached, but a
kernel call still allocates, types its arguments and wraps the result. For a root that is a
single op of the table below, over leaves whose view is their whole C-contiguous storage
(or constants), numpy's ufunc is the best kernel there is (one op: nothing to fuse) and is
called directly. Its results are the kernel's, bit for bit: only ops that round once in
IEEE arithmetic or wrap in two's complement (``+ - *``, ``/`` on floats, comparisons,
negation), operands already in the loop dtype ``dag.build`` chose (so numpy's promotion
and the library's agree: no cast runs), float16/bfloat16 excluded. Floating-point
warnings are ignored, as the kernels raise none. The result is laid out as the general path
lays it out (``order.allocate_for``), and gets the same leaf key.

Not where the kernels would run on threads (from ``serial_threshold`` elements, where
``cost.threads_pay``): numpy's ufunc runs on one core. Elsewhere it is the serial
kernel's equal for less overhead (``(x - y).eval()`` of 262k float32: the kernels' 157
us, numpy's 137). The decision is made once per root key (the key fixes the op, dtypes,
views and storage kinds of every leaf); per call only the storage sizes are checked (a
view over a prefix of a longer storage has the same key). ``ENABLED`` turns the path off
(the kernel tests); ``STATS["direct"]`` counts the evaluations it answered.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager

import numpy as np

from ..core.strided import contiguous
from ..dag.nodes import Const, Leaf, Map, Node
from ..kernels.threads import num_threads
from ..options import OPTIONS
from .cost import seconds_of, threads_pay
from .order import allocate_for

__all__ = ["runner_for", "disabled", "ENABLED", "STATS", "UFUNCS", "quiet_fp", "restore_fp"]

try:  # numpy's errstate without its Python frames: its context variable
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj

    _IGNORE = _make_extobj(all="ignore")
except ImportError:  # pragma: no cover - another numpy: the public context manager
    _extobj_contextvar = None


def quiet_fp() -> object:
    """Ignore floating-point errors in this context until ``restore_fp`` of the token it
    returns: ``np.errstate(all="ignore")`` without its frames (0.18 us, not 0.69)."""
    if _extobj_contextvar is None:  # pragma: no cover - another numpy
        return np.seterr(all="ignore")
    return _extobj_contextvar.set(_IGNORE)


def restore_fp(token) -> None:
    """Undo ``quiet_fp``."""
    if _extobj_contextvar is None:  # pragma: no cover - another numpy
        np.seterr(**token)
    else:
        _extobj_contextvar.reset(token)


def _quiet(ufunc, *args):
    """``ufunc(*args)`` with floating-point errors ignored (set, call, reset: ~0.5 us)."""
    if _extobj_contextvar is None:  # pragma: no cover - another numpy
        with np.errstate(all="ignore"):
            return ufunc(*args)
    token = _extobj_contextvar.set(_IGNORE)
    try:
        return ufunc(*args)
    finally:
        _extobj_contextvar.reset(token)


# A context whose numpy errstate ignores everything: ``_QUIET.run(ufunc, a, b)`` runs the
# ufunc in it, for the price of a call (setting and resetting the variable instead costs
# ~0.5 us, half of numpy's own ``a + b`` on 1e3 elements). The ufunc reads no other
# variable. A context is entered by one thread at a time: another thread, finding it
# entered, gets a RuntimeError before the call and takes ``_quiet``.
_QUIET = contextvars.copy_context()
if _extobj_contextvar is not None:
    _QUIET.run(_extobj_contextvar.set, _IGNORE)
    _run_quiet = _QUIET.run
else:  # pragma: no cover - another numpy
    _run_quiet = _quiet


# op -> (ufunc, dtype kinds it runs directly): ops whose kernel result is numpy's exactly.
UFUNCS = {
    "add": (np.add, "iuf"),
    "sub": (np.subtract, "iuf"),
    "mul": (np.multiply, "iuf"),
    "truediv": (np.true_divide, "f"),
    "neg": (np.negative, "iuf"),
    "eq": (np.equal, "iuf"),
    "ne": (np.not_equal, "iuf"),
    "lt": (np.less, "iuf"),
    "le": (np.less_equal, "iuf"),
    "gt": (np.greater, "iuf"),
    "ge": (np.greater_equal, "iuf"),
}
_DTYPES = frozenset(np.dtype(c) for c in "bBhHiIlLqQfd")  # no float16, bool, complex

ENABLED = [True]
STATS = {"direct": 0}
_new = object.__new__


@contextmanager
def disabled():
    """Every evaluation takes the general path (the kernels) inside this block.

    >>> import axesarray as ax, numpy as np
    >>> from axesarray.engine import direct
    >>> a = ax.tensor(np.ones(3), "N")
    >>> with direct.disabled():
    ...     (a + a).numpy()
    array([2., 2., 2.])
    """
    old = ENABLED[0]
    ENABLED[0] = False
    try:
        yield
    finally:
        ENABLED[0] = old


def _whole(view, strides: tuple) -> bool:
    """Whether ``view`` reads elements 0, 1, ... of its storage in C order (strides of
    length-1 dims do not matter, nor any when a length is 0)."""
    if view.offset or view.blocks is not None:
        return False
    pairs = zip(view.shape, view.strides, strides, strict=True)
    return 0 in view.shape or all(n == 1 or s == c for n, s, c in pairs)


def _eligible(root: Node) -> bool:
    if type(root) is not Map or root.op not in UFUNCS:
        return False
    ufunc, kinds = UFUNCS[root.op]
    shape = root.shape
    strides = contiguous(shape).strides
    leaves = 0
    for c in root.children:
        if c.dtype not in _DTYPES or c.dtype.kind not in kinds or c.shape != shape:
            return False
        if type(c) is Leaf:
            if type(c.data) is not np.ndarray or not _whole(c.view, strides):
                return False
            leaves += 1
        elif type(c) is not Const:
            return False
    return leaves > 0 and len(root.children) == ufunc.nin


def _threads_pay(root: Map, n: int, dtype: np.dtype) -> bool:
    """Whether the kernels would run ``root`` (``n`` elements) on threads, estimated
    faster than one core: what ``dispatch.parallel_pays`` weighs for a kernel, here for the
    op's bytes (its leaves read, its result written) and one operation an element."""
    moved = n * (dtype.itemsize + sum(c.dtype.itemsize for c in root.children if type(c) is Leaf))
    return threads_pay(seconds_of(moved, n), num_threads(load=False))


def runner_for(root: Node, unbound: set):
    """``run(root) -> Leaf | None`` for a root the direct path answers, else None. ``run``
    answers None (take the general path) while the path is off (``ENABLED``), for a leaf
    with a declared kind (a tag) while ``unbound`` (the set of unbound placeholders' tags)
    is not empty (the general path checks them), when the result is as big as
    ``serial_threshold`` (there the kernels run on every core, numpy on one) or when this
    call's storage is not a whole buffer."""
    if not _eligible(root):
        return None
    out = allocate_for(root)  # the general path's layout and key for this result
    if out.view != contiguous(root.shape):
        return None
    ufunc = UFUNCS[root.op][0]
    view, key, n, shape, dtype = out.view, out.key, out.view.size, out.view.shape, out.dtype
    threads_pay = _threads_pay(root, n, dtype)
    floats = root.children[0].dtype.kind == "f"
    kinds = tuple(type(c) is Leaf for c in root.children)
    stats, enabled, options, quiet = STATS, ENABLED, OPTIONS, _run_quiet

    def wrap(data) -> Leaf:
        leaf = _new(Leaf)
        leaf.data, leaf.view, leaf.shape, leaf.dtype = data, view, shape, data.dtype
        leaf.writeable, leaf.origin, leaf.tag, leaf.key = True, None, None, key
        stats["direct"] += 1
        return leaf

    if kinds == (True, True):

        def run(root):
            if not enabled[0] or (threads_pay and n >= options["serial_threshold"]):
                return None
            a, b = root.children
            if unbound and (a.tag is not None or b.tag is not None):
                return None  # maybe a placeholder with no value: evaluate checks
            da, db = a.data, b.data
            if len(da) != n or len(db) != n:  # storage is 1-D: len is size, and cheaper
                return None
            if floats:
                try:
                    data = quiet(ufunc, da, db)
                except RuntimeError:  # the context is entered by another thread
                    data = _quiet(ufunc, da, db)
            else:
                data = ufunc(da, db)
            leaf = _new(Leaf)  # Leaf.fresh's fields, inline (a frame per call counts)
            leaf.data, leaf.view, leaf.shape, leaf.dtype = data, view, shape, dtype
            leaf.writeable, leaf.origin, leaf.tag, leaf.key = True, None, None, key
            stats["direct"] += 1
            return leaf

        return run

    def run(root):
        if not enabled[0] or (threads_pay and n >= options["serial_threshold"]):
            return None
        args = []
        for c, is_leaf in zip(root.children, kinds, strict=True):
            if is_leaf:
                d = c.data
                if len(d) != n or (unbound and c.tag is not None):
                    return None
                args.append(d)
            else:
                args.append(c.value)
        try:
            data = quiet(ufunc, *args)
        except RuntimeError:  # the context is entered by another thread
            data = _quiet(ufunc, *args)
        return wrap(data)  # an array: at least one operand is a 1-D storage

    return run
