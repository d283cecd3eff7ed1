"""Lazy expression DAG nodes (r-tensors) and their constructors; no execution.

Nodes are positional: dim ``k`` of a node is the ``k``-th axis of the Tensor wrapping it.
Equality is identity. Every node class has a ``kind`` (its name in visitor tables), its
``children`` (a tuple) and ``rebuild(children)``; code that walks the DAG dispatches on
``kind`` through a table (``engine.reference``, ``engine.planner``...), never through a
ladder of ``isinstance``.

Each node computes two things once, at construction, so that looking up a cached plan
costs one dict lookup and no tree walk:

- ``params``: its run-time parameters (leaves, constants, pads), each once, in order of
  first appearance depth-first;
- ``key``: an int naming its structure (op, dtypes, leaf views, which params a child
  shares with another; never data or scalar values, except the few constants rewrites
  look at, ``ops.SPECIAL_CONSTANTS``). Keys are interned, so a DAG with much sharing (a
  backward pass) hashes in time proportional to its nodes, not to its unfolded tree.
  The same key serves the plan cache and hash-consing in the planner.

A ``Leaf`` made by a view of another leaf keeps it in ``origin`` (with the view step):
``leaf_roots`` finds the tensors a user created behind any view, and autograd maps a
gradient back through the steps.
"""

from __future__ import annotations

import itertools
import math
import operator
import threading
import weakref

import numpy as np

from ..core.ops import SPECIAL_CONSTANTS
from ..core.strided import View
from ..errors import message
from ..storage.devices import device_of

__all__ = [
    "Node",
    "Leaf",
    "Const",
    "Map",
    "Cast",
    "Reduce",
    "Remap",
    "Pad",
    "Concat",
    "Dot",
    "Call",
    "walk",
    "rebuild_dag",
    "leaf_roots",
    "derived_leaf",
    "name_dims",
    "known_names",
]

# --- structural keys ------------------------------------------------------------------------

_KEYS: dict[tuple, int] = {}
_KEYS_MAX = 1 << 16
_next_key = itertools.count(1).__next__
_keys_lock = threading.Lock()


def _intern(t: tuple) -> int:
    """The int naming structure ``t``. Past ``_KEYS_MAX`` entries the table starts over;
    ids are never reused, so an old key simply stops matching (a plan-cache miss)."""
    k = _KEYS.get(t)
    if k is None:
        with _keys_lock:
            k = _KEYS.get(t)
            if k is None:
                if len(_KEYS) >= _KEYS_MAX:
                    _KEYS.clear()
                k = _KEYS[t] = _next_key()
    return k


# A node whose children hold more params than this together (or any of whose children is
# lazy) is *lazy*: its key and params are computed on first use, by one walk of its own
# DAG (``_finish``), instead of merging its children's params at construction. In a long
# program (a recurrence and its gradient: one view of the input per step) every node holds
# params in proportion to the steps, and merging them per node made building quadratic.
LAZY_PARAMS = 64
_KEY = None  # Node.key's slot descriptor (set below): reads a key without finishing a node


def _lazy_getattr(node, name):
    # Only reached on a lazy twin when a slot is unset: its key or params.
    if name == "key" or name == "params":
        _finish(node)
        return object.__getattribute__(node, name)
    raise AttributeError(name)


def _defer(node) -> None:
    """Make ``node`` lazy: its key and params are found when first read (``_finish``)."""
    node.__class__ = type(node)._lazy


def lazy(node) -> bool:
    """Whether ``node``'s key and params are not computed yet (see ``LAZY_PARAMS``)."""
    try:
        _KEY.__get__(node)
    except AttributeError:
        return True
    return False


def _lazy_over(children) -> bool:
    total = 0
    for c in children:
        try:
            _KEY.__get__(c)
        except AttributeError:
            return True
        total += len(c.params)
    return total > LAZY_PARAMS


