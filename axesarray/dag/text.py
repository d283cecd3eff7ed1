"""Expressions as text: a one-line formula, an indented tree, and the key of their inputs.

Inputs are numbered like the engine's plan numbers them (``input t1`` in ``ax.explain``):
the tensors (leaves) read, in order of first appearance, each once; constants are ``c0``,
``c1``... and pad values ``p0``... A
leaf does not know the Python name of the tensor it came from, so the key describes it by
dtype and axes (``t0: float32 (N=8, C=64)``). Dims of inner nodes get their names from
the root's axes; a reduced or contracted dim takes the name the reduction or dot remembered
beside the DAG (``expr.name_dims``), and only a dim nobody named is called ``r0``, ``r1``...
Imports ``expr``, ``ops``, ``errors``.
"""

from __future__ import annotations

import attrs
import numpy as np

from ..core.ops import OPS
from ..errors import fmt_axes
from ..storage.devices import device_of
from . import nodes as ex

__all__ = [
    "Inputs",
    "InputInfo",
    "inputs",
    "formula",
    "tree_lines",
    "work",
    "chunks_text",
    "cut",
    "is_position",
    "names_up",
    "dim_names",
]


@attrs.frozen
class InputInfo:
    """One input of an expression: its plan number, label and description."""

    label: str  # "t0"
    kind: str  # "tensor", "constant", "pad value" or "chunked"
    dtype: str
    axes: str  # the dims it really has, "N=8, C=64" (broadcast dims left out)
    notes: tuple[str, ...]  # "broadcast over N", "same storage as t0", "blocked C/4"...

    def __str__(self) -> str:
        text = f"{self.label}: {self.dtype} ({self.axes})"
        if self.kind != "tensor":
            text = f"{self.label}: {self.kind} {self.dtype}"
        return text + "".join(f", {n}" for n in self.notes)


@attrs.frozen(eq=False)
class Inputs:
    """Labels of the parameter nodes and names of every node's dims."""

    labels: dict  # id(node) -> "t0"
    dims: dict  # id(node) -> tuple of dim names
    infos: tuple[InputInfo, ...]


def dim_names(root: ex.Node, names: tuple[str, ...] | None) -> dict:
    """id(node) -> names of its dims: the root's ``names`` propagated down (first path
    wins); a dim the path leaves unnamed (reduced, contracted) takes the name that flows
    up from the leaves (``names_up``), else a position (``r0``, ``d0``).

    A dim remembered under two names (the same node in two tensors) shows its position
    and both names: ``d1[N|A]``.
    """
    up = names_up(root)
    if names is None:
        names = tuple(n or f"d{d}" for d, n in enumerate(up[id(root)]))
    out: dict = {id(root): _plain(tuple(names))}
    counter = [0]

    def fresh() -> str:
        counter[0] += 1
        return f"r{counter[0] - 1}"

    for node in reversed(ex.walk(root)):  # parents before children
        mine = out[id(node)]
        for child, child_names in _child_names(node, mine, fresh, up):
            if id(child) not in out:
                below = up[id(child)]
                out[id(child)] = _plain(
                    tuple(
                        b if is_position(n) and b is not None else n
                        for n, b in zip(child_names, below, strict=True)
                    )
                )
    return out


def names_up(root: ex.Node) -> dict:
    """id(node) -> per dim, the name that flows up from the leaves (or None): what an op
    or a leaf remembered (``expr.name_dims``, a variable's or placeholder's axes), carried
    through elementwise nodes, reductions, views and dots."""
    up: dict = {}
    for node in ex.walk(root):  # children first
        known = _leaf_names(node) if node.kind == "leaf" else ex.known_names(node)
        if known is not None:
            up[id(node)] = tuple(known)
            continue
        up[id(node)] = _derive_up(node, up)
    return up


