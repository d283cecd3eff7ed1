"""The one runner: a planned ``Schedule`` run over parameters given by argument.

Everything that executes a schedule goes through ``run_schedule``: eager evaluation and
assignment (``executor``), the stages of an ``ax.function``, a backward pass and an
optimizer step (``program``), and the chunks of a dask task (``chunk_run``, serial
variants). A ``Bound`` schedule is a schedule with its parameters, some fixed, some filled
per call (an input, a program's intermediate value, a dask block): the call passes their
storage and gets new ``Leaf`` objects over it in the parameter list, so no shared node is
ever mutated and concurrent calls of one program run in parallel (DESIGN §13).
"""

from __future__ import annotations

import math
import time
from functools import partial
from types import FunctionType

import numpy as np

from ..core.strided import span
from ..dag.nodes import Leaf
from ..kernels.threads import interrupts_held
from ..options import OPTIONS
from ..storage.memory import SMALL, allocate
from .alias import overlap_test, overlaps, reads, shares_storage, via_temp
from .binder import binder
from .binder import fresh_runner as _fresh
from .binder import into_runner as _into
from .binder import lowered as binder_lowered
from .dispatch import kernel_for, run_kernel, variant
from .routes import ROUTES, dot_runner, host_dot
from .schedule import DotStep, KernelStep, Schedule
from .tiers import compile_first, in_background

__all__ = [
    "run_schedule",
    "time_steps",
    "Bound",
    "NO_TEMPS",
    "kernel_calls",
    "Straight",
    "POOL_MAX_BYTES",
]

NO_TEMPS: dict = {}
_F16 = np.dtype(np.float16)
_U16 = np.dtype(np.uint16)


def run_schedule(
    plan: Schedule, params, dst: Leaf | None, serial: bool = False, fresh_dst: bool = False
) -> dict:
    """Execute ``plan`` over ``params`` (into ``dst`` when given); returns the temps (the
    result is one of them when ``dst`` is None). ``serial``: every kernel's serial variant
    (a dask task: dask already runs one task per core). ``fresh_dst``: ``dst`` is new
    storage no operand reads (no alias check)."""
    if not plan.ready and not serial:  # a first run: compiled where Ctrl-C cannot land
        compile_first(plan, params, dst)
    device = plan.device
    steps = plan.steps
    if plan.dst_early and dst is not None and not fresh_dst and shares_storage(params, dst):
        return _via_scratch(plan, params, dst, serial)
    if (  # the common small case: one kernel into the destination, no overlap
        dst is not None
        and not serial
        and not plan.temps
        and len(steps) == 1
        and type(steps[0]) is KernelStep
        and (fresh_dst or not overlaps(steps[0], params, dst))
    ):
        run_kernel(steps[0], params, NO_TEMPS, dst, device)
        plan.ready = True
        return NO_TEMPS
    temps = {
        t: device.empty(math.prod(shape), dtype) for t, (shape, dtype, _) in enumerate(plan.temps)
    }
    last = len(steps) - 1
    for i, step in enumerate(steps):
        if type(step) is not KernelStep:
            ROUTES[type(step)](step, params, temps, dst, device)
        elif i == last and dst is not None and not fresh_dst and overlaps(step, params, dst):
            first, copy = via_temp(step)
            temps["alias"] = device.empty(first.out.view.size, first.out.dtype)
            run_kernel(first, params, temps, dst, device)
            run_kernel(copy, params, temps, dst, device)
        elif serial:
            fn = step.compiled.kernels.get((device.type, "serial"))
            if fn is None:
                fn = kernel_for(step, device, "serial")
            fn(*binder(step)(params, temps, dst))
        else:
            run_kernel(step, params, temps, dst, device)
    if not serial:
        plan.ready = True
    return temps