def _combine(head: tuple, children: tuple) -> tuple[int, tuple] | None:
    """Key and params of a node with structure ``head`` over ``children`` (None: the node
    is lazy, see ``LAZY_PARAMS``).

    Params are merged in order, each object once; when children share a param (``x * x``,
    or ``a + b`` with ``b`` a view of the same leaf object...) the key records which
    positions each child's params took, so equal keys mean equal param layouts.
    """
    if _lazy_over(children):
        return None
    if len(children) == 1:
        c = children[0]
        return _intern(head + (c.key,)), c.params
    if len(children) == 2:  # the common case, straight-line: it runs for every operator
        a, b = children
        pa, pb = a.params, b.params
        # ``in`` on a tuple of nodes is an identity test (nodes define no __eq__), in C
        if not pa or not pb:
            disjoint = True
        elif len(pa) == 1:
            disjoint = pa[0] not in pb
        elif len(pb) == 1:
            disjoint = pb[0] not in pa
        else:
            disjoint = set(map(id, pa)).isdisjoint(map(id, pb))
        if disjoint:
            return _intern(head + (a.key, b.key)), pa + pb
    # Shared params. In a long program most nodes join a child holding hundreds of params
    # (one view of the input per step) with a few shared ones (a recurrence's weights):
    # then only the few are looked up, by identity scans in C, so building stays linear
    # in practice; a dict over every param per node made it quadratic.
    first = children[0].params
    rest = [c.params for c in children[1:]]
    slots = []
    shared = False
    if sum(map(len, rest)) <= 8:
        params = first
        for pc in rest:
            slot = []
            for p in pc:
                if p in params:  # an identity scan (nodes define no __eq__)
                    shared = True
                    slot.append(params.index(p))
                else:
                    slot.append(len(params))
                    params += (p,)
            slots.append(tuple(slot))
    else:  # large children on both sides (a backward step reads both halves of a loop)
        params = first
        for pc in rest:  # C-level passes only: no Python loop over the params
            index = dict(zip(map(id, params), itertools.count()))
            known = list(map(index.__contains__, map(id, pc)))
            if any(known):
                shared = True
            if not all(known):
                params += tuple(itertools.compress(pc, map(operator.not_, known)))
                index = dict(zip(map(id, params), itertools.count()))
            slots.append(tuple(map(index.__getitem__, map(id, pc))))
    keys = tuple(c.key for c in children)
    return _intern(head + keys + ((tuple(slots),) if shared else ())), params


# Every node kind, in one place. Each table that dispatches on ``node.kind`` (evaluation,
# fusion, gradients, chunked lowering, text) covers every kind or names the ones it has no
# entry for, with the reason, in its module's ``NO_RULE`` (tests/test_kinds_coverage.py).
KINDS = (
    "leaf",
    "const",
    "map",
    "cast",
    "reduce",
    "remap",
    "pad",
    "concat",
    "dot",
    "call",
    "reshape",
    "chunked",
)


class Node:
    """Base of all nodes: shape (positional), dtype, children, structural key, params."""

    __slots__ = ("shape", "dtype", "children", "key", "params", "dim_names", "__weakref__")
    kind = "node"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def arg(self) -> Node:
        """The only (or first) child."""
        return self.children[0]

    @property
    def args(self) -> tuple[Node, ...]:
        return self.children

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.dtype} {self.shape}>"

    def __init_subclass__(cls, **kwargs):
        # Each kind gets a lazy twin (the same class plus ``__getattr__``), the class of
        # its lazy nodes until ``_finish`` turns them back. Only the twin has the hook: on
        # a class with ``__getattr__`` every attribute read is a generic lookup (CPython
        # specializes no attribute access of such a class: ~45 ns a read, not ~15).
        super().__init_subclass__(**kwargs)
        if "_eager" in cls.__dict__:
            return
        cls._lazy = type(
            cls.__name__,
            (cls,),
            {
                "__slots__": (),
                "__getattr__": _lazy_getattr,
                "_eager": cls,
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
            },
        )

    def own(self) -> tuple:
        """This node's structure without its children (what its key adds to theirs)."""
        raise NotImplementedError  # pragma: no cover - every computed kind defines it

    def __reduce__(self):
        # Keys are interned per process, and the default pickle of these slots cannot be
        # loaded (``children`` is a class attribute of the leaf kinds): refuse at dumps,
        # never write what cannot be read. Leaves (storage) have their own.
        raise TypeError(
            message(
                "pickle",
                f"a {self.kind} node is not pickled",
                repr(self),
                "Pickle tensors (a lazy tensor pickles as its value)",
            )
        )


