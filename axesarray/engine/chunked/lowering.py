"""Chunked expressions on dask.array: lowering a DAG that reads ``expr.Chunked`` leaves.

Only dask's public array API is used (its internals are being rewritten under query
planning). How each part of an expression maps:

- a maximal **elementwise region** (map, cast, const over operands) is ONE ``da.blockwise``
  layer; its function rebuilds the same region over in-memory blocks and evaluates it with
  the in-memory engine, so each chunk is one fused kernel call. Dims are blockwise indices,
  so operands broadcast by index; chunks are aligned by rechunking every operand to the
  chunks of the biggest one along each dim (``explain`` lists each rechunk);
- a **reduction** is one blockwise step (the region and the reduction fused per chunk,
  keeping the reduced dims as length 1: the partials) and one ``da.reduction`` whose
  combine and aggregate steps run our reduce kernels (argmax/argmin combine in numpy);
- **dot** is ``da.einsum``; a numpy **call** is one task on its whole operands;
  **pad** ``da.pad``; **concat** ``da.concatenate``; **views**
  are dask slicing (a view that only transposes or broadcasts is a blockwise index);
- a subexpression with no chunked input is computed in memory first.

What each task runs (block functions, combine steps, serial kernels per chunk, one plan
per block signature) is ``engine.chunked.tasks``.
"""

from __future__ import annotations

import functools
import math
import string

import attrs
import dask
import dask.array as da
import numpy as np

from ...core.reductions_table import REDUCTIONS
from ...dag import nodes as ex
from ...dag.build import reduce as reduce_node
from ...dag.chunked_leaf import Chunked, has_chunked
from ...dag.nodes import Leaf, Node, Reduce
from ...dag.text import chunks_text, dim_names
from ...display.planviews import chunked_html
from ...options import OPTIONS
from ...storage.devices import host_array
from ...storage.memory import wrap_array
from .. import executor, reference
from .tasks import BlockFunction, Combine, Into, IntoFunction, arg_dtype, keep_partials, run_assign
from .tasks import evaluate as _run

__all__ = [
    "evaluate",
    "compute",
    "explain",
    "ChunkedPlan",
    "ChunkedStep",
    "logical_array",
    "run_assign",
]

_LETTERS = string.ascii_letters
_REGION = frozenset(("map", "cast", "const"))
# Kinds with no ``_Lowering._<kind>``, and why (tests/test_kinds_coverage.py).
NO_RULE = {
    "leaf": "an in-memory leaf is one chunk (``_in_memory``): only chunked subtrees lower",
    "reshape": "split/merge of a chunked value moves into its Chunked leaf (dask's reshape)",
}


# --- the plan ------------------------------------------------------------------------------


@attrs.frozen
class ChunkedStep:
    """One dask layer of a chunked plan."""

    kind: str  # "blockwise", "reduction", "einsum", "numpy call", "pad", "concatenate", ...
    tasks: int  # tasks this layer adds to the graph
    per_chunk: str  # what each task runs
    kernels: tuple = ()  # the in-memory plan's kernel lines for one chunk

    def __str__(self) -> str:
        text = f"{self.kind}: {_n(self.tasks, 'task')}; {self.per_chunk}"
        return text + "".join(f"\n      {k}" for k in self.kernels)


@attrs.frozen(repr=False)
class ChunkedPlan:
    """What a chunked expression becomes in dask: layers, tasks and kernels per chunk.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.ones((8, 4)), "N C").chunk({"N": 1})
    >>> plan = ax.explain(ax.sigmoid(x * 2 + 1))
    >>> [(s.kind, s.tasks) for s in plan.steps]
    [('blockwise', 8)]
    """

    steps: tuple[ChunkedStep, ...]
    chunks: tuple  # the result's chunks, per dim
    graph_tasks: int  # tasks in the whole graph, dask's own input tasks included
    names: tuple = ()  # the result's axis names

    def _repr_html_(self) -> str:
        return chunked_html(self)

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        blocks = math.prod(len(c) for c in self.chunks)
        names = self.names or tuple(f"d{d}" for d in range(len(self.chunks)))
        lines = [
            f"Chunked plan (dask): {_n(len(self.steps), 'layer')}, {_n(blocks, 'result chunk')}, "
            f"{_n(self.graph_tasks, 'task')} in the graph (input tasks included)"
        ]
        if self.chunks:
            lines.append("  result " + chunks_text(names, self.chunks))
        lines += [f"  [{i}] {s}" for i, s in enumerate(self.steps)]
        return "\n".join(lines)


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


