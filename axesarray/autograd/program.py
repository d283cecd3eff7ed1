"""Several outputs planned together and run many times: ``ax.function``, ``backward``,
optimizer steps (positions only).

The engine plans one expression at a time. When several outputs share a value that a plan
computes as a kernel or a BLAS call of its own anyway (a dot, a reduction, the argument of
a view of a computed value) or when one output is read by another (a forward value that
the backward pass reuses), a ``Program`` computes it once into a slot and the outputs read
the slot. So is a shared expensive op (exp, tanh, division...), as the planner does with a
heavy subexpression that ends up in several kernels; cheap shared elementwise work is
recomputed inside each kernel (reading its inputs again costs less than a temporary).

Each stage's expression is built and planned once, and the program holds each stage's
schedule bound to its parameters (``engine.runner.Bound``): a run passes this run's
storage of the inputs and of the computed slots by argument, so no shared node is mutated,
no lock is taken, and concurrent calls of one program run in parallel. A program's plans
are its own: a program longer than the engine's plan cache does not plan again per call.
"""

from __future__ import annotations

import attrs

from .. import engine
from ..core.ops import OPS
from ..dag import nodes as ex
from ..dag import views as expr_views
from ..dag.chunked_leaf import has_chunked
from ..dag.reshape import reshape
from ..dag.text import dim_names, formula, inputs, is_position
from ..display.planviews import program_html
from ..engine import executor
from ..engine.planner import heavy_nodes
from ..engine.runner import Bound, Straight, kernel_calls
from ..options import OPTIONS
from ..storage.memory import allocate

__all__ = ["Program", "Stage", "StagePlan", "ProgramPlan", "root_leaf"]

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
    make: object = None  # () -> Leaf: new storage for the slot on each run
    source: int | None = None  # the slot's index among the run's storages (per-run storage)
    bound: object = None  # engine.runner.Bound, once planned (the program keeps its plans)
    user_node: object = None  # the node of the user's DAG it computes (explain's names)


@attrs.frozen(repr=False)
class StagePlan:
    """One stage of a program: its label, formula and engine plan."""

    label: str
    formula: str
    plan: object  # engine.plan.Plan

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        body = "\n".join("  " + line for line in str(self.plan).split("\n"))
        return f"{self.label} = {self.formula}\n{body}"


@attrs.frozen(repr=False)
class ProgramPlan:
    """What a function (or backward pass, or optimizer step) runs: per stage, its plan.
    ``repr`` and ``print`` show the same text; Jupyter shows a table per stage."""

    stages: tuple[StagePlan, ...]

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return program_html(self)

    @property
    def kernels(self) -> tuple:
        """Every kernel of every stage, in order."""
        return tuple(k for s in self.stages for k in s.plan.kernels)

    def __str__(self) -> str:
        n, k = len(self.stages), len(self.kernels)
        head = f"Program: {n} stage{'' if n == 1 else 's'}, {k} kernel{'' if k == 1 else 's'}"
        return "\n".join([head] + [str(s) for s in self.stages])


def _shared(outputs: list) -> list:
    """Nodes to compute once, children first: values several outputs read that cost a
    kernel of their own, and outputs another output reads. So does a heavy elementwise
    value read by several parents within one output: the planner materializes such a
    value in every output that reads it (a backward pass's chain of ``dh``, read by every
    gradient), so computing it once saves a kernel per output and per step."""
    seen: dict[int, int] = {}
    first: dict[int, ex.Node] = {}
    realized: set[int] = set()
    fanned: set[int] = set()  # heavy values read by several parents within one output
    for out in outputs:
        heavy = heavy_nodes(out)
        parents: dict[int, int] = {}
        for node in ex.walk(out):
            seen[id(node)] = seen.get(id(node), 0) + 1
            first.setdefault(id(node), node)
            for c in node.children:
                parents[id(c)] = n = parents.get(id(c), 0) + 1
                if n > 1 and id(c) in heavy:
                    fanned.add(id(c))
            if node.kind in ("remap", "reshape", "dot"):  # the engine realizes these args
                realized.update(id(c) for c in node.children if c.kind not in ("leaf", "const"))
    outs = {id(o) for o in outputs}
    picked = []
    for k, node in first.items():
        if node.kind in ("leaf", "const"):
            continue
        if seen[k] > 1 and (
            k in outs
            or node.kind in _OWN_KERNEL
            or k in realized
            or _expensive(node)
            or k in fanned
        ):
            picked.append(node)
    return picked