class Leaf(Node):
    """A strided view over 1-D storage: the only node that holds data (an l-tensor).

    ``origin`` is ``(parent leaf, step)`` when this leaf is a view of another one made by
    ``step``: ``("remap", shape, maps)``, ``("split", dim, lengths)``, ``("merge", dims,
    pos)`` or ``("same",)`` (a read-only alias); None for a leaf a user created.
    """

    __slots__ = ("data", "view", "writeable", "origin", "tag")
    kind = "leaf"
    children = ()

    def __init__(self, data, view: View, writeable: bool = True, origin=None, tag=None):
        self.data = data
        self.view = view
        self.shape = view.shape
        self.dtype = data.dtype
        self.writeable = writeable
        self.origin = origin
        # What the user declared the storage to be (autograd's kinds), inherited by views.
        self.tag = tag if origin is None or tag is not None else origin[0].tag
        # The key names what the compiled code sees of the storage besides its dtype: the
        # device kind of storage that is not a numpy array, and an array that is not the
        # usual writeable, aligned, contiguous buffer (numba types those differently). So
        # the key of an expression says where it runs and how its kernel is typed: the
        # plan cache needs no walk over the leaves, and a cached plan may call the kernel
        # it compiled without numba's argument typing (``engine.executor``).
        head = ("L", self.dtype.char, view.shape, view.strides, view.offset, view.blocks)
        plain = type(data) is np.ndarray
        if not plain:  # a subclass (np.memmap) too: it is a different argument type
            head += (device_of(data).type, type(data).__name__)
        if plain or isinstance(data, np.ndarray):
            f = data.flags
            if not (f.writeable and f.aligned and f.c_contiguous):
                head += ((f.writeable, f.aligned, f.c_contiguous),)
        self.key = _intern(head)

    @property
    def params(self):
        # A property, not a stored (self,): that would be a reference cycle, and leaves
        # (with their storage) would wait for the cyclic garbage collector to be freed.
        return (self,)

    def __reduce__(self):
        # The constructor again (the key is interned per process). ``data`` is the storage
        # object itself, so leaves pickled together (a tensor and its views, the origin
        # chain) share one storage again when loaded, as torch's views do.
        data = self.data
        if not isinstance(data, np.ndarray):
            data = _DeviceStorage.of(data)
        return (Leaf, (data, self.view, self.writeable, self.origin, self.tag))

    @classmethod
    def fresh(cls, data, view: View, key: int) -> Leaf:
        """A new writeable leaf over new storage whose key is already known (the engine's
        results: the schedule knows their view)."""
        leaf = object.__new__(cls)
        leaf.data, leaf.view, leaf.shape, leaf.dtype = data, view, view.shape, data.dtype
        leaf.writeable, leaf.origin, leaf.tag, leaf.key = True, None, None, key
        return leaf


class _DeviceStorage:
    """Device storage being pickled: it goes as its device and a host copy, and is
    uploaded again when loaded. One object per storage while a pickle (or a deepcopy)
    holds it, so leaves pickled together load sharing one device storage again."""

    __slots__ = ("data", "__weakref__")
    _live: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def __init__(self, data):
        self.data = data

    @classmethod
    def of(cls, data) -> _DeviceStorage:
        found = cls._live.get(id(data))
        if found is None or found.data is not data:
            found = cls._live[id(data)] = cls(data)
        return found

    def __reduce__(self):
        device = device_of(self.data)
        return (_upload, (device, device.to_host(self.data)))


def _upload(device, host: np.ndarray):
    return device.upload(host)


def derived_leaf(leaf: Leaf, view: View, step: tuple, writeable: bool | None = None) -> Leaf:
    """A view of ``leaf`` (same storage) that remembers where it came from."""
    w = leaf.writeable if writeable is None else writeable
    # The key of a view of the same storage follows from the leaf's key (its dtype, storage
    # kind and flags) and the view: remembered by view object (``views`` hands the same
    # View for a broadcast rebuilt each call), the leaf made without ``__init__``'s key.
    memo = (leaf.key, id(view))
    hit = _DERIVED.get(memo)
    if hit is not None and hit[0] is view:
        # ``Leaf.fresh``'s fields inline, as ``engine.direct`` does: calling it and setting
        # three fields again cost 0.25 us of a 2.6 us broadcast (two derived leaves)
        new = _new_node(Leaf)
        new.data, new.view, new.shape, new.dtype = leaf.data, view, view.shape, leaf.dtype
        new.writeable, new.origin, new.tag, new.key = w, (leaf, step), leaf.tag, hit[1]
        return new
    new = Leaf(leaf.data, view, w, (leaf, step))
    if len(_DERIVED) >= 4096:
        _DERIVED.clear()
    _DERIVED[memo] = (view, new.key)  # the entry keeps the View alive: its id stays its own
    return new