# --- lowering ------------------------------------------------------------------------------


def _dtype_code(dt: np.dtype) -> str:
    """A dtype as a recipe writes it: numpy's ``str``, but bfloat16 by name ('<V2' is any
    2-byte void); ``tasks`` reads it back."""
    return dt.name if dt.kind == "V" else dt.str


def _chunks_text(chunks: tuple) -> str:
    if len(set(chunks)) == 1:
        return f"{len(chunks)} x {chunks[0]}"
    if len(set(chunks[:-1])) == 1:
        return f"{len(chunks) - 1} x {chunks[0]} + {chunks[-1]}"
    return str(chunks)


class _Lowering:
    """Lowers one expression; ``steps`` records the layers for ``explain``."""

    def __init__(self, names=None, describe: bool = False):
        self.memo: dict = {}
        self.engine = OPTIONS["engine"]
        self.steps: list[ChunkedStep] = []
        self.names = names
        self.describe = describe
        self.into = None  # an ``Into``: the root region writes there (``compute``)

    def label(self, node: Node, d: int) -> str:
        dims = dim_names(self.root, self.names).get(id(node))
        return dims[d] if dims is not None else f"d{d}"

    # An operand is (dask array, dims): the node dims it has, in its axis order; a node
    # dim it lacks is broadcast.
    def lower(self, node: Node) -> tuple:
        hit = self.memo.get(id(node))
        if hit is None:
            if has_chunked(node):
                hit = getattr(self, "_" + node.kind)(node)
            else:  # e.g. an in-memory operand of concat or dot: one chunk
                arr, dims = self._in_memory(node)
                hit = da.from_array(arr, chunks=arr.shape), dims
            self.memo[id(node)] = hit
        return hit

    def full(self, node: Node):
        """``node``'s value as a dask array in logical order, every dim present."""
        arr, dims = self.lower(node)
        return _broadcast(arr, dims, node.shape)

    def _chunked(self, node: Chunked):
        return node.array, tuple(range(node.ndim))

    def _remap(self, node):
        arr, dims = self.lower(node.arg)
        index, kept = [], []
        for d in dims:
            src, start, step = node.maps[d]
            if src < 0:
                index.append(start)
                continue
            n = node.shape[src]
            stop = start + step * (n - 1) + (1 if step > 0 else -1)
            index.append(slice(0, 0) if n == 0 else slice(start, None if stop < 0 else stop, step))
            kept.append(src)
        if len(set(kept)) != len(kept):  # a diagonal: not expressible as an index
            arr = _broadcast(arr, dims, node.arg.shape)
            return self._remap_full(arr, node)
        if any(i != slice(None) for i in index):
            arr = arr[tuple(index)]
            self.steps.append(ChunkedStep("view", arr.npartitions, "each slices a block"))
        return arr, tuple(kept)

    def _remap_full(self, arr, node):
        return da.from_array(reference.remap_array(arr.compute(), node.shape, node.maps)), tuple(
            range(node.ndim)
        )

    def _pad(self, node):
        width = [(0, 0)] * node.ndim
        width[node.dim] = (node.before, node.after)
        arr = da.pad(self.full(node.arg), width, mode="constant", constant_values=node.value)
        self.steps.append(ChunkedStep("pad", arr.npartitions, "dask's pad (constant value)"))
        return arr, tuple(range(node.ndim))

    def _concat(self, node):
        arr = da.concatenate([self.full(a) for a in node.args], axis=node.dim)
        self.steps.append(ChunkedStep("concatenate", 0, "the blocks are reused"))
        return arr, tuple(range(node.ndim))

    def _dot(self, node):
        def letters(labels):
            return "".join(_LETTERS[lb] for lb in labels)

        spec = f"{letters(node.a_labels)},{letters(node.b_labels)}->{letters(node.out_labels)}"
        arr = da.einsum(spec, self.full(node.a), self.full(node.b), dtype=node.dtype)
        arr = arr.astype(node.dtype)
        self.steps.append(
            ChunkedStep("einsum", arr.npartitions, f"each runs numpy's einsum on blocks ({spec})")
        )
        return arr, tuple(range(node.ndim))

    def _call(self, node):
        """A numpy call (scan, sort, gather, ``ax.apply``) needs its operands whole: one
        task, on the operands gathered from their chunks."""
        fn = functools.partial(reference.call_value, node.fn, node.name, node.shape, node.dtype)
        value = dask.delayed(fn)([self.full(c) for c in node.children])
        arr = da.from_delayed(value, node.shape, dtype=node.dtype)
        self.steps.append(ChunkedStep("numpy call", 1, f"{node.name} on the whole operands"))
        return arr, tuple(range(node.ndim))

    def _in_memory(self, node):
        """An operand with no chunked input: computed now, broadcast dims dropped."""
        if type(node) is Leaf:
            arr = host_array(node.data, node.view, False)
            strides = node.view.strides
            if node.view.blocks is None:
                keep = [d for d in range(node.ndim) if strides[d] != 0 or node.shape[d] <= 1]
                arr = arr[tuple(slice(None) if d in keep else 0 for d in range(node.ndim))]
                return arr, tuple(keep)
            return arr, tuple(range(node.ndim))
        return _run(node, self.engine, False), tuple(range(node.ndim))

    def _map(self, node):
        return self.region(node)

    _cast = _const = _map

    def _reduce(self, node):
        return self.region(node.arg, node)

    def region(self, root: Node, reduce: Reduce | None = None):
        """One blockwise layer for the elementwise region under ``root`` (the partials of
        ``reduce`` over it when given, then one ``da.reduction``)."""
        reg = _Region(root, self)
        shape = root.shape
        chunks = reg.align(self, root)
        ind = tuple(_LETTERS[d] for d in range(root.ndim))
        args = []
        dims = []
        for arr, odims in reg.arrays(chunks):
            args += [arr, tuple(_LETTERS[d] for d in odims)]
            dims.append(odims)
        present = {d for _, odims, _ in reg.operands for d in odims}
        new_axes = {_LETTERS[d]: shape[d] for d in range(root.ndim) if d not in present}
        serial = math.prod(len(c) for c in chunks.values()) > 1
        if reduce is None and self.into is not None and root is self.root:
            return self.region_into(reg, root, chunks, args, dims, serial)
        if reduce is None:
            fn = BlockFunction(reg.recipe, tuple(dims), shape, self.engine, None, serial)
            arr = da.blockwise(
                fn, ind, *args, dtype=root.dtype, new_axes=new_axes, align_arrays=False,
                meta=np.empty((0,) * root.ndim, root.dtype), token="axesarray-region",
            )  # fmt: skip
            self.note(arr, "fused elementwise evaluation", fn, args, root)
            return arr, tuple(range(root.ndim))
        return self.reduction(reduce, reg, fn_args=(ind, args, dims, new_axes, chunks, serial))

    def region_into(self, reg, root: Node, chunks: dict, args: list, dims: list, serial: bool):
        """The root region's layer when computing into memory on a local scheduler: each
        task's kernel writes its chunk into ``self.into`` (placeholders come back)."""
        fn = BlockFunction(reg.recipe, tuple(dims), root.shape, self.engine, None, serial)
        args = list(args)
        for d, n in enumerate(root.shape):
            sizes = chunks.get(d, (n,))
            starts = np.cumsum((0,) + tuple(sizes[:-1]), dtype=np.int64)
            args += [da.from_array(starts, chunks=1), (_LETTERS[d],)]
        ind = tuple(_LETTERS[d] for d in range(root.ndim))
        adjust = {_LETTERS[d]: (1,) * len(chunks.get(d, (n,))) for d, n in enumerate(root.shape)}
        arr = da.blockwise(
            IntoFunction(fn), ind, *args, self.into, None, dtype=bool, align_arrays=False,
            adjust_chunks=adjust, meta=np.empty((0,) * root.ndim, bool), token="axesarray-into",
        )  # fmt: skip
        self.note(
            arr, "fused elementwise evaluation into the result", fn, args[: 2 * len(dims)], root
        )
        return arr, tuple(range(root.ndim))

    def reduction(self, node: Reduce, reg, fn_args):
        ind, args, dims, new_axes, chunks, serial = fn_args
        root = node.arg
        if all(len(chunks.get(d, ())) <= 1 for d in node.axes):
            # Each chunk holds whole rows of the reduction: one task per chunk computes
            # its part of the result, as in memory (no partials, no tree).
            out = tuple(_LETTERS[d] for d in range(root.ndim) if d not in node.axes)
            red = ("whole", node.op, node.axes, node.dtype)
            fn = BlockFunction(reg.recipe, tuple(dims), root.shape, self.engine, red, serial)
            arr = da.blockwise(
                fn, out, *args, dtype=node.dtype, align_arrays=False, concatenate=False,
                new_axes={k: n for k, n in new_axes.items() if k in out},
                meta=np.empty((0,) * node.ndim, node.dtype), token="axesarray-reduce",
            )  # fmt: skip
            self.note(arr, _what(fn, "reduction of whole rows"), fn, args, root)
            return arr, tuple(range(node.ndim))
        adjust = {_LETTERS[d]: (1,) * (len(chunks[d]) if d in chunks else 1) for d in node.axes}
        arg = REDUCTIONS[node.op].index
        if arg:
            axis = node.axes[0]
            offsets = da.arange(root.shape[axis], chunks=chunks.get(axis, root.shape[axis]))
            args = args + [offsets, (_LETTERS[axis],)]
            dims = dims + [(axis,)]
            pdtype = arg_dtype(root.dtype)
            red = ("arg", node.op, axis)
        else:
            pdtype = _accumulator(node)
            red = ("partial", node.op, node.axes, pdtype)
        fn = BlockFunction(reg.recipe, tuple(dims), root.shape, self.engine, red, serial)
        parts = da.blockwise(
            fn, ind, *args, dtype=pdtype, new_axes=new_axes, align_arrays=False,
            adjust_chunks=adjust, meta=np.empty((0,) * root.ndim, pdtype),
            token="axesarray-partials",
        )  # fmt: skip
        self.note(parts, _what(fn, "partial reduction"), fn, args, root)
        before = len(parts.__dask_graph__())
        aggregate = Combine(node.op, self.engine, node.dtype)
        if arg:
            # One record per chunk along one axis: gather them, then pick (numpy).
            arr = parts.rechunk({axis: -1}).map_blocks(
                aggregate, axis=(axis,), keepdims=False, drop_axis=axis, dtype=node.dtype,
                meta=np.empty((0,) * node.ndim, node.dtype),
            )  # fmt: skip
            how = "numpy: the first max/min record of the chunks' (value, index) partials"
        elif _one_combine(parts, node.axes):
            # Few partials per result chunk: one task per result chunk gathers them
            # (concatenated along the reduced dims) and reduces them with one kernel call.
            out = tuple(_LETTERS[d] for d in range(root.ndim) if d not in node.axes)
            arr = da.blockwise(
                aggregate, out, parts, ind, concatenate=True, dtype=node.dtype,
                axis=node.axes, keepdims=False, meta=np.empty((0,) * node.ndim, node.dtype),
                token="axesarray-combine",
            )  # fmt: skip
            how = f"our {node.op} kernel over the gathered partials ({pdtype})"
        else:
            arr = da.reduction(
                parts, keep_partials, aggregate, combine=Combine(node.op, self.engine),
                axis=node.axes, keepdims=False, dtype=node.dtype, concatenate=True,
                meta=np.empty((0,) * node.ndim, node.dtype),
            )  # fmt: skip
            how = f"our {node.op} kernel over the partials ({pdtype}), in a tree"
        tasks = len(arr.__dask_graph__()) - before
        self.steps.append(ChunkedStep("reduction", tasks, f"combine and aggregate with {how}"))
        return arr, tuple(range(node.ndim))

    def note(self, arr, what: str, fn: BlockFunction, args, root: Node) -> None:
        kernels: tuple = ()
        if self.describe:
            names = tuple(self.label(root, d) for d in range(root.ndim))
            kernels = _sample_plan(fn, args, self.engine, names)
        how = "serial kernels: dask runs the chunks in parallel" if fn.serial else "one chunk"
        self.steps.append(
            ChunkedStep("blockwise", arr.npartitions, f"each runs one {what} ({how})", kernels)
        )


