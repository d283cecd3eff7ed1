"""Graph tensors and compiled functions: ``constant``, ``placeholder``, ``persistent_tensor``,
``variable``, ``variables``, ``function``, ``grad``, and ``explain`` for several outputs.

The four kinds are Nervana graph's (seed table: constant, persistent, trainable, input):

============================  ========  ==========  =========  =====
constructor                   constant  persistent  trainable  input
============================  ========  ==========  =========  =====
``ax.constant``               yes       yes         no         no
``ax.placeholder``            no        yes         no         yes
``ax.persistent_tensor``      no        yes         no         no
``ax.variable``               no        yes         yes        no
============================  ========  ==========  =========  =====

Each owns its storage (the initial value is copied) and tags it with an ``autograd.Kind``
that its views share. A constant is read-only: any write raises ``TypeError`` naming it.
A placeholder has a value only during a call of an ``ax.function`` that lists it.
"""

from __future__ import annotations

import weakref

import numpy as np

from .. import engine
from ..autograd.program import Program, root_leaf
from ..autograd.rules import GRAD_NAMES, Kind, gradients, zeros_like
from ..core.axes import Axes, Axis, UnboundAxis, as_axes, parse_names
from ..core.dtypes import as_dtype
from ..core.strided import contiguous
from ..creation import tensor as make_tensor
from ..dag import nodes as ex
from ..dag.resize import NotLengthGeneric, resize
from ..errors import AxesError, fmt_axes, message
from ..functions import explain as explain_tensor
from ..tensors.gradients import seed_node
from ..tensors.layout_methods import allocate_leaf, layout_for_axes
from ..tensors.tensor import Tensor

__all__ = [
    "constant",
    "placeholder",
    "persistent_tensor",
    "variable",
    "variables",
    "grad",
    "function",
    "Function",
    "explain",
]


def _declare(kind: str, value, axes, dtype, name, op: str) -> Tensor:
    """A new storage holding ``value`` (copied), tagged ``kind``."""
    if name is not None and not isinstance(name, str):
        raise TypeError(message(op, "name must be a string", repr(name)))
    if isinstance(value, Tensor):
        if axes is not None and set(parse_names(axes, op)) != set(value.names):
            raise AxesError(
                message(
                    op,
                    "the axes differ from the initial tensor's",
                    f"given {' '.join(parse_names(axes, op))}; tensor: {fmt_axes(value.axes)}",
                    "Leave axes out to take the tensor's",
                )
            )
        src = value if dtype is None else value.astype(dtype)
        src = src.to_layout(src.layout) if src.layout is not None else src.copy()
    else:
        if axes is None:
            raise TypeError(
                message(
                    op, "a value that is not a tensor needs axes", None, f"ax.{op}(value, 'N C')"
                )
            )
        arr = np.asarray(value, dtype=None if dtype is None else as_dtype(dtype, op))
        if arr.ndim == 0 and not isinstance(axes, str):  # a number fills Axis objects
            arr = np.full(as_axes(axes, op).shape, arr, dtype=arr.dtype)
        src = make_tensor(arr, axes, copy=True)
    if kind == "variable" and src.dtype.kind != "f":
        raise TypeError(
            message(
                op,
                f"a variable must have a float dtype, not {src.dtype}",
                None,
                "Pass dtype='float32'",
            )
        )
    leaf = src.node
    tag = Kind(kind, name, src.axes, src.layout)
    node = ex.Leaf(leaf.data, leaf.view, kind in ("persistent", "variable"), tag=tag)
    out = Tensor(src.axes, node, src.layout)
    tag.owner = weakref.ref(out)
    return out


def constant(value, axes=None, dtype=None, name: str | None = None) -> Tensor:
    """An immutable tensor (a copy of ``value``): writing it raises ``TypeError``.

    >>> import axesarray as ax, numpy as np
    >>> c = ax.constant(np.array([1.0, 2.0]), "K", name="c")
    >>> c.kind, c.trainable
    ('constant', False)
    """
    return _declare("constant", value, axes, dtype, name, "constant")