def _via_scratch(plan: Schedule, params, dst: Leaf, serial: bool) -> dict:
    """Run ``plan`` into scratch storage laid out like ``dst``, then copy the destination's
    elements: an input that shares ``dst``'s memory is read intact by every step."""
    device = plan.device
    end = span(dst.view)
    scratch = Leaf(device.empty(0 if end is None else end[1], dst.dtype), dst.view)
    temps = run_schedule(plan, params, scratch, serial, fresh_dst=True)
    if end is not None:
        device.array_view(dst.data, dst.view)[...] = device.array_view(scratch.data, dst.view)
    return temps


def time_steps(plan: Schedule, params, dst: Leaf | None, repeat: int) -> list[float]:
    """Seconds each step of a (compiled) schedule takes, the best of ``repeat`` runs of the
    whole schedule (temporaries written as in a real run; the destination too)."""
    device = plan.device
    best = [math.inf] * len(plan.steps)
    last = len(plan.steps) - 1
    for _ in range(repeat):
        temps = {
            t: device.empty(math.prod(shape), dtype)
            for t, (shape, dtype, _) in enumerate(plan.temps)
        }
        for i, step in enumerate(plan.steps):
            start = time.perf_counter()
            if type(step) is not KernelStep:
                ROUTES[type(step)](step, params, temps, dst, device)
            elif i == last and dst is not None and overlaps(step, params, dst):
                first, copy = via_temp(step)
                temps["alias"] = device.empty(first.out.view.size, first.out.dtype)
                run_kernel(first, params, temps, dst, device)
                run_kernel(copy, params, temps, dst, device)
            else:
                run_kernel(step, params, temps, dst, device)
            if not device.is_cpu:  # kernels launch asynchronously: wait for this one
                device.to_host(device.empty(1, np.dtype("uint8")))
            best[i] = min(best[i], time.perf_counter() - start)
    return best


# --- straight paths for a ready one-kernel schedule ----------------------------------------


def _single_kernel(plan: Schedule, params, temps: dict, dst: Leaf | None):
    """The one CPU kernel step of a ready schedule and its machine code, called without
    numba's argument typing (the plan key fixes every argument's numba type: dtypes,
    storage kinds and flags are in the leaf keys), or None for other schedules or a
    variant that depends on the output's alignment."""
    if not (plan.ready and plan.device.is_cpu and len(plan.steps) == 1):
        return None
    step = plan.steps[0]
    if type(step) is not KernelStep:
        return None
    kind = variant(step, plan.device)
    if kind == "stream":  # would change with the output's alignment
        return None
    fn = step.compiled.kernels.get(("cpu", kind))  # a Kernel, or its dispatcher once ready
    if fn is None or not getattr(fn, "ready", True):
        return None
    from ..storage.numba_private import entry_point  # numba is loaded: the kernel ran

    target = getattr(fn, "fn", fn)
    call = entry_point(target, binder(step)(params, temps, dst))
    if call is None and type(target) is FunctionType:
        call = target  # a parallel variant: Python running the compiled parts on threads
    return None if call is None else (step, call)


def fast_runner(plan: Schedule, params, out: Leaf, many: bool = False):
    """For a ready schedule writing a fresh result: ``run(params) -> Leaf``, generated
    with its kernels, arguments, allocation and result key fixed: the next evaluation of
    the same structure skips the general path. One CPU kernel: ``binder.fresh_runner``;
    several (``many``: the executor's cached plans): a straight runner, from the plan's
    second ready run on (``NoRunner(later=True)`` until then). None for other schedules.
    ``run.threshold`` records the ``serial_threshold`` it chose its variants under."""
    if len(plan.temps) == 1:
        found = _single_kernel(plan, params, {0: out.data}, None)
        if found is not None:
            (shape, dtype, _), view = plan.temps[0], plan.result.view
            n = math.prod(shape)
            # Small buffers keep numpy's alignment (as ``allocate`` does), without its frame.
            alloc = np.empty if n * dtype.itemsize < SMALL else allocate
            run = _fresh(found[0], found[1], alloc, n, dtype, Leaf, view, out.key)
            run.threshold = OPTIONS["serial_threshold"]
            return run
    if not (many and plan.ready and plan.device.is_cpu):
        return None
    if not _second(plan):
        return NoRunner(later=True)
    gen = Straight(_what(plan))
    setup: list = []
    got = gen.schedule(plan, _loader(gen, params, setup), None, True)
    if got is None:
        return None
    view = plan.result.view
    gen.ns["fresh"] = Leaf.fresh
    returns = f"fresh({got}, {gen.bind(view, 'v')}, {Leaf(gen.sample[got], view).key})"
    return gen.build("params", setup, returns, EAGER_POOL_MAX_BYTES)


