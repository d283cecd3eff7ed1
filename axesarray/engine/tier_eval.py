"""The numpy tier's evaluation: an expression computed with numpy while its kernels compile.

``tier_assign`` evaluates the rewritten DAG each shared node once, elementwise ops as numpy
ufuncs writing into reused buffers (each node's value: ``tier_ops``). A big expression runs
in slabs of its first dim on the kernels' threads (``_evaluate``, ``_slabs``): a full
slab's steps are recorded once and replayed (``_replay_all``); dots and values the slabs do
not cut are computed first, in full. A schedule keeps what is worked out between its calls
(``Program``). When the tier answers is ``engine.tiers``' decision.
"""

from __future__ import annotations

import math

import numpy as np

from ..dag.nodes import Const, Leaf, Node, rebuild_dag, walk
from ..kernels import tier_math
from ..kernels.threads import num_threads, run_parts
from ..storage.memory import leaf_array, wrap_array
from .direct import quiet_fp, restore_fp
from .reference import assign as reference_assign
from .rewrite import REWRITES, rewrite
from .tier_ops import F64, WIDE_OPS, compute, computes_wide, view
from .tier_write import may_refuse, same_view, target_of, write, write_blocked

__all__ = ["tier_assign", "TIER_REWRITES", "SLAB_ELEMENTS"]

# The rewrites the tier applies: ``(a * b).sum("k")`` is a dot (BLAS), ``x ** 2`` a square,
# as for the kernels. Not the logsumexp rules (``rewrite.CPU_REWRITES``): they trade a
# second exp per element for one sweep of memory, a good trade in a fused kernel; numpy
# evaluates op by op, where the formula as written (one exp) costs less: a softmax, by hand
# or ``ax.softmax``, is ``e / e.sum(K)`` here. Its special values are the kernels' since
# the tier overflows where they do (``_OVERFLOWS``: ``ax.softmax`` of a row holding +inf and
# 100.0 is NaN and 0).
TIER_REWRITES = REWRITES


