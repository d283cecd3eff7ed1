"""Supported dtypes and numpy's promotion rules (NEP 50: Python scalars are weak).

Owns the dtype whitelist and every "what dtype does this produce" question; answers come
from numpy itself (``ufunc.resolve_dtypes``), so they match numpy exactly.
Imports ``errors`` and ``ops``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..errors import message
from .reductions_table import REDUCERS

__all__ = [
    "SUPPORTED",
    "as_dtype",
    "ufunc_dtypes",
    "reduce_dtype",
    "scan_dtype",
    "check_weak_scalar",
    "can_assign",
    "is_weak",
    "bfloat16",
    "is_bf16",
]

SUPPORTED = tuple(
    np.dtype(c)
    for c in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    )
)
_SUPPORTED = frozenset(SUPPORTED)
_WEAK = (bool, int, float)
_BOOL = np.dtype(bool)


def bfloat16() -> np.dtype:
    """numpy's bfloat16 dtype from ``ml_dtypes`` (imported on first use; ``ImportError``
    with the install hint when it is missing).

    >>> bfloat16()
    dtype(bfloat16)
    """
    global BF16
    if BF16 is None:
        try:
            import ml_dtypes
        except ImportError:
            raise ImportError(
                message(
                    "bfloat16",
                    "bfloat16 storage needs the ml_dtypes package",
                    None,
                    "pip install ml_dtypes (or axesarray[bfloat16])",
                )
            ) from None
        BF16 = np.dtype(ml_dtypes.bfloat16)
    return BF16


BF16 = None  # set by bfloat16(); only bfloat16 among the supported dtypes has kind "V"


def is_bf16(dt) -> bool:
    """Whether ``dt`` is bfloat16 (without importing ml_dtypes).

    >>> is_bf16(np.dtype("float16")), is_bf16(bfloat16())
    (False, True)
    """
    return dt.kind == "V" and dt.name == "bfloat16"


def as_dtype(dtype, op: str = "dtype") -> np.dtype:
    """Return a supported ``np.dtype`` or raise ``TypeError``.

    >>> as_dtype("float32")
    dtype('float32')
    >>> as_dtype("bfloat16")
    dtype(bfloat16)
    """
    if isinstance(dtype, str) and dtype == "bfloat16":
        return bfloat16()
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(message(op, "not a dtype", f"got {dtype!r}")) from None
    if is_bf16(dt):
        return bfloat16()
    if dt not in _SUPPORTED:
        raise TypeError(
            message(
                op,
                f"dtype {dt} is not supported",
                None,
                "Use one of: " + ", ".join(str(d) for d in SUPPORTED) + ", bfloat16",
            )
        )
    return dt


def is_weak(value) -> bool:
    """Python bool/int/float scalars are weakly typed (NEP 50)."""
    return isinstance(value, _WEAK) and not isinstance(value, np.generic)


@lru_cache(maxsize=4096)
def _resolve(ufunc_name: str, types: tuple) -> tuple[np.dtype, ...]:
    ufunc = getattr(np, ufunc_name)
    return ufunc.resolve_dtypes(types + (None,) * ufunc.nout)


def ufunc_dtypes(ufunc_name: str, types: tuple, op: str) -> tuple[np.dtype, ...]:
    """Loop dtypes numpy picks for ``ufunc(*operands)``: inputs then output.

    ``types`` holds ``np.dtype`` for arrays and ``int``/``float``/``bool`` for weak scalars.

    >>> ufunc_dtypes("add", (np.dtype("float32"), float), "add")
    (dtype('float32'), dtype('float32'), dtype('float32'))
    >>> ufunc_dtypes("true_divide", (np.dtype("int32"), np.dtype("int32")), "truediv")[-1]
    dtype('float64')
    """
    # Identity tests: np.dtype("float64") == float is True, which must not count as weak.
    if all(any(t is w for w in _WEAK) for t in types):
        # Only weak scalars: numpy gives them their default dtypes.
        types = tuple(np.result_type(t(0)) for t in types)
    # A Python bool is weak too, but bool is the lowest kind, so it is simply np.bool_.
    types = tuple(_BOOL if t is bool else t for t in types)
    try:
        return _resolve(ufunc_name, types)
    except TypeError as e:
        names = ", ".join(t.__name__ if isinstance(t, type) else str(t) for t in types)
        raise TypeError(message(op, "unsupported operand dtypes", names, str(e))) from None


@lru_cache(maxsize=1024)
def reduce_dtype(op: str, dtype: np.dtype) -> np.dtype:
    """Result dtype of a reduction, as numpy gives it (sum of int8 is int64, of bool int64).

    >>> reduce_dtype("sum", np.dtype("int8")), reduce_dtype("max", np.dtype("int8"))
    (dtype('int64'), dtype('int8'))
    """
    return np.asarray(REDUCERS[op](np.zeros(1, dtype))).dtype


@lru_cache(maxsize=1024)
def scan_dtype(func, dtype: np.dtype) -> np.dtype:
    """Result dtype of a running ``func`` (``np.cumsum``, ``np.cumprod``), as numpy gives it
    (int8 sums in int64, bool in int64, floats keep theirs).

    >>> scan_dtype(np.cumsum, np.dtype("int8")), scan_dtype(np.cumsum, np.dtype("float32"))
    (dtype('int64'), dtype('float32'))
    """
    return func(np.zeros(1, dtype)).dtype


def check_weak_scalar(value, dtype: np.dtype, op: str) -> None:
    """Raise as numpy does when a Python int does not fit the integer dtype it meets."""
    if isinstance(value, int) and not isinstance(value, bool) and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(
                message(
                    op,
                    f"Python integer {value} is out of bounds for {dtype}",
                    None,
                    f"Use a value in [{info.min}, {info.max}] or cast with astype first",
                )
            )


def can_assign(src, dst: np.dtype) -> bool:
    """Whether a value of dtype (or weak scalar) ``src`` may be written to ``dst``.

    The rule is numpy's ``copyto`` default, ``casting="same_kind"``.
    """
    if isinstance(src, np.dtype):
        return np.can_cast(src, dst, casting="same_kind")
    return np.can_cast(np.result_type(dst, src), dst, casting="same_kind")