def _leaf_names(leaf: ex.Node) -> tuple | None:
    """The names of a leaf's dims: remembered (``ax.tensor``), declared (a variable's or
    placeholder's axes), or those of the leaf it is a view of, carried through the view's
    steps (a remap moves them; a split or merge names nothing). None when nobody named it.
    A rewrite reads a leaf through a new view (a contraction found in ``(x * w).sum``), so
    its names come from the leaf it views."""
    chain = []
    while True:
        known = ex.known_names(leaf)
        if known is None and leaf.origin is None and leaf.tag is not None:
            axes = getattr(leaf.tag, "axes", None)
            if axes is not None and len(axes) == leaf.ndim:
                known = axes.names
        if known is not None or leaf.origin is None:
            break
        chain.append(leaf)
        leaf = leaf.origin[0]
    if known is None:
        return None
    for view in reversed(chain):  # from the named leaf down to the one asked about
        step = view.origin[1]
        if step[0] == "same":
            continue
        names: list = [None] * view.ndim
        if step[0] == "remap":
            for k, (d, _, _) in enumerate(step[2]):
                if d >= 0 and names[d] is None:
                    names[d] = known[k]
        known = tuple(names)
    return tuple(known)


def _derive_up(node: ex.Node, up: dict) -> tuple:
    names: list = [None] * node.ndim
    kind = node.kind
    if kind == "reduce":
        kept = [n for d, n in enumerate(up[id(node.arg)]) if d not in node.axes]
        return tuple(kept)
    if kind == "remap":
        below = up[id(node.arg)]
        for k, (s, _, _) in enumerate(node.maps):
            if s >= 0 and names[s] is None:
                names[s] = below[k]
        return tuple(names)
    if kind == "dot":
        by_label: dict = {}
        for labels, child in ((node.a_labels, node.a), (node.b_labels, node.b)):
            for lb, n in zip(labels, up[id(child)], strict=True):
                if by_label.get(lb) is None:
                    by_label[lb] = n
        return tuple(by_label.get(lb) for lb in node.out_labels)
    if kind in ("map", "cast", "pad", "concat"):
        for c in node.children:
            if c.ndim == node.ndim:
                for d, n in enumerate(up[id(c)]):
                    if names[d] is None:
                        names[d] = n
    return tuple(names)


def _plain(names: tuple) -> tuple:
    """Names with each collision shown as its position and the names: ``d1[N|A]``."""
    return tuple(f"d{d}[{n}]" if "|" in n and "[" not in n else n for d, n in enumerate(names))


def is_position(name: str) -> bool:
    """Whether a dim name is a position (``d0``, ``r1``, ``i2``), not a user's name."""
    return name[:1] in "rdi" and name[1:].isdigit()


def _child_names(node: ex.Node, mine: tuple, fresh, up: dict) -> list:
    if node.kind == "reduce":
        it = iter(mine)
        return [
            (node.arg, tuple(fresh() if d in node.axes else next(it) for d in range(node.arg.ndim)))
        ]
    if node.kind == "remap":
        return [
            (
                node.arg,
                tuple(mine[s] if s >= 0 else f"i{k}" for k, (s, _, _) in enumerate(node.maps)),
            )
        ]
    if node.kind == "dot":
        by_label = dict(zip(node.out_labels, mine, strict=True))
        below: dict = {}  # a contracted label's name from either operand
        for labels, child in ((node.a_labels, node.a), (node.b_labels, node.b)):
            for lb, n in zip(labels, up[id(child)], strict=True):
                if n is not None:
                    below.setdefault(lb, n)
        for label in (*node.a_labels, *node.b_labels):
            if label not in by_label:
                by_label[label] = below.get(label) or fresh()
        return [
            (node.a, tuple(by_label[lb] for lb in node.a_labels)),
            (node.b, tuple(by_label[lb] for lb in node.b_labels)),
        ]
    if node.kind == "call":
        dims = node.arg_dims or [(-1,) * c.ndim for c in node.children]
        return [
            (c, tuple(mine[d] if d >= 0 else fresh() for d in ds))
            for c, ds in zip(node.children, dims, strict=True)
        ]
    if node.kind == "reshape":
        kind, d, spec = node.step
        if kind == "split":  # the child's dim is the split dims together
            return [(node.arg, mine[:d] + ("*".join(mine[d : d + len(spec)]),) + mine[d + 1 :])]
        rest = iter(mine[:spec] + mine[spec + 1 :])
        return [(node.arg, tuple(fresh() if k in d else next(rest) for k in range(node.arg.ndim)))]
    return [(c, mine) for c in node.children]


