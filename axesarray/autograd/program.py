"""Several outputs planned together and run many times: ``ax.function``, ``backward``,
optimizer steps (positions only).

The engine plans one expression at a time. When several outputs share a value that a plan
computes as a kernel or a BLAS call of its own anyway (a dot, a reduction, the argument of
a view of a computed value) or when one output is read by another (a forward value that
the backward pass reuses), a ``Program`` computes it once into a slot and the outputs read
the slot. So is a shared expensive op (exp, tanh, division...), as the planner does with a
heavy subexpression that ends up in several kernels; cheap shared elementwise work is
recomputed inside each kernel (reading its inputs again costs less than a temporary).

Each stage's expression is built and planned once; a run only sets storage: the *dynamic*
leaves (placeholders and slots, and every view of them in the stages) get this run's data,
and each stage is one engine call that hits the plan cache.
"""

from __future__ import annotations

import threading

import attrs

from .. import engine
from ..dag import views as expr_views
from ..dag import nodes as ex
from ..dag.text import formula, inputs
from ..core.ops import OPS
from ..dag.reshape import reshape
from ..storage.memory import allocate

__all__ = ["Program", "Stage", "StagePlan", "ProgramPlan", "root_leaf"]

# Binding sets ``Leaf.data`` on shared leaf objects: one run at a time.
RUN_LOCK = threading.RLock()

# Kinds whose value a plan computes on its own anyway (so sharing it across outputs saves
# a whole kernel or BLAS call); so are the computed arguments of dots and of views of
# computed values.
_OWN_KERNEL = frozenset(("dot", "reduce"))


def root_leaf(leaf: ex.Leaf) -> ex.Leaf:
    """The leaf a user created behind a view."""
    while leaf.origin is not None:
        leaf = leaf.origin[0]
    return leaf


@attrs.define(eq=False)
class Stage:
    """One engine call: ``node`` into ``slot`` (into a fresh result when None)."""

    node: ex.Node
    slot: ex.Leaf | None
    label: str
    output: int | None  # which output this stage computes, if any
    dynamic: list  # (leaf, root) pairs: leaf is a view of root, whose data changes per run
    make: object = None  # () -> Leaf: new storage for the slot on each run


@attrs.frozen
class StagePlan:
    label: str
    formula: str
    plan: object  # engine.plan.Plan

    def __str__(self) -> str:
        body = "\n".join("  " + line for line in str(self.plan).split("\n"))
        return f"{self.label} = {self.formula}\n{body}"


@attrs.frozen
class ProgramPlan:
    """What a function (or backward pass, or optimizer step) runs: per stage, its plan."""

    stages: tuple[StagePlan, ...]

    @property
    def kernels(self) -> tuple:
        """Every kernel of every stage, in order."""
        return tuple(k for s in self.stages for k in s.plan.kernels)

    def __str__(self) -> str:
        head = f"Program: {len(self.stages)} stage(s), {len(self.kernels)} kernel(s)"
        return "\n".join([head] + [str(s) for s in self.stages])


def _shared(outputs: list) -> list:
    """Nodes to compute once, children first: values several outputs read that cost a
    kernel of their own, and outputs another output reads."""
    seen: dict[int, int] = {}
    first: dict[int, ex.Node] = {}
    realized: set[int] = set()
    for out in outputs:
        for node in ex.walk(out):
            seen[id(node)] = seen.get(id(node), 0) + 1
            first.setdefault(id(node), node)
            if node.kind in ("remap", "reshape", "dot"):  # the engine realizes these args
                realized.update(id(c) for c in node.children if c.kind not in ("leaf", "const"))
    outs = {id(o) for o in outputs}
    picked = []
    for k, node in first.items():
        if node.kind in ("leaf", "const"):
            continue
        if seen[k] > 1 and (
            k in outs or node.kind in _OWN_KERNEL or k in realized or _expensive(node)
        ):
            picked.append(node)
    return picked


def _expensive(node: ex.Node) -> bool:
    """An expensive op (exp, tanh, division...): computed once and read, as the planner
    does with a heavy subexpression that ends up in several kernels."""
    return node.kind == "map" and OPS[node.op].expensive


def _substitute(root: ex.Node, slots: dict) -> ex.Node:
    """``root`` reading the slot leaves in place of the nodes they hold (views of a slot
    become leaf views)."""

    def fn(node, kids):
        leaf = slots.get(id(node))
        if leaf is not None:
            return leaf
        if node.kind == "remap" and kids[0].kind == "leaf":
            return expr_views.remap(kids[0], node.shape, node.maps)
        if node.kind == "reshape" and kids[0].kind == "leaf":
            return reshape(kids[0], node.step)
        return None

    return ex.rebuild_dag(root, fn)


def _dynamic(node: ex.Node, roots: set[int]) -> list:
    return [
        (p, r)
        for p in node.params
        if type(p) is ex.Leaf and p.origin is not None and id(r := root_leaf(p)) in roots
    ]


def _fresh_like(node: ex.Node):
    """New storage for ``node`` as the engine would lay out its result, per call."""
    template = engine.allocate_for(node)
    return lambda: ex.Leaf(allocate(template.data.size, template.dtype), template.view)


