"""Devices: where storage lives, as a value (``Device``) that owns every storage operation.

A ``Device`` is a frozen value, ``(type, index)``: ``cpu``, ``cuda``, ``cuda:1``. What it
does with storage belongs to its *backend*, one class per kind of storage: ``HostBackend``
(1-D numpy arrays), ``CupyBackend`` (CuPy arrays on a real GPU), ``NumbaBackend`` (numba
device arrays when CuPy is missing) and ``SimulatorBackend`` (numba's CUDA simulator, under
``NUMBA_ENABLE_CUDASIM=1``: a flavour of cuda, ``Device.backend == "simulator"``). A new
kind of storage is one backend class and one entry in ``backend_for``. Code elsewhere never
tests storage types: it asks ``device_of(data)`` and calls the device's methods (allocate,
upload, copy to host, pointer, array view, matmul).

An index is honoured or refused: ``cuda:1`` stays ``cuda:1`` where the backend has several
devices (CuPy), and is refused with a clear error where it has one (numba, the simulator).
``Device`` compares equal to its string form, so ``t.device == "cpu"`` reads naturally.
Imports ``strided``, ``storage`` and (lazily) numba / CuPy.
"""

from __future__ import annotations

import attrs
import numpy as np

from ..core.strided import View
from ..errors import message
from .memory import allocate, leaf_array

__all__ = [
    "Device",
    "CPU",
    "CUDA",
    "device_of",
    "as_device",
    "host_array",
    "DEVICE_TYPES",
    "backend_for",
]

DEVICE_TYPES = ("cpu", "cuda")


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


class HostBackend:
    """Storage in host memory: 1-D, 64-byte aligned numpy arrays."""

    name = "numpy"
    has_blas = True
    strided_views = True

    def available(self) -> bool:
        return True

    def count(self) -> int:
        return 1

    def index_of(self, data) -> int:
        return 0

    def empty(self, index: int, n: int, dtype: np.dtype):
        return allocate(n, dtype)

    def upload(self, index: int, arr: np.ndarray):
        return arr

    def to_host(self, data) -> np.ndarray:
        return data

    def write_host(self, data, values: np.ndarray) -> None:
        data[...] = values

    def pointer(self, data) -> int:
        return data.__array_interface__["data"][0]

    def array_view(self, data, view: View):
        return leaf_array(data, view)

    def matmul(self, a, b, out) -> None:
        np.matmul(a, b, out=out)


class NumbaBackend:
    """numba device arrays (a GPU without CuPy): one device, no strided views, no BLAS."""

    name = "numba"
    has_blas = False
    strided_views = False

    def available(self) -> bool:
        try:
            from numba import cuda

            return bool(cuda.is_available())
        except Exception:  # noqa: BLE001 - no driver, no toolkit: simply not available
            return False

    def count(self) -> int:
        return 1

    def index_of(self, data) -> int:
        return 0

    def empty(self, index: int, n: int, dtype: np.dtype):
        from numba import cuda

        return cuda.device_array(n, dtype=dtype)

    def upload(self, index: int, arr: np.ndarray):
        from numba import cuda

        return cuda.to_device(np.ascontiguousarray(arr))

    def to_host(self, data) -> np.ndarray:
        return data.copy_to_host()

    def write_host(self, data, values: np.ndarray) -> None:
        data.copy_to_device(values)

    def pointer(self, data) -> int:
        return data.__cuda_array_interface__["data"][0]

    def array_view(self, data, view: View):
        raise NotImplementedError(
            message("array_view", "only CuPy device arrays have strided views", self.name)
        )

    def matmul(self, a, b, out) -> None:
        raise NotImplementedError(message("matmul", "no BLAS on this backend", self.name))


class SimulatorBackend(NumbaBackend):
    """numba's CUDA simulator: host memory standing in for one GPU (for tests)."""

    name = "simulator"

    def pointer(self, data) -> int:
        from .numba_private import simulator_pointer

        return simulator_pointer(data)


class CupyBackend:
    """CuPy arrays on real GPUs: every device index, strided views and cuBLAS."""

    name = "cupy"
    has_blas = True
    strided_views = True

    def available(self) -> bool:
        return NumbaBackend().available()

    def count(self) -> int:
        return _cupy().cuda.runtime.getDeviceCount()

    def index_of(self, data) -> int:
        return data.device.id

    def empty(self, index: int, n: int, dtype: np.dtype):
        cp = _cupy()
        with cp.cuda.Device(index):
            return cp.empty(n, dtype=dtype)

    def upload(self, index: int, arr: np.ndarray):
        cp = _cupy()
        with cp.cuda.Device(index):
            return cp.asarray(arr)

    def to_host(self, data) -> np.ndarray:
        return data.get()

    def write_host(self, data, values: np.ndarray) -> None:
        data.set(values)

    def pointer(self, data) -> int:
        return data.__cuda_array_interface__["data"][0]

    def array_view(self, data, view: View):
        size = data.dtype.itemsize
        ptr = data.data + view.offset * size
        strides = tuple(s * size for s in view.strides)
        return _cupy().ndarray(view.shape, data.dtype, ptr, strides)

    def matmul(self, a, b, out) -> None:
        _cupy().matmul(a, b, out=out)


_HOST = HostBackend()


def backend_for(device_type: str):
    """The backend that holds storage of ``device_type`` in this process.

    >>> backend_for("cpu").name
    'numpy'
    """
    if device_type == "cpu":
        return _HOST
    from .numba_private import cuda_simulated

    if cuda_simulated():
        return SimulatorBackend()
    return CupyBackend() if _cupy() is not None else NumbaBackend()


