"""Work that does not run a generated kernel: BLAS for ``dot``, numpy for ``call``, repack
kernels for copies.

``run_dot`` hands a planned contraction to the device's matmul (numpy/BLAS on the CPU,
CuPy/cuBLAS on a GPU). ``try_copy`` sends a big plain leaf-to-leaf copy to the
cache-blocked repack kernels, whose fixed cost (planning, a thread pool) is tens of
microseconds, so small copies stay with a fused copy kernel.
"""

from __future__ import annotations

import numpy as np

from ..dag.nodes import Leaf, Node
from ..kernels import scans
from ..kernels.threads import blas_ran, interrupts_held
from ..storage.devices import Device, host_array
from ..storage.memory import leaf_array
from .binder import array_of
from .reference import call_value
from .schedule import CallStep, DotStep

__all__ = [
    "run_dot",
    "host_dot",
    "dot_runner",
    "run_call",
    "ROUTES",
    "try_copy",
    "REPACK_MIN_BYTES",
]

REPACK_MIN_BYTES = 1 << 18


def run_dot(step: DotStep, params, temps: dict, dst, device: Device) -> None:
    a = array_of(step.a.src, params, temps, dst)
    b = array_of(step.b.src, params, temps, dst)
    # the output: a C-order temp, or the destination when its layout is BLAS rows
    out = array_of(step.out.src, params, temps, dst)
    if device.is_cpu:
        host_dot(a, b, out, step)
        return
    nb, m, k, n = step.sizes
    a3 = device.array_view(a, step.a.view).transpose(step.perm_a).reshape(nb, m, k)
    b3 = device.array_view(b, step.b.view).transpose(step.perm_b).reshape(nb, k, n)
    device.matmul(a3, b3, device.array_view(out, step.out.view).reshape(nb, m, n))


def host_dot(a, b, out, step: DotStep) -> None:
    """A dot step on host storage (``a``, ``b``, ``out``: the 1-D arrays its leaves view):
    one ``np.matmul`` (BLAS) of the batched matrices. The straight runners call it too."""
    nb, m, k, n = step.sizes
    a3 = leaf_array(a, step.a.view).transpose(step.perm_a).reshape(nb, m, k)
    b3 = leaf_array(b, step.b.view).transpose(step.perm_b).reshape(nb, k, n)
    np.matmul(a3, b3, out=leaf_array(out, step.out.view).reshape(nb, m, n))
    blas_ran(m, n, k)  # its threads may now hold the other cores (kernels.threads)


def dot_runner(step: DotStep, a, b, out):
    """``host_dot`` of ``step`` as a function of its three storages, for the straight
    runners: each operand's matrix is a strided view of its storage whose shape, strides
    and byte offset are fixed by the step's views (the plan key fixes them), so it is found
    once, from this run's storages ``a``, ``b``, ``out``, and made per call by one
    ``np.ndarray`` over the storage (a fifth of ``leaf_array``, transpose and reshape). None
    (call ``host_dot``) when an operand's matrix is not a view of its storage (numpy copies
    a transposed operand it cannot reshape), a view is blocked or empty, or a storage is
    not a plain contiguous array."""
    nb, m, k, n = step.sizes
    recipes = []
    for data, kl, perm, shape in (
        (a, step.a, step.perm_a, (nb, m, k)),
        (b, step.b, step.perm_b, (nb, k, n)),
        (out, step.out, None, (nb, m, n)),
    ):
        if (
            type(data) is not np.ndarray
            or not data.flags.c_contiguous
            or kl.view.blocks is not None
            or data.size == 0
            or 0 in shape
        ):
            return None
        arr = leaf_array(data, kl.view)
        arr = (arr if perm is None else arr.transpose(perm)).reshape(shape)
        if not np.may_share_memory(arr, data):  # a copy (a fresh buffer never overlaps)
            return None
        if nb == 1:  # a plain matrix product: numpy's 2-D loop
            arr = arr[0]
        offset = arr.__array_interface__["data"][0] - data.__array_interface__["data"][0]
        recipes.append((arr.shape, data.dtype, offset, arr.strides))
    (sa, ta, oa, ka), (sb, tb, ob, kb), (so, to, oo, ko) = recipes
    nd, matmul = np.ndarray, np.matmul

    def run(a, b, out) -> None:
        matmul(nd(sa, ta, a, oa, ka), nd(sb, tb, b, ob, kb), out=nd(so, to, out, oo, ko))
        blas_ran(m, n, k)

    return run


def run_call(step: CallStep, params, temps: dict, dst, device: Device) -> None:
    """Evaluate a numpy call on host arrays (device operands are copied to the host) and
    write its C-order result into the step's temp; a running sum or product by its
    compiled loop when loaded (``kernels.scans``), from the operand's storage straight
    into the temp's."""
    out = step.out
    if step.scan is not None and device.is_cpu:
        x = array_of(step.args[0].src, params, temps, dst)
        if scans.run(step.scan, x, array_of(out.src, params, temps, dst)):
            return
    arrays = [host_array(array_of(a.src, params, temps, dst), a.view) for a in step.args]
    value = call_value(step.fn, step.name, out.view.shape, out.dtype, arrays)
    device.write_host(temps[out.src[1]], value.reshape(-1))


# Steps that are not generated kernels, by type: how the executor runs each.
ROUTES = {DotStep: run_dot, CallStep: run_call}


def try_copy(dst: Leaf, root: Node) -> bool:
    """Run ``dst[...] = root`` on the repack kernels when it is a big plain copy; False
    (nothing written) when it is not one or they decline."""
    if not (
        type(root) is Leaf
        and root.dtype == dst.dtype
        and root.view.size * root.dtype.itemsize >= REPACK_MIN_BYTES
    ):
        return False
    global _RUN_CPU
    if _RUN_CPU is None:
        with interrupts_held():  # numba-compiled: imported when first needed
            from ..kernels.repack import run_cpu
        _RUN_CPU = run_cpu
    return _RUN_CPU.try_repack(dst, root)


_RUN_CPU = None  # ``kernels.repack.run_cpu`` once imported
