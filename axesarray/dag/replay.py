"""A DAG built once over input nodes, replayed over other inputs of the same structure.

A function that builds a fixed formula of its inputs (``ax.softmax``: a max, a guard, an
exp, a sum, a division) builds the same structure for every input with the same key: the
same nodes, keys and param layout, only the inputs' params differ. ``record`` keeps that
structure as a recipe (no node of it, so no input's storage is kept alive); ``replay``
makes the nodes again over new inputs by copying each node's fields, its key and its
params with the inputs' params put in place, without the builders' checks, dtype rules
and key interning. The nodes replayed are indistinguishable from built ones.

Only plain elementwise structure is recorded (maps, casts, reductions, remaps of computed
values and shared constants); anything else (a view that makes a new leaf, a pad, a lazy
node, a mean's registered count) makes ``record`` answer None: the caller builds anew.
"""

from __future__ import annotations

import attrs

from .nodes import Cast, Const, Map, Reduce, Remap, lazy, walk
from .resize import COUNTS

__all__ = ["Recipe", "record", "replay"]

# The kinds a recipe makes again, with the field(s) each has besides shape and dtype
# (children, key and params are set from the recipe).
_FIELDS = {Map: "op", Cast: None, Reduce: ("op", "axes"), Remap: "maps"}
_new = object.__new__


@attrs.frozen
class Recipe:
    """What ``replay`` needs: the inputs' keys and param counts, the shared constants (and
    their ids), and per node made ``(class, shape, dtype, own field(s), child slots, param
    slots, key, dim names)`` or, for a shared constant, the Const itself. Slots
    ``0..len(inputs)-1`` are the inputs, then the steps in order; param slots index the
    inputs' params followed by the constants. ``roots``: the slots returned."""

    keys: tuple
    counts: tuple
    consts: tuple
    const_ids: frozenset
    steps: tuple
    roots: tuple


def _params(inputs: tuple) -> tuple | None:
    """The inputs' params, in order; None when two inputs share one (the sharing is then
    structure the recipe does not know)."""
    if len(inputs) == 1:
        return inputs[0].params
    out = tuple(p for n in inputs for p in n.params)
    return out if len(set(map(id, out))) == len(out) else None


def record(inputs: tuple, roots: tuple) -> Recipe | None:
    """The recipe of the nodes between ``inputs`` and ``roots`` (just built), or None when
    they are not plain elementwise structure over the inputs' params and shared constants."""
    if any(lazy(n) for n in inputs) or any(lazy(n) for n in roots):
        return None
    given = _params(inputs)
    if given is None:
        return None
    slot: dict[int, int] = {id(n): i for i, n in enumerate(inputs)}
    param_slot: dict[int, int] = {id(p): i for i, p in enumerate(given)}
    consts: list = []
    steps: list = []
    count = len(inputs)
    top = object()  # above the roots: one walk, children before parents, down to the inputs

    def edges(n):
        return roots if n is top else () if id(n) in slot else n.children

    for node in walk(top, edges)[:-1]:
        if id(node) in slot:  # an input
            continue
        cls = type(node)
        if cls is Const:
            if node in COUNTS or id(node) in param_slot:
                return None
            param_slot[id(node)] = len(given) + len(consts)
            consts.append(node)
            steps.append(node)  # a slot holding the constant itself
        elif cls in _FIELDS:
            try:
                pslots = tuple(param_slot[id(p)] for p in node.params)
            except KeyError:  # a param made by the build (a view's new leaf)
                return None
            field = _FIELDS[cls]
            if field is None:
                own = None
            elif type(field) is str:
                own = getattr(node, field)
            else:
                own = tuple(getattr(node, f) for f in field)
            steps.append(
                (
                    cls,
                    node.shape,
                    node.dtype,
                    own,
                    tuple(slot[id(c)] for c in node.children),
                    pslots,
                    node.key,
                    getattr(node, "dim_names", None),
                )
            )
        else:
            return None
        slot[id(node)] = count
        count += 1
    keys = tuple(n.key for n in inputs)
    counts = tuple(len(n.params) for n in inputs)
    roots_at = tuple(slot[id(r)] for r in roots)
    return Recipe(keys, counts, tuple(consts), frozenset(map(id, consts)), tuple(steps), roots_at)


def replay(recipe: Recipe, inputs: tuple) -> tuple | None:
    """The recipe's roots over ``inputs``; None when the inputs do not fit it (another
    structure, or params shared with each other or with the recipe's constants)."""
    try:
        for n, key, count in zip(inputs, recipe.keys, recipe.counts, strict=True):
            if n.known_key != key or len(n.params) != count:
                return None
    except AttributeError:  # a lazy input (its key is not known yet)
        return None
    given = _params(inputs)
    if given is None or not recipe.const_ids.isdisjoint(map(id, given)):
        return None
    table = given + recipe.consts
    made = list(inputs)
    for step in recipe.steps:
        if type(step) is Const:
            made.append(step)
            continue
        cls, shape, dtype, own, kids, pslots, key, names = step
        node = _new(cls)
        node.shape, node.dtype, node.key = shape, dtype, key
        if cls is Map:
            node.op = own
        elif cls is Remap:
            node.maps = own
        elif cls is Reduce:
            node.op, node.axes = own
        node.children = tuple([made[i] for i in kids])
        node.params = tuple([table[i] for i in pslots])
        if names is not None:
            node.dim_names = names
        made.append(node)
    return tuple(made[i] for i in recipe.roots)