class Program:
    """``outputs`` (nodes) computed together. ``dsts`` gives each output's destination: a
    leaf, a function making a new leaf per run, or None for a fresh result. ``inputs`` are
    root leaves whose storage ``run`` sets."""

    def __init__(self, outputs: list, dsts: list | None = None, inputs=(), labels=None, fuse=None):
        n = len(outputs)
        # ``fuse``: per output, a group; consecutive stages of one group writing fixed
        # destinations run as one multi-output kernel when they can (an optimizer step).
        self.fuse = list(fuse) if fuse is not None else [None] * n
        dsts = list(dsts) if dsts is not None else [None] * n
        labels = list(labels) if labels is not None else [f"output {i}" for i in range(n)]
        self.inputs = list(inputs)
        index: dict[int, int] = {}
        for i, o in enumerate(outputs):
            index.setdefault(id(o), i)
        slots: dict[int, ex.Leaf] = {}
        roots = {id(r) for r in self.inputs}
        self.stages: list[Stage] = []
        results: list = [None] * n  # stage index per output
        for node in _shared(outputs):
            i = index.get(id(node))
            dst = dsts[i] if i is not None else None
            make = None
            if dst is None and i is not None:  # returned to the caller: new storage each run
                make = _fresh_like(node)
            elif callable(dst):
                make = dst
            slot = dst if isinstance(dst, ex.Leaf) else (make or _fresh_like(node))()
            body = _substitute(node, slots)
            label = labels[i] if i is not None else f"shared #{len(slots)} ({node.kind})"
            self.stages.append(Stage(body, slot, label, i, _dynamic(body, roots), make))
            slots[id(node)] = slot
            roots.add(id(slot))
            if i is not None:
                results[i] = len(self.stages) - 1
        for i, node in enumerate(outputs):
            if results[i] is not None or index[id(node)] != i:
                continue
            body = _substitute(node, slots)
            dst = dsts[i]
            fixed = dst if isinstance(dst, ex.Leaf) else None
            make = dst if callable(dst) else None
            self.stages.append(Stage(body, fixed, labels[i], i, _dynamic(body, roots), make))
            results[i] = len(self.stages) - 1
        # an output listed twice is computed once
        self._results = [results[index[id(node)]] for node in outputs]

    def run(self, bound: dict | None = None) -> list:
        """Compute every output; ``bound`` maps each input root leaf to this run's
        storage. Returns one leaf per output (its destination when it has one)."""
        bound = bound or {}
        with RUN_LOCK:
            saved = [(r, r.data) for r in self.inputs]
            try:
                for r in self.inputs:
                    r.data = bound[r]
                return self._run()
            finally:
                for r, data in saved:
                    r.data = data
                for st in self.stages:  # views of the inputs stop holding this run's data
                    for leaf, root in st.dynamic:
                        leaf.data = root.data

    def _groups(self) -> list[list[int]]:
        """Stage indices in runs: the stages of one ``fuse`` group writing fixed
        destinations go to the engine together (one multi-output kernel when they fuse: an
        optimizer step). Groups are independent of each other, so a group's stages may be
        gathered across another group's; never across an ungrouped stage."""
        groups: list[list[int]] = []
        open_: dict = {}  # fuse group -> its list in ``groups``, until another stage runs
        for k, st in enumerate(self.stages):
            fixed = st.make is None and st.slot is not None and st.output is not None
            group = self.fuse[st.output] if fixed else None
            if group is None:
                open_.clear()  # stages of a group never move across an unrelated stage
                groups.append([k])
            elif group in open_:
                open_[group].append(k)
            else:
                open_[group] = [k]
                groups.append(open_[group])
        return groups

    def _run(self) -> list:
        values: list = [None] * len(self.stages)
        for group in self._groups():
            for k in group:
                for leaf, root in self.stages[k].dynamic:
                    leaf.data = root.data
            if len(group) > 1:
                engine.assign_many([(self.stages[k].slot, self.stages[k].node) for k in group])
                for k in group:
                    values[k] = self.stages[k].slot
                continue
            (k,) = group
            st = self.stages[k]
            node, slot = st.node, st.slot
            if st.make is not None:
                new = st.make()
                if slot is None:
                    slot = new
                else:  # the same leaf object (later stages read it), new storage
                    slot.data = new.data
            if slot is None:
                if type(node) is ex.Leaf:  # nothing to compute: the value itself
                    values[k] = ex.Leaf(node.data, node.view, node.writeable)
                else:
                    values[k] = engine.evaluate(node)
                continue
            engine.assign(slot, node)
            values[k] = ex.Leaf(slot.data, slot.view) if st.make is not None else slot
        return [values[k] for k in self._results]

    def explain(self, names: list | None = None) -> ProgramPlan:
        """Each stage's plan (nothing runs); stages fused into one kernel share a plan.
        ``names`` label each output's dims."""
        plans = []
        for group in self._groups():
            texts = []
            for k in group:
                st = self.stages[k]
                dims = None
                if st.output is not None and names is not None:
                    dims = names[st.output]
                dim_names = dims or tuple(f"d{d}" for d in range(st.node.ndim))
                texts.append((st.label, formula(st.node, inputs(st.node, tuple(dim_names)))))
            if len(group) > 1:
                pairs = [(self.stages[k].slot, self.stages[k].node) for k in group]
                plan = engine.explain_many(pairs)
                label = " + ".join(t[0] for t in texts)
                plans.append(StagePlan(label, "; ".join(t[1] for t in texts), plan))
                continue
            st = self.stages[group[0]]
            dims = names[st.output] if st.output is not None and names is not None else None
            plan = engine.explain(st.node, st.slot, dims)
            plans.append(StagePlan(st.label, texts[0][1], plan))
        return ProgramPlan(tuple(plans))