# (leaf key, id of the View) -> (the View, the derived leaf's key): ``derived_leaf``'s. Bounded.
_DERIVED: dict = {}
_new_node = object.__new__


def leaf_roots(root: Node) -> list[Leaf]:
    """The leaves a user created (no ``origin``) behind every leaf ``root`` reads, once each,
    in order of first appearance."""
    found: dict[int, Leaf] = {}
    for p in root.params:
        if type(p) is Leaf:
            while p.origin is not None:
                p = p.origin[0]
            found.setdefault(id(p), p)
    return list(found.values())


_SPECIAL = frozenset(SPECIAL_CONSTANTS)


class Const(Node):
    """A scalar value broadcast to ``shape``; the value is a run-time argument, except that
    whether it is one of ``ops.SPECIAL_CONSTANTS`` (and which) is structure."""

    __slots__ = ("value",)
    kind = "const"
    children = ()

    def __init__(self, value, dtype: np.dtype, shape: tuple[int, ...] = ()):
        self.dtype = dtype
        self.value = v = dtype.type(value)
        self.shape = shape
        self.key = _intern(("K", dtype.char, shape, _special(v)))

    @property
    def params(self):
        return (self,)  # not stored: see Leaf.params

    @property
    def special(self) -> float | None:
        """The value when it is one of ``ops.SPECIAL_CONSTANTS`` (so part of the key)."""
        return _special(self.value)


def _special(v) -> float | None:
    """``v`` as one of ``ops.SPECIAL_CONSTANTS``, or None (-0.0 is not 0.0 here: a literal
    +0.0 in its place would turn ``-0.0 + x`` into ``+0.0``)."""
    if v not in _SPECIAL:
        return None
    f = float(v)
    return f if f != 0.0 or math.copysign(1.0, f) > 0 else None


class Map(Node):
    """An elementwise op from ``ops.OPS``; args share the node's shape and loop dtype.

    ``dag.build`` also builds Maps without ``__init__`` (the same six fields) when it
    remembers the key of a structure it built before."""

    __slots__ = ("op",)
    kind = "map"

    def __init__(self, op: str, args: tuple[Node, ...], dtype: np.dtype):
        self.op = op
        self.children = args
        self.shape = args[0].shape
        self.dtype = dtype
        made = _combine(("M", op, dtype.char), args)
        if made is not None:
            self.key, self.params = made
        else:
            _defer(self)

    def own(self) -> tuple:
        return ("M", self.op, self.dtype.char)

    def rebuild(self, children):
        return Map(self.op, tuple(children), self.dtype)


class Cast(Node):
    """Convert to ``dtype`` with numpy's ``astype`` semantics (unsafe casting)."""

    __slots__ = ()
    kind = "cast"

    def __init__(self, arg: Node, dtype: np.dtype):
        self.children = (arg,)
        self.shape = arg.shape
        self.dtype = dtype
        if not _lazy_over(self.children):
            self.key, self.params = _intern(("C", dtype.char, arg.key)), arg.params
        else:
            _defer(self)

    def own(self) -> tuple:
        return ("C", self.dtype.char)

    def rebuild(self, children):
        return Cast(children[0], self.dtype)


class Reduce(Node):
    """Reduce ``axes`` (positions in ``arg``) with sum/prod/max/min/any/all/argmax/argmin.

    The result keeps the other dims in order. ``arg`` already has the accumulation dtype.
    """

    __slots__ = ("op", "axes")
    kind = "reduce"

    def __init__(self, op: str, arg: Node, axes: tuple[int, ...], dtype: np.dtype):
        self.op = op
        self.children = (arg,)
        self.axes = axes
        self.shape = tuple(n for d, n in enumerate(arg.shape) if d not in axes)
        self.dtype = dtype
        if not _lazy_over(self.children):
            self.key, self.params = _intern(("R", op, dtype.char, axes, arg.key)), arg.params
        else:
            _defer(self)

    def own(self) -> tuple:
        return ("R", self.op, self.dtype.char, self.axes)

    def rebuild(self, children):
        return Reduce(self.op, children[0], self.axes, self.dtype)


