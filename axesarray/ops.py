"""The closed table of elementwise operations.

Owns each op's arity, the numpy ufunc whose dtype rules (and reference results) it follows,
and whether it is "expensive" for the materialization rule. Engines translate op names;
``apply_map`` is the numpy meaning of each op (the oracle). Imports nothing from the package.
"""

from __future__ import annotations

import attrs
import numpy as np

__all__ = ["OpInfo", "OPS", "REDUCERS", "UNARY", "BINARY", "COMPARISONS", "apply_map"]


@attrs.frozen
class OpInfo:
    name: str
    arity: int
    ufunc: str  # numpy ufunc giving the dtype rule and the reference result
    symbol: str | None = None  # Python operator, for printing
    expensive: bool = False  # worth materializing rather than recomputing when shared


def _table(*rows: OpInfo) -> dict[str, OpInfo]:
    return {r.name: r for r in rows}


OPS = _table(
    # binary arithmetic
    OpInfo("add", 2, "add", "+"),
    OpInfo("sub", 2, "subtract", "-"),
    OpInfo("mul", 2, "multiply", "*"),
    OpInfo("truediv", 2, "true_divide", "/", True),
    OpInfo("floordiv", 2, "floor_divide", "//", True),
    OpInfo("mod", 2, "remainder", "%", True),
    OpInfo("pow", 2, "power", "**", True),
    OpInfo("maximum", 2, "maximum"),
    OpInfo("minimum", 2, "minimum"),
    OpInfo("and", 2, "bitwise_and", "&"),
    OpInfo("or", 2, "bitwise_or", "|"),
    OpInfo("xor", 2, "bitwise_xor", "^"),
    # comparisons
    OpInfo("eq", 2, "equal", "=="),
    OpInfo("ne", 2, "not_equal", "!="),
    OpInfo("lt", 2, "less", "<"),
    OpInfo("le", 2, "less_equal", "<="),
    OpInfo("gt", 2, "greater", ">"),
    OpInfo("ge", 2, "greater_equal", ">="),
    # unary
    OpInfo("neg", 1, "negative", "-"),
    OpInfo("invert", 1, "invert", "~"),
    OpInfo("abs", 1, "absolute"),
    OpInfo("square", 1, "square"),
    OpInfo("sign", 1, "sign"),
    OpInfo("exp", 1, "exp", None, True),
    OpInfo("expm1", 1, "expm1", None, True),
    OpInfo("log", 1, "log", None, True),
    OpInfo("log1p", 1, "log1p", None, True),
    OpInfo("sqrt", 1, "sqrt", None, True),
    OpInfo("sin", 1, "sin", None, True),
    OpInfo("cos", 1, "cos", None, True),
    OpInfo("tanh", 1, "tanh", None, True),
    # sigmoid has no numpy ufunc: it takes exp's dtype rule; the reference is 1/(1+exp(-x)).
    OpInfo("sigmoid", 1, "exp", None, True),
    OpInfo("floor", 1, "floor"),
    OpInfo("ceil", 1, "ceil"),
    OpInfo("rint", 1, "rint"),  # round half to even, numpy's np.round for floats
    OpInfo("isnan", 1, "isnan"),
    OpInfo("isinf", 1, "isinf"),
    OpInfo("isfinite", 1, "isfinite"),
    OpInfo("logical_not", 1, "logical_not"),
    # ternary
    OpInfo("where", 3, "where"),
)

# numpy's reduction for each Reduce op (argmax/argmin take one axis, see the engines).
REDUCERS = {
    "sum": np.sum,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "any": np.any,
    "all": np.all,
    "argmax": np.argmax,
    "argmin": np.argmin,
}

UNARY = frozenset(k for k, v in OPS.items() if v.arity == 1)
BINARY = frozenset(k for k, v in OPS.items() if v.arity == 2)
COMPARISONS = frozenset(("eq", "ne", "lt", "le", "gt", "ge"))


def apply_map(op: str, args: list, out_dtype: np.dtype) -> np.ndarray:
    """Evaluate op on numpy arrays already in their loop dtypes: the reference semantics."""
    if op == "where":
        return np.where(args[0], args[1], args[2]).astype(out_dtype, copy=False)
    if op == "sigmoid":
        x = args[0]
        one = x.dtype.type(1)
        return (one / (one + np.exp(-x))).astype(out_dtype, copy=False)
    ufunc = getattr(np, OPS[op].ufunc)
    return ufunc(*args, dtype=None).astype(out_dtype, copy=False)
