"""1-D storage: aligned allocation and zero-copy wrapping of numpy arrays.

Owns turning any numpy array into (1-D base buffer, ``View``) without copying, and the
64-byte aligned allocator. Imports ``errors`` and ``strided``.
"""

from __future__ import annotations

import math
import sys
from ctypes import addressof, c_char

import numpy as np

from ..core.strided import View, contiguous
from ..errors import AxesError, fmt_axes, message

__all__ = ["ALIGN", "AllocationError", "allocate", "wrap_array", "leaf_array", "fresh"]

ALIGN = 64  # bytes; allocations start on a cache line


_BYTES = np.dtype(np.uint8)
SMALL = 4096  # bytes below which allocations skip the alignment (and its cost)


class AllocationError(AxesError, MemoryError):
    """Memory for a tensor cannot be had: an ``AxesError`` that is also a ``MemoryError``."""


def _refuse(op: str, n: int, dtype: np.dtype, axes, reason: str) -> AllocationError:
    what = fmt_axes(axes) if axes is not None else f"{n:,} elements"
    return AllocationError(
        message(
            op,
            f"cannot allocate {n * dtype.itemsize:,} bytes: {reason}",
            f"{what}; {dtype}",
            "Use shorter axes or a smaller dtype, or process the data in pieces",
        )
    )


def allocate(n: int, dtype: np.dtype, fill=None, axes=None, op: str = "allocate") -> np.ndarray:
    """A 1-D array of ``n`` elements whose first byte is ``ALIGN``-aligned.

    Small arrays (under ``SMALL`` bytes) keep numpy's own alignment: finding the address
    costs more than an evaluation of a small expression, and kernels accept any alignment.
    A size that cannot be had raises ``AllocationError`` naming ``op`` and ``axes`` (when
    given) instead of numpy's message.

    >>> try:
    ...     allocate(1 << 62, np.dtype("float64"), op="zeros")
    ... except MemoryError as e:
    ...     print(str(e)[:62])
    zeros: cannot allocate 36,893,488,147,419,103,232 bytes: more
    """
    itemsize = dtype.itemsize
    nbytes = n * itemsize
    if nbytes < SMALL:
        buf = np.empty(n, dtype)
        if fill is not None:
            buf.fill(fill)
        return buf
    if nbytes + ALIGN > sys.maxsize:
        raise _refuse(op, n, dtype, axes, "more than an address can span")
    try:
        raw = np.empty(nbytes + ALIGN, _BYTES)
    except MemoryError:
        raise _refuse(op, n, dtype, axes, "more than the system can give") from None
    # ``raw.ctypes.data`` builds a ctypes helper object (about 1 us, measured): the buffer
    # protocol gives the address for a third of that, which a small result's call feels.
    buf = np.ndarray((n,), dtype, raw, (-addressof(c_char.from_buffer(raw))) % ALIGN)
    if fill is not None:
        buf.fill(fill)
    return buf


def wrap_array(arr: np.ndarray) -> tuple[np.ndarray, View] | None:
    """Express ``arr`` as a view over a 1-D buffer that shares its memory.

    Returns None when the byte strides are not multiples of the item size (then the
    caller copies).

    >>> a = np.arange(6.0).reshape(2, 3)[:, ::-1]
    >>> base, view = wrap_array(a)
    >>> view.strides, view.offset, base.shape
    ((3, -1), 2, (6,))
    """
    itemsize = arr.itemsize
    if any(s % itemsize for s in arr.strides):
        return None
    strides = tuple(s // itemsize for s in arr.strides)
    if arr.size == 0:
        return np.empty(0, arr.dtype), View(arr.shape, strides, 0)
    # Lowest and highest element addresses, relative to arr's first element.
    lo = sum(s * (n - 1) for s, n in zip(strides, arr.shape, strict=True) if s < 0)
    hi = sum(s * (n - 1) for s, n in zip(strides, arr.shape, strict=True) if s > 0)
    # A view of arr that starts at the lowest address: flip every negative-stride axis.
    flip = tuple(slice(None, None, -1) if s < 0 else slice(None) for s in strides)
    low_view = arr[flip] if lo else arr
    base = np.lib.stride_tricks.as_strided(
        low_view, shape=(hi - lo + 1,), strides=(itemsize,), writeable=arr.flags.writeable
    )
    return base, View(arr.shape, strides, -lo)


def leaf_array(data: np.ndarray, view: View, writeable: bool = True) -> np.ndarray:
    """The numpy array a view of host storage describes: zero-copy for plain views, a
    gather when blocked (``devices.host_array`` copies device storage to the host first)."""
    if view.blocks is not None:
        from ..core.strided import addresses

        return data[addresses(view)]
    itemsize = data.itemsize
    byte_strides = tuple(s * itemsize for s in view.strides)
    if math.prod(view.shape) == 0:
        # Nothing to read; keep numpy's strides so empty views still look like numpy's.
        return np.lib.stride_tricks.as_strided(np.empty(1, data.dtype), view.shape, byte_strides)
    out = np.ndarray(
        view.shape,
        data.dtype,
        buffer=data,
        offset=view.offset * itemsize,
        strides=byte_strides,
    )
    if not writeable and out.flags.writeable:
        out.flags.writeable = False
    return out


def fresh(
    shape: tuple[int, ...],
    dtype: np.dtype,
    order: tuple[int, ...] | None = None,
    axes=None,
    op: str = "allocate",
):
    """Allocate a C-contiguous buffer laid out in physical ``order`` (a permutation of dims).

    Returns ``(data, view)`` where ``view`` is in logical dim order. ``axes`` and ``op``
    name the tensor in the error raised when the memory cannot be had.
    """
    n = math.prod(shape)
    data = allocate(n, dtype, axes=axes, op=op)
    if order is None:
        return data, contiguous(shape)
    phys = contiguous(tuple(shape[d] for d in order))
    strides = [0] * len(shape)
    for p, d in enumerate(order):
        strides[d] = phys.strides[p]
    return data, View(tuple(shape), tuple(strides), 0)
