"""Loop nests: which loops a kernel runs, in what order, after dropping and merging dims.

Owns the numpy-nditer-style rules: drop length-1 dims, order the output dims by the output's
strides (outermost = largest), then merge adjacent dims whose strides allow it for *every*
operand (``stride[outer] == stride[inner] * length[inner]``). Reduce dims stay innermost
and are never merged with output dims. Positions and integers only.
"""

from __future__ import annotations

import attrs

__all__ = ["LoopNest", "build_loop_nest", "nditer_order"]


@attrs.frozen
class LoopNest:
    """Loop dims from outermost to innermost; each is a group of index dims (major first).

    >>> nest = build_loop_nest((2, 3, 4), 3, [(12, 4, 1), (12, 4, 1)])
    >>> nest.lengths, nest.groups
    ((24,), ((0, 1, 2),))
    """

    lengths: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]
    n_out: int  # the first n_out loop dims are output dims, the rest reduce dims

    @property
    def rank(self) -> int:
        return len(self.lengths)


def nditer_order(dims: list[int], operands: list[tuple[int, ...]]) -> list[int]:
    """Stable insertion sort: larger |stride| outside, decided by the first operand that
    has non-zero, different strides on both dims (numpy's nditer rule). A stride vector
    shorter than a dim means stride 0 there.

    >>> nditer_order([0, 1, 2], [(1, 12, 4)])
    [1, 2, 0]
    """

    def stride(op, d):
        return abs(op[d]) if d < len(op) else 0

    def outside(a: int, b: int) -> bool:
        for op in operands:
            sa, sb = stride(op, a), stride(op, b)
            if sa and sb and sa != sb:
                return sa > sb
        return False

    order: list[int] = []
    for d in dims:
        pos = len(order)
        while pos > 0 and outside(d, order[pos - 1]):
            pos -= 1
        order.insert(pos, d)
    return order


def build_loop_nest(
    shape: tuple[int, ...],
    n_out: int,
    operands: list[tuple[int, ...]],
    pinned: frozenset[int] = frozenset(),
    reduce_order: list[tuple[int, ...]] | None = None,
) -> LoopNest:
    """Plan the loops over index space ``shape`` (output dims first, then reduce dims).

    ``operands`` are stride vectors per index dim (shorter vectors mean stride 0 beyond);
    the first is the output, which decides the order of output dims. ``pinned`` dims
    (guards, blocked axes) are kept even at length 1 and never merged. Reduce dims are
    ordered by ``reduce_order`` (default: the operands after the output).
    """
    keep = [d for d, n in enumerate(shape) if n != 1 or d in pinned]
    out_dims = nditer_order([d for d in keep if d < n_out], operands)
    red_dims = nditer_order(
        [d for d in keep if d >= n_out], reduce_order or operands[1:] or operands
    )

    def merged(dims: list[int]) -> list[list[int]]:
        groups: list[list[int]] = []
        for d in dims:
            if groups and _can_merge(groups[-1], d, shape, operands, pinned):
                groups[-1].append(d)
            else:
                groups.append([d])
        return groups

    out_groups = merged(out_dims)
    red_groups = merged(red_dims)
    groups = tuple(tuple(g) for g in out_groups + red_groups)
    lengths = []
    for g in groups:
        n = 1
        for d in g:
            n *= shape[d]
        lengths.append(n)
    return LoopNest(tuple(lengths), groups, len(out_groups))


def _can_merge(group: list[int], d: int, shape, operands, pinned) -> bool:
    last = group[-1]
    if last in pinned or d in pinned:
        return False
    for op in operands:
        s_outer = op[last] if last < len(op) else 0
        s_inner = op[d] if d < len(op) else 0
        if s_outer != s_inner * shape[d]:
            return False
    return True
