"""The fused engine: plan once per expression structure, then run compiled kernels.

Owns the plan cache (keyed by the nodes' structural keys, which hold ops, dtypes and leaf
views, plus the identity pattern of the leaves, the device and the destination), binding a
cached plan to the current arrays and scalars, the alias check of DESIGN §3 (in place only
when the output is read through the identical view at the same index; any other overlap
goes through a temporary), and dispatch to a kernel variant: CPU serial (small), parallel,
stream (big contiguous outputs) or CUDA.
"""

from __future__ import annotations

import hashlib
import math
import sys
import threading
import weakref
from collections import OrderedDict
from pathlib import Path

import numpy as np

from .._version import __version__
from ..devices import pointer as _pointer
from ..errors import message
from ..expr import Leaf, Node
from ..kernels import cache as kcache
from ..kernels import mathlib
from ..kernels.cpu import can_stream, cpu_source
from ..kernels.cuda import cuda_source
from ..kernels.ir import KLeaf
from ..kernels.lower import Lowered
from ..kernels.repack import try_repack
from ..options import OPTIONS
from ..storage import allocate, device_of, leaf_array
from ..strided import View, span
from .explain import debug_level, debug_print
from .planner import (
    DotStep,
    KernelStep,
    Schedule,
    build_plan,
    fresh_view,
    make_step,
    signature,
)

__all__ = ["evaluate", "assign", "explain", "plan_for", "run_plan", "PLAN_STATS"]

_PLANS: OrderedDict = OrderedDict()
_PLANS_MAX = 512
_plans_lock = threading.Lock()
PLAN_STATS = {"hits": 0, "misses": 0}
_F16 = np.dtype(np.float16)
_U16 = np.dtype(np.uint16)
# Generated files name the hash of the code they inline (the math library and the SIMD
# intrinsics), so editing it invalidates numba's disk cache of every kernel.
_MATHLIB = hashlib.sha256(
    b"".join(
        (Path(mathlib.__file__).parent / name).read_bytes()
        for name in ("mathlib.py", "repack_simd.py", "repack_plan.py")
    )
).hexdigest()[:12]
# Outputs at least this big are written with streaming (non-temporal) stores when their
# rows are contiguous: they would not stay in cache anyway, and skipping the read of each
# destination line saves a third of the memory traffic.
STREAM_MIN_BYTES = 8 << 20
STREAM_MIN_ROW = 1024


def _device_error(devices) -> ValueError:
    return ValueError(
        message(
            "evaluate",
            "the operands are on different devices",
            ", ".join(sorted(devices)),
            "Move them first: t.to('cuda') or t.to('cpu')",
        )
    )


def _blas(device: str) -> bool:
    """Whether dot runs on BLAS: numpy on the CPU, CuPy (cuBLAS) on a real GPU."""
    if device == "cpu":
        return True
    from .. import devices

    return devices._cupy() is not None and not devices._simulated()


def plan_for(root: Node, dst: Leaf | None) -> tuple[Schedule, list[Node], bool]:
    """The cached plan for ``dst[...] = root`` (or a fresh result), the run-time parameters
    in the plan's order, and whether the plan was cached.

    The key is ``root.key`` (built with the nodes) plus the identity pattern of the leaves,
    the device and the destination's view: no walk over the tree on a hit.
    """
    params = root.params
    ids = []
    on_gpu = dst is not None and type(dst.data) is not np.ndarray
    for p in params:
        if type(p) is Leaf:
            ids.append(id(p))
            if type(p.data) is not np.ndarray:
                on_gpu = True
    pattern = None
    if len(set(ids)) != len(ids):  # a leaf read more than once: its repeats are structure
        first = {}
        pattern = tuple(first.setdefault(i, k) for k, i in enumerate(ids))
    device = "cuda" if on_gpu else "cpu"
    key = (root.key, pattern, device) if dst is None else (root.key, pattern, device, dst.key)
    plan = _PLANS.get(key)
    if plan is not None:
        PLAN_STATS["hits"] += 1
        return plan, [params[i] for i in plan.positions], True
    if on_gpu:
        found = {device_of(p.data) for p in params if type(p) is Leaf}
        if dst is not None:
            found.add(device_of(dst.data))
        if len(found) > 1:
            raise _device_error(found)
    _, canonical, canon = signature(root)
    target = None if dst is None else (dst.view, dst.dtype)
    plan = build_plan(root, canonical, canon, target, _blas(device))
    plan.device = device
    first_at = {}
    for k, p in enumerate(params):
        first_at.setdefault(id(p), k)
    plan.positions = tuple(first_at[id(p)] for p in canonical)
    debug_print(plan)
    with _plans_lock:
        PLAN_STATS["misses"] += 1
        _PLANS[key] = plan
        if len(_PLANS) > _PLANS_MAX:
            _PLANS.popitem(last=False)
    return plan, canonical, False


