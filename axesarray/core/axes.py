"""Axes: ``Axis``, ``Axes``, parsing ``"N C H W"`` and the broadcasting rule.

Owns the only place where axis names are matched. Imports ``errors`` and ``options``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence

import attrs

from ..errors import AxesError, fmt_axes, message
from ..options import get_option

__all__ = [
    "UnboundAxis",
    "Axis",
    "Axes",
    "as_axes",
    "axes_for_shape",
    "spec_items",
    "broadcast_axes",
    "parse_names",
    "check_size",
    "MAX_SIZE",
]

MAX_SIZE = (1 << 63) - 1  # element counts and offsets are int64 in every kernel


_INTERNED: dict = {}
_INTERN_MAX = 1 << 16  # past this many distinct axes, new ones are simply not shared


_MISSING = object()


@attrs.frozen(repr=False)
class UnboundAxis:
    """``Axis("N", None)``: an axis whose length a placeholder binds at each call of a
    function (a batch axis). Only ``ax.placeholder`` takes it.

    >>> Axis("N", None)
    Axis('N', None)
    """

    name: str

    def __repr__(self) -> str:
        return f"Axis({self.name!r}, None)"


@attrs.frozen(repr=False)
class Axis:
    """A named dimension: a name and a length. Equality compares both.

    >>> Axis("C", 64)
    Axis('C', 64)
    >>> Axis("C", 64) == Axis("C", 32)
    False
    """

    name: str
    length: int

    def __new__(cls, name=None, length=_MISSING):
        if length is None and type(name) is str:
            # Axis("N", None): a length bound per call, for ax.placeholder only.
            return UnboundAxis(name)
        # Equal axes are one object (interned), so comparing two tensors' axes is an
        # identity test per axis instead of a Python-level __eq__ call: that comparison
        # runs for every binary op. __init__ then runs again on the shared object, so only
        # exact str/int arguments (valid, and re-setting identical values) may find it:
        # Axis("N", 8.0) hashes like Axis("N", 8) but must be refused, not shared.
        # Pickling calls __new__ without arguments.
        if type(name) is str and type(length) is int:
            hit = _INTERNED.get((name, length))
            if hit is not None:
                return hit
        return object.__new__(cls)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise AxesError(
                message(
                    "Axis",
                    "an axis name must be a Python identifier",
                    f"got {self.name!r}",
                    "Use names such as 'N', 'C', 'height'",
                )
            )
        try:
            length = operator.index(self.length)
        except TypeError:
            length = -1
        if length < 0 or isinstance(self.length, bool):
            raise AxesError(
                message(
                    "Axis",
                    f"the length of axis {self.name!r} must be a non-negative integer",
                    f"got {self.length!r}",
                )
            )
        if length > MAX_SIZE:
            raise _too_large("Axis", [(self.name, length)])
        object.__setattr__(self, "length", int(length))
        if len(_INTERNED) < _INTERN_MAX:
            _INTERNED.setdefault((self.name, self.length), self)

    @classmethod
    def _known(cls, name: str, length: int) -> Axis:
        """``Axis(name, length)`` for a name already checked and an int length: the
        interned axis when there is one, without running the checks again."""
        hit = _INTERNED.get((name, length))
        return hit if hit is not None else cls(name, length)

    def __repr__(self) -> str:
        return f"Axis({self.name!r}, {self.length})"

    def __str__(self) -> str:
        return f"{self.name}={self.length}"

    def resize(self, length: int) -> Axis:
        """Return an axis with the same name and another length.

        >>> Axis("C", 3).resize(8)
        Axis('C', 8)
        """
        return Axis(self.name, length)


def parse_names(spec: str | Iterable, op: str = "axes") -> tuple[str, ...]:
    """Parse ``"N C H W"`` (spaces or commas) or a sequence of names/Axis into names.

    >>> parse_names("N C, H W")
    ('N', 'C', 'H', 'W')
    """
    if type(spec) is str:  # a string parsed before: its names (it passed the checks)
        hit = _PARSED.get(spec)
        if hit is not None:
            return hit
    if isinstance(spec, str):
        names = tuple(spec.replace(",", " ").split())
    elif isinstance(spec, Axis):
        names = (spec.name,)
    else:
        try:
            names = tuple(a.name if isinstance(a, Axis) else a for a in spec)
        except TypeError:
            raise TypeError(
                message(
                    op,
                    "axis names must be a string or a sequence of names",
                    f"got {spec!r}",
                    "Name them, e.g. 'C' or ('H', 'W')",
                )
            ) from None
    for n in names:
        if not isinstance(n, str) or not (n.isidentifier() or n == "..."):
            raise AxesError(message(op, "an axis name must be a string identifier", f"got {n!r}"))
    seen = set()
    for n in names:
        if n in seen and n != "...":
            raise AxesError(
                message(op, f"axis name {n!r} appears twice", f"names: {' '.join(names)}")
            )
        seen.add(n)
    if type(spec) is str:
        if len(_PARSED) >= 1024:
            _PARSED.clear()
        _PARSED[spec] = names
    return names


_PARSED: dict = {}  # ``parse_names``' answers for strings (a program names axes per call)


class Axes(tuple):
    """An ordered tuple of ``Axis`` with unique names; a frozen value type.

    >>> a = Axes([Axis("N", 2), Axis("C", 3)])
    >>> a.names, a.shape, a["C"]
    (('N', 'C'), (2, 3), Axis('C', 3))
    >>> str(a)
    'N=2, C=3'
    """

    __slots__ = ()

    def __new__(cls, axes: Iterable[Axis] = ()) -> Axes:
        items = tuple(axes)
        names = set()
        bits = 0  # the OR of the lengths: its bit length bounds each length's
        for a in items:
            if not isinstance(a, Axis):
                hint = "Use ax.Axis(name, length)"
                if isinstance(a, UnboundAxis):
                    hint = "A length of None is bound per call: only ax.placeholder takes it"
                raise AxesError(message("Axes", "every item must be an Axis", f"got {a!r}", hint))
            if a.name in names:
                raise AxesError(
                    message(
                        "Axes",
                        f"axis name {a.name!r} appears twice",
                        fmt_axes(items),
                        "Rename one axis",
                    )
                )
            names.add(a.name)
            bits |= a.length
        # Four lengths under 2**15 multiply to under 2**60: only larger axes pay for a product.
        if (bits >> 15 or len(items) > 4) and math.prod([a.length for a in items]) > MAX_SIZE:
            raise _too_large("Axes", items)
        return tuple.__new__(cls, items)

    @classmethod
    def _trusted(cls, items: tuple) -> Axes:
        """Build without validation; callers guarantee unique Axis items."""
        return tuple.__new__(cls, items)

    @property
    def names(self) -> tuple[str, ...]:
        """The names in order.

        >>> Axes([Axis("N", 2), Axis("C", 3)]).names
        ('N', 'C')
        """
        return tuple(a.name for a in self)

    @property
    def shape(self) -> tuple[int, ...]:
        """The lengths in order.

        >>> Axes([Axis("N", 2), Axis("C", 3)]).shape
        (2, 3)
        """
        return tuple(a.length for a in self)

    @property
    def size(self) -> int:
        """The product of the lengths (1 for no axes).

        >>> Axes([Axis("N", 2), Axis("C", 3)]).size
        6
        """
        n = 1
        for a in self:
            n *= a.length
        return n

    def index(self, name: str | Axis, op: str = "axes") -> int:  # type: ignore[override]
        """Position of an axis given by name (or Axis, whose length must match).

        >>> Axes([Axis("N", 2), Axis("C", 3)]).index("C")
        1
        """
        key = name.name if isinstance(name, Axis) else name
        for i, a in enumerate(self):
            if a.name == key:
                if isinstance(name, Axis) and name.length != a.length:
                    raise AxesError(
                        message(
                            op,
                            f"axis {key!r} has length {a.length}, not {name.length}",
                            f"axes: {fmt_axes(self)}",
                            "Pass the name only, or an Axis of the right length",
                        )
                    )
                return i
        raise AxesError(
            message(
                op,
                f"unknown axis {key!r}",
                f"axes: {fmt_axes(self)}",
                "Use one of the names: " + (" ".join(self.names) or "(none)"),
            )
        )

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self.index(key))
        if isinstance(key, slice):
            return Axes._trusted(tuple.__getitem__(self, key))
        return tuple.__getitem__(self, key)

    def __contains__(self, key) -> bool:  # type: ignore[override]
        if isinstance(key, str):
            return any(a.name == key for a in self)
        return tuple.__contains__(self, key)

    def __add__(self, other) -> Axes:  # type: ignore[override]
        return Axes(tuple(self) + tuple(other))

    def __repr__(self) -> str:
        return "Axes(" + ", ".join(repr(a) for a in self) + ")"

    def __str__(self) -> str:
        return fmt_axes(self)

    def __reduce__(self):
        return (Axes, (tuple(self),))


def _too_large(op: str, axes) -> AxesError:
    size = 1
    for a in axes:
        size *= a.length if hasattr(a, "length") else a[1]
    return AxesError(
        message(
            op,
            f"the axes hold {size:,} elements, more than an int64 can count",
            fmt_axes(axes),
            f"Keep the product of the lengths at most {MAX_SIZE:,}",
        )
    )


def check_size(axes: Sequence[Axis], op: str = "axes") -> None:
    """Refuse axes whose element count does not fit an int64 (with an ``AxesError``).

    >>> try:
    ...     check_size([Axis("A", 1 << 32), Axis("B", 1 << 32)], "broadcast_to")
    ... except AxesError as e:
    ...     print(str(e)[:48])
    broadcast_to: the axes hold 18,446,744,073,709,5
    """
    if math.prod([a.length for a in axes]) > MAX_SIZE:
        raise _too_large(op, axes)


def as_axes(spec, op: str = "axes") -> Axes:
    """Turn an Axes, an iterable of Axis, or ``Axis`` into ``Axes``.

    Names without lengths are not accepted here (they need data to size them).
    """
    if isinstance(spec, Axes):
        return spec
    if isinstance(spec, Axis):
        return Axes._trusted((spec,))
    if isinstance(spec, str):
        raise AxesError(
            message(
                op, "axis names alone do not give lengths", f"got {spec!r}", "Pass Axis objects"
            )
        )
    try:
        items = tuple(spec)
    except TypeError:
        raise TypeError(
            message(
                op,
                "axes must be an Axis or a sequence of Axis objects",
                f"got {spec!r}",
                "Use e.g. (ax.Axis('N', 8), ax.Axis('C', 3))",
            )
        ) from None
    for a in items:
        if not isinstance(a, Axis):
            hint = "Use ax.Axis(name, length)"
            if isinstance(a, UnboundAxis):
                hint = "A length of None is bound per call: only ax.placeholder takes it"
            raise AxesError(message(op, "expected Axis objects", f"got {a!r}", hint))
    try:
        return Axes(items)
    except AxesError as e:
        raise AxesError(str(e).replace("Axes:", f"{op}:", 1)) from None


def _length_mismatch(op: str, a: Sequence[Axis], b: Sequence[Axis], what=("left", "right")):
    lengths_b = {x.name: x.length for x in b}
    for x in a:
        lb = lengths_b.get(x.name)
        if lb is not None and lb != x.length:
            return AxesError(
                message(
                    op,
                    f"axis {x.name!r} has length {x.length} in the {what[0]} operand "
                    f"and {lb} in the {what[1]}",
                    f"{what[0]}: {fmt_axes(a)}; {what[1]}: {fmt_axes(b)}",
                    "Slice or rename one operand",
                )
            )
    return None


def broadcast_axes(a, b, op: str = "broadcast", mode: str | None = None) -> Axes:
    """The axes of ``a (op) b`` under the broadcasting rule.

    Operands are matched by name. If one operand's axes contain the other's, the result has
    the larger operand's order, whichever side it is on; with equal name sets, the left's.
    Otherwise the left's axes come first, followed by the right's new ones, unless the
    ``broadcast="subset"`` option (or ``mode``) makes that an error. Accepts tensors or axes.

    >>> import axesarray as ax
    >>> N, C, H = ax.Axis("N", 2), ax.Axis("C", 3), ax.Axis("H", 4)
    >>> ax.broadcast_axes([C], [N, C]).names
    ('N', 'C')
    >>> ax.broadcast_axes([N, C], [H]).names
    ('N', 'C', 'H')
    """
    a = a.axes if hasattr(a, "axes") else as_axes(a, op)
    b = b.axes if hasattr(b, "axes") else as_axes(b, op)
    if a == b:
        return a
    err = _length_mismatch(op, a, b)
    if err is not None:
        raise err
    names_a = {x.name for x in a}
    names_b = {x.name for x in b}
    if names_b <= names_a:
        return a
    if names_a <= names_b:
        return b
    mode = mode or get_option("broadcast")
    if mode == "subset":
        raise AxesError(
            message(
                op,
                "neither operand's axes contain the other's",
                f"left: {fmt_axes(a)}; right: {fmt_axes(b)}",
                "Strict broadcasting (broadcast='subset') is on: call broadcast_to "
                "on one operand first",
            )
        )
    union = tuple(a) + tuple(x for x in b if x.name not in names_a)
    check_size(union, op)
    return Axes._trusted(union)


def spec_items(axes, op: str = "tensor") -> list:
    """The items (names or Axis) of an axes spec in order: a string of names, an Axis, a
    sequence of names and Axis objects, or a dict name -> length. A set is refused: it
    has no order, so its names would land on dimensions at random.

    >>> spec_items({"N": 2, "C": 3})
    [Axis('N', 2), Axis('C', 3)]
    """
    if isinstance(axes, str):
        return list(parse_names(axes, op))
    if isinstance(axes, Axis):
        return [axes]
    if isinstance(axes, (set, frozenset)):
        raise TypeError(
            message(
                op,
                "axes given as a set have no order",
                f"got {axes!r}",
                "Give them in the data's order: a string 'N C' or a list ['N', 'C']",
            )
        )
    if isinstance(axes, Mapping):  # name -> length: the lengths are checked, not dropped
        items = []
        for name, length in axes.items():
            try:
                items.append(Axis(name, length))
            except AxesError as err:
                raise AxesError(str(err).replace("Axis:", f"{op}:", 1)) from None
        return items
    try:
        return list(axes)
    except TypeError:
        raise TypeError(
            message(
                op,
                "axes must be names ('N C H W') or a sequence of names or Axis objects",
                f"got {axes!r}",
                "Use e.g. ax.tensor(array, 'N C')",
            )
        ) from None


def axes_for_shape(axes, shape: tuple, op: str = "tensor", what: str = "data") -> Axes:
    """Match an axes spec (Axes, Axis list, names, mixed) against the shape of ``what``
    (the data of ``ax.tensor``, a dask array...): names take their lengths from the shape.

    >>> axes_for_shape("N C", (2, 3)).names
    ('N', 'C')
    """
    items = spec_items(axes, op)
    if len(items) != len(shape):
        raise AxesError(
            message(
                op,
                f"the {what} has {len(shape)} dimensions but {len(items)} axes were given",
                f"{what} shape {shape}; axes {' '.join(str(a) for a in items) or '()'}",
                f"Give one axis per dimension of the {what}",
            )
        )
    out = []
    for item, n in zip(items, shape, strict=True):
        if isinstance(item, Axis):
            if item.length != n:
                raise AxesError(
                    message(
                        op,
                        f"axis {item.name!r} has length {item.length} but the {what} has {n}",
                        f"{what} shape {shape}; axes {', '.join(str(a) for a in items)}",
                        f"Pass names only to take lengths from the {what}",
                    )
                )
            out.append(item)
        else:
            out.append(Axis(item, int(n)))
    return Axes(out)