def persistent_tensor(initial, axes=None, dtype=None, name: str | None = None) -> Tensor:
    """A tensor kept across computations (e.g. an optimizer's velocity), not trained.

    >>> import axesarray as ax
    >>> ax.persistent_tensor(0.0, (ax.Axis("K", 3),)).kind
    'persistent'
    """
    return _declare("persistent", initial, axes, dtype, name, "persistent_tensor")


def variable(initial, axes=None, dtype=None, name: str | None = None) -> Tensor:
    """A trainable tensor (a copy of ``initial``): ``backward`` fills its ``grad``,
    optimizers update it in place. Float dtypes only.

    >>> import axesarray as ax, numpy as np
    >>> w = ax.variable(np.zeros(3, "float32"), "K", name="w")
    >>> w.kind, w.trainable
    ('variable', True)
    """
    return _declare("variable", initial, axes, dtype, name, "variable")


def placeholder(axes, dtype="float32", name: str | None = None) -> Tensor:
    """An input with a value only while an ``ax.function`` listing it runs (bound there).

    Reading it anywhere else raises ``ValueError`` naming it; writing it raises
    ``TypeError``.

    An axis given as ``ax.Axis("N", None)`` takes its length from each call's value (a
    batch axis: the last, smaller batch of an epoch is accepted). The graph is built at
    a nominal length (``NOMINAL``, 7); each new length rebuilds it for that length once
    (kernels are reused where the loops are the same).

    >>> import axesarray as ax
    >>> x = ax.placeholder((ax.Axis("N", 2),), "float32", name="x")
    >>> f = ax.function(x * 2, inputs=[x])
    >>> f([1.0, 2.0]).numpy()
    array([2., 4.], dtype=float32)
    >>> b = ax.placeholder((ax.Axis("N", None), ax.Axis("F", 2)), "float64", name="b")
    >>> g = ax.function(b.sum("F").mean("N"), inputs=[b])
    >>> float(g([[1.0, 2.0]] * 5)), float(g(b=[[0.0, 1.0]]))  # 5 rows, then 1, by name
    (3.0, 1.0)
    """
    if isinstance(axes, (list, tuple, Axes)):  # anything else: as_axes says what is wrong
        items = list(axes)
        dynamic = tuple(k for k, a in enumerate(items) if isinstance(a, UnboundAxis))
        axes = [Axis(a.name, NOMINAL) if isinstance(a, UnboundAxis) else a for a in items]
    else:
        dynamic = ()
    full = as_axes(axes, "placeholder")
    dt = as_dtype(dtype, "placeholder")
    if name is not None and not isinstance(name, str):
        raise TypeError(message("placeholder", "name must be a string", repr(name)))
    tag = Kind("placeholder", name, full, None)
    # Never read while unbound; zeros (untouched pages) keep stray readers safe.
    data = np.zeros(max(full.size, 1), dt)
    out = Tensor(full, ex.Leaf(data, contiguous(full.shape), False, tag=tag))
    tag.owner = weakref.ref(out)
    engine.UNBOUND.add(tag)
    if dynamic:
        DYNAMIC[out.node] = dynamic
    return out


_NOTHING = object()  # an input not given (yet) in a call
# The length an Axis(name, None) has while the graph is built. Not 1 or 2: a mean's count
# and the constants folded from it (1/n, 2/n of a squared error's gradient) must not be
# special constants at the nominal length (0, 1, 2, 0.5, -1 are structure, and x * 1 is
# dropped), or the graph would not follow a new count.
NOMINAL = 7
# placeholder root leaf -> positions of its axes bound per call
DYNAMIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def variables(expr: Tensor):
    """The variable objects ``expr`` reads (through any view), each once, in order.

    >>> import axesarray as ax, numpy as np
    >>> w = ax.variable(np.ones(2), "K")
    >>> [v is w for v in ax.variables((w.rename(K="J") * 2).sum())]
    [True]
    """
    if not isinstance(expr, Tensor):
        raise TypeError(message("variables", "expected a Tensor", type(expr).__name__))
    for leaf in ex.leaf_roots(expr.node):
        tag = leaf.tag
        if tag is None or not tag.trainable:
            continue
        owner = tag.owner() if tag.owner is not None else None
        yield owner if owner is not None else Tensor(tag.axes, leaf, tag.layout)


