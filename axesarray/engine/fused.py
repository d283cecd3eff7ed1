"""The fused engine: plan once per expression structure, then run compiled kernels.

Owns the plan cache (keyed by ``planner.signature``: structure, sharing, dtypes and leaf
views), binding a cached plan to the current arrays and scalars, the alias check of DESIGN
§3 (in place only when the output is read through the identical view at the same index;
any other overlap goes through a temporary), and dispatch to CPU kernels (serial below
``serial_threshold`` elements, parallel above).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from .. import __version__
from ..expr import Leaf, Node
from ..kernels import cache as kcache
from ..kernels import mathlib
from ..kernels.cpu import cpu_source
from ..kernels.ir import KLeaf
from ..kernels.lower import Lowered
from ..options import get_option
from ..storage import allocate, leaf_array
from ..strided import View, span
from .planner import DotStep, KernelStep, Plan, build_plan, fresh_view, make_step, signature

__all__ = ["evaluate", "assign", "plan_for", "run_plan", "PLAN_STATS"]

_PLANS: OrderedDict = OrderedDict()
_PLANS_MAX = 512
_plans_lock = threading.Lock()
PLAN_STATS = {"hits": 0, "misses": 0}
_F16 = np.dtype(np.float16)
_U16 = np.dtype(np.uint16)
# Generated files name the mathlib they inline, so editing it invalidates numba's disk cache.
_MATHLIB = hashlib.sha256(Path(mathlib.__file__).read_bytes()).hexdigest()[:12]


def plan_for(root: Node, dst: Leaf | None) -> tuple[Plan, list[Node], bool]:
    """The (cached) plan for ``dst[...] = root`` or a fresh result; and whether it was cached."""
    key, params = signature(root)
    if dst is not None:
        key = (key, dst.view, dst.dtype.char)
    with _plans_lock:
        plan = _PLANS.get(key)
        if plan is not None:
            _PLANS.move_to_end(key)
            PLAN_STATS["hits"] += 1
            return plan, params, True
    plan = build_plan(root, params, None if dst is None else (dst.view, dst.dtype))
    with _plans_lock:
        PLAN_STATS["misses"] += 1
        _PLANS[key] = plan
        if len(_PLANS) > _PLANS_MAX:
            _PLANS.popitem(last=False)
    return plan, params, False


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


def kernel_for(step: KernelStep, parallel: bool):
    """The compiled CPU kernel of a step (from the kernel cache)."""
    key = ("cpu", parallel)
    fn = step.compiled.get(key)
    if fn is None:
        source = cpu_source(lowered(step), parallel, __version__, _MATHLIB)
        fn = step.compiled[key] = kcache.get_kernel(source)
    return fn


def _args(step: KernelStep, params, temps: dict, dst) -> list:
    low = lowered(step)
    args = []
    for source in low.recipe:
        kind = source[0]
        if kind == "int":
            args.append(source[1])
        elif kind == "array":
            arr = _array(low.operands[source[1]].src, params, temps, dst)
            args.append(arr.view(_U16) if arr.dtype == _F16 else arr)
        else:
            node = source[1]
            value = params[node.src[1]].value
            args.append(np.float32(value) if node.dtype == _F16 else value)
    return args


# --- aliasing -------------------------------------------------------------------------------


def _pointer(data: np.ndarray) -> int:
    return data.__array_interface__["data"][0]


def _address_range(data: np.ndarray, view: View) -> tuple[int, int] | None:
    s = span(view)
    if s is None:
        return None
    base, size = _pointer(data), data.itemsize
    return base + s[0] * size, base + s[1] * size


def _overlaps(step: KernelStep, params, dst: Leaf) -> bool:
    """Whether an input of the final kernel may read memory the kernel writes, other than
    through the identical view at the same index (which is safe in place)."""
    out_range = None
    for leaf in step.leaves():
        if leaf.src[0] != "param":
            continue
        data = params[leaf.src[1]].data
        if not np.may_share_memory(data, dst.data):
            continue
        if (
            id(leaf) in step.same_index
            and leaf.view == dst.view
            and _pointer(data) == _pointer(dst.data)
        ):
            continue
        out_range = out_range or _address_range(dst.data, dst.view)
        in_range = _address_range(data, leaf.view)
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


def _run_kernel(step: KernelStep, params, temps: dict, dst) -> None:
    parallel = step.size >= get_option("serial_threshold")
    kernel_for(step, parallel)(*_args(step, params, temps, dst))


def _run_dot(step: DotStep, params, temps: dict, dst) -> None:
    nb, m, k, n = step.sizes
    a = leaf_array(_array(step.a.src, params, temps, dst), step.a.view)
    b = leaf_array(_array(step.b.src, params, temps, dst), step.b.view)
    a3 = a.transpose(step.perm_a).reshape(nb, m, k)
    b3 = b.transpose(step.perm_b).reshape(nb, k, n)
    np.matmul(a3, b3, out=temps[step.out.src[1]].reshape(nb, m, n))


def run_plan(plan: Plan, params: list[Node], dst: Leaf | None) -> dict:
    """Execute a plan; returns the temps (the result is one of them when ``dst`` is None)."""
    temps = {t: allocate(int(np.prod(shape)), dtype) for t, (shape, dtype, _) in
             enumerate(plan.temps)}
    last = len(plan.steps) - 1
    for i, step in enumerate(plan.steps):
        if isinstance(step, DotStep):
            _run_dot(step, params, temps, dst)
        elif i == last and dst is not None and _overlaps(step, params, dst):
            first, copy = _via_temp(step)
            temps["alias"] = allocate(first.out.view.size, first.out.dtype)
            _run_kernel(first, params, temps, dst)
            _run_kernel(copy, params, temps, dst)
        else:
            _run_kernel(step, params, temps, dst)
    return temps


def evaluate(root: Node) -> Leaf:
    """Compute ``root`` into fresh storage laid out like its dominant input."""
    plan, params, _ = plan_for(root, None)
    temps = run_plan(plan, params, None)
    res = plan.result
    return Leaf(temps[res.src[1]], res.view)


def assign(dst: Leaf, root: Node) -> None:
    """``dst[...] = root``: same shape, castable dtype (validated by the caller)."""
    if root is dst:
        return
    plan, params, _ = plan_for(root, dst)
    run_plan(plan, params, dst)
