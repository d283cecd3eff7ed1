"""Layouts: the ``Layout`` value type, the standard names, role mapping and physical dims.

A layout is a physical order of axes plus optional blocks; it is an explicit tag on a
tensor, never inferred from strides (C=1 or H=W=1 make strides ambiguous). Standard names
are built from the role letters N, C, H, W: ``"NCHW"``, ``"NHWC"``, ``"NCHW4"`` (any block
``"NCHWx"``), ``"CHWN4"``; any permutation of the four letters is accepted, and a trailing
number blocks C. Keyword roles map the letters to a tensor's own axis names.

A tensor carries a *bound* layout: one whose names are the tensor's axis names. Binding
only renames; ``roles`` remembers the letters so ``str`` still reads ``"NHWC"``.

Layouts as views of storage are ``tensors.layout_methods``; the functions users call
(``to_layout``, ``physical``, ``repack``...) are in ``layout_ops``. This module only
imports ``axes`` and ``errors``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from ..core.axes import Axes, Axis
from ..errors import LayoutError, fmt_axes, message

__all__ = [
    "Layout",
    "PhysDim",
    "STANDARD",
    "parse",
    "bind",
    "role_pairs",
    "physical_dims",
    "isel_layout",
]

# The names DESIGN §4 lists; NCHWx is open-ended (any x >= 2), so it is matched by pattern.
STANDARD = ("NCHW", "NHWC", "NCHW4", "NCHW32", "NCHW64", "CHWN4")
_ROLES = "NCHW"
_NAME = re.compile(r"^([A-Za-z]+?)(\d+)?$")


def _order(value) -> tuple[str, ...]:
    if isinstance(value, str):
        names = tuple(value.replace(",", " ").split())
        if len(names) == 1 and len(names[0]) > 1 and names[0].isupper():
            raise LayoutError(
                message(
                    "Layout",
                    f"order {value!r} is one word",
                    None,
                    "Separate axis names with spaces, Layout(order='C H W N'), "
                    f"or parse a standard name: Layout.parse({value!r})",
                )
            )
        return names
    return tuple(a.name if isinstance(a, Axis) else a for a in value)


def _blocks(value) -> tuple[tuple[str, int], ...]:
    items = value.items() if isinstance(value, Mapping) else (value or ())
    out = []
    for item in items:
        name, size = item
        out.append((name.name if isinstance(name, Axis) else name, size))
    return tuple(out)


def _roles(value) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, Mapping) else (value or ())
    return tuple(sorted(items))


@attrs.frozen(repr=False)
class Layout:
    """A physical order of axes plus blocks; block dims go innermost, in ``blocks`` order.

    ``Layout(order="C H W N", blocks={"C": 4})`` is CHWN4: physical shape
    ``(ceil(C/4), H, W, N, 4)``. Equality compares ``order`` and ``blocks`` only.
    ``roles`` (role letter -> axis name) only changes how the layout is printed, and
    ``partial`` marks the tag of a view that cuts through blocks (see ``physical``).

    >>> lay = Layout(order="C H W N", blocks={"C": 4})
    >>> str(lay), lay == Layout.parse("CHWN4")
    ('CHWN4', True)
    >>> str(Layout.parse("NHWC", N="batch", C="feat", H="y", W="x"))
    'NHWC'
    """

    order: tuple[str, ...] = attrs.field(converter=_order)
    blocks: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_blocks)
    roles: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_roles, eq=False)
    partial: bool = attrs.field(default=False, eq=False)

    def __attrs_post_init__(self) -> None:
        seen: set[str] = set()
        for n in self.order:
            if not isinstance(n, str) or not n.isidentifier():
                raise LayoutError(
                    message("Layout", "an axis name must be a string identifier", f"got {n!r}")
                )
            if n in seen:
                raise LayoutError(
                    message(
                        "Layout",
                        f"axis {n!r} appears twice in the order",
                        f"order: {' '.join(self.order)}",
                        "List each axis once",
                    )
                )
            seen.add(n)
        blocked: set[str] = set()
        for n, x in self.blocks:
            if n not in seen:
                raise LayoutError(
                    message(
                        "Layout",
                        f"block axis {n!r} is not in the order",
                        f"order: {' '.join(self.order)}; blocks: {self._blocks_text()}",
                        "Block one of the ordered axes",
                    )
                )
            if n in blocked:
                raise LayoutError(
                    message("Layout", f"axis {n!r} is blocked twice", self._blocks_text())
                )
            blocked.add(n)
            if isinstance(x, bool) or not isinstance(x, int) or x < 2:
                raise LayoutError(
                    message(
                        "Layout",
                        f"block size of {n!r} must be an integer >= 2",
                        f"got {x!r}",
                        "Use no block for an unblocked axis",
                    )
                )

    # --- construction ------------------------------------------------------------------

    @classmethod
    def parse(cls, spec, **roles) -> Layout:
        """A Layout from a name (``"NCHW4"``), an order string (``"N H W C"``) or a Layout.

        Keyword ``roles`` map role letters to axis names: ``N="batch"``.

        >>> Layout.parse("NCHW8").blocks
        (('C', 8),)
        """
        if isinstance(spec, Layout):
            lay = spec
        elif isinstance(spec, str):
            lay = _parse_name(spec)
        else:
            raise LayoutError(
                message(
                    "layout",
                    "expected a layout name or an ax.Layout",
                    f"got {type(spec).__name__} {spec!r}",
                    "Pass e.g. 'NCHW4' or ax.Layout(order='C H W N', blocks={'C': 4})",
                )
            )
        return lay.with_roles(**roles) if roles else lay

    def with_roles(self, **roles) -> Layout:
        """The same layout with role letters (or names) mapped to axis names.

        >>> Layout.parse("NCHW").with_roles(N="batch").order
        ('batch', 'C', 'H', 'W')
        """
        unknown = [r for r in roles if r not in self.order]
        if unknown:
            raise LayoutError(
                message(
                    "layout",
                    "roles name axes the layout does not have: " + ", ".join(map(repr, unknown)),
                    f"layout {self} orders {' '.join(self.order)}",
                    "Map only the layout's letters, e.g. N='batch'",
                )
            )
        for r, a in roles.items():
            if not isinstance(a, str) or not a.isidentifier():
                raise LayoutError(
                    message("layout", f"role {r!r} must map to an axis name", f"got {a!r}")
                )
        return self.renamed(roles)

    def renamed(self, mapping: Mapping[str, str]) -> Layout:
        """Rename axes; one-letter role names are remembered so ``str`` is unchanged.

        >>> lay = Layout.parse("NCHW4").renamed({"C": "feat"})
        >>> lay.order, str(lay)
        (('N', 'feat', 'H', 'W'), 'NCHW4')
        """
        new = [mapping.get(n, n) for n in self.order]
        if len(set(new)) != len(new):
            raise LayoutError(
                message(
                    "layout",
                    "two axes would get the same name",
                    f"{' '.join(self.order)} -> {' '.join(new)}",
                    "Give each role a different axis",
                )
            )
        letters = {a: r for r, a in self.roles}
        roles = {}
        for n in self.order:
            role = letters.get(n, n)
            target = mapping.get(n, n)
            if len(role) == 1 and role != target:
                roles[role] = target
        return Layout(
            new,
            tuple((mapping.get(n, n), x) for n, x in self.blocks),
            roles,
            self.partial,
        )

    # --- queries -----------------------------------------------------------------------

    def block(self, name: str) -> int | None:
        """Block size of axis ``name``, or None when it is not blocked.

        >>> Layout.parse("NCHW32").block("C"), Layout.parse("NCHW32").block("H")
        (32, None)
        """
        for n, x in self.blocks:
            if n == name:
                return x
        return None

    @property
    def ndim_physical(self) -> int:
        """Dims of the physical array: one per axis plus one per block.

        >>> Layout.parse("NCHW4").ndim_physical
        5
        """
        return len(self.order) + len(self.blocks)

    def _blocks_text(self) -> str:
        return ", ".join(f"{n}:{x}" for n, x in self.blocks) or "none"

    def __str__(self) -> str:
        letters = {a: r for r, a in self.roles}
        order = [letters.get(n, n) for n in self.order]
        blocks = [(letters.get(n, n), x) for n, x in self.blocks]
        if all(len(n) == 1 for n in order):
            text = "".join(order)
            if len(blocks) == 1 and blocks[0][0] == "C":
                return text + str(blocks[0][1])
            return text + "".join(f"{x}{n.lower()}" for n, x in blocks)
        text = " ".join(order)
        return text + (f" [{', '.join(f'{n}:{x}' for n, x in blocks)}]" if blocks else "")

    def __repr__(self) -> str:
        blocks = "{" + ", ".join(f"{n!r}: {x}" for n, x in self.blocks) + "}"
        extra = f", blocks={blocks}" if self.blocks else ""
        return f"Layout(order={' '.join(self.order)!r}{extra})"


def _parse_name(spec: str) -> Layout:
    text = spec.strip()
    if " " in text or "," in text:
        return Layout(order=text)
    m = _NAME.match(text)
    letters = m.group(1).upper() if m else ""
    if m and sorted(letters) == sorted(_ROLES):
        block = int(m.group(2)) if m.group(2) else None
        if block is not None and block < 2:
            raise LayoutError(
                message(
                    "layout",
                    f"block size in {spec!r} must be >= 2",
                    f"got {block}",
                    f"Use {letters} for no blocking",
                )
            )
        return Layout(tuple(letters), {"C": block} if block else {})
    hint = "Use NCHW, NHWC, NCHW4, NCHW32, NCHW64, NCHWx for any x (e.g. NCHW8), CHWN4"
    if text.upper().endswith("X"):
        hint = f"Write the block size instead of x, e.g. {text[:-1].upper()}8"
    raise LayoutError(message("layout", f"unknown layout {spec!r}", None, hint))


def parse(spec, **roles) -> Layout:
    """``Layout.parse`` as a function."""
    return Layout.parse(spec, **roles)


def bind(layout: Layout, axes: Axes, op: str = "to_layout") -> Layout:
    """Check that ``layout`` orders exactly ``axes`` (by name); returns it unpartialed."""
    names = set(axes.names)
    missing = [a for a in axes if a.name not in layout.order]
    extra = [n for n in layout.order if n not in names]
    if missing or extra:
        parts = []
        if extra:
            parts.append("the tensor has no " + ", ".join(map(repr, extra)))
        if missing:
            parts.append("the layout does not place " + ", ".join(repr(a.name) for a in missing))
        if extra and not missing:
            hint = (
                f"The layout orders {len(layout.order)} axes and the tensor has {len(axes)}: "
                "add the missing ones (expand_dims) or choose a layout without "
                + ", ".join(map(repr, extra))
            )
        elif role_pairs(layout, extra, [a.name for a in missing]) is not None:
            pairs = role_pairs(layout, extra, [a.name for a in missing])
            roles = ", ".join(f"{r}='{a}'" for r, a in pairs)
            # ax.zeros/ones/full/empty take the layout as a keyword after the axes.
            call = (
                f"ax.{op}(axes, layout='{layout}', {roles})"
                if op in ("zeros", "ones", "full", "empty")
                else f"{op}('{layout}', {roles})"
            )
            hint = f"Map roles to axis names with keywords (axes in N C H W order): {call}"
        else:
            hint = "Name every axis of the tensor once in the layout"
        raise LayoutError(
            message(op, "; ".join(parts), f"layout {layout}; axes: {fmt_axes(axes)}", hint)
        )
    return attrs.evolve(layout, partial=False) if layout.partial else layout


def role_pairs(layout: Layout, extra, missing) -> list[tuple[str, str]] | None:
    """The roles that bind ``layout`` to axes it does not place: its unmatched role
    letters ``extra`` in N, C, H, W order paired with the axis names ``missing`` in the
    tensor's order (axes named in N C H W order, the convention of every standard layout),
    plus the roles ``layout`` already has; None when that pairing cannot be made (the
    counts differ, or a name is not a role letter).

    >>> role_pairs(Layout.parse("CHWN4"), ["C", "H", "W", "N"], ["b", "f", "y", "x"])
    [('N', 'b'), ('C', 'f'), ('H', 'y'), ('W', 'x')]
    """
    if not extra or len(extra) != len(missing) or any(r not in _ROLES for r in extra):
        return None
    letters = sorted(extra, key=_ROLES.index)
    pairs = dict(layout.roles) | dict(zip(letters, missing, strict=True))
    return sorted(pairs.items(), key=lambda p: (_ROLES.find(p[0]) % 5, p[0]))


@attrs.frozen
class PhysDim:
    """One physical dimension: the logical axis it comes from and its role in a block.

    ``kind`` is ``"plain"`` (an unblocked axis), ``"outer"`` (the block number of a
    blocked axis, length ceil(L/x)) or ``"inner"`` (the position inside a block, length x).
    """

    axis: int
    kind: str
    length: int
    label: str
    block: int = 1


def physical_dims(layout: Layout, axes: Axes) -> tuple[PhysDim, ...]:
    """Physical dims of ``axes`` stored in ``layout`` (bound), outermost first.

    >>> from axesarray import Axis, Axes
    >>> ax4 = Axes([Axis("N", 2), Axis("C", 5), Axis("H", 3), Axis("W", 3)])
    >>> [d.length for d in physical_dims(Layout.parse("NCHW4"), ax4)]
    [2, 2, 3, 3, 4]
    """
    dims = []
    for n in layout.order:
        p = axes.index(n, "layout")
        length = axes[p].length
        x = layout.block(n)
        if x is None:
            dims.append(PhysDim(p, "plain", length, n))
        else:
            dims.append(PhysDim(p, "outer", -(-length // x), f"{n}//{x}", x))
    for n, x in layout.blocks:
        dims.append(PhysDim(axes.index(n, "layout"), "inner", x, f"{n}%{x}", x))
    return tuple(dims)


def isel_layout(layout: Layout, axes: Axes, indexers: Mapping) -> Layout:
    """The tag of ``t.isel(**indexers)``: the same physical order for the axes that remain.

    An integer drops its axis (and its block). A slice of a blocked axis that does not
    cover whole blocks (start not on a block boundary, a step other than 1, or an end
    inside a block that is not the last one) marks the tag ``partial``: the view is still
    stored blocked and every op works on it, but ``physical`` is refused.
    """
    partial = layout.partial
    dropped = set()
    for name, key in indexers.items():
        name = name.name if isinstance(name, Axis) else name
        if not isinstance(key, slice):
            dropped.add(name)
            continue
        x = layout.block(name)
        if x is None:
            continue
        length = axes[name].length
        start, stop, step = key.indices(length)
        n = len(range(start, stop, step))
        whole = n == 0 or (step == 1 and start % x == 0 and (n % x == 0 or start + n == length))
        partial = partial or not whole
    if not dropped and partial == layout.partial:
        return layout
    blocks = tuple((n, x) for n, x in layout.blocks if n not in dropped)
    roles = tuple((r, a) for r, a in layout.roles if a not in dropped)
    order = tuple(n for n in layout.order if n not in dropped)
    return Layout(order, blocks, roles, partial and bool(blocks))