def grad(loss: Tensor, wrt, seed=None):
    """Lazy gradients of ``loss`` with respect to each tensor of ``wrt``.

    Each has exactly its ``wrt`` tensor's axes (same order) and layout, and is an
    r-tensor planned and fused like any expression. A tensor ``loss`` does not read gets
    zeros. A loss with axes needs ``seed`` (its gradient: a tensor with those axes).

    >>> import axesarray as ax, numpy as np
    >>> w = ax.variable(np.array([1.0, 2.0, 3.0]), "K", name="w")
    >>> (gw,) = ax.grad((w * w).sum(), [w])
    >>> gw.names, gw.numpy()
    (('K',), array([2., 4., 6.]))
    """
    if not isinstance(loss, Tensor):
        raise TypeError(message("grad", "the loss must be a Tensor", type(loss).__name__))
    single = isinstance(wrt, Tensor)
    targets = _tensors(wrt, "grad", "wrt", "wrt item")
    for k, w in enumerate(targets):
        if not isinstance(w, Tensor) or not w.is_lvalue:
            what = "an r-tensor" if isinstance(w, Tensor) else type(w).__name__
            raise TypeError(
                message(
                    "grad",
                    f"wrt[{k}] must be an l-tensor (storage)",
                    f"got {what}",
                    "Differentiate with respect to the tensors it is computed from",
                )
            )
        if w.dtype.kind != "f":
            raise TypeError(
                message("grad", f"wrt[{k}] must be a float tensor, not {w.dtype}", fmt_axes(w.axes))
            )
    start = seed_node(loss, seed, "grad")
    nodes = gradients(loss.node, start, [w.node for w in targets])
    out = []
    for w, g in zip(targets, nodes, strict=True):
        g = zeros_like(w.node) if g is None else g
        tag = root_leaf(w.node).tag
        if tag is not None and tag.name:
            GRAD_NAMES[g] = f"grad_{tag.name}"
        out.append(Tensor(w.axes, g, w.layout))
    return out[0] if single else out


# --- compiled functions -----------------------------------------------------------------------


def _tensors(value, op: str, what: str, item: str) -> list:
    """``value`` (a Tensor or a list/tuple of them) as a list, or a TypeError naming ``op``
    (and which ``item`` is not a tensor)."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        for k, t in enumerate(value):
            if not isinstance(t, Tensor):
                raise TypeError(message(op, f"{item} {k} is not a Tensor", type(t).__name__))
        return list(value)
    raise TypeError(
        message(
            op,
            f"{what} must be a Tensor or a list of tensors",
            f"got {type(value).__name__}",
            f"e.g. ax.{op}([loss], ...)" if what == "outputs" else None,
        )
    )


def _label(t: Tensor, i: int) -> str:
    name = GRAD_NAMES.get(t.node)
    if name is None and type(t.node) is ex.Leaf and t.node.tag is not None:
        name = t.node.tag.name
    return name or f"output {i}"


def _maker(t: Tensor):
    """Per run, new storage in the output's layout (None: the engine's fresh result)."""
    if t.layout is None:
        return None
    layout = layout_for_axes(t.axes, t.layout)
    return lambda: allocate_leaf(t.axes, t.dtype, layout)


def _declared(p: Tensor, dynamic: tuple, shape: bool = False) -> str:
    """A placeholder's axes (or shape) as declared: ``N=any`` for an axis bound per call."""
    if shape:
        dims = ["any" if d in dynamic else str(n) for d, n in enumerate(p.shape)]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
    return ", ".join(f"{a.name}=any" if d in dynamic else str(a) for d, a in enumerate(p.axes))