# Partials one combine task may gather (more go through da.reduction's tree, which keeps
# each task's input bounded): by count, and by bytes.
_COMBINE_MAX_PARTS = 256
_COMBINE_MAX_BYTES = 64 << 20


def _one_combine(parts, axes: tuple) -> bool:
    """Whether the partials of one result chunk are few and small enough for one task."""
    count = math.prod(len(parts.chunks[d]) for d in axes)
    block = math.prod(max(c) if c else 0 for c in parts.chunks) * parts.dtype.itemsize
    return count <= _COMBINE_MAX_PARTS and count * block <= _COMBINE_MAX_BYTES


def _what(fn: BlockFunction, reduction: str) -> str:
    """What a reducing task runs, for ``explain``."""
    if fn.two_kernels:
        return f"fused evaluation into this thread's scratch, then its {reduction}"
    return f"fused evaluation and {reduction}"


def _accumulator(node: Reduce) -> np.dtype:
    """The partials' dtype: floats sum in float64 (as the fused kernels accumulate), so
    the combined result rounds once."""
    if REDUCTIONS[node.op].accumulator == "float64" and node.dtype.kind in "fc":
        return np.dtype("complex128" if node.dtype.kind == "c" else "float64")
    return node.dtype


def _sample_plan(fn: BlockFunction, args, engine: str, names: tuple) -> tuple:
    """The in-memory plan of the first chunk (its kernels, whether compiled or cached);
    ``names`` are the region's dims (the kernels' loops are named by them)."""
    if engine != "numba":
        return ("the reference engine (numpy), one call per node",)
    blocks = [np.empty(tuple(c[0] for c in a.chunks), a.dtype) for a in args[::2]]
    root, shape, _ = fn.block_root(blocks)
    red = fn.reduce
    if red is not None and red[0] == "arg":
        root = reduce_node(red[1], root, (red[2],))
    elif fn.two_kernels:  # the region into scratch, then its reduction
        scratch = Leaf(*wrap_array(np.empty(shape, root.dtype)), False)
        ex.name_dims(scratch, names)
        second = executor.explain(fn.partial_root(scratch, shape)[0]).kernels
        return tuple(str(k) for k in executor.explain(root, None, names).kernels + second)
    else:
        ex.name_dims(root, names)  # the partials keep the reduced dims (length 1)
        root = fn.partial_root(root, shape)[0]
    named = names if len(names) == root.ndim else None
    return tuple(str(k) for k in executor.explain(root, None, named).kernels)