def inputs(root: ex.Node, names: tuple[str, ...] | None) -> Inputs:
    """Number and describe the parameters of ``root`` (the tensor's axis ``names``; None:
    the names an op remembered, else positions)."""
    dims = dim_names(root, names)
    labels: dict = {}
    infos = []
    storage: dict = {}
    counts = {"leaf": 0, "const": 0, "pad": 0, "chunked": 0}
    letters = {"leaf": "t", "const": "c", "pad": "p", "chunked": "z"}
    for node in ex.walk(root):
        if node.kind not in counts:
            continue
        label = f"{letters[node.kind]}{counts[node.kind]}"
        counts[node.kind] += 1
        labels[id(node)] = label
        if node.kind == "chunked":
            infos.append(
                InputInfo(
                    label,
                    "chunked",
                    str(node.dtype),
                    "",
                    (chunks_text(dims[id(node)], node.chunks),),
                )
            )
        elif node.kind == "leaf":
            infos.append(_leaf_info(node, label, dims[id(node)], storage))
        elif node.kind == "const":
            infos.append(
                InputInfo(label, "constant", str(node.dtype), "", (repr(node.value.item()),))
            )
        else:
            infos.append(
                InputInfo(label, "pad value", str(node.dtype), "", (repr(node.value.item()),))
            )
    return Inputs(labels, dims, tuple(infos))


def _leaf_info(leaf: ex.Leaf, label: str, names: tuple, storage: dict) -> InputInfo:
    view = leaf.view
    kept, spread = [], []
    for name, n, s in zip(names, view.shape, view.strides, strict=True):
        (spread if s == 0 and n > 1 else kept).append((name, n))
    notes = []
    if spread:
        notes.append("broadcast over " + ", ".join(n for n, _ in spread))
    if view.blocks is not None:
        notes += [
            f"{name} in blocks of {b.size}"
            for name, b in zip(names, view.blocks, strict=True)
            if b is not None
        ]
    first = storage.setdefault(id(leaf.data), label)
    if first != label:
        notes.append(f"same storage as {first}")
    device = device_of(leaf.data)
    if not device.is_cpu:
        notes.append(f"on {device}")
    return InputInfo(label, "tensor", str(leaf.dtype), fmt_axes(kept), tuple(notes))


def chunks_text(names, chunks) -> str:
    """``chunks N: 4 of 2, C: 1 of 6`` (how many chunks along each axis, and their size)."""
    parts = []
    for d, c in zip(names, chunks, strict=True):
        size = f"{c[0]}" if len(set(c)) == 1 else f"{max(c)} (last {c[-1]})"
        if len(set(c[:-1])) > 1:
            size = "uneven " + "/".join(map(str, c))
        parts.append(f"{d}: {len(c)} chunk{'s' if len(c) != 1 else ''} of {size}")
    return "chunks " + ", ".join(parts)


# --- formula --------------------------------------------------------------------------------


def _over(names) -> str:
    return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"


