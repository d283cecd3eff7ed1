"""Checked structures of ops on named axes, remembered per their operands' ``Axes`` objects.

A program rebuilt each call passes the same tensors, so the same ``Axes`` objects: what
an op derives from its operands' axes (result axes, positions, labels, views, dtypes) is
remembered by the objects' ids, each entry keeping its ``Axes`` alive and checked by
identity (an id is not reused while the entry holds its object). A miss runs the checks,
so a wrong name or length raises at build with its usual message; a hit was checked when
it was made. The tables are bounded. Used by ``tensors.tensor`` (broadcasting operators:
``PAIRS`` for two operands, ``MANY`` for the general path; ``ax.dot``); they read
positions only, never a node.
"""

from __future__ import annotations

import numpy as np

from ..core.axes import Axes, broadcast_axes
from ..core.dtypes import ufunc_dtypes
from ..options import OPTIONS

__all__ = ["PAIRS", "pair", "MANY", "many", "contraction"]

_MAX = 1024

# (id(left), id(right), broadcast option) -> (left axes, right axes, result axes, left
# remap maps, right maps (None where an operand's axes are the result's), result shape).
PAIRS: dict = {}


def pair(a_axes: Axes, b_axes: Axes, name: str) -> tuple:
    """``PAIRS``' entry for two operands' axes, made (``broadcast_axes``' checks, the
    ``broadcast`` option read) and remembered; callers look ``PAIRS`` up first."""
    axes = broadcast_axes(a_axes, b_axes, op=name)
    maps = [
        None if v == axes else tuple((axes.index(x.name, name), 0, 1) for x in v)
        for v in (a_axes, b_axes)
    ]
    hit = (a_axes, b_axes, axes, maps[0], maps[1], axes.shape)
    if len(PAIRS) >= _MAX:
        PAIRS.clear()
    PAIRS[(id(a_axes), id(b_axes), OPTIONS["broadcast"])] = hit
    return hit


# Any number of operands (``elementwise``'s general path: ``where``, layouts): (broadcast
# option, id of each operand's Axes or None for a scalar) -> (the Axes objects, result
# axes, result shape, each operand's remap maps or None).
MANY: dict = {}
_EMPTY = Axes()


def many(operand_axes: tuple, name: str) -> tuple:
    """``(axes, shape, maps)`` of operands with these ``Axes`` (None: a scalar): the
    result axes by ``broadcast_axes`` left to right, and per operand the remap maps to
    them (None: its axes are the result's, or a scalar); remembered in ``MANY``."""
    memo = (OPTIONS["broadcast"],) + tuple(None if a is None else id(a) for a in operand_axes)
    hit = MANY.get(memo)
    if hit is None or any(h is not a for h, a in zip(hit[0], operand_axes, strict=True)):
        axes = None
        for a in operand_axes:
            if a is not None:
                if axes is None:
                    axes = a
                elif a is not axes and a != axes:
                    axes = broadcast_axes(axes, a, op=name)
        axes = _EMPTY if axes is None else axes
        maps = tuple(
            None if a is None or a == axes else tuple((axes.index(x.name, name), 0, 1) for x in a)
            for a in operand_axes
        )
        hit = (operand_axes, axes, axes.shape, maps)
        if len(MANY) >= _MAX:
            MANY.clear()
        MANY[memo] = hit
    return hit[1], hit[2], hit[3]


# (id(a), id(b), contracted names, dtypes) -> ``_contraction``'s tuple.
_CONTRACTS: dict = {}


def contraction(
    a_axes: Axes, b_axes: Axes, over_names: tuple, a_dtype: np.dtype, b_dtype: np.dtype, op: str
) -> tuple:
    """``(a axes, b axes, result axes, a names, b names, a labels, b labels, result
    labels, result shape, loop dtypes)`` of contracting ``over_names`` (``ax.dot``)."""
    memo = (id(a_axes), id(b_axes), over_names, a_dtype, b_dtype)
    hit = _CONTRACTS.get(memo)
    if hit is None or hit[0] is not a_axes or hit[1] is not b_axes:
        hit = _contraction(a_axes, b_axes, over_names, (a_dtype, b_dtype), op)
        if len(_CONTRACTS) >= _MAX:
            _CONTRACTS.clear()
        _CONTRACTS[memo] = hit
    return hit


def _contraction(a_axes: Axes, b_axes: Axes, over_names: tuple, dtypes: tuple, op: str):
    for name in over_names:
        a_axes.index(name, op)
        b_axes.index(name, op)
    broadcast_axes(a_axes, b_axes, op=op, mode="union")  # same-name lengths must agree
    out_axes = Axes(
        [x for x in a_axes if x.name not in over_names]
        + [x for x in b_axes if x.name not in over_names and x.name not in a_axes]
    )
    a_names, b_names = a_axes.names, b_axes.names
    label = {n: i for i, n in enumerate(dict.fromkeys(a_names + b_names))}
    loop = ufunc_dtypes("matmul", dtypes, op)
    return (
        a_axes,
        b_axes,
        out_axes,
        a_names,
        b_names,
        tuple(label[n] for n in a_names),
        tuple(label[n] for n in b_names),
        tuple(label[x.name] for x in out_axes),
        out_axes.shape,
        loop,
    )