def _broadcast(arr, dims: tuple, shape: tuple):
    """A lowered operand as a dask array with every dim of ``shape``, in order."""
    if dims == tuple(range(len(shape))):
        return arr
    order = sorted(range(len(dims)), key=lambda k: dims[k])
    arr = arr.transpose(order) if order != list(range(len(dims))) else arr
    present = sorted(dims)
    arr = arr[tuple(slice(None) if d in present else None for d in range(len(shape)))]
    return da.broadcast_to(arr, shape)


class _Region:
    """The elementwise region under a root: its recipe and its operands."""

    def __init__(self, root: Node, low: _Lowering):
        self.operands: list = []  # (array, dims, in_memory)
        self.index: dict[int, int] = {}
        entries: list = []
        at: dict[int, int] = {}

        def visit(n: Node) -> int:
            if id(n) in at:
                return at[id(n)]
            if n.kind in _REGION and (n.kind == "const" or has_chunked(n)):
                if n.kind == "const":
                    entry = ("const", n.value.item(), _dtype_code(n.dtype))
                elif n.kind == "map":
                    entry = ("map", n.op, _dtype_code(n.dtype), *(visit(c) for c in n.children))
                else:
                    entry = ("cast", _dtype_code(n.dtype), visit(n.arg))
            else:
                k = self.index.get(id(n))
                if k is None:
                    k = self.index[id(n)] = len(self.operands)
                    lowered = low.lower(n) if has_chunked(n) else low._in_memory(n)
                    self.operands.append((*lowered, not has_chunked(n)))
                entry = ("in", k)
            entries.append(entry)
            at[id(n)] = len(entries) - 1
            return at[id(n)]

        visit(root)
        self.recipe = tuple(entries)

    def align(self, low: _Lowering, root: Node) -> dict[int, tuple]:
        """Per dim, the chunks of the biggest chunked operand having it; rechunks the
        others (recorded as steps)."""
        chunks: dict[int, tuple] = {}
        size: dict[int, int] = {}
        for arr, dims, mem in self.operands:
            if mem:
                continue
            for k, d in enumerate(dims):
                if d not in chunks or arr.size > size[d]:
                    chunks[d], size[d] = arr.chunks[k], arr.size
        for i, (arr, dims, mem) in enumerate(self.operands):
            if mem:
                continue
            want = tuple(chunks[d] for d in dims)
            if arr.chunks != want:
                for k, d in enumerate(dims):
                    if arr.chunks[k] != want[k]:
                        low.steps.append(
                            ChunkedStep(
                                "rechunk",
                                0,
                                f"operand {i} aligned along {low.label(root, d)}: "
                                f"{_chunks_text(arr.chunks[k])} -> {_chunks_text(want[k])}",
                            )
                        )
                self.operands[i] = (arr.rechunk(want), dims, mem)
        return chunks

    def arrays(self, chunks: dict):
        for arr, dims, mem in self.operands:
            if mem:
                want = tuple(chunks.get(d, arr.shape[k]) for k, d in enumerate(dims))
                arr = da.from_array(arr, chunks=want)
            yield arr, dims