def into_runner(plan: Schedule, params, dst: Leaf, many: bool = False):
    """For a ready schedule writing the destination: ``run(params, dst)`` that checks
    aliasing of the last kernel (an overlap takes the general path, through a temporary)
    and calls the kernels (several only with ``many``, as ``fast_runner``). None for other
    schedules."""
    steps = plan.steps
    if not steps or type(steps[-1]) not in (KernelStep, DotStep):
        return None
    general = partial(run_schedule, plan)
    if not plan.temps and type(steps[-1]) is KernelStep:
        found = _single_kernel(plan, params, NO_TEMPS, dst)
        if found is not None:
            step, call = found
            candidates = tuple(i for i, same_place, _ in reads(step) if same_place)
            inplace = _InPlace(plan, step, call, candidates) if plan.device.is_cpu else None
            run = _into(step, call, overlap_test(step), general, inplace, candidates)
            run.threshold = OPTIONS["serial_threshold"]
            return run
    if not (many and plan.ready and plan.device.is_cpu):
        return None
    if not _second(plan):
        return NoRunner(later=True)
    gen = Straight(_what(plan))
    # Earlier steps write temporaries; only the last one writes ``dst`` (the general path
    # goes through a temporary when it would read what it writes). A last BLAS step (the
    # second product of attention) goes the general way whenever an operand's storage
    # overlaps the destination's (conservative: storage bounds).
    # A plan whose BLAS step writes the destination early (cosine: the product, then the
    # division in place) goes the general way, through a scratch copy, in the same case.
    last_dot = type(steps[-1]) is DotStep or plan.dst_early
    test = "shares" if last_dot else "overlaps"
    setup = [f"if {test}(params, dst):", "    return general(params, dst)", "out = dst.data"]
    gen.sample["out"] = dst.data
    if gen.schedule(plan, _loader(gen, params, setup), "out", False) is None:
        return None
    if last_dot:
        gen.ns.update(shares=shares_storage, general=general)
    else:
        gen.ns.update(overlaps=overlap_test(steps[-1]), general=general)
    return gen.build("params, dst", setup, "None", EAGER_POOL_MAX_BYTES)


class _InPlace:
    """``run(params, dst)`` of a one-kernel assignment whose destination is the storage of
    some of its operands, read at the destination's own view and index (``m[...] = b * m +
    g``, ``x += 1``). The kernel's two arguments over the same memory fail LLVM's run-time
    overlap check and run its scalar loop (Adam's update over 131072 float32: 398 us
    against 92 us vectorized). So such an assignment runs the step's in-place variant,
    which reads those operands through the destination (``lowered(step, alias)``): one
    kernel per set of aliased parameters, compiled once (the general kernel answers while
    it compiles in the background under ``tiered``; with ``tiered=False`` it compiles
    first, as every kernel does)."""

    __slots__ = ("plan", "step", "call", "candidates", "kind", "variants")

    def __init__(self, plan: Schedule, step: KernelStep, call, candidates: tuple) -> None:
        self.plan, self.step, self.call, self.candidates = plan, step, call, candidates
        self.kind = variant(step, plan.device)
        self.variants: dict = {}  # alias -> (Kernel, bind)

    def __call__(self, params, dst) -> None:
        o = dst.data
        alias = tuple(i for i in self.candidates if params[i].data is o)
        got = self.variants.get(alias)
        if got is None:
            got = self.variants[alias] = self._start(alias, params, dst)
        kernel, bind = got
        if kernel.ready:
            kernel.fn(*bind(params, NO_TEMPS, dst))
        else:
            self.call(*binder(self.step)(params, NO_TEMPS, dst))

    def _start(self, alias: tuple, params, dst) -> tuple:
        kernel = kernel_for(self.step, self.plan.device, self.kind, alias)
        bind = binder(self.step, alias)
        if not kernel.ready:
            args = bind(params, NO_TEMPS, dst)
            if OPTIONS["tiered"]:
                in_background(kernel.warm, args)
            else:
                with interrupts_held():
                    kernel.warm(args)
        return kernel, bind


