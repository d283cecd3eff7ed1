"""The planner's cost model: estimated work and bytes moved, with shared nodes counted once.

Owns every number the planner compares when it decides to materialize or recompute a value
and to fuse or split a kernel (DESIGN §13), and the estimate ``explain`` shows per kernel
(``KernelInfo.est_bytes``, ``est_flops``). Work is in flop-equivalents: an arithmetic op,
a comparison or a cast is 1, an op marked ``expensive`` in the op table (exp, log, tanh,
division...) is its ``work`` there (measured: log and tanh 24, sin and pow 100) or else
``TRANSCENDENTAL``; a leaf read is ``LOAD``. Over a DAG every node counts
once however many parents read it (a ``where`` chain that repeats its argument costs its
argument once: it is one local in the generated body).

Decisions, in terms of these estimates:

- ``worth_materializing(work, elements, itemsize, uses)``: a value read by ``uses`` kernels
  is written once and read ``uses`` times (``2 * itemsize`` bytes per element and use,
  weighted by ``FLOPS_PER_BYTE``) instead of being computed ``uses`` times. Cheap shared
  subexpressions (``x - mean`` of batch norm) are recomputed; transcendental ones are not;
- a reduction is never recomputed per element of its consumer: the planner reads a
  reduction used outside its own kernel from a temporary (``planner._fuse_reduce``), which
  this model treats as a leaf (``BOUNDARY`` kinds);
- ``body_size``: the compile-time size of a fused body, shared nodes once, which
  ``planner._size_cuts`` keeps under ``KERNEL_BUDGET``;
- ``blas_into_destination``: a BLAS result read only at the output's own index by the
  final kernel (or the result itself) is written straight into the destination when its
  layout takes BLAS rows: the bytes of a temporary (written by BLAS, read back, and a
  fresh allocation per run) are saved, and nothing else changes;
- ``stored_reduction``/``worth_storing``: a root ``f(E, reduce(E))`` (softmax written by
  hand: ``e / e.sum(K)``) whose result can hold ``E`` computes ``E`` once, writes it to
  the result while reducing it, and reads it back (in cache) for ``f``: one computation
  of ``E`` and one read of its inputs saved, a store and a load in cache added (the
  normalize kernel, ``kernels.cpu_normalize.normalize_kernel``);
- ``blas_host``: an elementwise value computed from a BLAS result that nothing else reads
  (``relu(x @ w + b)``) is written over that result's temporary: one temporary instead of
  two, the same bytes moved;
- ``serial_seconds``: a step's one-core time, which ``dispatch.parallel_pays`` weighs
  against the measured cost of a parallel launch.

Imports only the op and reduction tables and the kernel IR (``engine.planner`` and
``engine.plan`` use it).
"""

from __future__ import annotations

import math

from ..core.ops import OPS
from ..core.reductions_table import REDUCTIONS
from ..core.strided import View
from ..kernels.ir import computed_from, kernel_nodes

__all__ = [
    "TRANSCENDENTAL",
    "LOAD",
    "FLOPS_PER_BYTE",
    "BOUNDARY",
    "op_work",
    "dag_work",
    "worth_materializing",
    "step_estimate",
    "blas_rows",
    "dot_layouts",
    "blas_into_destination",
    "parent_edges",
    "blas_host",
    "stored_reduction",
    "reduced",
    "worth_storing",
    "worth_sweeping",
    "can_hold",
    "FLOPS_PER_SECOND",
    "CACHE_BYTES",
    "PRIVATE_CACHE_BYTES",
    "CACHE_BYTES_PER_SECOND",
    "MEMORY_BYTES_PER_SECOND",
    "serial_seconds",
    "step_seconds",
    "seconds_of",
    "threads_save",
    "threads_pay",
    "LAUNCH_SECONDS",
]

