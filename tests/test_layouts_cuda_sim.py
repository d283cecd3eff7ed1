"""CUDA repacks under numba's simulator (tiny shapes), and on a real GPU when one exists.

``NUMBA_ENABLE_CUDASIM`` must be set before numba is imported, so the simulator runs in a
subprocess and the rest of the suite keeps the real numba.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from axesarray.core.strided import contiguous
from axesarray.dag.nodes import Leaf
from axesarray.kernels.repack.run_cpu import try_repack

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from numba import cuda
    import axesarray as ax
    from axesarray.dag.nodes import Leaf
    from axesarray.kernels.repack.run_cpu import try_repack
    from axesarray.kernels.repack.plan import plans
    from axesarray.layout_ops import empty_like_layout

    def expected(logical, name):
        n, c, h, w = logical.shape
        if name == "NCHW":
            return logical
        if name == "NHWC":
            return logical.transpose(0, 2, 3, 1)
        x = 4 if name == "CHWN4" else int(name[4:])
        cb = -(-c // x)
        p = np.pad(logical, ((0, 0), (0, cb * x - c), (0, 0), (0, 0))).reshape(n, cb, x, h, w)
        return p.transpose(1, 3, 4, 0, 2) if name == "CHWN4" else p.transpose(0, 1, 3, 4, 2)

    CASES = [("NCHW", "NHWC", (2, 3, 2, 3)), ("NHWC", "NCHW4", (1, 5, 2, 2)),
             ("NCHW4", "CHWN4", (3, 6, 1, 2)), ("CHWN4", "NCHW", (2, 5, 2, 1)),
             ("NCHW", "NCHW32", (1, 33, 1, 2)), ("NCHW", "NHWC", (1, 33, 34, 1))]
    kinds = set()
    for dtype in ("int8", "float16", "float32", "float64"):
        for src_name, dst_name, shape in CASES:
            if dtype != "float32" and shape[2] > 30:
                continue  # one multi-tile case is enough: the simulator is slow
            logical = np.random.default_rng(0).integers(1, 100, shape).astype(dtype)
            src = ax.tensor(logical, "N C H W").to_layout(src_name)
            host = empty_like_layout(src.axes, src.dtype, ax.Layout.parse(dst_name))
            d = cuda.to_device(host._node.data)
            s = cuda.to_device(src._node.data)
            dst_leaf = Leaf(d, host._node.view)
            for p in plans(dst_leaf.shape, src._node.view, dst_leaf.view, 1, widen=False):
                kinds.add("rows" if p.rows else "tile")
            assert try_repack(dst_leaf, Leaf(s, src._node.view))
            out = d.copy_to_host().reshape(host.physical.shape)
            np.testing.assert_array_equal(out, expected(logical, dst_name), strict=True)
    assert kinds == {"rows", "tile"}, kinds
    # Tensor level: a device tensor converts on the device, padding zero.
    logical = np.random.default_rng(1).integers(1, 100, (2, 5, 2, 3)).astype("float32")
    dev = ax.tensor(logical, "N C H W").to("cuda")
    packed = dev.to_layout("NCHW4")
    assert packed.device == "cuda" and str(packed.layout) == "NCHW4"
    back = packed.to("cpu")
    np.testing.assert_array_equal(back.physical, expected(logical, "NCHW4"))
    np.testing.assert_array_equal(packed.to_layout("NHWC").to("cpu").physical,
                                  logical.transpose(0, 2, 3, 1))
    print("cuda repack ok")
    """
)


def run_script(env_extra: dict) -> subprocess.CompletedProcess:
    env = dict(os.environ, **env_extra)
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.cuda
def test_cuda_repack_under_the_simulator():
    proc = run_script({"NUMBA_ENABLE_CUDASIM": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cuda repack ok" in proc.stdout


def _gpu_available() -> bool:
    """A real GPU (conftest may have switched this process to the simulator)."""
    try:
        from numba import config, cuda

        return not config.ENABLE_CUDASIM and bool(cuda.is_available())
    except Exception:  # no driver, no toolkit: no GPU
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_available(), reason="needs a CUDA GPU")
def test_cuda_repack_on_a_gpu():
    proc = run_script({"NUMBA_ENABLE_CUDASIM": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_host_and_device_arrays_do_not_mix():
    class FakeDevice:  # anything with __cuda_array_interface__ counts as device memory
        __cuda_array_interface__ = {}
        dtype = np.dtype("float32")

    host = Leaf(np.zeros(4, "float32"), contiguous((4,)))
    assert not try_repack(Leaf(FakeDevice(), contiguous((4,))), host)
