"""What a dask task of a chunked expression runs: block functions, combine steps, and the
per-chunk programs behind them.

A layer of many chunks runs every kernel **serial**: dask already runs one task per core,
so a parallel kernel per task would only oversubscribe the cores (on a loaded machine a
parallel launch waits for a descheduled thread: ~12 ms per chunk measured, against 0.1 ms
serial). A layer of one chunk keeps the engine's variant choice, one parallel kernel at a
time per process (numba's workqueue layer aborts on two at once).

A block function plans its first chunk of each block signature (shapes, strides, dtypes)
and keeps the schedule as a ``_BlockSchedule``; every later chunk of that signature binds its
blocks to the program's parameters and runs the kernels: no region rebuild, no plan
lookup. Some reductions run as two programs (``_SplitProgram``: the region into a
per-thread scratch, then the reduction); an ``IntoFunction`` writes its chunk straight
into the caller's result array. Block functions are picklable: they hold the region as
tuples (ops, dtypes, dims), never nodes (whose keys are per process) or compiled kernels.
Measurements: ``docs/guide/dask.md``.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from ...core.dtypes import as_dtype
from ...core.ops import OPS
from ...core.reductions_table import REDUCTIONS
from ...core.strided import remap_view
from ...dag.build import reduce as reduce_node
from ...dag.nodes import Cast, Const, Leaf, Map, Node, Reduce
from ...options import OPTIONS
from ...storage.devices import host_array
from ...storage.memory import wrap_array
from .. import executor, reference
from ..routes import try_copy
from ..runner import Bound, run_schedule

__all__ = [
    "BlockFunction",
    "Combine",
    "evaluate",
    "run_assign",
    "arg_dtype",
    "keep_partials",
    "splits",
    "Into",
    "IntoFunction",
]

# Parallel kernels of one-chunk layers: one at a time per process (they use every core
# already, and numba's workqueue threading layer aborts on two concurrent launches).
_PARALLEL_LOCK = threading.Lock()
_BLOCK_SCHEDULES: dict = {}  # (block function token, block signature) -> _BlockSchedule
_BLOCK_SCHEDULES_MAX = 256


# --- running a node in memory -----------------------------------------------------------------


def _dtype(code: str) -> np.dtype:
    """A recipe's dtype (``lowering._dtype_code``); bfloat16 imports ml_dtypes here, in a
    worker process that has not."""
    return as_dtype(code) if code == "bfloat16" else np.dtype(code)


def _run_serial(plan, params, dst: Leaf | None) -> dict:
    """The runner with every kernel's serial variant; ``dst``, when given, is fresh
    storage that no operand reads (a chunk's own output)."""
    return run_schedule(plan, params, dst, serial=True, fresh_dst=True)


def _result(plan, temps: dict) -> np.ndarray:
    res = plan.result
    return host_array(temps[res.src[1]], res.view)


def evaluate(root: Node, engine: str, serial: bool) -> np.ndarray:
    """The value of an in-memory ``root`` (logical order) with ``engine``; the fused one
    always runs its kernels here (no numpy tier: every chunk runs the same kernel),
    serial ones when ``serial``."""
    if type(root) is Leaf:
        return host_array(root.data, root.view, False)
    if engine == "numpy":
        with np.errstate(all="ignore"):
            return np.asarray(reference.evaluate_array(root))
    if serial:
        plan, _ = executor.schedule_for(root, None)
        if plan.device.is_cpu:
            return _result(plan, _run_serial(plan, root.params, None))
    if math.prod(root.shape) >= OPTIONS["serial_threshold"]:
        with _PARALLEL_LOCK:
            leaf = executor.evaluate(root, tiered=False)
    else:
        leaf = executor.evaluate(root, tiered=False)
    return host_array(leaf.data, leaf.view)


def run_assign(dst: Leaf, src: Node, serial: bool = True) -> None:
    """``dst[...] = src`` in memory for a block function; ``dst`` is fresh storage (a
    chunk's output). A big plain copy goes to the repack kernels."""
    if OPTIONS["engine"] == "numpy":
        reference.assign(dst, src)
        return
    if src is dst or try_copy(dst, src):
        return
    plan, _ = executor.schedule_for(src, dst)
    if serial and plan.device.is_cpu:
        _run_serial(plan, src.params, dst)
    elif math.prod(dst.shape) >= OPTIONS["serial_threshold"]:
        with _PARALLEL_LOCK:
            executor.assign(dst, src, tiered=False)
    else:
        executor.assign(dst, src, tiered=False)


# --- block functions ----------------------------------------------------------------------------


def _storage(block: np.ndarray) -> np.ndarray:
    """The 1-D storage ``_block_leaf`` wraps for ``block`` (cheap when contiguous)."""
    if block.flags.c_contiguous:
        return block.reshape(-1)
    pair = wrap_array(block)
    return pair[0] if pair is not None else np.ascontiguousarray(block).reshape(-1)


def _block_leaf(block: np.ndarray, dims: tuple, shape: tuple) -> Leaf:
    """A read-only leaf over ``block`` whose axes are the region's ``dims``, broadcast to
    the region's block ``shape``."""
    base, view = wrap_array(block) or wrap_array(np.ascontiguousarray(block))
    view = remap_view(view, shape, tuple((d, 0, 1) for d in dims))
    return Leaf(base, view, False)


def _decode(recipe: tuple, leaves: list, shape: tuple) -> Node:
    """The region ``recipe`` (see ``engine.chunked._Region``) over ``leaves``, at ``shape``."""
    nodes: list = []
    for entry in recipe:
        tag = entry[0]
        if tag == "in":
            nodes.append(leaves[entry[1]])
        elif tag == "const":
            nodes.append(Const(entry[1], _dtype(entry[2]), shape))
        elif tag == "map":
            nodes.append(Map(entry[1], tuple(nodes[k] for k in entry[3:]), _dtype(entry[2])))
        else:
            nodes.append(Cast(nodes[entry[2]], _dtype(entry[1])))
    return nodes[-1]


def arg_dtype(dtype: np.dtype) -> np.dtype:
    """The record of an argmax/argmin partial: value and global index."""
    return np.dtype([("v", dtype), ("i", np.int64)])


class _BlockSchedule:
    """The schedule of one block signature, planned on its first chunk and bound to its
    blocks (``runner.Bound``): later chunks pass their blocks' storage in place of the
    first chunk's leaves (views and keys are the same for the whole signature). ``dst``
    (a leaf over this thread's scratch) makes the program write there instead of a fresh
    result."""

    __slots__ = ("bound", "keep", "dst")

    def __init__(self, root: Node, leaves: list, keep: tuple | None, dst: Leaf | None = None):
        plan, _ = executor.schedule_for(root, dst)
        at = {id(leaf): k for k, leaf in enumerate(leaves)}
        # the first chunk's blocks are not kept alive: their places are filled per call
        self.bound = Bound(plan, root.params, lambda p: at.get(id(p)))
        self.keep = keep
        self.dst = None if dst is None else (dst.view, dst.key, dst.dtype)

    @property
    def plan(self):
        return self.bound.plan

    def __call__(self, blocks, out: np.ndarray | None = None) -> np.ndarray:
        """Run on ``blocks``; a program with ``dst`` writes into ``out`` (an array with the
        planned strides) or, without it, this thread's scratch."""
        storages = [_storage(b) for b in blocks]
        bound, fresh = self.bound, Leaf.fresh
        if self.dst is not None:
            view, key, dtype = self.dst
            if out is not None:
                bound.assign(storages, fresh(wrap_array(out)[0], view, key), True, True)
                return out
            buf = _scratch(math.prod(view.shape), dtype)
            bound.assign(storages, fresh(buf, view, key), True, True)
            return buf.reshape(view.shape)
        temps = run_schedule(bound.plan, bound.params(storages), None, serial=True)
        out = _result(bound.plan, temps)
        return out if self.keep is None else out.reshape(self.keep)


class _SplitProgram:
    """A reduction of a computed region as two kernels: the region into this thread's
    scratch (an elementwise kernel: contiguous, vectorized) and the reduction of the
    scratch. The fused kernel loops over the reduced dims innermost, where a transcendental
    op does not vectorize (3-5x slower per element than the two kernels, see
    ``docs/guide/dask.md``); the scratch is one chunk per thread, reused."""

    __slots__ = ("region", "reduce")

    def __init__(self, fn: BlockFunction, root: Node, shape: tuple, leaves: list):
        base, view = wrap_array(np.empty(shape, root.dtype))
        scratch = Leaf(base, view, True)
        self.region = _BlockSchedule(root, leaves, None, scratch)
        node, keep = fn.partial_root(Leaf(base, view, False), shape)
        self.reduce = _BlockSchedule(node, [node.params[0]], keep)

    def __call__(self, blocks) -> np.ndarray:
        return self.reduce([self.region(blocks)])


_SCRATCH = threading.local()


def _scratch(n: int, dtype: np.dtype) -> np.ndarray:
    """``n`` elements of this thread's scratch (one per dask thread, grown as needed; the
    values live only until the thread's next chunk)."""
    nbytes = n * dtype.itemsize
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.nbytes < nbytes:
        buf = _SCRATCH.buf = np.empty(max(nbytes, 64), np.uint8)
    return buf[:nbytes].view(dtype)


def splits(recipe: tuple, reduce, ndim: int) -> bool:
    """Whether a block function's reduction runs as two kernels (``_SplitProgram``): a
    whole-row or partial reduction of a region with an expensive op (exp, log...: they do
    not vectorize inside the fused reduction loop), or of cheap ops reduced along a dim
    lying between kept dims (a strided inner loop). Measured per chunk in
    ``docs/guide/dask.md``; otherwise the fused reduction kernel is as fast or faster."""
    if reduce is None or reduce[0] == "arg":
        return False
    ops = [e[1] for e in recipe if e[0] == "map"]
    if not ops:
        return False
    if any(OPS[op].expensive for op in ops):
        return True
    kept = [d for d in range(ndim) if d not in reduce[2]]
    return bool(kept) and any(kept[0] < d < kept[-1] for d in reduce[2])


def _one(block):
    """The block dask passes as nested lists of one along contracted dims."""
    while type(block) is list:
        block = block[0]
    return block


class BlockFunction:
    """The function of one blockwise layer: evaluates the region on one block per operand.

    ``reduce`` is None (elementwise), ``("whole", op, axes, dtype)`` (the reduction of
    chunks that hold whole rows: reduced dims dropped; dask passes each operand as nested
    lists of one block along them), ``("partial", op, axes, dtype)`` (a reduction's
    partials, reduced dims kept as length 1) or ``("arg", op, axis)`` (argmax/argmin
    partials: value and global index; the last operand is the block's indices along
    ``axis``).
    ``serial``: run serial kernels (the layer has several chunks: dask runs them at once).
    """

    def __init__(self, recipe, dims, shape, engine, reduce=None, serial=True):
        self.recipe, self.dims, self.shape = recipe, dims, shape
        self.engine, self.reduce, self.serial = engine, reduce, serial
        self.token = ("axesarray-block", recipe, dims, shape, engine, reduce, serial)

    def __dask_tokenize__(self):
        return self.token

    def __getstate__(self):
        return self.token

    def __setstate__(self, token):
        self.__init__(*token[1:])

    @property
    def two_kernels(self) -> bool:
        """Whether each task runs a ``_SplitProgram`` (fused engine, serial layers)."""
        return (
            self.engine == "numba"
            and self.serial
            and splits(self.recipe, self.reduce, len(self.shape))
        )

    def block_root(self, blocks) -> tuple[Node, tuple, list]:
        """The region over ``blocks``: root, block shape, and the leaf of each block."""
        shape = list(self.shape)
        for block, dims in zip(blocks, self.dims, strict=False):
            for k, d in enumerate(dims):
                shape[d] = block.shape[k]
        shape = tuple(shape)
        leaves = [_block_leaf(b, dims, shape) for b, dims in zip(blocks, self.dims, strict=False)]
        return _decode(self.recipe, leaves, shape), shape, leaves

    def partial_root(self, root: Node, shape: tuple) -> tuple[Node, tuple | None]:
        """The node one task evaluates (the region, or its partial reduction) and the
        shape of its partials (reduced dims kept as 1; None for elementwise)."""
        if self.reduce is None:
            return root, None
        kind, op, axes, dtype = self.reduce
        if kind == "whole":  # the region already has the accumulation dtype
            return Reduce(op, root, axes, dtype), None
        keep = tuple(1 if d in axes else n for d, n in enumerate(shape))
        return Reduce(op, root if root.dtype == dtype else Cast(root, dtype), axes, dtype), keep

    def __call__(self, *blocks):
        blocks = tuple(np.asarray(_one(b)) for b in blocks)
        red = self.reduce
        if self.engine == "numba" and self.serial and (red is None or red[0] != "arg"):
            key = (self.token, tuple((b.shape, b.strides, b.dtype.str) for b in blocks))
            program = _BLOCK_SCHEDULES.get(key)
            if program is None:
                root, shape, leaves = self.block_root(blocks)
                if self.two_kernels:
                    program = _SplitProgram(self, root, shape, leaves)
                    plan = program.region.plan
                else:
                    node, keep = self.partial_root(root, shape)
                    program = _BlockSchedule(node, leaves, keep)
                    plan = program.plan
                if not plan.device.is_cpu:
                    return self.evaluate(blocks)
                if len(_BLOCK_SCHEDULES) >= _BLOCK_SCHEDULES_MAX:
                    _BLOCK_SCHEDULES.clear()
                _BLOCK_SCHEDULES[key] = program
            return program(blocks)
        return self.evaluate(blocks)

    def evaluate(self, blocks) -> np.ndarray:
        """One chunk, the region rebuilt (the reference engine, argmax/argmin partials,
        one-chunk layers)."""
        root, shape, _ = self.block_root(blocks)
        red = self.reduce
        if red is not None and red[0] == "arg":
            _, op, axis = red
            start = int(blocks[-1][0]) if blocks[-1].size else 0
            keep = tuple(1 if d == axis else n for d, n in enumerate(shape))
            out = np.empty(keep, arg_dtype(root.dtype))
            if out.size:
                value = evaluate(reduce_node(op[3:], root, (axis,)), self.engine, self.serial)
                index = evaluate(reduce_node(op, root, (axis,)), self.engine, self.serial)
                out["v"] = value.reshape(keep)
                out["i"] = index.reshape(keep) + start
            return out
        node, keep = self.partial_root(root, shape)
        out = evaluate(node, self.engine, self.serial)
        return out if keep is None else out.reshape(keep)


class Into:
    """A numpy array that tasks of the local schedulers (threads, sync: one process) write
    their chunks into; tokenized by identity, never by its values."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __dask_tokenize__(self):
        return ("axesarray-into", id(self))


class IntoFunction:
    """An elementwise block function whose kernel writes its chunk straight into the
    result (an ``Into``): no chunk allocated per task and no concatenation afterwards.

    Called with the operand blocks, then one block per dim holding the chunk's start along
    it, then the ``Into``; returns a one-element placeholder."""

    def __init__(self, fn: BlockFunction):
        self.fn = fn
        self.token = ("axesarray-into", fn.token)

    def __dask_tokenize__(self):
        return self.token

    def __call__(self, *args):
        fn, ndim = self.fn, len(self.fn.shape)
        blocks = tuple(np.asarray(b) for b in args[: len(fn.dims)])
        starts = [int(np.asarray(b).reshape(-1)[0]) for b in args[len(fn.dims) : -1]]
        root, shape, leaves = fn.block_root(blocks)
        region = tuple(slice(s, s + n) for s, n in zip(starts, shape, strict=True))
        out = args[-1].array[(*region, Ellipsis)]  # an array view even when 0-d
        if fn.engine == "numba" and out.size:
            sig = tuple((b.shape, b.strides, b.dtype.str) for b in blocks) + (out.strides,)
            key = (self.token, sig)
            program = _BLOCK_SCHEDULES.get(key)
            if program is None:
                base, view = wrap_array(out)
                program = _BlockSchedule(root, leaves, None, Leaf(base, view, True))
                if program.plan.device.is_cpu:
                    if len(_BLOCK_SCHEDULES) >= _BLOCK_SCHEDULES_MAX:
                        _BLOCK_SCHEDULES.clear()
                    _BLOCK_SCHEDULES[key] = program
            if program.plan.device.is_cpu:
                program(blocks, out)
                return np.zeros((1,) * ndim, bool)
        out[...] = fn.evaluate(blocks)
        return np.zeros((1,) * ndim, bool)


class Combine:
    """``da.reduction``'s combine and aggregate steps: our reduce kernel over partials
    (serial: the tree has many tasks; numpy for argmax/argmin, whose partials are (value,
    index) records)."""

    def __init__(self, op: str, engine: str, dtype=None):
        self.op, self.engine, self.dtype = op, engine, dtype

    def __dask_tokenize__(self):
        return ("axesarray-combine", self.op, self.engine, str(self.dtype))

    def __call__(self, x, axis, keepdims):
        axes = tuple(sorted(a % x.ndim for a in axis))
        if REDUCTIONS[self.op].index:
            pick = REDUCTIONS[self.op].numpy
            j = pick(x["v"], axis=axes[0], keepdims=True)
            out = np.take_along_axis(x, j, axis=axes[0])
            if self.dtype is not None:
                out = out["i"]
        else:
            base, view = wrap_array(np.ascontiguousarray(x))
            root = reduce_node(self.op, Leaf(base, view, False), axes)
            out = evaluate(root, self.engine, True)
            out = out.reshape(tuple(1 if d in axes else n for d, n in enumerate(x.shape)))
            if self.dtype is not None:
                out = out.astype(self.dtype, copy=False)
        return out if keepdims else out.reshape([n for d, n in enumerate(x.shape) if d not in axes])


def keep_partials(x, axis, keepdims):
    """``da.reduction``'s chunk step: the blockwise step already reduced each chunk."""
    return x
