"""Alias analysis (DESIGN §3): may the final kernel write memory its inputs still read?

In place is safe only when the output is read through the identical view at the same
index; any other overlap (transposed, shifted, reduced) sends the final kernel to a C-order
temporary and a copy kernel. Decided per run from address ranges (cheap: storage bounds
are cached per array, weakref-validated).
"""

from __future__ import annotations

import weakref

from ..core.strided import View, span
from ..dag.nodes import Leaf
from ..kernels.ir import KLeaf
from ..storage.devices import device_of
from .planner import fresh_view, make_step
from .schedule import KernelStep

__all__ = ["overlaps", "overlap_test", "via_temp", "shares_storage", "reads"]

_BOUNDS: dict = {}  # id(storage) -> (weakref, first byte, end byte)


def _pointer(data) -> int:
    return device_of(data).pointer(data)


def _bounds(data) -> tuple[int, int]:
    """Byte range of a 1-D storage array, cached (a weakref proves the id is not reused)."""
    hit = _BOUNDS.get(id(data))
    if hit is not None and hit[0]() is data:
        return hit[1], hit[2]
    lo = _pointer(data)
    hi = lo + data.size * data.dtype.itemsize
    try:
        ref = weakref.ref(data)
    except TypeError:  # storage without weak references: no cached bounds
        return lo, hi
    if len(_BOUNDS) > 4096:
        _BOUNDS.clear()
    _BOUNDS[id(data)] = (ref, lo, hi)
    return lo, hi


def _address_range(data, view: View) -> tuple[int, int] | None:
    s = span(view)
    if s is None:
        return None
    base, size = _pointer(data), data.itemsize
    return base + s[0] * size, base + s[1] * size


def reads(step: KernelStep) -> tuple:
    """Per input leaf: its param index, whether it reads the output's own elements (same
    view, at the same index), and its view. The destination view is part of the plan key."""
    c = step.compiled
    if c.reads is None:
        c.reads = tuple(
            (leaf.src[1], id(leaf) in step.same_index and leaf.view == step.out.view, leaf.view)
            for leaf in step.leaves()
            if leaf.src[0] == "param"
        )
    return c.reads


def overlaps(step: KernelStep, params, dst: Leaf) -> bool:
    """Whether an input of the final kernel may read memory the kernel writes, other than
    through the identical view at the same index (which is safe in place)."""
    out = dst.data
    o0, o1 = _bounds(out)
    out_range = None
    for index, same_place, view in reads(step):
        data = params[index].data
        if data is out:
            if same_place:
                continue
        else:
            d0, d1 = _bounds(data)
            if d0 >= o1 or o0 >= d1:
                continue  # disjoint storage
            if same_place and d0 == o0:
                continue  # another array object over the same memory, same view
        out_range = out_range or _address_range(out, dst.view)
        in_range = _address_range(data, view)
        if out_range and in_range and in_range[0] < out_range[1] and out_range[0] < in_range[1]:
            return True
    return False


def shares_storage(params, dst: Leaf) -> bool:
    """Whether any leaf parameter's storage overlaps the destination's (conservative: the
    storage bounds, not the views). A schedule that writes the destination before its last
    step (``Schedule.dst_early``) then runs into a scratch copy."""
    o0, o1 = _bounds(dst.data)
    for p in params:
        if type(p) is Leaf:
            d0, d1 = _bounds(p.data)
            if d0 < o1 and o0 < d1:
                return True
    return False


def _bounds_source(name: str, into: str, indent: str) -> list[str]:
    """Source lines setting ``{into}0, {into}1`` to ``_bounds({name})``, the cached case
    inline (it is per call)."""
    return [
        f"{indent}h = B.get(id({name}))",
        f"{indent}if h is not None and h[0]() is {name}:",
        f"{indent}    {into}0, {into}1 = h[1], h[2]",
        f"{indent}else:",
        f"{indent}    {into}0, {into}1 = bounds({name})",
    ]


def overlap_test(step: KernelStep):
    """``overlaps(step, params, dst)`` specialised to ``step`` (generated once per step):
    inputs on other storage or read in place answer without the loop over ``reads``;
    any other case asks ``overlaps`` itself, so both always agree."""
    lines = ["def test(params, dst):", "    o = dst.data", *_bounds_source("o", "o", "    ")]
    for index, same_place, _ in reads(step):
        lines.append(f"    d = params[{index}].data")
        if same_place:  # in place is safe: the same array, or another over the same start
            lines += ["    if d is not o:", *_bounds_source("d", "d", "        ")]
            lines.append("        if d0 < o1 and o0 < d1 and d0 != o0:")
        else:
            lines += [*_bounds_source("d", "d", "    "), "    if d is o or (d0 < o1 and o0 < d1):"]
        lines.append("            return overlaps(step, params, dst)")
    lines.append("    return False")
    namespace = {"B": _BOUNDS, "bounds": _bounds, "overlaps": overlaps, "step": step}
    exec(compile("\n".join(lines) + "\n", f"<overlap test of {step.why}>", "exec"), namespace)
    return namespace["test"]


def via_temp(step: KernelStep) -> tuple[KernelStep, KernelStep]:
    """The final step writing a C-order temp instead, and a kernel copying it to dst."""
    c = step.compiled
    if c.via_temp is None:
        shape = step.out.view.shape
        temp = KLeaf(fresh_view(shape, tuple(range(len(shape)))), step.out.dtype, ("alias",))
        first = make_step(temp, step.tree, frozenset(), step.why + " (into an alias temp)")
        copy = make_step(step.out, temp, frozenset(), "copy out of the alias temp")
        c.via_temp = (first, copy)
    return c.via_temp