# --- binding a step to data -------------------------------------------------------------------


def _array(src: tuple, params, temps: dict, dst) -> np.ndarray:
    kind = src[0]
    if kind == "param":
        return params[src[1]].data
    if kind == "dst":
        return dst.data
    return temps[src[1] if kind == "temp" else "alias"]


def lowered(step: KernelStep) -> Lowered:
    """The step's argument layout and address terms (computed once per step)."""
    low = step.compiled.get("lowered")
    if low is None:
        low = step.compiled["lowered"] = Lowered(step.out, step.tree, step.nest)
    return low


def _streamable(step: KernelStep) -> bool:
    hit = step.compiled.get("streamable")
    if hit is None:
        nest = step.nest
        hit = step.compiled["streamable"] = (
            can_stream(lowered(step))
            and step.size * step.out.dtype.itemsize >= STREAM_MIN_BYTES
            and (nest.rank == 1 or nest.lengths[-1] >= STREAM_MIN_ROW)
        )
    return hit


def variant(step: KernelStep, device: str, out=None) -> str:
    """Which variant runs: "cuda", "serial" (small), "parallel", or "stream" (a big output
    with contiguous rows, when its storage ``out`` is element-aligned)."""
    if device != "cpu":
        return "cuda"
    if step.size < OPTIONS["serial_threshold"]:
        return "serial"
    if _streamable(step) and (out is None or out.flags.aligned):
        return "stream"
    return "parallel"


def source_for(step: KernelStep, device: str, kind: str) -> tuple[str, str]:
    """Generated module source and its entry point for a step's variant."""
    if device == "cpu":
        return cpu_source(lowered(step), kind, __version__, _MATHLIB), "kernel"
    from .. import devices

    return cuda_source(lowered(step), __version__, _MATHLIB, devices._simulated()), "launch"


def kernel_for(step: KernelStep, device: str, kind: str):
    """The compiled kernel of a step's variant (from the kernel cache)."""
    key = (device, kind)
    fn = step.compiled.get(key)
    if fn is None:
        source, entry = source_for(step, device, kind)
        if debug_level() >= 3:
            print(f"[axesarray] generated source:\n{source}", file=sys.stderr)
        fn = step.compiled[key] = kcache.get_kernel(source, entry)
    return fn


def _source_expr(src: tuple) -> str:
    kind = src[0]
    if kind == "param":
        return f"params[{src[1]}].data"
    if kind == "dst":
        return "dst.data"
    return f"temps[{src[1]!r}]" if kind == "temp" else "temps['alias']"


def _binder(step: KernelStep):
    """A generated function ``bind(params, temps, dst) -> args`` for the step's kernel:
    plan-time integers are literals, arrays and scalars are looked up (the hot path of a
    small evaluation, so it is straight-line code)."""
    hit = step.compiled.get("binder")
    if hit is None:
        low = lowered(step)
        parts = []
        for source in low.recipe:
            if source[0] == "int":
                parts.append(repr(source[1]))
            elif source[0] == "array":
                leaf = low.operands[source[1]]
                expr = _source_expr(leaf.src)
                parts.append(f"{expr}.view(U16)" if leaf.dtype == _F16 else expr)
            else:
                node = source[1]
                value = f"params[{node.src[1]}].value"
                parts.append(f"f32({value})" if node.dtype == _F16 else value)
        code = f"def bind(params, temps, dst):\n    return ({', '.join(parts)},)\n"
        namespace = {"U16": _U16, "f32": np.float32}
        exec(compile(code, f"<binder of {step.why}>", "exec"), namespace)
        hit = step.compiled["binder"] = namespace["bind"]
    return hit