class _Buffers:
    """Full-size temporaries by (shape, dtype), handed back when their last reader has run
    and handed out again: the next op writes memory that is already mapped and in cache
    (numpy allocates every temporary anew; past glibc's mmap threshold each one is fresh
    pages, faulted in as it is written)."""

    __slots__ = ("free",)

    def __init__(self) -> None:
        self.free: dict = {}

    def take(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        stack = self.free.get((shape, dtype))
        return stack.pop() if stack else np.empty(shape, dtype)

    def give(self, buf: np.ndarray) -> None:
        self.free.setdefault((buf.shape, buf.dtype), []).append(buf)


def tier_assign(dst: Leaf, root: Node, plan=None) -> None:
    """``dst[...] = root`` the way the numpy tier runs it: each shared node once, in the
    order ``walk`` gives, elementwise ops as numpy ufuncs writing into reused buffers
    (``out=``): a dying operand's own buffer, else a freed one of the same shape, and the
    last op straight into ``dst`` (numpy's ufuncs handle an operand that overlaps it);
    float32 chains computed in float64 from their first ``WIDE_OPS`` op on and rounded
    once (the ufunc casts in its own buffered loop, no float64 copy of an input).

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.array([0.0, 1.0, 4.0], np.float32), "N")
    >>> out = ax.zeros(x.axes, "float32")
    >>> tier_assign(out.node, (ax.sqrt(x) * 2 + 1).node)
    >>> out.numpy()
    array([1., 3., 5.], dtype=float32)
    """
    program = None if plan is None else plan.tier_program
    if program is None and plan is not None:
        program = plan.tier_program = Program.of(root) or False
    if program:
        if program.loops != len(tier_math.LOOPS):  # loops loaded since: work it out again
            program.memo, program.loops = {}, len(tier_math.LOOPS)
        target = target_of(dst, program.root, program.refuse)
        value = _evaluate(program.root, target, program.bind(root.params), program.memo)
    else:
        root = rewrite(root, TIER_REWRITES)
        if root.kind in ("leaf", "const"):
            reference_assign(dst, root, wide=True)
            return
        value = _evaluate(root, target_of(dst, root))
    if value is None:
        return
    # computed, not written: blocked layouts, integer results, device storage
    data, view = dst.data, dst.view
    if type(data) is np.ndarray and view.blocks is None:
        np.copyto(leaf_array(data, view), value, casting="unsafe")
    elif type(data) is not np.ndarray or not write_blocked(data, view, value):
        wrapped = wrap_array(value) or wrap_array(np.ascontiguousarray(value))
        reference_assign(dst, Leaf(*wrapped))


class Program:
    """A schedule's tier evaluation, kept between its calls (``Schedule.tier_program``): the
    rewritten DAG once, its params (leaves, constants) replaced by data-less stand-ins bound
    per call by position (``bind``), and what ``_evaluate`` works out about each evaluated
    node (``memo``: the order, the slabs, each step's buffer). A call then does what the
    values need: the rewrite, the walks, the slab analysis and ``_run``'s bookkeeping
    (~0.2-0.7 ms of Python on the workload rows) are done once. Holds no data: the
    stand-ins are empty, the steps keep buffer shapes, not buffers."""

    __slots__ = ("root", "slots", "refuse", "memo", "loops", "recipes")

    def __init__(self, root: Node, slots: list) -> None:
        self.root, self.slots, self.memo = root, slots, {}
        self.recipes: list | None = None  # ``_bind_recipe`` of each slot's param
        self.refuse = may_refuse(root)
        # the math library's loops the memo's steps were worked out with (``computes_wide``)
        self.loops = len(tier_math.LOOPS)

    @classmethod
    def of(cls, root: Node) -> Program | None:
        """``root``'s program, or None where the rewritten DAG reads data that is not a
        param (a leaf a rewrite made), or a param is not a leaf or constant (a pad's value,
        a call), or nothing is computed."""
        params = root.params
        if any(type(p) is not Leaf and type(p) is not Const for p in params):
            return None
        index = {id(p): i for i, p in enumerate(params)}
        slots: list = []  # (stand-in id, param position)
        foreign: list = []

        def stand_in(node: Node, kids: tuple) -> Node | None:
            if node.kind != "leaf" and node.kind != "const":
                return None
            i = index.get(id(node))
            if i is None:  # a constant a rewrite made is structure: kept as it is
                if node.kind == "leaf":
                    foreign.append(node)
                return None
            if node.kind == "leaf":
                new = Leaf(np.empty(0, node.dtype), node.view, node.writeable)
            else:
                new = Const(0, node.dtype, node.shape)
            slots.append((id(new), i))
            return new

        rewritten = rewrite(root, TIER_REWRITES)
        if rewritten.kind in ("leaf", "const"):
            return None
        template = rebuild_dag(rewritten, stand_in)
        return None if foreign else cls(template, slots)

    def bind(self, params: tuple) -> dict:
        """``given`` for ``_evaluate``: each stand-in's value, from this call's params."""
        recipes = self.recipes
        if recipes is None:
            recipes = self.recipes = [_bind_recipe(params[i]) for _, i in self.slots]
        given = {}
        for (sid, i), recipe in zip(self.slots, recipes, strict=True):
            p = params[i]
            if recipe is None:
                given[sid] = view(p, [], p.shape)
                continue
            shape, strides, offset = recipe
            value = np.ndarray(shape, p.dtype, p.data, offset, strides)
            if not p.writeable:
                value.flags.writeable = False
            given[sid] = value
        return given


def _bind_recipe(p: Node) -> tuple | None:
    """How a kept program makes a param's value each call: a plain host leaf's compact
    view (``tier_ops.view``: its broadcast dims of length 1) as ``(shape, byte strides,
    byte offset)`` over its storage (the plan key fixes the view, the dtype and the
    storage kind), so a call makes one ``np.ndarray``; None for the others (constants,
    blocked or device storage: ``view``)."""
    if type(p) is not Leaf or type(p.data) is not np.ndarray or p.view.blocks is not None:
        return None
    v = p.view
    if 0 in v.shape:
        return None
    item = p.data.itemsize
    shape = tuple(1 if st == 0 else n for n, st in zip(v.shape, v.strides, strict=True))
    return shape, tuple(st * item for st in v.strides), v.offset * item


SLAB_ELEMENTS = 1 << 20


def _evaluate(root: Node, target, given: dict | None = None, memo: dict | None = None):
    """``tier_assign``'s evaluation: writes ``target`` (None: returns the root's value).
    A big expression whose every computed node keeps the result's first dim (elementwise
    ops, reductions over other dims, broadcasts) runs in slabs of that dim (``_slabs``):
    every temporary is a slab's, and stays in cache (numpy's own temporaries go to memory
    and back, a float64 one twice the bytes). Dots, and values the slabs do not cut, are
    computed first, in full (each by this function). ``given``: values of nodes computed
    already, by id (filled in as it goes). ``memo``: a ``Program``'s, where what this
    function works out about ``root`` (the order, the slabs, each step's buffer) is kept
    for the next call, by id of the (kept) node."""
    given = {} if given is None else given
    known = None if memo is None else memo.get(id(root))
    if known is None:
        order = walk(root, lambda n: () if id(n) in given else n.children)
        found = _slabs(order, root, given)
        known = _Whole(root, order) if found is None else _Sliced(root, order, found)
        if memo is not None:
            memo[id(root)] = known
    return known.run(target, given, memo)


class _Whole:
    """The evaluation of a root in full (not in slabs): each big operand of a dot first (on
    its own, in slabs when it can: the softmax between attention's two dots), then ``_run``
    over the order; kept by a ``Program``, ``_run``'s steps replayed (``_replay_all``)."""

    __slots__ = ("root", "order", "big", "replay")

    def __init__(self, root: Node, order: list) -> None:
        self.root, self.order, self.replay = root, order, None
        self.big = [
            c
            for n in order
            if n.kind == "dot"
            for c in n.children
            if c.kind in ("map", "cast", "reduce") and math.prod(c.shape) >= 2 * SLAB_ELEMENTS
        ]

    def run(self, target, given: dict, memo: dict | None):
        for c in self.big:
            if id(c) not in given:
                given[id(c)] = _evaluate(c, None, given, memo)
        replay = self.replay
        if replay is not None:
            inputs, slots, steps, wide = replay
            bufs = [np.empty(shape, dtype) for shape, dtype in slots]
            return _replay_all(steps, bufs, {i: given[i] for i in inputs}, target, wide)
        order = self.order
        if self.big:
            order = walk(self.root, lambda n: () if id(n) in given else n.children)
        vals = {id(n): given[id(n)] for n in order if id(n) in given}
        if memo is None:
            return _run(order, vals, target, {})
        inputs = list(vals)
        facts = _facts(order)
        record: list = []
        value = _run(order, vals, target, {}, None, facts, record)
        slots, steps = _slotted(record, order, set(inputs), facts[0])
        self.replay = (inputs, slots, steps, facts[1])
        return value


def _slotted(record: list, order: list, inputs: set, last: dict) -> tuple[list, list]:
    """``_run``'s recorded steps for another call: each buffer a slot (its shape and dtype:
    the next call allocates its own), and the values that die after each step."""
    positions = [k for k, n in enumerate(order) if id(n) not in inputs]
    slots: list = []
    slot_of: dict[int, int] = {}
    steps = []
    for k, (node, cids, expand, out, is_wide, shape) in zip(positions, record, strict=True):
        if out is not None and out is not _TARGET and type(out) is not tuple:
            if id(out) not in slot_of:
                slot_of[id(out)] = len(slots)
                slots.append((out.shape, out.dtype))
            out = slot_of[id(out)]
        dying = tuple({i for i in cids if last[i] == k})
        steps.append((node, cids, expand, out, is_wide, shape, dying))
    return slots, steps


def _replay_all(steps: list, bufs: list, vals: dict, target, wide: dict):
    """``_run``'s steps (``_slotted``) again, without its bookkeeping: each node computed
    into its slot's buffer (``bufs``: one per slot, this caller's) or the target, values
    dropped when their last reader ran. The same shapes and dtypes give the same choices;
    what ``_run`` works out per node (shapes, buffers, who holds them) is Python work, and
    in a slab it runs with the slab's data in the caches (~25 us a node measured, 5x its
    time with a warm cache)."""
    end = len(steps) - 1
    token = quiet_fp()
    try:
        for k, (node, cids, expand, out, is_wide, shape, dying) in enumerate(steps):
            if out is not None:
                out = (
                    target
                    if out is _TARGET
                    else vals[out[1]]  # an operand's own buffer (``_ADOPTED``)
                    if type(out) is tuple
                    else bufs[out]
                )
            elif k == end and target is not None and node.kind == "reduce":
                out = target  # a row loop's result straight into the destination, if it fits
            kids = [vals[i] for i in cids]
            if expand is not None:
                kids = [
                    v if v.shape == s else np.broadcast_to(v, s)
                    for v, s in zip(kids, expand, strict=True)
                ]
            value = compute(node, kids, is_wide, wide, out, shape)
            if k == end:
                if target is None:
                    if is_wide and value.dtype != node.dtype:
                        value = value.astype(node.dtype)  # rounded once
                    return value if value.shape == shape else np.broadcast_to(value, shape).copy()
                if value is not target:
                    write(target, value, shape)  # rounded once, if wide, by the copy
                return None
            vals[id(node)] = value
            for i in dying:
                del vals[i]
    finally:
        restore_fp(token)
    return None


class _Sliced:
    """The evaluation of a root in slabs (``_slabs``' findings, the order, the per-slab facts
    and shapes), kept by a ``Program``: a call only binds values and runs the slabs."""

    __slots__ = (
        "root", "dims", "views", "rows", "early", "order", "computed", "facts", "by_height",
        "replay", "free",
    )  # fmt: skip

    def __init__(self, root: Node, order: list, found: tuple) -> None:
        self.root = root
        self.dims, self.views, self.rows, self.early = found
        self.order = [n for n in order if self.dims[id(n)] != _BELOW]
        self.computed = [n for n in self.order if id(n) not in self.views]
        self.facts = _facts(self.computed)  # the same for every slab: worked out once
        self.by_height: dict = {}  # every node's slab shape, by slab height
        # a full slab's steps (``_slotted``), recorded once, and buffer sets for them: a
        # thread takes one for its ranges of slabs and gives it back (kept between calls:
        # fresh pages would be faulted in again)
        self.replay: tuple | None = None
        self.free: list = []

    def run(self, target, given: dict, memo: dict | None):
        root, dims, views, rows, order = self.root, self.dims, self.views, self.rows, self.order
        computed, facts, by_height = self.computed, self.facts, self.by_height
        for node in self.early:  # a dot, or a value the slab does not cut: in full, first
            given[id(node)] = _evaluate(node, None, given, memo)
        full: dict[int, np.ndarray] = {}
        with np.errstate(all="ignore"):
            for node in order:
                if id(node) in given:
                    full[id(node)] = given[id(node)]
                elif id(node) in views:
                    kids = [full[id(c)] for c in node.children]
                    kids = [
                        v if v.shape == c.shape else np.broadcast_to(v, c.shape)
                        for v, c in zip(kids, node.children, strict=True)
                    ]
                    full[id(node)] = view(node, kids, tuple(node.shape))
        if target is not None and any(
            np.may_share_memory(v, target) and not (dims.get(key) == 0 and same_view(v, target))
            for key, v in full.items()
        ):
            # a slab would overwrite what a later slab reads: a fresh result first. An
            # operand that is the destination itself, cut as it is (``m[...] = b * m + g``),
            # is not: each slab reads its rows before its last op writes them.
            target = None
        result = target if target is not None else np.empty(root.shape, root.dtype)
        # the views each slab cuts along its dim (a length-1 dim is broadcast: read whole)
        cut = [
            (id(n), full[id(n)], dims[id(n)])
            for n in order
            if id(n) in full and dims.get(id(n)) is not None and full[id(n)].shape[dims[id(n)]] != 1
        ]
        whole = {id(n): full[id(n)] for n in order if id(n) in full}
        n0 = root.shape[0]

        def slab(lo: int, hi: int, bufs: list | None) -> list | None:
            """One slab's rows of the result; ``bufs``: the calling thread's buffer set for
            replays (taken here when it has none yet), returned."""
            vals = dict(whole)
            for key, v, d in cut:
                vals[key] = v[(slice(None),) * d + (slice(lo, hi),)]
            replay = self.replay
            if replay is not None and hi - lo == rows:
                slots, steps = replay
                if bufs is None:
                    try:
                        bufs = self.free.pop()
                    except IndexError:  # none free (or another thread took the last one)
                        bufs = [np.empty(*x) for x in slots]
                _replay_all(steps, bufs, vals, result[lo:hi], facts[1])
                return bufs
            shapes = by_height.get(hi - lo)
            if shapes is None:
                shapes = by_height[hi - lo] = {
                    id(n): tuple(hi - lo if i == dims[id(n)] else m for i, m in enumerate(n.shape))
                    for n in order
                }
            record = [] if hi - lo == rows else None
            _run(computed, vals, result[lo:hi], shapes, _Buffers(), facts, record)
            if record and self.replay is None:
                self.replay = _slotted(record, computed, set(), facts[0])
            return bufs

        def slabs(first: int, last: int) -> None:
            bufs = None
            try:
                for lo in range(first * rows, min(n0, last * rows), rows):
                    bufs = slab(lo, min(n0, lo + rows), bufs)
            finally:
                if bufs is not None:
                    self.free.append(bufs)

        # The slabs are independent (each writes its own rows of the result) and numpy's
        # ufuncs release the GIL: they run on the kernels' threads (as many as numba's default
        # when numba is not loaded yet: the answer does not wait for its start-up). The compile
        # process runs at a lower priority, so the answer keeps the cores.
        run_parts(slabs, -(-n0 // rows), (), num_threads(load=False))
        return None if target is not None else result


# A node only nodes computed in full first (``early``) read: their own evaluation computes it.
_BELOW = "below"
# Node kinds a slab computes a part of; another kind (a dot, a pad, a reshape) is computed
# in full before the slabs, and the slabs read it as a view.
_SLICED = ("map", "cast", "reduce", "remap")


def _slabs(order: list, root: Node, given: dict | None = None):
    """``(dims, views, rows, early)`` when ``root`` can run in slabs of ``rows`` along its
    first dim: ``dims[id(node)]``, the dim of each node that follows the slab (None: the
    node does not depend on it; ``_BELOW``: only an early node reads it), ``views``, the ids
    of nodes read in full (leaves, constants, ``given`` values, early nodes, broadcasts of
    them), ``early``: the computed nodes to evaluate in full first (a dot, or a value the
    slab does not cut, as the norms of ``b`` in a cosine over ``N M``); None otherwise
    (small expressions, a value read along two dims)."""
    if not root.shape or root.shape[0] < 2 or root.kind not in ("map", "cast", "reduce"):
        return None
    given = {} if given is None else given
    per_row = 0
    dims: dict[int, int | str | None] = {id(root): 0}
    early: list = []
    for node in reversed(order):  # parents before children
        d = dims.get(id(node), "unused")
        if d == "unused":
            return None  # not reached (cannot happen in a walk from root)
        if d == _BELOW:
            kid_dims = [_BELOW] * len(node.children)
        elif node.kind in ("leaf", "const") or id(node) in given:
            continue
        elif node.kind not in _SLICED or (d is None and node.kind != "remap"):
            early.append(node)
            kid_dims = [_BELOW] * len(node.children)
        elif d is None:  # a remap of something the slab does not cut
            kid_dims = [None]
        elif node.kind in ("map", "cast"):
            if any(tuple(c.shape) != tuple(node.shape) for c in node.children):
                return None
            kid_dims = [d] * len(node.children)
        elif node.kind == "reduce":
            child = node.children[0]
            kept = [i for i in range(len(child.shape)) if i not in node.axes]
            if len(kept) != len(node.shape):
                return None
            kid_dims = [kept[d]]
        else:  # remap
            src = [s for s, m in enumerate(node.maps) if m[0] == d]
            if not src:
                kid_dims = [None]
            else:
                s = src[0]
                child = node.children[0]
                if node.maps[s][1:] != (0, 1) or child.shape[s] != node.shape[d]:
                    return None
                kid_dims = [s]
        if d is not None and d != _BELOW and kid_dims[:1] != [_BELOW]:
            # the node's elements per row, and a reduction's operand's (it reads them all;
            # a remap reads only what it maps)
            per_row = max(per_row, math.prod(node.shape) // max(1, node.shape[d]))
            if node.kind == "reduce":
                child = node.children[0]
                per_row = max(per_row, math.prod(child.shape) // max(1, child.shape[kid_dims[0]]))
        for c, cd in zip(node.children, kid_dims, strict=True):
            before = dims.get(id(c), cd)
            if before != cd:
                if c.kind not in ("leaf", "const") or _BELOW not in (before, cd):
                    return None  # read along two dims (or computed twice)
                cd = before if cd == _BELOW else cd  # a leaf the slabs read too: cut
            dims[id(c)] = cd
    views = set(map(id, early))
    for node in order:  # children first: a view reads views only
        if dims[id(node)] == _BELOW:
            continue
        if (
            node.kind in ("leaf", "const")
            or id(node) in given
            or (node.kind == "remap" and id(node.children[0]) in views)
        ):
            views.add(id(node))
    if any(dims[id(n)] is None and id(n) not in views for n in order):
        return None
    if per_row == 0:
        return None
    computed = [n for n in order if id(n) not in views and dims[id(n)] != _BELOW]
    if len(computed) == 1 and not (root.kind == "map" and root.op in WIDE_OPS):
        # No temporary to keep in cache: one part per thread, not slabs. One core does not
        # reach the memory roof (``x.max("K")`` of 16 MiB: 0.96 ms on one thread, 0.60 on
        # two; 32 slabs on two threads were no faster than one call).
        threads = num_threads(load=False)
        if threads < 2 or per_row * root.shape[0] < 2 * SLAB_ELEMENTS:
            return None
        return dims, views, -(-root.shape[0] // threads), early[::-1]
    n0 = root.shape[0]
    rows = max(1, SLAB_ELEMENTS // per_row)
    threads = num_threads(load=False)
    if threads > 1 and per_row * n0 >= SLAB_ELEMENTS // 4:
        # at least a slab per thread, where the work pays a launch (~20-50 us)
        rows = min(rows, -(-n0 // threads))
        return (dims, views, rows, early[::-1]) if rows < n0 else None
    if rows * 2 > n0:
        return None  # one or two slabs on one thread: nothing to gain
    return dims, views, rows, early[::-1]


def _facts(order: list) -> tuple[dict, dict]:
    """``(last, wide)`` of ``order``: the position of each value's last reader, and which
    nodes are computed in float64 (``is_wide``)."""
    last: dict[int, int] = {}
    wide: dict[int, bool] = {}
    for k, node in enumerate(order):
        for c in node.children:
            last[id(c)] = k
        wide[id(node)] = computes_wide(node, wide) if node.children else False
    return last, wide


def _run(
    order: list,
    vals: dict,
    target: np.ndarray | None,
    shapes: dict,
    pool: _Buffers | None = None,
    facts: tuple | None = None,
    record: list | None = None,
):
    """Evaluate ``order`` (its nodes not in ``vals``, in order; the last is the root) into
    ``target`` (None: return the root's value); ``shapes``: a node's shape when it is not
    ``node.shape`` (a slab's); ``pool``: buffers to take from and hand back (a slab's
    thread keeps one); ``facts``: ``_facts(order)``, when the caller has it; ``record``: a
    list that receives each computed node's step, for ``_slotted``."""
    last, wide = facts if facts is not None else _facts(order)
    # the owned buffers each value is or views, and how many live values hold each
    backing: dict[int, list] = {}
    holders: dict[int, int] = {}
    adopted: set = set()  # buffers that are a dot's own result (no slot in a replay)
    if pool is None:
        pool = _Buffers()
    end = len(order) - 1
    with np.errstate(all="ignore"):
        for k, node in enumerate(order):
            nid = id(node)
            if nid in vals:
                continue
            shape = shapes.get(nid) or tuple(node.shape)
            cids = [id(c) for c in node.children]
            kids = [vals[i] for i in cids]
            is_wide = wide[nid]
            out = None
            kind = node.kind
            elementwise = kind in ("map", "cast")
            if not elementwise or record is not None:
                kid_shapes = [
                    shapes.get(i) or tuple(c.shape)
                    for i, c in zip(cids, node.children, strict=True)
                ]
            if not elementwise:
                # only ufuncs broadcast: the other kinds read their operands in full (views)
                kids = [
                    v if v.shape == s else np.broadcast_to(v, s)
                    for v, s in zip(kids, kid_shapes, strict=True)
                ]
            elif kids and not _spreads_to(kids, shape):
                elementwise = False  # compact: computed at its operands' shape, no buffer
            if elementwise:
                if k == end and target is not None:
                    if target.dtype == node.dtype and target.shape == shape:
                        out = target  # the last op writes the destination
                else:
                    dtype = F64 if is_wide else node.dtype
                    out = _reuse(node, shape, dtype, backing, holders, vals, last, k)
                    if out is None:
                        out = pool.take(shape, dtype)
            if record is not None:
                step_out = out
                if out is not None and out is target:
                    step_out = _TARGET
                elif out is not None and id(out) in adopted:
                    # the operand's value itself, made by this call (a dot's): replayed as
                    # that operand's value, not as a slot
                    step_out = (_ADOPTED, next(i for i in cids if vals[i] is out))
                record.append(
                    (
                        node,
                        cids,
                        None if kind in ("map", "cast") else kid_shapes,
                        step_out,
                        is_wide,
                        shape,
                    )
                )
            value = compute(node, kids, is_wide, wide, out, shape)
            if k == end:
                if is_wide and value.dtype != node.dtype:
                    value = value.astype(node.dtype)  # rounded once, as the kernels do
                if target is None:
                    return value if value.shape == shape else np.broadcast_to(value, shape).copy()
                if value is not target:
                    write(target, value, shape)
                done = {id(b): b for bufs in backing.values() for b in bufs}
                if out is not None and out is not target:
                    done[id(out)] = out
                for buf in done.values():
                    pool.give(buf)  # the next slab's (nothing reads them any more)
                return None
            vals[nid] = value
            if value is out:
                backing[nid] = [out]
                holders[id(out)] = holders.get(id(out), 0) + 1
            elif kind not in ("reduce", "leaf", "const"):
                # a move, dot or call may return a view of an operand's buffer, and so may
                # an op that returns its operand (``stop_gradient``); a reduction's value is
                # a new array
                own = [b for i in cids for b in backing.get(i, ()) if np.may_share_memory(value, b)]
                if own:
                    backing[nid] = own
                    for b in own:
                        holders[id(b)] = holders.get(id(b), 0) + 1
                elif kind == "dot" and _fresh(value, kids):
                    # a dot's result is a new array only it holds: the op after it may
                    # write over it (``x @ w + b`` in place, as numpy's temporary elision)
                    backing[nid] = [value]
                    holders[id(value)] = 1
                    adopted.add(id(value))
            for i in cids:
                if last[i] == k and i in vals:
                    del vals[i]
                    for b in backing.pop(i, ()):
                        holders[id(b)] -= 1
                        if holders[id(b)] == 0:
                            pool.give(b)


def _spreads_to(kids: list, shape: tuple) -> bool:
    """Whether numpy broadcasts the operands' shapes to ``shape`` (``np.broadcast_shapes``
    without its cost: an operand of the full shape, or each dim full in one of them)."""
    if any(v.shape == shape for v in kids):
        return True
    if any(v.ndim != len(shape) for v in kids):
        return np.broadcast_shapes(*(v.shape for v in kids)) == shape
    return all(any(v.shape[i] == n for v in kids) for i, n in enumerate(shape))


_ALL = slice(None)
_TARGET = "target"  # a recorded step that wrote the slab's target
_ADOPTED = "adopted"  # a recorded step that wrote over an operand's value: (_ADOPTED, its id)


def _fresh(value: np.ndarray, kids: list) -> bool:
    """Whether ``value`` is a new, writeable, C-ordered array sharing no memory with
    ``kids`` (an op's operands)."""
    return (
        value.flags.writeable
        and value.flags.c_contiguous
        and not any(np.may_share_memory(value, v) for v in kids)
    )


def _reuse(node, shape, dtype, backing, holders, vals, last, k) -> np.ndarray | None:
    """A buffer an operand read for the last time by ``node`` owns alone, of ``node``'s
    shape and loop dtype: the ufunc writes its result over it (numpy's own temporary
    elision, for chains numpy cannot see)."""
    for c in node.children:
        bufs = backing.get(id(c))
        if not bufs or len(bufs) != 1 or last[id(c)] != k:
            continue
        buf = bufs[0]
        if (
            holders[id(buf)] == 1
            and vals[id(c)] is buf
            and buf.shape == shape
            and buf.dtype == dtype
        ):
            # held by this operand only: handed over (the holder count moves to ``node``)
            del backing[id(c)]
            holders[id(buf)] = 0
            return buf
    return None