class Remap(Node):
    """Index remap of a computed node: ``arg[maps(out)]`` (see ``strided.remap_view``)."""

    __slots__ = ("maps",)
    kind = "remap"

    def __init__(self, arg: Node, shape: tuple[int, ...], maps: tuple):
        self.children = (arg,)
        self.maps = maps
        self.shape = shape
        self.dtype = arg.dtype
        if not _lazy_over(self.children):
            self.key, self.params = _intern(("X", shape, maps, arg.key)), arg.params
        else:
            _defer(self)

    def own(self) -> tuple:
        return ("X", self.shape, self.maps)

    def rebuild(self, children):
        return Remap(children[0], self.shape, self.maps)


class Pad(Node):
    """Pad dim ``dim`` with ``before``/``after`` copies of ``value`` (a guarded read); the
    value is a run-time parameter (the Pad node itself is in ``params``)."""

    __slots__ = ("dim", "before", "after", "value", "source")
    kind = "pad"

    def __init__(self, arg: Node, dim: int, before: int, after: int, value, source=None):
        self.source = source  # the Pad this was rebuilt from: its param (None: itself)
        self.children = (arg,)
        self.dim = dim
        self.before = before
        self.after = after
        self.dtype = arg.dtype
        self.value = arg.dtype.type(value)
        shape = list(arg.shape)
        shape[dim] += before + after
        self.shape = tuple(shape)
        if not _lazy_over(self.children):
            self.key = _intern(("P", dim, before, after, arg.key))
        else:
            _defer(self)

    def own(self) -> tuple:
        return ("P", self.dim, self.before, self.after)

    @property
    def params(self):
        return self.children[0].params + (self.source or self,)  # not stored: Leaf.params

    def rebuild(self, children):
        return Pad(children[0], self.dim, self.before, self.after, self.value, self.source or self)


class Concat(Node):
    """Join ``args`` (same dtype, same shape but for ``dim``) along ``dim``."""

    __slots__ = ("dim",)
    kind = "concat"

    def __init__(self, args: tuple[Node, ...], dim: int):
        self.children = args
        self.dim = dim
        shape = list(args[0].shape)
        shape[dim] = sum(a.shape[dim] for a in args)
        self.shape = tuple(shape)
        self.dtype = args[0].dtype
        made = _combine(("J", dim), args)
        if made is not None:
            self.key, self.params = made
        else:
            _defer(self)

    def own(self) -> tuple:
        return ("J", self.dim)

    def rebuild(self, children):
        return Concat(tuple(children), self.dim)


class Dot(Node):
    """Sum of products, einsum style: each dim carries an integer label.

    Labels of ``a`` and ``b`` missing from ``out_labels`` are contracted; labels shared by
    ``a``, ``b`` and the output are batch dims.
    """

    __slots__ = ("a_labels", "b_labels", "out_labels")
    kind = "dot"

    def __init__(self, a, b, a_labels, b_labels, out_labels, shape, dtype):
        self.children = (a, b)
        self.a_labels = a_labels
        self.b_labels = b_labels
        self.out_labels = out_labels
        self.shape = shape
        self.dtype = dtype
        head = ("D", a_labels, b_labels, out_labels, shape, dtype.char)
        made = _combine(head, (a, b))
        if made is not None:
            self.key, self.params = made
        else:
            _defer(self)

    def own(self) -> tuple:
        return ("D", self.a_labels, self.b_labels, self.out_labels, self.shape, self.dtype.char)

    @property
    def a(self) -> Node:
        return self.children[0]

    @property
    def b(self) -> Node:
        return self.children[1]

    def rebuild(self, children):
        a, b = children
        return Dot(a, b, self.a_labels, self.b_labels, self.out_labels, self.shape, self.dtype)


class Call(Node):
    """``fn(*children as read-only numpy arrays)``: an array of ``shape`` and ``dtype``. For
    work kernels do not express (scans, sorts, gathers, ``ax.apply``); both engines run it
    with numpy and fused code around it still fuses. ``fn`` is part of the key (hashable,
    equal only to functions computing the same: see ``calls``); ``arg_dims`` (display
    only) gives per child the result dim of each child dim (-1: none)."""

    __slots__ = ("fn", "name", "arg_dims")
    kind = "call"

    def __init__(self, fn, args, shape, dtype, name: str, arg_dims=None):
        self.fn, self.name, self.arg_dims = fn, name, arg_dims
        self.children, self.shape, self.dtype = tuple(args), tuple(shape), np.dtype(dtype)
        made = _combine(("F", fn, name, self.shape, self.dtype.char), args)
        if made is not None:
            self.key, self.params = made
        else:
            _defer(self)

    def own(self) -> tuple:
        return ("F", self.fn, self.name, self.shape, self.dtype.char)

    def rebuild(self, children):
        return Call(self.fn, children, self.shape, self.dtype, self.name, self.arg_dims)