# --- aliasing -------------------------------------------------------------------------------


_BOUNDS: dict = {}  # id(storage) -> (weakref, first byte, end byte)


def _bounds(data) -> tuple[int, int]:
    """Byte range of a 1-D storage array, cached (a weakref proves the id is not reused)."""
    hit = _BOUNDS.get(id(data))
    if hit is not None and hit[0]() is data:
        return hit[1], hit[2]
    lo = _pointer(data)
    hi = lo + data.size * data.dtype.itemsize
    if len(_BOUNDS) > 4096:
        _BOUNDS.clear()
    _BOUNDS[id(data)] = (weakref.ref(data), lo, hi)
    return lo, hi


def _address_range(data: np.ndarray, view: View) -> tuple[int, int] | None:
    s = span(view)
    if s is None:
        return None
    base, size = _pointer(data), data.itemsize
    return base + s[0] * size, base + s[1] * size


def _overlaps(step: KernelStep, params, dst: Leaf) -> bool:
    """Whether an input of the final kernel may read memory the kernel writes, other than
    through the identical view at the same index (which is safe in place)."""
    reads = step.compiled.get("reads")
    if reads is None:
        # Per input leaf: its param index and whether it reads the output's own elements
        # (same view, at the same index). The destination view is part of the plan's key.
        reads = step.compiled["reads"] = tuple(
            (leaf.src[1], id(leaf) in step.same_index and leaf.view == step.out.view, leaf.view)
            for leaf in step.leaves()
            if leaf.src[0] == "param"
        )
    out = dst.data
    try:
        o0, o1 = _bounds(out)
    except TypeError:  # storage without weak references: no cached bounds
        o0 = _pointer(out)
        o1 = o0 + out.size * out.dtype.itemsize
    out_range = None
    for index, same_place, view in reads:
        data = params[index].data
        if data is out:
            if same_place:
                continue
        else:
            try:
                d0, d1 = _bounds(data)
            except TypeError:
                d0 = _pointer(data)
                d1 = d0 + data.size * data.dtype.itemsize
            if d0 >= o1 or o0 >= d1:
                continue  # disjoint storage
            if same_place and d0 == o0:
                continue  # another array object over the same memory, same view
        out_range = out_range or _address_range(out, dst.view)
        in_range = _address_range(data, view)
        if out_range and in_range and in_range[0] < out_range[1] and out_range[0] < in_range[1]:
            return True
    return False


def _via_temp(step: KernelStep) -> tuple[KernelStep, KernelStep]:
    """The final step writing a C-order temp instead, and a kernel copying it to dst."""
    hit = step.compiled.get("via_temp")
    if hit is None:
        shape = step.out.view.shape
        temp = KLeaf(fresh_view(shape, tuple(range(len(shape)))), step.out.dtype, ("alias",))
        first = make_step(temp, step.tree, frozenset(), step.why + " (into an alias temp)")
        copy = make_step(step.out, temp, frozenset(), "copy out of the alias temp")
        hit = step.compiled["via_temp"] = (first, copy)
    return hit


# --- running --------------------------------------------------------------------------------


def _run_kernel(step: KernelStep, params, temps: dict, dst, device: str) -> None:
    args = _binder(step)(params, temps, dst)
    if device == "cpu" and step.size < OPTIONS["serial_threshold"]:
        kind = "serial"
    else:
        kind = variant(step, device, args[0])
    compiled = step.compiled
    fn = compiled.get((device, kind))
    if fn is None:
        fn = kernel_for(step, device, kind)
    elif type(fn) is kcache.Kernel and fn.ready:
        compiled[(device, kind)] = fn = fn.fn  # compiled and checked: call numba directly
    fn(*args)