@attrs.frozen(eq=False)
class Device:
    """A place for storage: ``Device("cpu")`` or ``Device("cuda", index)``.

    >>> Device("cpu") == "cpu", str(Device("cuda", 1)), Device("cuda").type
    (True, 'cuda:1', 'cuda')
    """

    type: str
    index: int = 0

    def __str__(self) -> str:
        return self.type if self.type == "cpu" or self.index == 0 else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"Device({str(self)!r})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = as_device(other)
            except ValueError:
                return False
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    # --- what runs there -----------------------------------------------------------------

    @property
    def is_cpu(self) -> bool:
        """Whether this is the host.

        >>> Device("cpu").is_cpu, Device("cuda").is_cpu
        (True, False)
        """
        return self.type == "cpu"

    @property
    def _impl(self):
        return _HOST if self.type == "cpu" else backend_for(self.type)

    @property
    def backend(self) -> str:
        """ "numpy" (cpu), "cupy", "numba" (numba device arrays) or "simulator".

        >>> Device("cpu").backend
        'numpy'
        """
        return self._impl.name

    def available(self) -> bool:
        """Whether kernels can run here (for cuda: a GPU, or numba's simulator).

        >>> Device("cpu").available()
        True
        """
        return self._impl.available()

    def check_available(self, op: str) -> None:
        """Raise a ``RuntimeError`` naming ``op`` when ``available()`` is False, and a
        ``ValueError`` when the backend has no device of this index.

        >>> Device("cpu").check_available("to")  # nothing to say: the host is always there
        """
        impl = self._impl
        if not impl.available():
            raise RuntimeError(
                message(
                    op,
                    f"no {self.type.upper()} device is available",
                    str(self),
                    "Install numba-cuda with a GPU driver, or set NUMBA_ENABLE_CUDASIM=1 to test",
                )
            )
        if self.index >= impl.count():
            n = impl.count()
            raise ValueError(
                message(
                    op,
                    f"device {self} does not exist: the {impl.name} backend has {n} "
                    f"{self.type} device{'s' if n != 1 else ''}",
                    f"{self.type}:0" + (f" .. {self.type}:{n - 1}" if n > 1 else ""),
                    f"Use '{self.type}'" + (f" or '{self.type}:N' with N < {n}" if n > 1 else ""),
                )
            )

    # --- storage -----------------------------------------------------------------------------

    def empty(self, n: int, dtype: np.dtype):
        """Uninitialized 1-D storage of ``n`` elements.

        >>> import numpy as np
        >>> Device("cpu").empty(4, np.dtype("float32")).shape
        (4,)
        """
        return self._impl.empty(self.index, n, dtype)

    def upload(self, arr: np.ndarray):
        """A copy of the 1-D host array ``arr`` on this device (``arr`` itself on the cpu).

        >>> import numpy as np
        >>> a = np.zeros(3)
        >>> Device("cpu").upload(a) is a
        True
        """
        return self._impl.upload(self.index, arr)

    def to_host(self, data) -> np.ndarray:
        """The storage as a host numpy array (a copy for device storage).

        >>> import numpy as np
        >>> Device("cpu").to_host(np.arange(3))
        array([0, 1, 2])
        """
        return self._impl.to_host(data)

    def write_host(self, data, values: np.ndarray) -> None:
        """Overwrite the storage with host ``values`` (same size).

        >>> import numpy as np
        >>> data = np.zeros(2)
        >>> Device("cpu").write_host(data, np.array([1.0, 2.0])); data
        array([1., 2.])
        """
        self._impl.write_host(data, values)

    def pointer(self, data) -> int:
        """Address of the first element, for overlap checks.

        >>> import numpy as np
        >>> a = np.zeros(4)
        >>> Device("cpu").pointer(a[1:]) - Device("cpu").pointer(a)
        8
        """
        return self._impl.pointer(data)

    def array_view(self, data, view: View):
        """A (numpy or CuPy) array for a plain view of 1-D storage, without copying.

        >>> import numpy as np
        >>> from axesarray.core.strided import View
        >>> Device("cpu").array_view(np.arange(6.0), View((2, 3), (1, 2), 0))
        array([[0., 2., 4.],
               [1., 3., 5.]])
        """
        return self._impl.array_view(data, view)

    @property
    def has_blas(self) -> bool:
        """Whether ``matmul`` runs a BLAS (numpy on the cpu, cuBLAS through CuPy).

        >>> Device("cpu").has_blas
        True
        """
        return self._impl.has_blas

    def matmul(self, a, b, out) -> None:
        """``out[...] = a @ b`` for 3-D arrays from ``array_view``.

        >>> import numpy as np
        >>> out = np.empty((1, 2, 2))
        >>> Device("cpu").matmul(np.ones((1, 2, 3)), np.ones((1, 3, 2)), out); out[0]
        array([[3., 3.],
               [3., 3.]])
        """
        self._impl.matmul(a, b, out)


CPU = Device("cpu")
CUDA = Device("cuda")


def device_of(data) -> Device:
    """The device holding 1-D storage ``data``: the only storage type test in the package.

    >>> device_of(np.zeros(3))
    Device('cpu')
    """
    if type(data) is np.ndarray or isinstance(data, np.ndarray):
        return CPU
    index = backend_for("cuda").index_of(data)
    return CUDA if index == 0 else Device("cuda", index)


def as_device(spec) -> Device:
    """``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``Device`` as a ``Device``.

    >>> as_device("cuda:0") == Device("cuda")
    True
    """
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, str):
        type_, _, index = spec.partition(":")
        if type_ in DEVICE_TYPES and (index == "" or (index.isdigit() and type_ == "cuda")):
            return Device(type_, int(index or 0))
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
