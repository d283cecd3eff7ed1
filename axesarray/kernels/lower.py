"""Lowering a kernel tree plus its loop nest to arguments and address arithmetic.

Owns the kernel's signature: which arrays, offsets, strides, guard bounds and scalars it
takes, in what order, and how each operand's address is written in terms of the loop
indices. Shapes, strides, offsets and scalars are run-time arguments; only the structure,
dtypes, loop rank, stride *classes* (0, 1, other) and block sizes shape the source, so one
compile serves every size. Shared by the CPU and CUDA templates.
"""

from __future__ import annotations

import numpy as np

from .ir import KConst, KLeaf, kernel_nodes
from .loops import LoopNest
from .scalar import type_name

__all__ = ["Lowered"]

_F16 = np.dtype(np.float16)


class Lowered:
    """Everything the templates need: operands, argument names/recipe, address terms.

    ``recipe`` lists, per argument, ``("array", k)`` for operand k's storage, ``("scalar",
    node)`` for a run-time scalar, or ``("int", value)`` for a plan-time integer.
    """

    def __init__(self, out: KLeaf, tree, nest: LoopNest, extra: tuple = (), alias=frozenset()):
        self.out = out
        self.tree = tree
        self.nest = nest
        self.extra = extra  # more (output, tree) pairs of a multi-output map kernel
        nodes = kernel_nodes(tree)
        for _, t in extra:
            nodes += [n for n in kernel_nodes(t) if all(n is not m for m in nodes)]
        self.reduce = next((n for n in nodes if n.kind == "reduce"), None)
        outs = [out] + [o for o, _ in extra]
        leaves = [n for n in nodes if n.kind == "leaf"]
        # A leaf reading the output in place (its storage and view: a BLAS result the kernel
        # rewrites; ``alias``: the parameters that are the destination's storage in this
        # variant, ``m[...] = b * m + g``) is the output operand itself. Two arguments over
        # the same memory would fail LLVM's runtime overlap check and run the scalar loop.
        # (The runner takes an in-place variant only when every leaf of those parameters
        # reads the output's own elements: ``engine.alias.overlaps`` is false.)
        inplace = {
            id(n)
            for n in leaves
            if n.view == out.view
            and (n.src == out.src or (n.src[0] == "param" and n.src[1] in alias))
        }
        self.operands: list[KLeaf] = outs + [n for n in leaves if id(n) not in inplace]
        self.index_of = {id(op): k for k, op in enumerate(self.operands)}
        self.index_of.update((i, 0) for i in inplace)
        self.names: list[str] = []
        self.recipe: list[tuple] = []
        self.inlined: dict = {}  # reset by each template (ops.Code.inline)
        self._scalars: dict = {}
        self.terms: list[list[str | None]] = []  # [operand][loop dim] -> source or None
        self.dim_of: dict[int, int] = {}  # index dim -> loop dim (for guards)
        for g, group in enumerate(nest.groups):
            for d in group:
                self.dim_of[d] = g
        for k, op in enumerate(self.operands):
            self._add_operand(k, op)
        for g, n in enumerate(nest.lengths):
            self._arg(f"n{g}", ("int", n))
        for node in nodes:
            if node.kind == "const":
                self.scalar(node)
            elif node.kind == "pad":
                self.scalar(("lo", node))
                self.scalar(("hi", node))
                self.scalar(node.value)
            elif node.kind == "concat":
                for j in range(1, len(node.parts)):
                    self.scalar(("bound", node, j))

    # --- arguments ---------------------------------------------------------------------------

    def _arg(self, name: str, source: tuple) -> str:
        self.names.append(name)
        self.recipe.append(source)
        return name

    def scalar(self, key) -> str:
        """Argument name of a run-time scalar (a KConst or a guard bound); adds it once."""
        if isinstance(key, KConst) and key.src[0] == "lit":
            # A literal baked into the source (e.g. the 1 of a reciprocal).
            return f"{type_name(key.dtype)}({key.src[1]!r})"
        ident = id(key) if isinstance(key, KConst) else (key[0], id(key[1])) + tuple(key[2:])
        if ident in self._scalars:
            return self._scalars[ident]
        j = len(self._scalars)
        if isinstance(key, KConst):
            name = self._arg(f"c{j}", ("scalar", key))
        elif key[0] == "lo":
            name = self._arg(f"g{j}", ("int", key[1].lo))
        elif key[0] == "hi":
            name = self._arg(f"g{j}", ("int", key[1].hi))
        else:
            name = self._arg(f"g{j}", ("int", key[1].bounds[key[2]]))
        self._scalars[ident] = name
        return name

    def _add_operand(self, k: int, op: KLeaf) -> None:
        self._arg(f"A{k}", ("array", k))
        self._arg(f"o{k}", ("int", op.view.offset))
        view = op.view
        ndim = view.ndim
        terms: list[str | None] = []
        for g, group in enumerate(self.nest.groups):
            d = group[-1]
            if d >= ndim:
                terms.append(None)
                continue
            blk = view.blocks[d] if view.blocks is not None else None
            stride = view.strides[d]
            i = f"i{g}"
            if blk is not None:
                s = self._arg(f"s{k}_{g}", ("int", stride))
                ph = self._arg(f"ph{k}_{g}", ("int", blk.phase))
                st = self._arg(f"st{k}_{g}", ("int", blk.step))
                inner = self._arg(f"in{k}_{g}", ("int", blk.inner))
                j = f"({ph} + {st} * {i})"
                terms.append(f"({j} // {blk.size}) * {s} + ({j} % {blk.size}) * {inner}")
            elif stride == 0:
                terms.append(None)
            elif stride == 1:
                terms.append(i)
            else:
                s = self._arg(f"s{k}_{g}", ("int", stride))
                terms.append(f"{i} * {s}")
        self.terms.append(terms)

    # --- helpers for templates ----------------------------------------------------------------

    def is_f16(self, k: int) -> bool:
        return self.operands[k].dtype == _F16

    def is_bf16(self, k: int) -> bool:
        return self.operands[k].dtype.kind == "V"

    def index(self, dim: int) -> str:
        """Loop index source of an index dim (guards are pinned, so it has its own loop)."""
        return f"i{self.dim_of[dim]}" if dim in self.dim_of else "0"

    def address(self, k: int, base: str, dims: range) -> str:
        parts = [base] + [t for g in dims if (t := self.terms[k][g]) is not None]
        return " + ".join(parts)

    def uses_dims(self, k: int, dims) -> bool:
        return any(self.terms[k][g] is not None for g in dims)