def _expensive(node: ex.Node) -> bool:
    """An expensive op (exp, tanh, division...): computed once and read, as the planner
    does with a heavy subexpression that ends up in several kernels."""
    return node.kind == "map" and OPS[node.op].expensive


def _substitute(root: ex.Node, slots: dict) -> ex.Node:
    """``root`` reading the slot leaves in place of the nodes they hold (views of a slot
    become leaf views). The walk stops at slots: each stage visits its own nodes only, so
    building a program is linear in its nodes, not one whole-DAG walk per stage."""
    done: dict[int, ex.Node] = {}
    for node in ex.walk(root, lambda n: () if id(n) in slots else n.children):
        leaf = slots.get(id(node))
        if leaf is not None:
            done[id(node)] = leaf
            continue
        kids = tuple(done[id(c)] for c in node.children)
        if node.kind == "remap" and kids[0].kind == "leaf":
            new = expr_views.remap(kids[0], node.shape, node.maps)
        elif node.kind == "reshape" and kids[0].kind == "leaf":
            new = reshape(kids[0], node.step)
        elif any(k is not c for k, c in zip(kids, node.children, strict=True)):
            new = node.rebuild(kids)
        else:
            new = node
        done[id(node)] = new
    return done[id(root)]


def _fresh_like(node: ex.Node, orders: dict):
    """New storage for ``node`` as the engine would lay out its result, per call
    (``orders``: the program's memo of result orders, shared by its stages)."""
    template = engine.allocate_for(node, orders)
    n, dtype, view, key = template.data.size, template.dtype, template.view, template.key
    return lambda: ex.Leaf.fresh(allocate(n, dtype), view, key)


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
        self._outputs = list(outputs)
        index: dict[int, int] = {}
        for i, o in enumerate(outputs):
            index.setdefault(id(o), i)
        slots: dict[int, ex.Leaf] = {}
        orders: dict = {}
        # Sources: storage a run passes by argument, the inputs then each computed slot.
        self._sources = {id(r): k for k, r in enumerate(self.inputs)}
        self.stages: list[Stage] = []
        results: list = [None] * n  # stage index per output
        for node in _shared(outputs):
            i = index.get(id(node))
            dst = dsts[i] if i is not None else None
            make = None
            if isinstance(dst, ex.Leaf):
                slot, source = dst, None  # a fixed destination: the same storage every run
            else:  # new storage each run (returned to the caller, or read by later stages)
                make = dst if callable(dst) else _fresh_like(node, orders)
                slot = make()  # the template: its view and key; never written
                source = self._sources[id(slot)] = len(self._sources)
            body = _substitute(node, slots)
            label = labels[i] if i is not None else f"shared #{len(slots)} ({node.kind})"
            self.stages.append(Stage(body, slot, label, i, make, source, user_node=node))
            slots[id(node)] = slot
            if i is not None:
                results[i] = len(self.stages) - 1
        for i, node in enumerate(outputs):
            if results[i] is not None or index[id(node)] != i:
                continue
            body = _substitute(node, slots)
            dst = dsts[i]
            fixed = dst if isinstance(dst, ex.Leaf) else None
            make = dst if callable(dst) else None
            self.stages.append(Stage(body, fixed, labels[i], i, make))
            results[i] = len(self.stages) - 1
        # an output listed twice is computed once
        self._results = [results[index[id(node)]] for node in outputs]
        self._run_groups: list | None = None
        # The straight runner once built (None: not yet; False: none for this program).
        self._straight = None
        self._runs = 0  # runs the general way

    def _source_of(self, leaf: ex.Leaf) -> int | None:
        """Which source ``leaf`` is a view of (None: a leaf read as it is)."""
        return self._sources.get(id(root_leaf(leaf)))

    def run(self, bound: dict | None = None) -> list:
        """Compute every output; ``bound`` maps each input root leaf to this run's
        storage. Returns one leaf per output (its destination when it has one).
        Thread-safe: this run's storage travels by argument."""
        return self._run(bound)[0]

    def run_storages(self, data: list) -> list:
        """``run`` with the inputs' storage given in order (1-D arrays)."""
        return self._call(data + [None] * (len(self._sources) - len(data)))[0]

    def _run(self, bound: dict | None) -> tuple[list, list]:
        bound = bound or {}
        storages: list = [None] * len(self._sources)
        for k, r in enumerate(self.inputs):
            storages[k] = bound[r]
        return self._call(storages)

    def _call(self, storages: list) -> tuple[list, list]:
        """Every output over ``storages`` (the inputs' storage first, then room for each
        computed slot's): the outputs and the storages as filled."""
        run = self._straight
        if run and run.threshold == OPTIONS["serial_threshold"] and run.engine == OPTIONS["engine"]:
            return run(storages), storages
        values: list = [None] * len(self.stages)
        groups = self._run_groups
        if groups is None:  # the stages are fixed: grouped once
            groups = self._run_groups = self._groups()
        for group in groups:
            self._stage(group, storages, values)
        # Built at the end of a second run: a program run once (a backward pass) never
        # pays for it.
        self._runs += 1
        if self._runs > 1 and (
            run is None or (run and run.threshold != OPTIONS["serial_threshold"])
        ):
            self._straight = self._build_straight(storages, values)
        return [values[k] for k in self._results], storages

    def _stage(self, group: list, storages: list, values: list) -> None:
        """Run one group of stages the general way (the engine's tiers, plans, runners)."""
        if len(group) > 1:
            engine.assign_many(
                [(self.stages[k].slot, self._node(self.stages[k], storages)) for k in group]
            )
            for k in group:
                values[k] = self.stages[k].slot
            return
        (k,) = group
        st = self.stages[k]
        b = st.bound
        if b is not None and b.plan.ready and st.slot is None is st.make:  # hot path
            values[k] = b.evaluate(storages)
            return
        node = st.node
        if st.make is not None:
            dst = st.make()
            if st.source is not None:
                storages[st.source] = dst.data
        else:
            dst = st.slot  # a fixed destination, or None: a fresh result
        if dst is None:
            if type(node) is ex.Leaf:
                # An input, a variable or a slot (or a view of one): returned as a
                # copy, so refilling the caller's buffer, an optimizer step or the next
                # run leaves results already returned unchanged.
                k_src = self._source_of(node)
                data = node.data if k_src is None else storages[k_src]
                values[k] = engine.allocate_for(node)
                engine.assign(values[k], ex.Leaf(data, node.view, node.writeable))
            else:
                values[k] = self._evaluate(st, storages)
            return
        if b is not None and b.plan.ready:
            b.assign(storages, dst)
        else:
            self._assign(st, storages, dst)
        values[k] = ex.Leaf(dst.data, dst.view) if st.make is not None else dst

    def _build_straight(self, storages: list, values: list):
        """The program as one generated function (``runner.Straight``), built from a run
        that just finished (``storages``, ``values``: its objects): each stage's kernels
        called in line, its shared values in buffers reused from call to call, the stages
        the straight runner cannot run (a BLAS step, an assignment into a fixed
        destination, a fused optimizer group) called through ``_stage``. None while a
        stage still compiles (the next run tries again); False when nothing would be won."""
        if OPTIONS["engine"] != "numba":
            return False
        for st in self.stages:
            if st.bound is not None and not st.bound.plan.ready:
                return None
        out = Straight(f"a program of {len(self.stages)} stages")
        sources: dict = {}
        setup = []
        for k in range(len(self.inputs)):
            sources[k] = name = f"s{k}"
            setup.append(f"{name} = storages[{k}]")
            out.sample[name] = storages[k]
        value: dict = {}  # stage -> expression of its value
        straight = 0
        for group in self._run_groups:
            k = group[0]
            st = self.stages[k]
            b = st.bound
            mark = out.mark()
            got = None
            if len(group) == 1 and b is not None and type(st.node) is not ex.Leaf:
                if st.slot is None and st.make is None:  # a fresh result
                    got = b.emit(out, sources, None)
                    if got is not None:
                        res = b.plan.result.view
                        key = ex.Leaf(out.sample[got], res).key
                        value[k] = f"fresh({got}, {out.bind(res, 'v')}, {key})"
                elif st.make is not None and st.output is None:  # a shared value
                    buf = out.buffer(st.slot.data.size, st.slot.dtype, fresh=False)
                    got = b.emit(out, sources, buf)
                elif st.make is not None:  # an output with storage of its own per call
                    leaf, buf = out.fresh_name("m"), out.fresh_name("b")
                    out.body.append(f"{leaf} = {out.bind(st.make, 'make')}()")
                    out.body.append(f"{buf} = {leaf}.data")
                    out.sample[buf] = st.make().data
                    got = b.emit(out, sources, buf)
                    value[k] = f"Leaf({buf}, {leaf}.view)"
                if got is not None and st.source is not None:
                    sources[st.source] = got
                    out.body.append(f"storages[{st.source}] = {got}")
            if got is None:  # the general way
                out.rollback(mark)
                out.body.append(f"stage({group!r}, storages, values)")
                for j in group:
                    value[j] = f"values[{j}]"
                    src = self.stages[j].source
                    if src is not None:
                        sources[src] = name = out.fresh_name("s")
                        out.body.append(f"{name} = storages[{src}]")
                        out.sample[name] = storages[src]
            else:
                straight += 1
        if not straight:
            return False
        if straight != len(self._run_groups):  # some stages run through ``_stage``
            setup.append(f"values = [None] * {len(self.stages)}")
        out.ns.update(stage=self._stage, fresh=ex.Leaf.fresh, Leaf=ex.Leaf)
        returns = "[" + ", ".join(value[k] for k in self._results) + "]"
        run = out.build("storages", setup, returns)
        run.engine = OPTIONS["engine"]
        return run

    def kernel_calls(self, bound: dict | None = None) -> list:
        """Zero-argument calls of every kernel of every stage, arguments bound once to the
        storage of one run with ``bound`` (benchmarks: the sum of kernel times)."""
        _, storages = self._run(bound)
        calls = []
        for st in self.stages:
            if st.bound is not None:
                dst = st.slot if st.slot is not None and st.make is None else None
                if st.make is not None and st.slot is not None:
                    dst = st.make()
                calls += kernel_calls(st.bound, storages, dst)
        return calls

    def _node(self, st: Stage, storages: list) -> ex.Node:
        """The stage's expression over this run's storage: new leaves in place of the
        per-run ones (for the engine's general path: tiers, chunked, the numpy engine)."""
        if not any(self._source_of(p) is not None for p in st.node.params if type(p) is ex.Leaf):
            return st.node

        def fn(node, kids):
            if type(node) is ex.Leaf:
                k = self._source_of(node)
                if k is not None:
                    return ex.Leaf.fresh(storages[k], node.view, node.key)
            return None

        return ex.rebuild_dag(st.node, fn)

    def _bound(self, st: Stage, dst) -> Bound | None:
        """The stage's bound schedule, planned on first use and kept (None for chunked
        stages and the numpy engine: the engine's general path runs those)."""
        b = st.bound
        if b is not None:
            return b
        node = st.node
        if OPTIONS["engine"] != "numba" or has_chunked(node):
            return None
        plan, _ = executor.schedule_for(node, dst)
        st.bound = b = Bound(plan, node.params, self._source_of)
        return b

    def _numpy_tier(self, b: Bound, st: Stage, storages: list, dst) -> ex.Leaf | None:
        """The numpy tier's answer while the stage's kernels compile (None: run them)."""
        if b.plan.ready or not OPTIONS["tiered"]:
            return None
        return executor.numpy_tier(b.plan, self._node(st, storages), dst)

    def _evaluate(self, st: Stage, storages: list) -> ex.Leaf:
        b = self._bound(st, None)
        if b is None:
            return engine.evaluate(self._node(st, storages))
        out = self._numpy_tier(b, st, storages, None)
        return out if out is not None else b.evaluate(storages)

    def _assign(self, st: Stage, storages: list, dst: ex.Leaf) -> None:
        b = self._bound(st, dst)
        if b is None:
            engine.assign(dst, self._node(st, storages))
        elif self._numpy_tier(b, st, storages, dst) is None:
            b.assign(storages, dst)

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

    def _name_slots(self, names) -> None:
        """Give each stage's slot (and body) the names its node has in the outputs' DAGs, so
        the stages that read a slot name its dims (display only)."""
        named: dict = {}
        for i, out in enumerate(self._outputs):
            if names is not None and names[i] is not None:
                for k, dims in dim_names(out, tuple(names[i])).items():
                    named.setdefault(k, dims)
        for st in self.stages:
            dims = named.get(id(st.user_node))
            if dims is None:
                continue
            if any(is_position(d) for d in dims):
                continue
            for node in (st.slot, st.node):
                if node is not None and node.ndim == len(dims):
                    ex.name_dims(node, dims)

    def explain(self, names: list | None = None) -> ProgramPlan:
        """Each stage's plan (nothing runs); stages fused into one kernel share a plan.
        ``names`` label each output's dims."""
        self._name_slots(names)
        plans = []
        for group in self._groups():
            texts = []
            for k in group:
                st = self.stages[k]
                dims = None
                if st.output is not None and names is not None:
                    dims = names[st.output]
                texts.append((st.label, formula(st.node, inputs(st.node, dims))))
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