# Python's operator precedence, so the formula reads like the code that built it.
_PREC = {"|": 2, "^": 3, "&": 4, "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6, "**": 8}
_COMPARE, _UNARY, _ATOM = 1, 7, 9


def _map_formula(n, go, inp, wrap) -> tuple[str, int]:
    info = OPS[n.op]
    if info.symbol and info.arity == 2:
        p = _PREC.get(info.symbol, _COMPARE)
        left, right = go(n.args[0]), go(n.args[1])
        # ** groups to the right, comparisons chain: both need parens where + does not
        left_need = left[1] <= p if p in (_PREC["**"], _COMPARE) else left[1] < p
        right_need = right[1] < p if p == _PREC["**"] else right[1] <= p
        return f"{wrap(left, left_need)} {info.symbol} {wrap(right, right_need)}", p
    if info.symbol and info.arity == 1:
        arg = go(n.args[0])
        return f"{info.symbol}{wrap(arg, arg[1] < _UNARY)}", _UNARY
    return f"{n.op}({', '.join(go(a)[0] for a in n.args)})", _ATOM


def _const_formula(n) -> tuple[str, int]:
    text = repr(n.value.item())
    return text, _UNARY if text.startswith("-") else _ATOM


# Per node kind: (node, go, inputs, wrap) -> (text, precedence of its outermost operator).
# Kinds _FORMULA and _NODE_TEXT have no entry for, and why (tests/test_kinds_coverage.py).
NO_RULE: dict = {}

_FORMULA = {
    "leaf": lambda n, go, inp, wrap: (inp.labels[id(n)], _ATOM),
    "chunked": lambda n, go, inp, wrap: (inp.labels[id(n)], _ATOM),
    "const": lambda n, go, inp, wrap: _const_formula(n),
    "map": _map_formula,
    "cast": lambda n, go, inp, wrap: (f"{n.dtype}({go(n.arg)[0]})", _ATOM),
    "reduce": lambda n, go, inp, wrap: (
        f"{n.op}({go(n.arg)[0]}, over={_over([inp.dims[id(n.arg)][d] for d in n.axes])})",
        _ATOM,
    ),
    "remap": lambda n, go, inp, wrap: (f"{remap_kind(n, inp)}({go(n.arg)[0]})", _ATOM),
    "pad": lambda n, go, inp, wrap: (
        f"pad({go(n.arg)[0]}, {inp.dims[id(n)][n.dim]}=({n.before}, {n.after}), "
        f"value={inp.labels[id(n)]})",
        _ATOM,
    ),
    "concat": lambda n, go, inp, wrap: (
        "concat(" + ", ".join(go(a)[0] for a in n.args) + f", along={inp.dims[id(n)][n.dim]})",
        _ATOM,
    ),
    "dot": lambda n, go, inp, wrap: (
        f"dot({go(n.a)[0]}, {go(n.b)[0]}, over={_over(_contracted(n, inp))})",
        _ATOM,
    ),
    "call": lambda n, go, inp, wrap: (f"{n.name}({', '.join(go(a)[0] for a in n.args)})", _ATOM),
    "reshape": lambda n, go, inp, wrap: (f"{_reshape_text(n, inp)}({go(n.arg)[0]})", _ATOM),
}


def _reshape_text(n, inp: Inputs) -> str:
    """``split[C->Co ci]`` or ``merge[H W->S]`` in the dims' names."""
    kind, d, spec = n.step
    mine, theirs = inp.dims[id(n)], inp.dims[id(n.arg)]
    if kind == "split":
        return f"split[{theirs[d]}->{' '.join(mine[d : d + len(spec)])}]"
    return f"merge[{' '.join(theirs[k] for k in d)}->{mine[spec]}]"


def formula(root: ex.Node, inp: Inputs, limit: int = 100) -> str:
    """A one-line formula: ``sigmoid(t0 * t1 - 1.0)``, ``sum(exp(t0), over=r0)``."""

    def wrap(pair: tuple[str, int], need: bool) -> str:
        return f"({pair[0]})" if need else pair[0]

    # Once per node, children first (no recursion: a long program is deep), each text cut
    # past ``limit``: only the first ``limit`` characters of the whole are shown, and a
    # child's text sits after its parent's head, so cutting it changes nothing shown; a
    # shared subexpression costs its cut text once, not its unfolded tree per use.
    done: dict[int, tuple[str, int]] = {}

    def go(n: ex.Node) -> tuple[str, int]:
        return done[id(n)]

    for n in ex.walk(root):
        text, prec = _FORMULA[n.kind](n, go, inp, wrap)
        done[id(n)] = (text[: limit + 1], prec)
    text = done[id(root)][0]
    return text if len(text) <= limit else cut(text, limit)


def cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters at a word boundary, ending in `` ...``."""
    if len(text) <= limit:
        return text
    head = text[: limit - 4]
    at = max(head.rfind(c) for c in " ,(")
    if at > limit // 2:
        head = head[: at + (head[at] == "(")]
    return head.rstrip(" ,") + " ..."


def _contracted(n: ex.Dot, inp: Inputs) -> list[str]:
    a = inp.dims[id(n.a)]
    return [a[k] for k, lb in enumerate(n.a_labels) if lb not in n.out_labels]


def remap_kind(n: ex.Remap, inp: Inputs) -> str:
    """What an index remap does, in words: ``transpose``, ``slice``, ``broadcast[N]``..."""
    mine = inp.dims[id(n)]
    used = [s for s, _, _ in n.maps if s >= 0]
    words = []
    if any(s < 0 for s, _, _ in n.maps):
        words.append("index")
    if any(
        s >= 0 and (start != 0 or step != 1 or n.shape[s] != n.arg.shape[k])
        for k, (s, start, step) in enumerate(n.maps)
    ):
        words.append("slice")
    if used != sorted(used):
        words.append("transpose")
    spread = [mine[d] for d in range(n.ndim) if d not in used and n.shape[d] > 1]
    if spread:
        words.append("broadcast[" + " ".join(spread) + "]")
    return "+".join(words) or "view"


# --- tree -------------------------------------------------------------------------------------


# Per node kind: (node, inputs) -> its line in the tree.
_NODE_TEXT = {
    "leaf": lambda n, inp: inp.labels[id(n)],
    "chunked": lambda n, inp: f"{inp.labels[id(n)]} (chunked)",
    "const": lambda n, inp: f"{n.value.item()!r} ({n.dtype})",
    "map": lambda n, inp: f"{n.op} ({OPS[n.op].symbol})" if OPS[n.op].symbol else n.op,
    "cast": lambda n, inp: f"astype {n.dtype}",
    "reduce": lambda n, inp: f"{n.op} over {_over([inp.dims[id(n.arg)][d] for d in n.axes])}",
    "remap": remap_kind,
    "pad": lambda n, inp: (
        f"pad {inp.dims[id(n)][n.dim]} by ({n.before}, {n.after}) with {inp.labels[id(n)]}"
    ),
    "concat": lambda n, inp: f"concat along {inp.dims[id(n)][n.dim]}",
    "dot": lambda n, inp: f"dot over {_over(_contracted(n, inp))}",
    "call": lambda n, inp: f"{n.name} (numpy)",
    "reshape": _reshape_text,
}


def tree_lines(root: ex.Node, inp: Inputs, max_lines: int = 40) -> list[tuple[str, str, str]]:
    """(branch prefix, node text, ``dtype (dims)``) per line, root first.

    A subexpression used twice is drawn once and then referred to by its ``#k`` mark.
    """
    shared = _shared(root)
    marks: dict = {}
    lines: list = []

    def go(n: ex.Node, prefix: str, branch: str) -> None:
        if len(lines) >= max_lines:
            return
        if id(n) in marks:
            lines.append((prefix + branch, f"= {marks[id(n)]} (computed once)", ""))
            return
        text = _NODE_TEXT[n.kind](n, inp)
        if id(n) in shared and n.kind not in ("leaf", "const"):
            marks[id(n)] = f"#{len(marks) + 1}"
            text = f"{marks[id(n)]} {text}"
        dims = ", ".join(f"{d}={k}" for d, k in zip(inp.dims[id(n)], n.shape, strict=True))
        lines.append((prefix + branch, text, f"{n.dtype} ({dims})"))
        kids = n.children
        inner = "" if not branch else prefix + ("   " if branch == "└─ " else "│  ")
        for k, c in enumerate(kids):
            go(c, inner, "└─ " if k == len(kids) - 1 else "├─ ")

    go(root, "", "")
    if len(lines) >= max_lines:
        lines.append(("", f"... ({len(ex.walk(root))} nodes in all)", ""))
    return lines


def _shared(root: ex.Node) -> set[int]:
    seen: set[int] = set()
    twice: set[int] = set()
    stack = [root]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            twice.add(id(n))
            continue
        seen.add(id(n))
        stack.extend(n.children)
    return twice


# --- cost -------------------------------------------------------------------------------------


def work(root: ex.Node) -> int:
    """Elements read or computed to evaluate ``root``: decides whether a preview is cheap."""
    total = 0
    for n in ex.walk(root):
        if n.kind == "reduce":
            total += int(np.prod(n.arg.shape, dtype=np.float64))
        elif n.kind == "dot":
            lengths = dict(zip(n.a_labels, n.a.shape, strict=True))
            lengths.update(zip(n.b_labels, n.b.shape, strict=True))
            total += int(np.prod(list(lengths.values()), dtype=np.float64))
        elif n.kind != "const":
            total += int(np.prod(n.shape, dtype=np.float64))
    return total
