"""Algebraic rewrites of an expression DAG, run once per plan before planning.

Each rule looks at a node whose children are already rewritten and returns a cheaper
equivalent, or None. Rules may only look at structure and at constants whose value is
part of the key (``ops.SPECIAL_CONSTANTS``), so a cached plan is exact for every
expression with the same key. New constants a rule makes are special too: the planner
writes them as literals, they are not run-time parameters.

- ``1 / (1 + exp(-x))`` (either order of the sum) is ``sigmoid(x)``: the math library
  evaluates the same formula with an exp specialized for it;
- ``x ** 2``, ``** 0.5``, ``** -1``, ``** 1`` are square, sqrt, reciprocal and x, as
  numpy's ``ndarray.__pow__`` computes them (``fast_scalar_power``).
"""

from __future__ import annotations

from ..expr import Const, Map, Node, rebuild_dag

__all__ = ["rewrite", "RULES"]


def _is(node: Node, kind: str, op: str | None = None) -> bool:
    return node.kind == kind and (op is None or node.op == op)


def _special(node: Node) -> float | None:
    return node.special if node.kind == "const" else None


def sigmoid(node: Node, kids: tuple) -> Node | None:
    if node.op != "truediv" or node.dtype.kind != "f" or _special(kids[0]) != 1.0:
        return None
    den = kids[1]
    if not _is(den, "map", "add"):
        return None
    a, b = den.children
    e = b if _special(a) == 1.0 else a if _special(b) == 1.0 else None
    if e is None or not _is(e, "map", "exp") or not _is(e.children[0], "map", "neg"):
        return None
    x = e.children[0].children[0]
    return Map("sigmoid", (x,), node.dtype) if x.dtype == node.dtype else None


def fast_power(node: Node, kids: tuple) -> Node | None:
    if node.op != "pow":
        return None
    base, exponent = kids
    e, dtype = _special(exponent), node.dtype
    if e == 2.0:
        return Map("square", (base,), dtype)
    if dtype.kind != "f":
        return None
    if e == 0.5:
        return Map("sqrt", (base,), dtype)
    if e == -1.0:
        return Map("truediv", (Const(1, dtype, base.shape), base), dtype)
    if e == 1.0:
        return base
    return None


RULES = (sigmoid, fast_power)


def _apply(node: Node, kids: tuple) -> Node | None:
    if node.kind != "map":
        return None
    for rule in RULES:
        out = rule(node, kids)
        if out is not None:
            return out
    return None


def rewrite(root: Node) -> Node:
    """``root`` with every rule applied bottom-up (shared subtrees stay shared)."""
    return rebuild_dag(root, _apply)
