"""Work that does not run a generated kernel: BLAS for ``dot``, repack kernels for copies.

``run_dot`` hands a planned contraction to the device's matmul (numpy/BLAS on the CPU,
CuPy/cuBLAS on a GPU). ``try_copy`` sends a big plain leaf-to-leaf copy to the
cache-blocked repack kernels, whose fixed cost (planning, a thread pool) is tens of
microseconds, so small copies stay with a fused copy kernel.
"""

from __future__ import annotations

from ..devices import Device
from ..expr import Leaf, Node
from .binder import array_of
from .schedule import DotStep

__all__ = ["run_dot", "try_copy", "REPACK_MIN_BYTES"]

REPACK_MIN_BYTES = 1 << 18


def run_dot(step: DotStep, params, temps: dict, dst, device: Device) -> None:
    nb, m, k, n = step.sizes
    a = device.array_view(array_of(step.a.src, params, temps, dst), step.a.view)
    b = device.array_view(array_of(step.b.src, params, temps, dst), step.b.view)
    a3 = a.transpose(step.perm_a).reshape(nb, m, k)
    b3 = b.transpose(step.perm_b).reshape(nb, k, n)
    device.matmul(a3, b3, temps[step.out.src[1]].reshape(nb, m, n))


def try_copy(dst: Leaf, root: Node) -> bool:
    """Run ``dst[...] = root`` on the repack kernels when it is a big plain copy; False
    (nothing written) when it is not one or they decline."""
    if not (
        type(root) is Leaf
        and root.dtype == dst.dtype
        and root.view.size * root.dtype.itemsize >= REPACK_MIN_BYTES
    ):
        return False
    from ..kernels.repack import try_repack  # numba-compiled: imported when first needed

    return try_repack(dst, root)