def _array_view(data, view: View):
    """A (numpy or CuPy) array for a plain view of 1-D storage, without copying."""
    if isinstance(data, np.ndarray):
        return leaf_array(data, view)
    import cupy

    size = data.dtype.itemsize
    ptr = data.data + view.offset * size
    return cupy.ndarray(view.shape, data.dtype, ptr, tuple(s * size for s in view.strides))


def _run_dot(step: DotStep, params, temps: dict, dst) -> None:
    nb, m, k, n = step.sizes
    a = _array_view(_array(step.a.src, params, temps, dst), step.a.view)
    b = _array_view(_array(step.b.src, params, temps, dst), step.b.view)
    a3 = a.transpose(step.perm_a).reshape(nb, m, k)
    b3 = b.transpose(step.perm_b).reshape(nb, k, n)
    out = temps[step.out.src[1]].reshape(nb, m, n)
    if isinstance(out, np.ndarray):
        np.matmul(a3, b3, out=out)
    else:
        import cupy

        cupy.matmul(a3, b3, out=out)


def _empty(n: int, dtype: np.dtype, device: str):
    if device == "cpu":
        return allocate(n, dtype)
    from ..devices import cuda_empty

    return cuda_empty(n, dtype)


_NO_TEMPS: dict = {}


def run_plan(plan: Schedule, params: list[Node], dst: Leaf | None) -> dict:
    """Execute a plan; returns the temps (the result is one of them when ``dst`` is None)."""
    device = plan.device
    steps = plan.steps
    if (  # the common small case: one kernel into the destination, no overlap
        dst is not None
        and not plan.temps
        and len(steps) == 1
        and type(steps[0]) is KernelStep
        and not _overlaps(steps[0], params, dst)
    ):
        _run_kernel(steps[0], params, _NO_TEMPS, dst, device)
        return _NO_TEMPS
    temps = (
        {
            t: _empty(math.prod(shape), dtype, device)
            for t, (shape, dtype, _) in enumerate(plan.temps)
        }
        if plan.temps
        else {}
    )
    last = len(plan.steps) - 1
    for i, step in enumerate(plan.steps):
        if isinstance(step, DotStep):
            _run_dot(step, params, temps, dst)
        elif i == last and dst is not None and _overlaps(step, params, dst):
            first, copy = _via_temp(step)
            temps["alias"] = _empty(first.out.view.size, first.out.dtype, device)
            _run_kernel(first, params, temps, dst, device)
            _run_kernel(copy, params, temps, dst, device)
        else:
            _run_kernel(step, params, temps, dst, device)
    return temps


def explain(root: Node, dst: Leaf | None = None, names=None):
    """The public ``Plan`` for evaluating ``root`` (into ``dst`` when given)."""
    from .explain import describe

    plan, _, cached = plan_for(root, dst)
    return describe(plan, cached, names)


def evaluate(root: Node) -> Leaf:
    """Compute ``root`` into fresh storage laid out like its dominant input."""
    plan, params, _ = plan_for(root, None)
    temps = run_plan(plan, params, None)
    res = plan.result
    return Leaf(temps[res.src[1]], res.view)


# Plain copies at least this big go to the cache-blocked repack kernels, whose fixed cost
# (planning, a thread pool) is tens of microseconds; smaller ones to a fused copy kernel.
REPACK_MIN_BYTES = 1 << 18


def assign(dst: Leaf, root: Node) -> None:
    """``dst[...] = root``: same shape, castable dtype (validated by the caller)."""
    if root is dst:
        return
    if (
        type(root) is Leaf
        and root.dtype == dst.dtype
        and root.view.size * root.dtype.itemsize >= REPACK_MIN_BYTES
        and try_repack(dst, root)
    ):
        return
    plan, params, _ = plan_for(root, dst)
    run_plan(plan, params, dst)