TRANSCENDENTAL = 4  # an exp/log/division as additions (vectorized math library)
LOAD = 1  # reading an input element (an L1 hit once streamed)
# Flop-equivalents one core does in the time it moves one byte to or from memory: ~8
# vectorized float32 ops per ns against ~10 GB/s per core on the reference machine.
FLOPS_PER_BYTE = 0.8
# Absolute rates of one core, for the one decision that weighs an estimate against a
# measured time (a parallel launch: ``serial_seconds``, ``dispatch.parallel_pays``). Fitted
# to the serial kernels of benchmarks/bench_threads.py on the 2-core reference machine
# (AVX2): a kernel is bound by its work or by its bytes, whichever takes longer; bytes
# that stay in cache (a kernel moving up to CACHE_BYTES, which the step before it or a
# repeat left there) move ~2.5x faster than from memory.
FLOPS_PER_SECOND = 20e9
CACHE_BYTES = 8 << 20
# One core's own cache (L2: 2 MiB a core on the reference machine): bytes a kernel finds
# there come to that core only (``threads_save``).
PRIVATE_CACHE_BYTES = 2 << 20
CACHE_BYTES_PER_SECOND = 25e9
MEMORY_BYTES_PER_SECOND = 10e9
# Nodes a kernel reads as stored values (a leaf, or a value computed by its own kernel).
BOUNDARY = ("leaf", "remap", "reduce", "dot", "call", "reshape")


def op_work(node) -> int:
    """Work of one DAG or kernel-IR node (not its children)."""
    kind = node.kind
    if kind == "map":
        row = OPS[node.op]
        return (row.work or TRANSCENDENTAL) if row.expensive else 1
    if kind in ("cast", "pad", "concat"):
        return 1
    if kind in BOUNDARY:
        return LOAD
    return 0  # a constant


_SET_CAP = 256  # past this many nodes a body is cut anyway: children's work simply adds


def dag_work(order) -> dict[int, tuple[int, bool, frozenset | None]]:
    """``id(node) -> (work, transcendental, ids)`` for every node of ``order`` (children
    first, as ``expr.walk`` gives them): the work of computing the node's value at one
    element with every distinct node below it counted once, stopping at ``BOUNDARY``
    nodes (loaded); ``ids`` are the nodes counted (None past ``_SET_CAP``: then shared
    nodes below may count twice, an overestimate of a body that is cut anyway)."""
    own: dict[int, int] = {}
    out: dict[int, tuple[int, bool, frozenset | None]] = {}
    for node in order:
        i = id(node)
        own[i] = op_work(node)
        if node.kind in BOUNDARY or node.kind == "const":
            out[i] = (own[i], False, frozenset((i,)))
            continue
        trans = node.kind == "map" and OPS[node.op].expensive
        ids: set | None = {i}
        for c in node.children:
            _, t, below = out[id(c)]
            trans = trans or t
            if ids is not None and below is not None and len(ids) + len(below) <= _SET_CAP:
                ids |= below
            else:
                ids = None
        if ids is not None:
            out[i] = (sum(own[k] for k in ids), trans, frozenset(ids))
        else:
            work = own[i] + sum(out[id(c)][0] for c in node.children)
            out[i] = (work, trans, None)
    return out


def worth_materializing(
    work: float, elements: int, itemsize: int, uses: int, input_bytes: int = 0
) -> bool:
    """Whether a value read by ``uses`` kernels is cheaper written once and read back than
    computed in each of them (per element: ``work`` flop-equivalents per computation; a
    temporary costs a write plus ``uses`` reads, and the kernel that writes it reads the
    value's own inputs again: ``input_bytes``)."""
    if uses <= 1:
        return False
    recompute = (uses - 1) * work
    traffic = ((1 + uses) * itemsize + input_bytes) * FLOPS_PER_BYTE
    return recompute > traffic


def _distinct(view) -> int:
    """Elements a view reaches at most once each (its broadcast dims counted once)."""
    return math.prod(n for n, s in zip(view.shape, view.strides, strict=True) if s)