def _second(plan: Schedule) -> bool:
    """Whether the plan ran ready before (its ``fast`` says so)."""
    prev = plan.fast
    return type(prev) is NoRunner and prev.later and prev.threshold == OPTIONS["serial_threshold"]


def _what(plan: Schedule) -> str:
    return f"{len(plan.steps)} steps: " + ", ".join(s.why for s in plan.steps[:3])


def _loader(gen: Straight, params, setup: list):
    """``operand`` for ``Straight.schedule`` over a parameter list given per call: each
    parameter's storage (or value) read once at the top (``setup``)."""
    names: dict = {}

    def operand(j: int, attr: str) -> str:
        name = names.get((j, attr))
        if name is None:
            name = names[(j, attr)] = gen.fresh_name("p")
            setup.append(f"{name} = params[{j}].{attr}")
            gen.sample[name] = getattr(params[j], attr)
        return name

    return operand


class NoRunner:
    """A schedule's ``fast`` when it has none under this ``serial_threshold`` (so the
    general path does not look for one again on every call); false. ``later``: none yet,
    the next run builds it (a straight runner of several kernels is built on a plan's
    second ready run: a plan run once, a lazy program's first evaluation, never pays)."""

    __slots__ = ("threshold", "later")

    def __init__(self, later: bool = False) -> None:
        self.threshold = OPTIONS["serial_threshold"]
        self.later = later

    def __bool__(self) -> bool:
        return False


class Bound:
    """A schedule and its parameters: ``fixed`` ones (constants, variables, leaves the
    program reads as they are) and per-call ones, given to ``params(storages)`` as the
    storage of each *source* (an input, a computed value, a block) in order. Each per-call
    parameter is a view of its source: the same view and key as when planned, this call's
    storage."""

    __slots__ = ("plan", "fixed", "slots", "fast", "tried")

    def __init__(self, plan: Schedule, params: tuple, source_of):
        """``source_of(param) -> int | None``: which source a parameter views (None:
        fixed)."""
        self.plan = plan
        slots = []
        fixed = list(params)
        for i, p in enumerate(params):
            k = source_of(p) if type(p) is Leaf else None
            if k is not None:
                slots.append((i, k, p.view, p.key))
                fixed[i] = None  # not kept alive: filled per call
        self.fixed = fixed
        self.slots = tuple(slots)
        self.fast = None  # the straight path of a ready one-kernel schedule (see below)
        self.tried = False  # whether ``fast`` was looked for (once the plan is ready)

    def params(self, storages) -> list:
        """The parameter list of one call: ``storages[k]`` is source ``k``'s 1-D storage."""
        params = self.fixed.copy()
        fresh = Leaf.fresh
        for i, k, view, key in self.slots:
            params[i] = fresh(storages[k], view, key)
        return params

    def _straight(self):
        run = self.fast
        if run is not None and run.threshold == OPTIONS["serial_threshold"]:
            return run
        return None

    def evaluate(self, storages, serial: bool = False) -> Leaf:
        """Run into a fresh result: its leaf."""
        params = self.params(storages)
        if not serial:
            run = self._straight()
            if run is not None:
                return run(params)
        plan = self.plan
        temps = run_schedule(plan, params, None, serial)
        res = plan.result
        out = Leaf(temps[res.src[1]], res.view)
        if not serial and not self.tried and plan.ready:
            self.tried = True
            self.fast = fast_runner(plan, params, out)
        return out

    def assign(self, storages, dst: Leaf, serial: bool = False, fresh_dst: bool = False):
        """Run into ``dst``."""
        params = self.params(storages)
        if not serial:
            run = self._straight()
            if run is not None:
                run(params, dst)
                return
        run_schedule(self.plan, params, dst, serial, fresh_dst)
        if not serial and not self.tried and self.plan.ready:
            self.tried = True
            self.fast = into_runner(self.plan, params, dst)

    def emit(self, out: Straight, sources: dict, dst: str | None) -> str | None:
        """Emit this schedule into a straight runner (``Straight.schedule``): ``sources[k]``
        is the local holding source ``k``'s storage, ``dst`` fresh storage to write (None:
        a fresh result)."""
        per_call = {i: k for i, k, _, _ in self.slots}
        fixed = self.fixed

        def operand(j: int, attr: str) -> str | None:
            k = per_call.get(j)
            if k is None:
                return out.load(fixed[j], attr)
            return sources.get(k) if attr == "data" else None

        return out.schedule(self.plan, operand, dst, True)