# --- entry points -------------------------------------------------------------------------------


def logical_array(root: Node):
    """``root``'s value as a dask array in logical dim order (lazy)."""
    if type(root) is Chunked:
        return root.array
    low = _Lowering()
    low.root = root
    return low.full(root)


def evaluate(root: Node) -> Chunked:
    """A chunked result: the dask graph computing ``root`` (nothing runs yet)."""
    if type(root) is Chunked:
        return root
    return Chunked(logical_array(root))


def compute(root: Node) -> np.ndarray:
    """``root``'s value computed by dask, as a numpy array in logical order.

    A big elementwise root on a local scheduler (threads or sync: tasks share this
    process's memory) is computed into one result array, each task's kernel writing its
    chunk there; otherwise dask gathers the chunks."""
    nbytes = math.prod(root.shape) * root.dtype.itemsize
    if root.kind in _REGION and nbytes >= _INTO_MIN_BYTES and _local():
        out = np.empty(root.shape, root.dtype)
        low = _Lowering()
        low.root, low.into = root, Into(out)
        low.lower(root)[0].compute()
        return out
    return np.asarray(logical_array(root).compute())


# Below this, dask's gathering is as fast (its concatenation reuses heap memory; from 32
# MiB, glibc's largest mmap threshold, every result is fresh pages): measured 16 MB 12.7 ms
# gathered vs 15.3 ms written into; 32 MB 39 vs 18 ms; 268 MB 160 vs 102 ms.
_INTO_MIN_BYTES = 32 << 20


def _local() -> bool:
    """Whether a dask array would be computed by a scheduler sharing this process's memory
    (the configured one, else a distributed client's, else dask.array's default)."""
    get = dask.base.get_scheduler(cls=da.Array)
    return get in (dask.threaded.get, dask.local.get_sync)


def explain(root: Node, names=None) -> ChunkedPlan:
    """The dask layers of ``root``: tasks per chunk and the kernel each task runs."""
    low = _Lowering(names, describe=True)
    low.root = root
    arr = low.full(root)
    tasks = len(arr.__dask_graph__())
    shown = tuple(names) if names is not None else dim_names(root, None)[id(root)]
    return ChunkedPlan(tuple(low.steps), tuple(arr.chunks), tasks, shown)