def step_estimate(step) -> tuple[int, int]:
    """``(bytes moved, flop-equivalents)`` of one schedule step: every distinct input read
    once, the output written once; work per element of the kernel tree (shared nodes
    once) times the elements it runs on (under a reduction: the full index space; above
    it: the outputs). A BLAS call is ``2 * batch * M * K * N`` flops."""
    kind = type(step).__name__
    if kind == "DotStep":
        nb, m, k, n = step.sizes
        moved = sum(_distinct(x.view) * x.dtype.itemsize for x in (step.a, step.b))
        moved += nb * m * n * step.out.dtype.itemsize
        return int(moved), int(2 * nb * m * k * n)
    if kind == "CallStep":
        moved = sum(_distinct(a.view) * a.dtype.itemsize for a in step.args)
        size = math.prod(step.out.view.shape)
        return int(moved + size * step.out.dtype.itemsize), int(size)
    outs = [(step.out, step.tree)] + list(getattr(step, "extra", ()))
    moved, flops = 0, 0
    seen_leaves = set()
    total = math.prod(step.nest.lengths) if step.nest.lengths else 1
    for out, tree in outs:
        n_out = math.prod(out.view.shape)
        moved += _distinct(out.view) * out.dtype.itemsize
        nodes = kernel_nodes(tree)
        under = _under_reduce(tree)
        # a normalize kernel's output is its whole index space, but what reads only its
        # reductions and constants (a mean's division, a layer norm's sqrt(var + eps)) is
        # computed once per row (hoisted out of the row's loop)
        rows = math.prod(step.nest.lengths[: step.nest.n_out]) if step.nest.lengths else 1
        fixed = computed_from(nodes, _is_reduction) if n_out == total and rows < total else set()
        for node in nodes:
            if node.kind == "leaf":
                key = (node.src, node.view)
                if key not in seen_leaves:
                    seen_leaves.add(key)
                    moved += _distinct(node.view) * node.dtype.itemsize
            per = _reduce_work(node.op) if node.kind == "reduce" else op_work(node)
            count = total if id(node) in under else rows if id(node) in fixed else n_out
            flops += per * count
    return int(moved), int(flops)


def _is_reduction(node) -> bool:
    return node.kind in ("reduce", "swept")


def serial_seconds(step) -> float:
    """Estimated seconds of one schedule step on one core: the longer of its work and its
    bytes (``step_estimate``) at the rates above."""
    work, data, _ = step_seconds(step)
    return max(work, data)


def step_seconds(step) -> tuple[float, float, float]:
    """``(work, bytes, private)``: one core's seconds for the step's work and for its bytes
    at the rates above, and the share of those bytes taken to be in the calling core's
    own cache (up to ``PRIVATE_CACHE_BYTES`` of bytes in cache; none from memory)."""
    return seconds_of(*step_estimate(step))


def seconds_of(moved: int, flops: int) -> tuple[float, float, float]:
    """``step_seconds`` of a kernel moving ``moved`` bytes and doing ``flops`` of work."""
    cached = moved <= CACHE_BYTES
    rate = CACHE_BYTES_PER_SECOND if cached else MEMORY_BYTES_PER_SECOND
    private = min(1.0, PRIVATE_CACHE_BYTES / moved) if cached and moved else 0.0
    return flops / FLOPS_PER_SECOND, moved / rate, private


# What running a kernel's ranges on threads costs beyond the ranges themselves: handing
# them to the helpers, waking them and waiting for them (kernels/threads.py), measured
# with work to do (a part that does nothing is done by the caller before a helper wakes:
# 11-25 us, which this constant was until issue 18). ``benchmarks/bench_threads.py``
# ("kernels") times each kernel's serial and parallel variants and fits ``parallel = a *
# serial + b``: a = 0.59-0.60, b = 47-54 us on the 2-core reference machine (two runs), so
# threads pay from 116-135 us of one-core time, which is this constant over
# ``1 - 1 / threads``: 58-68 us. At 25 us a kernel of 50-130 us ran on threads, slower
# (relu(h + b) 256x1024: 102-108 us serial, 140-143 us parallel). With helpers that wait
# between launches (``threads.SPIN_SECONDS``) the fit reads b = 28-35 us, but at 30 us
# the workload suite's ~1e5-element kernels ran slower on threads (layer norm 154 ->
# 180 us): the constant stays.
LAUNCH_SECONDS = 60e-6