def kernel_calls(bound: Bound, storages, dst: Leaf | None = None) -> list:
    """Zero-argument calls of each compiled kernel of a ready bound schedule, arguments
    bound once (benchmarks: the kernels' own time, what no call can avoid)."""
    plan = bound.plan
    device = plan.device
    params = bound.params(storages)
    temps = {
        t: device.empty(math.prod(shape), dtype) for t, (shape, dtype, _) in enumerate(plan.temps)
    }
    calls = []
    for step in plan.steps:
        if type(step) is KernelStep:
            fn = kernel_for(step, device, variant(step, device))
            fn = fn.fn if getattr(fn, "ready", False) else fn
            args = binder(step)(params, temps, dst)
            calls.append(lambda fn=fn, args=args: fn(*args))
    return calls


# --- straight-line runners: bound schedules as one generated function ----------------------

# Per-call temporaries of a straight runner come from a free list of buffer sets while the
# set is at most this big: a call of a long program of tiny kernels would otherwise spend
# more on allocation than on its kernels. Above it the kernels take far longer than the
# allocation, and holding the buffers between calls would only cost memory.
POOL_MAX_BYTES = 16 << 20
# An expression's plan is cached with the engine's (up to 512 of them), so each of its
# runners keeps less.
EAGER_POOL_MAX_BYTES = 64 << 10


