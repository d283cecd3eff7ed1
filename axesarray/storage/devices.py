"""Devices: where storage lives, as a value (``Device``) that owns every storage operation.

``cpu`` storage is a 1-D numpy array. ``cuda`` storage is a CuPy array when CuPy is
installed and a real GPU runs, else a numba device array; under numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) the simulator's arrays stand in for GPU memory (a flavour of
cuda: ``Device.backend == "simulator"``). Code elsewhere never tests storage types: it
asks ``device_of(data)`` and calls the device's methods (allocate, upload, copy to host,
pointer, array view, matmul).

``Device`` compares equal to its string form, so ``t.device == "cpu"`` reads naturally.
Imports ``strided``, ``storage`` and (lazily) numba / CuPy.
"""

from __future__ import annotations

import attrs
import numpy as np

from ..errors import message
from .memory import allocate, leaf_array
from ..core.strided import View

__all__ = ["Device", "CPU", "CUDA", "device_of", "as_device", "host_array", "DEVICE_KINDS"]

DEVICE_KINDS = ("cpu", "cuda")


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


@attrs.frozen(eq=False)
class Device:
    """A place for storage: ``Device("cpu")`` or ``Device("cuda", index)``.

    >>> Device("cpu") == "cpu", str(Device("cuda", 1))
    (True, 'cuda:1')
    """

    kind: str
    index: int = 0

    def __str__(self) -> str:
        return self.kind if self.kind == "cpu" or self.index == 0 else f"{self.kind}:{self.index}"

    def __repr__(self) -> str:
        return f"Device({str(self)!r})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = as_device(other)
            except ValueError:
                return False
        return isinstance(other, Device) and (self.kind, self.index) == (other.kind, other.index)

    def __hash__(self) -> int:
        return hash((self.kind, self.index))

    # --- what runs there -----------------------------------------------------------------

    @property
    def is_cpu(self) -> bool:
        """Whether this is the host.

        >>> Device("cpu").is_cpu, Device("cuda").is_cpu
        (True, False)
        """
        return self.kind == "cpu"

    @property
    def backend(self) -> str:
        """ "numpy" (cpu), "cupy", "numba" (numba device arrays) or "simulator".

        >>> Device("cpu").backend
        'numpy'
        """
        if self.is_cpu:
            return "numpy"
        from .numba_private import cuda_simulated

        if cuda_simulated():
            return "simulator"
        return "cupy" if _cupy() is not None else "numba"

    def available(self) -> bool:
        """Whether kernels can run here (for cuda: a GPU, or numba's simulator).

        >>> Device("cpu").available()
        True
        """
        if self.is_cpu:
            return True
        try:
            from numba import cuda

            return bool(cuda.is_available())
        except Exception:  # noqa: BLE001 - no driver, no toolkit: simply not available
            return False

    def check_available(self, op: str) -> None:
        """Raise a ``RuntimeError`` naming ``op`` when ``available()`` is False.

        >>> Device("cpu").check_available("to")  # nothing to say: the host is always there
        """
        if not self.available():
            raise RuntimeError(
                message(
                    op,
                    f"no {self.kind.upper()} device is available",
                    str(self),
                    "Install numba-cuda with a GPU driver, or set NUMBA_ENABLE_CUDASIM=1 to test",
                )
            )

    # --- storage -----------------------------------------------------------------------------

    def empty(self, n: int, dtype: np.dtype):
        """Uninitialized 1-D storage of ``n`` elements.

        >>> import numpy as np
        >>> Device("cpu").empty(4, np.dtype("float32")).shape
        (4,)
        """
        if self.is_cpu:
            return allocate(n, dtype)
        if self.backend == "cupy":
            return _cupy().empty(n, dtype=dtype)
        from numba import cuda

        return cuda.device_array(n, dtype=dtype)

    def upload(self, arr: np.ndarray):
        """A copy of the 1-D host array ``arr`` on this device (``arr`` itself on the cpu).

        >>> import numpy as np
        >>> a = np.zeros(3)
        >>> Device("cpu").upload(a) is a
        True
        """
        if self.is_cpu:
            return arr
        if self.backend == "cupy":
            return _cupy().asarray(arr)
        from numba import cuda

        return cuda.to_device(np.ascontiguousarray(arr))

    def to_host(self, data) -> np.ndarray:
        """The storage as a host numpy array (a copy for device storage).

        >>> import numpy as np
        >>> Device("cpu").to_host(np.arange(3))
        array([0, 1, 2])
        """
        if self.is_cpu:
            return data
        if self.backend == "cupy":
            return data.get()
        return data.copy_to_host()

    def write_host(self, data, values: np.ndarray) -> None:
        """Overwrite the storage with host ``values`` (same size).

        >>> import numpy as np
        >>> data = np.zeros(2)
        >>> Device("cpu").write_host(data, np.array([1.0, 2.0])); data
        array([1., 2.])
        """
        if self.is_cpu:
            data[...] = values
        elif self.backend == "cupy":
            data.set(values)
        else:
            data.copy_to_device(values)

    def pointer(self, data) -> int:
        """Address of the first element, for overlap checks.

        >>> import numpy as np
        >>> a = np.zeros(4)
        >>> Device("cpu").pointer(a[1:]) - Device("cpu").pointer(a)
        8
        """
        if self.is_cpu:
            return data.__array_interface__["data"][0]
        if self.backend == "simulator":
            from .numba_private import simulator_pointer

            return simulator_pointer(data)
        return data.__cuda_array_interface__["data"][0]

    def array_view(self, data, view: View):
        """A (numpy or CuPy) array for a plain view of 1-D storage, without copying.

        >>> import numpy as np
        >>> from axesarray.strided import View
        >>> Device("cpu").array_view(np.arange(6.0), View((2, 3), (1, 2), 0))
        array([[0., 2., 4.],
               [1., 3., 5.]])
        """
        if self.is_cpu:
            return leaf_array(data, view)
        if self.backend != "cupy":
            raise NotImplementedError(
                message("array_view", "only CuPy device arrays have strided views", str(self))
            )
        size = data.dtype.itemsize
        ptr = data.data + view.offset * size
        return _cupy().ndarray(view.shape, data.dtype, ptr, tuple(s * size for s in view.strides))

    @property
    def has_blas(self) -> bool:
        """Whether ``matmul`` runs a BLAS (numpy on the cpu, cuBLAS through CuPy).

        >>> Device("cpu").has_blas
        True
        """
        return self.is_cpu or self.backend == "cupy"

    def matmul(self, a, b, out) -> None:
        """``out[...] = a @ b`` for 3-D arrays from ``array_view``.

        >>> import numpy as np
        >>> out = np.empty((1, 2, 2))
        >>> Device("cpu").matmul(np.ones((1, 2, 3)), np.ones((1, 3, 2)), out); out[0]
        array([[3., 3.],
               [3., 3.]])
        """
        if self.is_cpu:
            np.matmul(a, b, out=out)
        else:
            _cupy().matmul(a, b, out=out)


CPU = Device("cpu")
CUDA = Device("cuda")


def device_of(data) -> Device:
    """The device holding 1-D storage ``data``: the only storage type test in the package."""
    return CPU if type(data) is np.ndarray or isinstance(data, np.ndarray) else CUDA


def as_device(spec) -> Device:
    """``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``Device`` as a ``Device``.

    >>> as_device("cuda:0") == Device("cuda")
    True
    """
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, str):
        kind, _, index = spec.partition(":")
        if kind in DEVICE_KINDS and (index == "" or (index.isdigit() and kind == "cuda")):
            return Device(kind, int(index or 0))
    raise ValueError(
        message("to", f"unknown device {spec!r}", None, "Use 'cpu', 'cuda' or 'cuda:N'")
    )


def host_array(data, view: View, writeable: bool = True) -> np.ndarray:
    """The numpy array a view of storage describes, copied to the host for device storage
    (then read-only)."""
    dev = device_of(data)
    if not dev.is_cpu:
        return leaf_array(dev.to_host(data), view, False)
    return leaf_array(data, view, writeable)