def threads_pay(seconds: tuple[float, float, float], threads: int) -> bool:
    """Whether ``threads`` cores are estimated faster than one on a step of
    ``step_seconds``: what they save exceeds ``LAUNCH_SECONDS``."""
    return threads > 1 and threads_save(seconds, threads) > LAUNCH_SECONDS


def threads_save(seconds: tuple[float, float, float], threads: int) -> float:
    """Seconds ``threads`` cores save over one on a step of ``step_seconds`` (before the
    launch's cost): its work is shared out, and its bytes but those in the calling core's
    own cache, which another core reads no faster than the caller. Measured
    (``benchmarks/bench_threads.py``, 2 cores): ``x - y`` of 262k float32 (3 MiB) ran
    140-160 us serial and 196-241 us on two threads; from 6 MiB two threads were faster
    (a max of 8 MiB on fresh arrays: 370-406 us on two, 530-541 on one)."""
    work, data, private = seconds
    stay = data * private
    return max(work, data) - max(work / threads, stay + (data - stay) / threads)


def _reduce_work(op: str) -> int:
    """Work per element folded: logsumexp finds the max, then adds ``exp(x - max)``."""
    return 2 + TRANSCENDENTAL if op in ("logsumexp", "logsumexp_guarded") else 1


def _under_reduce(tree) -> set[int]:
    """Ids of the kernel-IR nodes evaluated per element of the reduction's index space."""
    found: set[int] = set()
    for node in kernel_nodes(tree):
        if node.kind == "reduce":
            found.update(id(n) for n in kernel_nodes(node.child))
            found.add(id(node))
    return found


# --- BLAS output placement ---------------------------------------------------------------


def blas_rows(view, order: tuple) -> bool:
    """Whether ``view`` read in dim order ``order`` (new dim p is view dim ``order[p]``) is
    C-contiguous, length-1 dims aside: BLAS then writes it as (batch, M, N) rows, no copy."""
    if getattr(view, "blocks", None) is not None:
        return False
    expect = 1
    for d in reversed(order):
        n, s = view.shape[d], view.strides[d]
        if n == 1:
            continue
        if s != expect:
            return False
        expect *= n
    return True


def dot_layouts(node) -> list[tuple]:
    """The dim orders (as indices of ``node``'s dims) a BLAS call can write ``node``'s
    result in: (batch, a's free dims, b's free dims), or with the operands swapped."""
    A, B, OUT = node.a_labels, node.b_labels, node.out_labels
    batch = [lb for lb in OUT if lb in A and lb in B]
    free_a = [lb for lb in OUT if lb in A and lb not in B]
    free_b = [lb for lb in OUT if lb in B and lb not in A]
    orders = [batch + free_a + free_b, batch + free_b + free_a]
    return [tuple(OUT.index(lb) for lb in o) for o in orders]


def _permuted(node, view):
    """``(dot, its destination view)`` when ``node`` is a ``dot`` with its dims permuted
    (a remap with no broadcast, slice or step: ``out["N M"] = dot`` over "M N"), else
    None."""
    if node.kind != "remap" or node.arg.kind != "dot":
        return None
    maps, arg = node.maps, node.arg
    dims = [m[0] for m in maps]
    if any(m[1:] != (0, 1) for m in maps) or sorted(dims) != list(range(node.ndim)):
        return None
    if any(arg.shape[i] != node.shape[j] for i, j in enumerate(dims)):
        return None
    return arg, View(
        tuple(view.shape[j] for j in dims), tuple(view.strides[j] for j in dims), view.offset
    )


