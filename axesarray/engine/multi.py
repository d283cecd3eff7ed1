"""Several assignments as one multi-output kernel: ``dst_k[...] = root_k`` in one loop.

An optimizer step writes a parameter and its state (SGD's velocity, Adam's moments) from
the same gradient: one pass over memory instead of one per assignment. The assignments
fuse when each plans as one elementwise kernel over the same loop nest and every read of
a destination is at the index being written (the value read is then the one sequential
kernels would see: before its store if it is written later, after it if earlier).
Otherwise, or when storages overlap in any other way at run time, they run one by one.
"""

from __future__ import annotations

import threading

from ..kernels.ir import KConst, KLeaf, kernel_nodes
from ..storage.devices import device_of
from .alias import _bounds
from .dispatch import run_kernel
from .explain import Plan, make_plan
from .planner import build_schedule
from .rewrite import CPU_REWRITES, rewrite
from .schedule import KernelStep, Schedule

__all__ = ["assign_many", "explain_many"]

_PLANS: dict = {}
_lock = threading.Lock()


def _joint(pairs) -> tuple[list, dict]:
    """The destinations then every root's params, each object once, and its positions."""
    joint: list = []
    at: dict[int, int] = {}
    for dst, root in pairs:
        for p in (dst, *root.params):
            if id(p) not in at:
                at[id(p)] = len(joint)
                joint.append(p)
    return joint, at


def _resrc(tree, params: tuple, at: dict):
    """The tree with its ``("param", i)`` sources renumbered into the joint params."""
    done: dict[int, object] = {}
    for n in kernel_nodes(tree):
        if n.kind == "leaf" and n.src[0] == "param":
            new = KLeaf(n.view, n.dtype, ("param", at[id(params[n.src[1]])]))
        elif n.kind == "const" and n.src[0] == "param":
            new = KConst(n.dtype, ("param", at[id(params[n.src[1]])]))
        elif n.children:
            new = n.rebuild(tuple(done[id(c)] for c in n.children))
        else:
            new = n
        done[id(n)] = new
    return done[id(tree)]


def _plan(pairs, joint: list, at: dict) -> tuple | None:
    """(step, reads) for one multi-output kernel, or None when the pairs do not fuse."""
    outs, trees, nest = [], [], None
    for dst, root in pairs:
        sched = build_schedule(rewrite(root, CPU_REWRITES), root.params, (dst.view, dst.dtype))
        if len(sched.steps) != 1 or sched.temps or type(sched.steps[0]) is not KernelStep:
            return None
        step = sched.steps[0]
        if any(n.kind == "reduce" for n in kernel_nodes(step.tree)):
            return None
        if nest is None:
            nest = step.nest
        elif step.nest != nest:
            return None
        outs.append(KLeaf(dst.view, dst.dtype, ("param", at[id(dst)])))
        trees.append(_resrc(step.tree, root.params, at))
    # Every read of a destination's storage object must be through its view (same index).
    written = {o.src[1]: o.view for o in outs}
    reads = []
    for tree in trees:
        for leaf in kernel_nodes(tree):
            if leaf.kind == "leaf" and leaf.src[0] == "param":
                reads.append((leaf.src[1], leaf.view))
    for j, view in reads:
        if j in written and view != written[j]:
            return None
    extra = tuple(zip(outs[1:], trees[1:], strict=True))
    step = KernelStep(outs[0], trees[0], nest, frozenset(), "multi-output assignment", None)
    step.extra = extra
    return step, tuple(reads), tuple(written.items())


def _separate(joint: list, reads: tuple, written: tuple) -> bool:
    """No input reads a destination's memory except through that very leaf's view."""
    for j, out_view in written:
        out = joint[j].data
        o0, o1 = _bounds(out)
        for i, view in reads:
            data = joint[i].data
            if data is out:
                if view != out_view:  # the same memory at another index
                    return False
                continue
            d0, d1 = _bounds(data)
            if d0 < o1 and o0 < d1:
                return False
    return True


def _lookup(pairs: list):
    joint, at = _joint(pairs)
    device = device_of(joint[0].data)
    pattern = tuple(at[id(p)] for dst, root in pairs for p in (dst, *root.params))
    key = (tuple((dst.key, root.key) for dst, root in pairs), pattern, device.type)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(pairs, joint, at) if device.is_cpu and len(pairs) > 1 else False
        plan = plan or False
        with _lock:
            _PLANS[key] = plan
    return plan, joint, device


def explain_many(pairs: list, explain):
    """The public ``Plan`` of ``assign_many(pairs)``: one kernel when they fuse, else the
    ``explain`` of each pair, kernels concatenated."""
    plan, joint, device = _lookup(pairs)
    if not plan or not _separate(joint, plan[1], plan[2]):
        plans = [explain(dst, root) for dst, root in pairs]
        return Plan(tuple(k for p in plans for k in p.kernels), (), all(p.cached for p in plans))
    step = plan[0]
    return make_plan(Schedule([], [step], step.out, device), True)


def assign_many(pairs: list, assign) -> None:
    """``dst[...] = root`` for each ``(dst, root)``, as one kernel when they fuse (CPU);
    ``assign`` runs them one by one otherwise."""
    plan, joint, device = _lookup(pairs)
    if not plan or not _separate(joint, plan[1], plan[2]):
        for dst, root in pairs:
            assign(dst, root)
        return
    run_kernel(plan[0], joint, {}, None, device)