_KEY = Node.__dict__["key"]
# The key slot under a second name: reading ``node.known_key`` never finishes a lazy node
# (its twin's ``__getattr__`` answers AttributeError for any other name), and on an eager
# node it is a plain (specialized) slot read, where ``_KEY.__get__(node)`` is a call.
Node.known_key = _KEY


def _finish(root: Node) -> None:
    """Key and params of a lazy node, by one walk of its DAG down to non-lazy nodes: the
    key interns the walk (each node's own structure and where its children are; a
    non-lazy node by its key and where its params are among the root's), the params are
    in order of first appearance, as ``_combine`` orders them."""
    entries: list = []
    at: dict[int, int] = {}
    params: list = []
    pos: dict[int, int] = {}

    def slot(p) -> int:
        k = pos.get(id(p))
        if k is None:
            k = pos[id(p)] = len(params)
            params.append(p)
        return k

    for n in walk(root, lambda n: n.children if lazy(n) else ()):
        if not lazy(n):
            entry = ("E", n.key, tuple(map(slot, n.params)))
        else:
            entry = (n.own(), tuple(at[id(c)] for c in n.children))
            if n.kind == "pad":  # its fill value is a param of its own, after its child's
                entry += (slot(n.source or n),)
        at[id(n)] = len(entries)
        entries.append(entry)
    root.key = _intern(("lazy", tuple(entries)))
    if root.kind != "pad":  # a pad's params are its child's and its own (a property)
        root.params = tuple(params)
    root.__class__ = root._eager  # finished: the kind's own class again


# --- traversal -------------------------------------------------------------------------------


# --- the names beside the DAG ----------------------------------------------------------
# Nodes are positional (hash-consing needs that), so a reduced or contracted dim loses its
# name in the DAG. The ops that drop names (reductions, dot) remember the names of the node
# they consume in its ``dim_names`` slot (set only then; it dies with the node, and is no
# part of its key). Display code derives every other node's names from its root's and
# these (``dag.text.inputs``); a node given two different names for one dim keeps both,
# joined by "|" (a true collision). A slot, not a weak dictionary: a reduction rebuilt
# each call names a new node each time, and a weak entry costs ~1.5 us to make.


def name_dims(node: Node, names: tuple[str, ...]) -> None:
    """Remember that ``node``'s dims are called ``names`` (for display only)."""
    old = getattr(node, "dim_names", None)
    if old == names:  # already known (a leaf contracted again)
        return
    if old is not None:
        names = tuple(
            a if a == b or b in a.split("|") else f"{a}|{b}"
            for a, b in zip(old, names, strict=True)
        )
    node.dim_names = tuple(names)


def known_names(node: Node) -> tuple[str, ...] | None:
    """The names some op remembered for ``node``'s dims, or None."""
    return getattr(node, "dim_names", None)


def walk(root: Node, edges=None) -> list[Node]:
    """All distinct nodes, children before parents (a topological order); ``edges(node)``
    replaces ``node.children`` (autograd follows fewer edges)."""
    order: list[Node] = []
    seen: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded:
            seen.add(id(node))
            order.append(node)
            continue
        stack.append((node, True))
        for c in reversed(node.children if edges is None else edges(node)):
            if id(c) not in seen:
                stack.append((c, False))
    return order


def rebuild_dag(root: Node, fn) -> Node:
    """Rebuild the DAG bottom-up: ``fn(node, new_children)`` returns the replacement of
    ``node`` (or None to keep ``node`` when its children did not change, else rebuild it).
    Shared subtrees are visited once and stay shared."""
    done: dict[int, Node] = {}
    for node in walk(root):
        kids = tuple(done[id(c)] for c in node.children)
        new = fn(node, kids)
        if new is None:
            changed = any(k is not c for k, c in zip(kids, node.children, strict=True))
            new = node.rebuild(kids) if changed else node
        if new is not node and new.shape == node.shape:  # the rewritten value keeps its names
            names = getattr(node, "dim_names", None)
            if names is not None and getattr(new, "dim_names", None) is None:
                new.dim_names = names
        done[id(node)] = new
    return done[id(root)]