def blas_into_destination(dag, view, dtype):
    """``(dot node, destination view as the dot's dims)`` for the BLAS call of
    ``dst[...] = dag`` that writes straight into the destination (``view``, ``dtype``), or
    None: the root itself (its dims maybe permuted), or a dot the root reads through
    elementwise ops only (map, cast: the same index), with the destination's dtype, whose
    value laid out like the destination is BLAS rows (``blas_rows``, either operand
    first). It saves the temporary's bytes (``2 * size * itemsize``: BLAS writes it, the
    final kernel reads it back) and its allocation; the final kernel then reads the
    destination in place, at its own index (``planner.build_schedule`` checks the built
    kernel)."""
    if view.blocks is not None or math.prod(view.shape) == 0:
        return None

    def fits(node, v) -> bool:
        return node.dtype == dtype and any(blas_rows(v, o) for o in dot_layouts(node))

    found = _permuted(dag, view)
    if found is not None:
        return found if fits(*found) else None
    seen: set = set()
    stack = [dag]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.kind == "dot":
            if node.shape == view.shape and fits(node, view):
                return node, view
        elif node.kind in ("map", "cast"):
            stack.extend(node.children)
    return None


def parent_edges(dag, canon: dict) -> dict:
    """Canonical value -> how many parent edges read it (each node of ``dag`` once)."""
    from ..dag.nodes import walk

    count: dict = {}
    for node in walk(dag):
        for c in node.children:
            k = canon[id(c)]
            count[k] = count.get(k, 0) + 1
    return count


def blas_host(node, canon: dict, parents: dict):
    """The ``dot`` whose temporary ``node`` (map or cast) may be written over: reached from
    ``node`` through elementwise ops only (the same index), with its shape and dtype, the
    dot and every op between read by nothing else (one parent edge each), so no kernel
    reads the product after ``node``'s kernel overwrote it. None when there is none."""
    if node.kind not in ("map", "cast"):
        return None
    stack = list(node.children)
    while stack:
        c = stack.pop()
        if parents.get(canon[id(c)], 0) != 1:
            continue
        if c.kind == "dot":
            if c.shape == node.shape and c.dtype == node.dtype:
                return c
        elif c.kind in ("map", "cast"):
            stack.extend(c.children)
    return None


# --- a value stored once in the result (the normalize kernel) ------------------------------

# Flop-equivalents per byte written and read back while still in cache (L1/L2): a few
# times cheaper than memory (``FLOPS_PER_BYTE``).
CACHED_PER_BYTE = FLOPS_PER_BYTE / 4
# The values of one output's reduced extent stay in cache between the normalize kernel's
# two sweeps below this size (a core's share of L2); above it, they come back from memory.
STORE_CACHE_BYTES = 1 << 18


def worth_storing(work: float, input_bytes: int, itemsize: int, row_elements: int) -> bool:
    """Whether ``f(E, reduce(E))`` stores ``E`` in the result while reducing it and reads
    it back for ``f``, instead of computing ``E`` in the reduction's kernel and again in
    the root's: that saves ``work`` and the reads of ``E``'s inputs (``input_bytes``) per
    element, and costs a store and a load of ``itemsize`` bytes, in cache when the
    reduced extent of one output (``row_elements``) fits."""
    fits = row_elements * itemsize <= STORE_CACHE_BYTES
    extra = 2 * itemsize * (CACHED_PER_BYTE if fits else FLOPS_PER_BYTE)
    return work + input_bytes * FLOPS_PER_BYTE > extra


def worth_sweeping(input_bytes: int, itemsize: int, extent: int) -> bool:
    """Whether the normalize kernel computes a reduction its stored value reads (over the
    same dims: a softmax's max) in a first sweep of its own, instead of a kernel of its
    own writing a temporary: that saves reading the reduction's inputs from memory
    (``input_bytes`` per element) and its temporary (``itemsize`` written and read back
    per output, ``extent`` elements each), and costs reading those inputs again, in
    cache when the reduced extent of one output fits. The work is the same."""
    fits = extent * input_bytes <= STORE_CACHE_BYTES
    saving = (input_bytes + 2 * itemsize / max(extent, 1)) * FLOPS_PER_BYTE
    return saving > input_bytes * (CACHED_PER_BYTE if fits else FLOPS_PER_BYTE)


