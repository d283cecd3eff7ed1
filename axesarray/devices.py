"""Devices: where a tensor's storage lives, and moving it between CPU and CUDA.

GPU storage is a CuPy array when CuPy is installed, else a numba device array; both are
1-D, like CPU storage. Under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the
simulator's arrays stand in for GPU memory. Imports ``tensor`` and below.
"""

from __future__ import annotations

import numpy as np

from . import expr as ex
from .errors import message

__all__ = ["to_device", "is_device_array", "cuda_empty", "host", "pointer", "upload", "DEVICES"]

DEVICES = ("cpu", "cuda")


def is_device_array(data) -> bool:
    return not isinstance(data, np.ndarray)


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def _cuda():
    from numba import cuda

    return cuda


def cuda_ready() -> bool:
    """Whether CUDA kernels can run here (a GPU, or numba's simulator)."""
    try:
        return bool(_cuda().is_available())
    except Exception:  # noqa: BLE001 - no driver, no toolkit: simply not available
        return False


def cuda_empty(n: int, dtype: np.dtype):
    """Uninitialized 1-D device storage."""
    cp = _cupy()
    if cp is not None and not _simulated():
        return cp.empty(n, dtype=dtype)
    return _cuda().device_array(n, dtype=dtype)


def upload(arr: np.ndarray):
    """Copy a 1-D host array to the device."""
    cp = _cupy()
    if cp is not None and not _simulated():
        return cp.asarray(arr)
    return _cuda().to_device(np.ascontiguousarray(arr))


def host(data) -> np.ndarray:
    """The storage as a host numpy array (a copy for device storage)."""
    if isinstance(data, np.ndarray):
        return data
    if hasattr(data, "copy_to_host"):
        return data.copy_to_host()
    return data.get()  # cupy


def write_host(data, values: np.ndarray) -> None:
    """Overwrite device storage with host ``values`` (same size)."""
    if hasattr(data, "copy_to_device"):
        data.copy_to_device(values)
    else:
        data.set(values)


def pointer(data) -> int:
    """Address of the first element, for overlap checks."""
    if isinstance(data, np.ndarray):
        return data.__array_interface__["data"][0]
    if hasattr(data, "__cuda_array_interface__"):
        return data.__cuda_array_interface__["data"][0]
    from .kernels.numba_private import simulator_pointer

    return simulator_pointer(data)


def _simulated() -> bool:
    from .kernels.numba_private import cuda_simulated

    return cuda_simulated()


def to_device(t, device: str):
    """A copy of ``t`` on ``device`` ("cpu" or "cuda"); ``t`` itself if it is there already.

    >>> import axesarray as ax
    >>> x = ax.zeros((ax.Axis("N", 2),))
    >>> x.to("cpu") is x
    True
    """
    from .tensor import Tensor

    if device not in DEVICES:
        raise ValueError(message("to", f"unknown device {device!r}", None, "Use 'cpu' or 'cuda'"))
    if t.device == device and t.is_lvalue:
        return t
    if device == "cuda" and not cuda_ready():
        raise RuntimeError(
            message(
                "to",
                "no CUDA device is available",
                None,
                "Install numba-cuda with a GPU driver, or set NUMBA_ENABLE_CUDASIM=1 to test",
            )
        )
    leaf = t.eval()._node
    data = upload(leaf.data) if device == "cuda" else host(leaf.data)
    return Tensor(t.axes, ex.Leaf(data, leaf.view), t.layout)