class Function:
    """``ax.function(outputs, inputs)``: planned once, called many times with values for
    the placeholders ``inputs``. See ``function``."""

    def __init__(self, outputs, inputs=()):
        self.single = isinstance(outputs, Tensor)
        outs = _tensors(outputs, "function", "outputs", "output")
        ins = _tensors(inputs, "function", "inputs", "input")
        for k, p in enumerate(ins):
            if not (isinstance(p, Tensor) and p.kind == "placeholder" and p.node.origin is None):
                raise TypeError(
                    message(
                        "function",
                        f"input {k} is not a placeholder",
                        type(p).__name__ if not isinstance(p, Tensor) else fmt_axes(p.axes),
                        "Inputs are tensors made by ax.placeholder(axes, dtype)",
                    )
                )
        roots = [p.node for p in ins]
        if len({id(r) for r in roots}) != len(roots):
            raise ValueError(message("function", "a placeholder is listed twice in inputs"))
        listed = {id(r) for r in roots}
        for t in outs:
            for leaf in ex.leaf_roots(t.node):
                if (
                    leaf.tag is not None
                    and leaf.tag.kind == "placeholder"
                    and id(leaf) not in listed
                ):
                    raise ValueError(
                        message(
                            "function",
                            f"the outputs read the {leaf.tag.label}, which is not among the inputs",
                            fmt_axes(leaf.tag.axes),
                            "Add it to inputs=[...]",
                        )
                    )
        self.outputs = outs
        self.inputs = ins
        self.dynamic = [DYNAMIC.get(p.node, ()) for p in ins]
        self.sized: dict = {}  # lengths of the dynamic axes -> (program, input leaves, axes)
        # Arrays of these shapes and dtypes (not empty) go straight to the program; None
        # when an axis is bound per call (its program depends on the lengths).
        self._plain = None
        if not any(self.dynamic) and all(p.size for p in ins):
            self._plain = [(p.shape, p.dtype) for p in ins]
        self._wrap = [(t.axes, t.layout) for t in outs]
        self.program = Program(
            [t.node for t in outs],
            [_maker(t) for t in outs],
            inputs=roots,
            labels=[_label(t, i) for i, t in enumerate(outs)],
        )

    def _value(self, k: int, p: Tensor, value) -> np.ndarray:
        """This call's storage for placeholder ``p`` (validated; zero-copy when possible)."""
        tag = p.node.tag
        who = f"input {k} ({tag.label})"
        dyn = self.dynamic[k]
        if dyn and isinstance(value, Tensor) and set(value.names) == set(p.names):
            # Axes bound per call take any length: in axis order, checked as an array.
            value = value.transpose(p.names).numpy()
        if isinstance(value, Tensor):
            if set(value.axes) != set(p.axes):
                raise AxesError(
                    message(
                        "function",
                        f"{who} has axes {_declared(p, dyn)}",
                        f"got {fmt_axes(value.axes)}",
                        "Pass a tensor with these axes (any order) or a numpy array",
                    )
                )
            if value.dtype != p.dtype:
                raise TypeError(
                    message(
                        "function",
                        f"{who} has dtype {p.dtype}",
                        f"got {value.dtype}",
                        f"Convert: value.astype('{p.dtype}')",
                    )
                )
            arr = value.transpose(p.names).numpy()
        else:
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                or isinstance(value, list)
            ):
                arr = np.asarray(value, dtype=p.dtype)
            elif isinstance(value, np.ndarray):
                arr = value
            else:
                raise TypeError(
                    message(
                        "function", f"{who} takes a numpy array or a tensor", type(value).__name__
                    )
                )
            if dyn and arr.ndim == p.ndim:
                want = tuple(arr.shape[d] if d in dyn else n for d, n in enumerate(p.shape))
            else:
                want = p.shape
            if arr.shape != want:
                raise AxesError(
                    message(
                        "function",
                        f"{who} has axes {_declared(p, dyn)}, shape {_declared(p, dyn, True)}",
                        f"got shape {arr.shape}",
                        "Pass an array of that shape, or a tensor with those axes",
                    )
                )
            if arr.dtype != p.dtype:
                raise TypeError(
                    message(
                        "function",
                        f"{who} has dtype {p.dtype}",
                        f"got {arr.dtype}",
                        f"Convert: array.astype('{p.dtype}')",
                    )
                )
        arr = np.ascontiguousarray(arr)
        return (arr.reshape(-1) if arr.size else np.zeros(1, arr.dtype)), arr.shape

    def _positional(self, values: tuple, named: dict) -> tuple:
        """The values in input order, from positions and placeholder names."""
        if not named:
            if len(values) != len(self.inputs):
                raise TypeError(
                    message("function", f"takes {len(self.inputs)} input(s)", f"got {len(values)}")
                )
            return values
        names = [p.node.tag.name for p in self.inputs]
        slots = list(values) + [_NOTHING] * (len(self.inputs) - len(values))
        if len(values) > len(self.inputs):
            raise TypeError(
                message("function", f"takes {len(self.inputs)} input(s)", f"got {len(values)}")
            )
        for key, v in named.items():
            if key not in names:
                known = ", ".join(repr(n) for n in names if n is not None) or "none"
                raise TypeError(
                    message(
                        "function",
                        f"no input is named {key!r}",
                        f"named inputs: {known}",
                        "Name a placeholder: ax.placeholder(axes, dtype, name='x')",
                    )
                )
            k = names.index(key)
            if slots[k] is not _NOTHING:
                raise TypeError(message("function", f"input {key!r} is given twice"))
            slots[k] = v
        missing = [names[k] or f"input {k}" for k, v in enumerate(slots) if v is _NOTHING]
        if missing:
            raise TypeError(message("function", "missing input(s)", ", ".join(map(str, missing))))
        return tuple(slots)

    def _sized(self, shapes: list):
        """(program, its input leaves, output axes) for this call's lengths of the axes
        bound per call; the graph rebuilt for new lengths once per distinct set."""
        key = tuple(tuple(s[d] for d in dyn) for s, dyn in zip(shapes, self.dynamic, strict=True))
        hit = self.sized.get(key)
        if hit is not None:
            return hit
        seen: dict = {}  # one length per name among the axes bound per call (one batch)
        for k, (p, s, dyn) in enumerate(zip(self.inputs, shapes, self.dynamic, strict=True)):
            for d in dyn:
                name = p.names[d]
                if seen.setdefault(name, (k, s[d]))[1] != s[d]:
                    j, n = seen[name]
                    raise AxesError(
                        message(
                            "function",
                            f"axis {name!r} is bound per call and has two lengths",
                            f"{name}={n} in input {j}, {name}={s[d]} in input {k}",
                            "Pass the same batch length to every input",
                        )
                    )
        nominal = tuple(
            tuple(p.shape[d] for d in dyn) for p, dyn in zip(self.inputs, self.dynamic, strict=True)
        )
        if key == nominal:
            hit = (self.program, [p.node for p in self.inputs], [t.axes for t in self.outputs])
        else:
            lengths = {
                p.node: {d: s[d] for d in dyn}
                for p, s, dyn in zip(self.inputs, shapes, self.dynamic, strict=True)
                if dyn
            }
            try:
                roots, leaves = resize([t.node for t in self.outputs], lengths)
            except NotLengthGeneric as e:
                raise AxesError(
                    message(
                        "function",
                        "the outputs use an axis bound per call by its length",
                        ", ".join(f"{n}={k}" for n, (_, k) in seen.items()) + f"; {e}",
                        "Slice, pad, reshape or sort along other axes, or give the axis a "
                        "length: ax.Axis(name, length)",
                    )
                ) from None
            axes = [
                Axes([a.resize(n) for a, n in zip(t.axes, r.shape, strict=True)])
                for t, r in zip(self.outputs, roots, strict=True)
            ]
            outs = [
                Tensor(a, r, t.layout) for a, r, t in zip(axes, roots, self.outputs, strict=True)
            ]
            inputs = [leaves.get(p.node, p.node) for p in self.inputs]
            program = Program(
                roots,
                [_maker(t) for t in outs],
                inputs=inputs,
                labels=[_label(t, i) for i, t in enumerate(self.outputs)],
            )
            hit = (program, inputs, axes)
        if len(self.sized) >= 64:  # many batch sizes: keep the latest ones
            self.sized.pop(next(iter(self.sized)))
        self.sized[key] = hit
        return hit

    def __call__(self, *values, **named):
        plain = self._plain
        if plain is not None and not named and len(values) == len(plain):
            # The common call: C-ordered numpy arrays of the declared shapes and dtypes,
            # passed as they are (``_value`` would accept them unchanged).
            data = []
            for v, (shape, dtype) in zip(values, plain, strict=True):
                if type(v) is not np.ndarray or v.shape != shape or v.dtype != dtype:
                    break
                if not v.flags.c_contiguous:
                    break
                data.append(v.reshape(-1))
            else:
                out = self.program.run_storages(data)
                pairs = zip(self._wrap, out, strict=True)
                results = [Tensor(a, leaf, lay) for (a, lay), leaf in pairs]
                return results[0] if self.single else tuple(results)
        values = self._positional(values, named)
        pairs = list(zip(self.inputs, values, strict=True))
        checked = [self._value(k, p, v) for k, (p, v) in enumerate(pairs)]
        data = [d for d, _ in checked]
        program, leaves, axes = self.program, [p.node for p in self.inputs], None
        if any(self.dynamic):
            program, leaves, axes = self._sized([s for _, s in checked])
        # Values travel by argument (no shared node is mutated): concurrent calls of one
        # function run in parallel, and the placeholders stay unbound outside the call.
        bound = dict(zip(leaves, data, strict=True))
        out_leaves = program.run(bound)
        axes = axes or [t.axes for t in self.outputs]
        results = [
            Tensor(a, leaf, t.layout)
            for a, t, leaf in zip(axes, self.outputs, out_leaves, strict=True)
        ]
        return results[0] if self.single else tuple(results)

    def explain(self):
        """Each stage's plan: outputs, shared values computed once (nothing runs)."""
        return self.program.explain([t.names for t in self.outputs])

    def __reduce__(self):
        # Its stages are plans over this process's leaves and kernels; its outputs are lazy
        # graph tensors (refused too). Rebuilding it from loaded tensors is cheap.
        ins = ", ".join(p.node.tag.label for p in self.inputs) or "none"
        raise TypeError(
            message(
                "function",
                "a compiled function is not pickled",
                f"inputs: {ins}",
                "Pickle the tensors it reads (variables, placeholders) and call "
                "ax.function(outputs, inputs) again with the loaded ones",
            )
        )