class Straight:
    """Builds one generated function running bound schedules back to back: every kernel
    called with positional arguments (shapes, strides and offsets are literals, storage
    is a local), a BLAS step as ``routes.dot_runner`` of its storage, the temporaries carved
    once, nothing looked up per step. Built from the objects of a finished run
    (``sample``: each local's value then), which type the kernels' direct entry points
    (``_single_kernel``'s reasoning: plan keys fix every argument's numba type). A
    schedule it cannot run (a numpy step, a BLAS step writing the destination, a kernel
    not compiled, another device) makes ``schedule`` return None: the caller runs it the
    general way."""

    def __init__(self, where: str):
        self.where = where
        self.body: list[str] = []
        self.ns: dict = {"alloc": allocate, "U16": np.dtype(np.uint16), "f32": np.float32}
        self.sample: dict = {}  # local name -> its value in the run it is built from
        self.pool: list = []  # (n, dtype) of each pooled buffer
        self._bound: dict = {}  # id(obj) -> namespace name
        self._keep: list = []  # what the names are (ids stay theirs while it is alive)
        self._entries: dict = {}  # (kernel, argument kinds) -> its entry point or None
        self.n = 0

    def mark(self) -> tuple:
        return len(self.body), len(self.pool)

    def rollback(self, mark: tuple) -> None:
        """Forget what was emitted since ``mark`` (loads stay: harmless)."""
        del self.body[mark[0] :], self.pool[mark[1] :]

    def fresh_name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def bind(self, obj, prefix: str = "c") -> str:
        """``obj`` as a name of the function's namespace."""
        name = self._bound.get(id(obj))
        if name is None:
            name = self._bound[id(obj)] = self.fresh_name(prefix)
            self.ns[name] = obj
            self._keep.append(obj)
        return name

    def load(self, obj, attr: str) -> str:
        """A name for ``obj.attr`` (a fixed leaf's storage, a constant's value), read now:
        a leaf's storage and a constant's value are set once, when it is made."""
        value = getattr(obj, attr)
        name = self.bind(value, "d")
        self.sample[name] = value
        return name

    def buffer(self, n: int, dtype, fresh: bool) -> str:
        """A local holding new storage of ``n`` elements: allocated per call (``fresh``:
        it outlives the call) or from the buffer set of this call."""
        name = self.fresh_name("b")
        self.sample[name] = allocate(n, dtype)
        if fresh:
            self.body.append(f"{name} = alloc({n}, {self.bind(dtype, 't')})")
        else:
            self.pool.append((name, n, dtype))
        return name

    def _kernel(self, step: KernelStep, device, names: list[str], literal: list, aligned: bool):
        """The callable for a step's kernel and this run's variant, or None."""
        small = step.size < OPTIONS["serial_threshold"]
        kind = "serial" if small else variant(step, device)
        if kind == "stream" and not aligned:  # the general path looks at the output
            return None
        fn = step.compiled.kernels.get((device.type, kind))
        if fn is None or not getattr(fn, "ready", True):
            return None
        target = getattr(fn, "fn", fn)
        from ..storage.numba_private import entry_point  # numba is loaded: the kernel ran

        args = tuple(
            self.sample[a] if a is not None else v for a, v in zip(names, literal, strict=True)
        )
        # Typing the arguments costs more than the rest of emitting a step: the entry
        # point is looked up once per kernel and argument kinds (the steps of a long
        # program repeat a handful of kernels).
        kinds = (id(target), *(_kind(a) for a in args))
        call = self._entries.get(kinds, self)
        if call is self:
            call = self._entries[kinds] = entry_point(target, args)
        return target if call is None else call

    def schedule(self, plan: Schedule, operand, dst: str | None, own_dst: bool) -> str | None:
        """Emit ``plan``'s steps; ``operand(j, attr)`` names param ``j``'s ``.data`` (or
        ``.value``), ``dst`` the destination's storage (None: a fresh result) that the
        last step may write without a temporary (the caller checked: new storage, or an
        overlap test before the call); ``own_dst``: storage of this runner's allocation
        (so aligned: the streaming variant may write it). Returns the local holding the
        result's storage (``dst`` when given), or None when the plan cannot run here
        (nothing emitted)."""
        device = plan.device
        if not device.is_cpu or not plan.ready:
            return None
        steps = plan.steps
        if not steps or any(type(s) not in (KernelStep, DotStep) for s in steps):
            return None
        mark = self.mark()
        res = plan.result.src
        temps: dict = {}
        for t, (shape, dtype, _) in enumerate(plan.temps):
            fresh = dst is None and res == ("temp", t)
            temps[t] = self.buffer(math.prod(shape), dtype, fresh)
        calls = []
        for step in steps:
            if type(step) is DotStep:  # BLAS: np.matmul on views of the storage
                names = []
                for src in (step.a.src, step.b.src, step.out.src):
                    if src[0] == "param":
                        names.append(operand(src[1], "data"))
                    elif src[0] == "temp":
                        names.append(temps[src[1]])
                    elif (
                        src[0] == "dst"
                        and dst is not None
                        and (step is steps[-1] or plan.dst_early)
                    ):
                        names.append(dst)  # the caller checked: no operand shares its storage
                    else:  # the destination earlier: the general path's care
                        self.rollback(mark)
                        return None
                samples = [self.sample.get(name) for name in names]
                run = None if any(x is None for x in samples) else dot_runner(step, *samples)
                args = ", ".join(names)
                if run is None:
                    calls.append(f"{self.bind(host_dot, 'k')}({args}, {self.bind(step)})")
                else:
                    calls.append(f"{self.bind(run, 'k')}({args})")
                continue
            names, literal, parts = [], [], []
            low = binder_lowered(step)
            for source in low.recipe:
                if source[0] == "int":
                    names.append(None)
                    literal.append(source[1])
                    parts.append(repr(source[1]))
                    continue
                if source[0] == "array":
                    leaf = low.operands[source[1]]
                    src = leaf.src
                    if src[0] == "param":
                        name = operand(src[1], "data")
                    elif src[0] == "dst" and dst is not None:
                        name = dst
                    elif src[0] == "temp":
                        name = temps[src[1]]
                    else:
                        name = None
                    bits16 = leaf.dtype == _F16 or leaf.dtype.kind == "V"
                else:
                    node = source[1]
                    name = operand(node.src[1], "value")
                    bits16 = node.dtype == _F16 or node.dtype.kind == "V"
                if name is None:
                    self.rollback(mark)
                    return None
                if bits16:  # float16 storage as its bits, scalars in float32 (binder)
                    name = self._bits16(name, source[0] == "array")
                names.append(name)
                literal.append(None)
                parts.append(name)
            aligned = own_dst or step is not steps[-1] or dst is None
            fn = self._kernel(step, device, names, literal, aligned)
            if fn is None:
                self.rollback(mark)
                return None
            calls.append(f"{self.bind(fn, 'k')}({', '.join(parts)})")
        self.body += calls
        return dst if dst is not None else temps[res[1]]

    def _bits16(self, name: str, array: bool) -> str:
        new = self.fresh_name("h")
        value = self.sample[name]
        if array:
            self.body.append(f"{new} = {name}.view(U16)")
            self.sample[new] = value.view(_U16)
        else:
            self.body.append(f"{new} = f32({name})")
            self.sample[new] = np.float32(value)
        return new

    def build(self, signature: str, setup: list[str], returns: str, pool_max=POOL_MAX_BYTES):
        """The function ``def run(<signature>)``: ``setup`` lines, the pooled
        buffer set, the body, ``return <returns>``."""
        lines = [f"def run({signature}):"] + ["    " + s for s in setup]
        pool = [(name, n, dtype) for name, n, dtype in self.pool]
        if pool:
            total = sum(n * dtype.itemsize for _, n, dtype in pool)
            shapes = tuple((n, dtype) for _, n, dtype in pool)
            names = ", ".join(name for name, _, _ in pool)
            if total <= pool_max:
                free: list = []
                self.ns.update(pop=free.pop, push=free.append, new=partial(_buffer_set, shapes))
                lines += [
                    "    try:",
                    "        bufs = pop()",
                    "    except IndexError:",
                    "        bufs = new()",
                    f"    ({names},) = bufs",
                ]
                self.body.append("push(bufs)")
            else:
                self.ns["new"] = partial(_buffer_set, shapes)
                lines += [f"    ({names},) = new()"]
        lines += ["    " + s for s in self.body] + [f"    return {returns}"]
        code = "\n".join(lines) + "\n"
        exec(compile(code, f"<straight runner of {self.where}>", "exec"), self.ns)
        run = self.ns["run"]
        run.threshold = OPTIONS["serial_threshold"]
        run.source = code
        return run


def _kind(arg):
    """What numba's type of a kernel argument depends on (storage: dtype and flags)."""
    if isinstance(arg, np.ndarray):
        f = arg.flags
        return (type(arg), arg.dtype, arg.ndim, f.writeable, f.aligned, f.c_contiguous)
    return type(arg)


def _buffer_set(shapes: tuple) -> tuple:
    return tuple(allocate(n, dtype) for n, dtype in shapes)