def can_hold(view, dtype, value) -> bool:
    """Whether a result (``view``: strided, not blocked, each element its own address;
    ``dtype``) can hold ``value``'s elements exactly: the same shape and dtype."""
    if view is not None:
        if view.blocks is not None or view.shape != value.shape:
            return False
        if any(s == 0 and n > 1 for n, s in zip(view.shape, view.strides, strict=True)):
            return False
    return dtype == value.dtype


def reduced(node):
    """The reduction under ``node`` through its epilogue (maps and casts whose other
    operands are constants: a mean's division by the count), or None."""
    while node.kind in ("map", "cast"):
        kids = [c for c in node.children if c.kind != "const"]
        if len(kids) != 1:
            return None
        node = kids[0]
    return node if node.kind == "reduce" else None


def _from_spine(value, on_spine: set, key) -> bool:
    """Whether ``value`` is a map or cast whose operands are values of the spine (or
    constants)."""
    if value.kind not in ("map", "cast"):
        return False
    return all(c.kind == "const" or key(c) in on_spine for c in value.children)


def stored_reduction(root, result, key, cost_of, stop=None):
    """``(remap, reduce)`` for the best ``E`` to store in ``root``'s result: ``root`` is
    elementwise and reads, at its own index (through maps and casts: its spine), both
    ``E`` (a map or cast, an input, or a value computed from the spine's: scratch) and
    ``reduce(E)`` (through an epilogue of constants: ``reduced``) broadcast back over the
    reduced dims, the result (``(view or None for a fresh one, dtype)``) can hold ``E``
    and ``worth_storing`` says so (the largest saving when several qualify). None otherwise.
    ``key(node)``: equal for nodes computing the same value; ``cost_of(E)``: ``(work,
    input bytes)`` per element; ``stop(node)``: a node read as a stored value (the spine
    ends there; it is not stored again). Visits the spine once."""
    if root.kind not in ("map", "cast"):
        return None
    spine, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        spine.append(node)
        if node.kind in ("map", "cast") and (stop is None or not stop(node)):
            stack.extend(node.children)
    # E: a computed value f reads at its index, or an input it reads there as it is (a leaf
    # of the result's view: ``x - x.max(K)``, whose x then comes from memory once)
    on_spine = {
        key(n) for n in spine if (n.kind in ("map", "cast") and n is not root) or n.kind == "leaf"
    }
    best, best_saving = None, 0.0
    for back in spine:
        red = None if back.kind != "remap" else reduced(back.arg)
        if red is None:
            continue
        value = red.arg
        row = REDUCTIONS[red.op]
        # E not read by f itself but computed from values f computes (a layer norm's
        # ``xc * xc`` beside its ``xc``): stored as scratch, it saves no work, but its
        # inputs come from memory once, for f's sweep too
        scratch = key(value) not in on_spine and _from_spine(value, on_spine, key)
        if row.index or (key(value) not in on_spine and not scratch):
            continue
        if row.kernel == "logsumexp" and value.dtype.kind != "f":  # (the template's E: float)
            continue
        if stop is not None and (stop(value) or stop(back.arg) or stop(red)):
            continue  # (a reduction a temporary holds anyway: nothing saved, E computed once)
        if not can_hold(*result, value):
            continue
        kept = [d for d in range(value.ndim) if d not in red.axes]
        if back.shape != value.shape or back.maps != tuple((d, 0, 1) for d in kept):
            continue
        size = value.dtype.itemsize
        work, input_bytes = (0, size) if value.kind == "leaf" else cost_of(value)
        if scratch:
            work = 0
        extent = math.prod(value.shape[d] for d in red.axes)
        if not worth_storing(work, input_bytes, size, extent):
            continue
        saving = work + input_bytes * FLOPS_PER_BYTE
        if saving > best_saving:
            best, best_saving = (back, red), saving
    return best