def function(outputs, inputs=()) -> Function:
    """Compile ``outputs`` (a tensor or a list) of the placeholders ``inputs``.

    ``f(*values)`` binds each placeholder to its value (a numpy array of its shape, or a
    tensor with its axes in any order; the dtype must match) and returns the outputs as
    new l-tensors (a tuple for a list). Values are checked before anything runs. Planning
    happens once; values several outputs share (a forward value the backward reuses)
    are computed once per call.

    >>> import axesarray as ax, numpy as np
    >>> N, K = ax.Axis("N", 2), ax.Axis("K", 3)
    >>> x = ax.placeholder((N, K), "float64", name="x")
    >>> w = ax.variable(np.ones(3), "K", name="w")
    >>> loss = ((x * w).sum("K") ** 2).sum()
    >>> f = ax.function([loss, *ax.grad(loss, [w])], inputs=[x])
    >>> value, gw = f(np.ones((2, 3)))
    >>> float(value.item()), gw.numpy()
    (18.0, array([12., 12., 12.]))
    """
    return Function(outputs, inputs)


def explain(expr, out: Tensor | None = None, *, timed: bool = False, repeat: int = 3):
    """``ax.explain`` for a tensor (the engine's ``Plan``; ``timed=True`` runs it and
    shows each kernel's time, see ``functions.explain``), a list of tensors planned
    together (e.g. gradients: stages named ``grad_<name>``), or an object with an
    ``explain()`` method (a function, an optimizer).

    >>> import axesarray as ax, numpy as np
    >>> w = ax.variable(np.ones(4), "K", name="w")
    >>> plan = ax.explain(ax.grad(ax.sigmoid(w * 2.0).sum(), [w]))
    >>> plan.stages[0].label, len(plan.kernels)
    ('grad_w', 1)
    """
    if isinstance(expr, Tensor):
        return explain_tensor(expr, out, timed=timed, repeat=repeat)
    if timed:
        raise TypeError(
            message(
                "explain",
                "timed=True times one expression's kernels",
                f"got {type(expr).__name__}",
                "Time the call itself (timeit), or pass one tensor expression",
            )
        )
    if isinstance(expr, (list, tuple)):
        ts = _tensors(expr, "explain", "a list of expressions", "item")
        prog = Program([t.node for t in ts], labels=[_label(t, i) for i, t in enumerate(ts)])
        return prog.explain([t.names for t in ts])
    if hasattr(expr, "explain"):
        return expr.explain()
    raise TypeError(
        message(
            "explain", "expected a Tensor, a list of tensors or a function", type(expr).__name__
        )
    )
