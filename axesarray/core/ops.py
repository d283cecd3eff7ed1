"""The table of elementwise operations: one row per op, everything else is generated.

A row says what an op is (arity, the numpy ufunc whose dtype rule and values it follows),
how it is written as scalar code (``Code``), how it prints and which ``Tensor`` operator
spells it, whether it is worth materializing when shared (``expensive``), its public
function (name and docstring with an example), and its derivative (``grad``). From the
table come: the public functions and ``__all__`` (``functions``), the ``Tensor`` operators
(``tensor``), the numpy ufunc map, the kernels' scalar code (``kernels.scalar``), the
reference engine's values (``apply_map``) and autograd's rules. Adding an op is one row
here plus its row in the tests (``tests/test_ops_table.py``).

``grad(F, args, out, g)`` returns one gradient per argument (None where there is none,
e.g. piecewise-constant ops): ``args`` and ``out`` are the op's inputs and result and ``g``
the incoming gradient, all values supporting Python arithmetic (``autograd`` wraps nodes);
``F`` has ``where`` and one function per row with a public name (``F.log``, ``F.sign``...).
Rules keep the op's loop dtype (write ``where(c, g, 0.0)``, not a new array). A row without
``grad`` is not differentiable (its results are bool or integer).

Imports nothing from the package.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

__all__ = [
    "Code",
    "Op",
    "OPS",
    "UNARY",
    "BINARY",
    "COMPARISONS",
    "UFUNCS",
    "SPECIAL_CONSTANTS",
    "apply_map",
]


@attrs.frozen
class Code:
    """Scalar source of an op: a template per loop-dtype kind (``f``, ``i``, ``u``, ``b``)
    or ``default``; ``{0}``.. are the operands and ``{sfx}`` is ``f32``/``f64`` (for the
    math library's ``exp_f32``...). ``wrap``: cast the value to the result's register type
    (small integers wrap as numpy's do, float16 rounds); comparisons and selections need
    no cast."""

    default: str
    f: str | None = None
    i: str | None = None
    u: str | None = None
    b: str | None = None
    wrap: bool = True
    # The first ``inline`` call sites of a kernel call ``<name>_inline`` (``{inl}`` in the
    # template): the math-library function with LLVM's alwaysinline on the call, for
    # functions too big for LLVM to inline on its own (their loops then vectorize); later
    # ones call out, so a kernel's machine code stays bounded.
    inline: int = 0

    def template(self, kind: str) -> str:
        return getattr(self, kind, None) or self.default if kind in "fiub" else self.default


def _math(name: str, inline: int = 0) -> Code:
    """A math-library function (``kernels/mathlib.py``), vectorizable, float only."""
    return Code(f"{name}_{{sfx}}{{inl}}({{0}})", inline=inline)


@attrs.frozen
class Op:
    """One elementwise op. See the module docstring for what is generated from it."""

    name: str
    arity: int
    dtype_rule: str  # numpy ufunc giving the loop and result dtypes (NEP 50)
    code: Code
    ufunc: str | None = None  # the numpy ufunc this op is (``np.<ufunc>(tensor)`` maps here)
    symbol: str | None = None  # Python operator, for printing
    dunder: str | None = None  # Tensor operator stem: "add" gives __add__, __radd__, __iadd__
    expensive: bool = False  # worth materializing rather than recomputing when shared
    # flop-equivalents an element costs one core when ``expensive`` (0: the cost model's
    # ``TRANSCENDENTAL``), measured per op by ``benchmarks/bench_op_work.py``
    work: int = 0
    public: str | None = None  # name of the generated ``ax.<name>`` function
    doc: str = ""  # its docstring (first line, then a runnable example)
    grad: Callable | None = None  # (F, args, out, g) -> gradient per argument
    reference: Callable | None = None  # numpy meaning when it is not ``np.<ufunc>``


def _op(name, arity, dtype_rule=None, code="", **kw) -> Op:
    code = code if isinstance(code, Code) else Code(code)
    return Op(name, arity, dtype_rule or name, code, **kw)


def _doc(line: str, fn: str, values: str, result: str) -> str:
    return f"""{line}

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.array({values}), "N")
    >>> ax.{fn}(x).numpy()
    {result}
    """


# --- derivative rules (F: the public namespace; every argument is a tensor) ---------------


def _sigmoid_ref(x):
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


def _where_ref(c, a, b):
    return np.where(c, a, b)


def _winner(F, x, y, g, better):
    """Gradient reaching ``x`` of max/min(x, y): all of ``g`` where ``x`` wins, half on a
    tie (the subgradient split evenly, so ``max(x, x)`` passes ``g`` through), else 0."""
    return F.where(better(x, y), g, F.where(x == y, g * 0.5, 0.0))


def _max_grad(F, a, out, g):
    return tuple(_winner(F, x, y, g, lambda u, v: u > v) for x, y in (a, a[::-1]))


def _min_grad(F, a, out, g):
    return tuple(_winner(F, x, y, g, lambda u, v: u < v) for x, y in (a, a[::-1]))


# fmt: off
_ROWS = [
    # --- binary arithmetic --------------------------------------------------------------
    _op(
        "add", 2, "add", Code("{0} + {1}", b="({0} or {1})"), ufunc="add", symbol="+",
        dunder="add", grad=lambda F, a, out, g: (g, g),
    ),
    _op(
        "sub", 2, "subtract", "{0} - {1}", ufunc="subtract", symbol="-", dunder="sub",
        grad=lambda F, a, out, g: (g, -g),
    ),
    _op(
        "mul", 2, "multiply", Code("{0} * {1}", b="({0} and {1})"), ufunc="multiply",
        symbol="*", dunder="mul", grad=lambda F, a, out, g: (g * a[1], g * a[0]),
    ),
    _op(
        "truediv", 2, "true_divide", "{0} / {1}", ufunc="divide", symbol="/",
        dunder="truediv", expensive=True,
        grad=lambda F, a, out, g: (g / a[1], -g * out / a[1]),
    ),
    _op(
        "floordiv", 2, "floor_divide",
        Code(
            "{0} // {1}",
            f="floordiv_float({0}, {1})",
            # a // -1 is -a: avoids the INT_MIN // -1 trap; x // 0 is 0 (error_model numpy)
            i="(({0} // {1}) if {1} != -1 else -{0})",
        ),
        ufunc="floor_divide", symbol="//", dunder="floordiv", expensive=True, work=170,
        grad=lambda F, a, out, g: (None, None),
    ),
    _op(
        "mod", 2, "remainder",
        Code("{0} % {1}", f="mod_float({0}, {1})", i="(({0} % {1}) if {1} != -1 else 0)"),
        ufunc="remainder", symbol="%", dunder="mod", expensive=True, work=170,
        grad=lambda F, a, out, g: (g, -g * F.floor(a[0] / a[1])),
    ),
    _op(
        "pow", 2, "power", "{0} ** {1}", ufunc="power", symbol="**", dunder="pow",
        expensive=True, work=100,
        grad=lambda F, a, out, g: (
            g * a[1] * a[0] ** (a[1] - 1),
            g * out * F.log(F.where(a[0] > 0, a[0], 1.0)),
        ),
    ),
    _op(
        "maximum", 2, "maximum", Code("max({0}, {1})", f="fmax_nan({0}, {1})"),
        ufunc="maximum", public="maximum",
        doc="""Elementwise maximum with numpy's NaN propagation, broadcasting by name.

    >>> import axesarray as ax, numpy as np
    >>> a, b = ax.tensor(np.array([1.0, 5.0]), "N"), ax.tensor(np.array([3.0, 2.0]), "N")
    >>> ax.maximum(a, b).numpy()
    array([3., 5.])
    """,
        grad=_max_grad,
    ),
    # ``np.clip`` against a scalar bound: x on a tie (clip(-0.0, 0.0) is -0.0, where maximum
    # gives the bound), a NaN in x or in the bound gives NaN. One row per side so that the
    # argument is evaluated once (a ``where`` chain repeats it); a tensor bound keeps the
    # ``where`` (numpy's array clip: the bound wins a tie, with the whole gradient).
    _op(
        "clip_lo", 2, "maximum",
        Code("max({0}, {1})", f="({0} if ({0} >= {1} or {0} != {0}) else {1})"),
        grad=lambda F, a, out, g: (
            F.where((a[0] >= a[1]) | F.isnan(a[0]), g, 0.0),
            F.where((a[0] >= a[1]) | F.isnan(a[0]), 0.0, g),
        ),
        reference=lambda x, lo: np.where((x >= lo) | np.isnan(x), x, lo),
    ),
    _op(
        "clip_hi", 2, "minimum",
        Code("min({0}, {1})", f="({0} if ({0} <= {1} or {0} != {0}) else {1})"),
        grad=lambda F, a, out, g: (
            F.where((a[0] <= a[1]) | F.isnan(a[0]), g, 0.0),
            F.where((a[0] <= a[1]) | F.isnan(a[0]), 0.0, g),
        ),
        reference=lambda x, hi: np.where((x <= hi) | np.isnan(x), x, hi),
    ),
    _op(
        "minimum", 2, "minimum", Code("min({0}, {1})", f="fmin_nan({0}, {1})"),
        ufunc="minimum", public="minimum",
        doc="""Elementwise minimum with numpy's NaN propagation, broadcasting by name.

    >>> import axesarray as ax, numpy as np
    >>> a, b = ax.tensor(np.array([1.0, 5.0]), "N"), ax.tensor(np.array([3.0, 2.0]), "N")
    >>> ax.minimum(a, b).numpy()
    array([1., 2.])
    """,
        grad=_min_grad,
    ),
    _op(
        "hypot", 2, "hypot", "math.hypot({0}, {1})", ufunc="hypot", expensive=True, work=30,
        public="hypot",
        doc="""Elementwise sqrt(a**2 + b**2) without overflow, broadcasting by name.

    >>> import axesarray as ax, numpy as np
    >>> a, b = ax.tensor(np.array([3.0, 5.0]), "N"), ax.tensor(np.array([4.0, 12.0]), "N")
    >>> ax.hypot(a, b).numpy()
    array([ 5., 13.])
    """,
        grad=lambda F, a, out, g: (g * a[0] / out, g * a[1] / out),
    ),
    _op("and", 2, "bitwise_and", Code("{0} & {1}", b="({0} and {1})"), ufunc="bitwise_and",
        symbol="&", dunder="and"),
    _op("or", 2, "bitwise_or", Code("{0} | {1}", b="({0} or {1})"), ufunc="bitwise_or",
        symbol="|", dunder="or"),
    _op("xor", 2, "bitwise_xor", Code("{0} ^ {1}", b="({0} != {1})"), ufunc="bitwise_xor",
        symbol="^", dunder="xor"),
    # --- comparisons (bool results: no cast) ----------------------------------------------
    _op("eq", 2, "equal", Code("({0} == {1})", wrap=False), ufunc="equal", symbol="==",
        dunder="eq"),
    _op("ne", 2, "not_equal", Code("({0} != {1})", wrap=False), ufunc="not_equal",
        symbol="!=", dunder="ne"),
    _op("lt", 2, "less", Code("({0} < {1})", wrap=False), ufunc="less", symbol="<",
        dunder="lt"),
    _op("le", 2, "less_equal", Code("({0} <= {1})", wrap=False), ufunc="less_equal",
        symbol="<=", dunder="le"),
    _op("gt", 2, "greater", Code("({0} > {1})", wrap=False), ufunc="greater", symbol=">",
        dunder="gt"),
    _op("ge", 2, "greater_equal", Code("({0} >= {1})", wrap=False), ufunc="greater_equal",
        symbol=">=", dunder="ge"),
    # --- unary ----------------------------------------------------------------------------
    _op("neg", 1, "negative", "-{0}", ufunc="negative", symbol="-", dunder="neg",
        grad=lambda F, a, out, g: (-g,)),
    _op("invert", 1, "invert", Code("~{0}", b="(not {0})"), ufunc="invert", symbol="~",
        dunder="invert"),
    _op(
        "abs", 1, "absolute", Code("abs({0})", b="{0}"), ufunc="absolute", dunder="abs",
        public="abs", doc=_doc("Elementwise absolute value.", "abs", "[-1.5, 2.0]",
                               "array([1.5, 2. ])"),
        grad=lambda F, a, out, g: (g * F.sign(a[0]),),
    ),
    _op(
        "square", 1, "square", Code("{0} * {0}", b="({0} and {0})"), ufunc="square",
        public="square", doc=_doc("Elementwise x*x.", "square", "[-1.5, 2.0]",
                                  "array([2.25, 4.  ])"),
        grad=lambda F, a, out, g: (g * 2 * a[0],),
    ),
    _op(
        "sign", 1, "sign",
        Code("1 if {0} > 0 else (-1 if {0} < 0 else 0)", f="sign_float({0})",
             u="1 if {0} > 0 else 0"),
        ufunc="sign", public="sign",
        doc=_doc("Elementwise sign (-1, 0 or 1; nan stays nan).", "sign", "[-1.5, 0.0, 2.0]",
                 "array([-1.,  0.,  1.])"),
        grad=lambda F, a, out, g: (None,),
    ),
    _op(
        "exp", 1, "exp", _math("exp"), ufunc="exp", expensive=True, public="exp",
        doc=_doc("Elementwise e**x.", "exp", "[0.0, 1.0]", "array([1.        , 2.71828183])"),
        grad=lambda F, a, out, g: (g * out,),
    ),
    _op(
        "expm1", 1, "expm1", _math("expm1"), ufunc="expm1", expensive=True, work=24,
        public="expm1",
        doc=_doc("Elementwise exp(x) - 1, accurate near 0.", "expm1", "[0.0, 1e-10]",
                 "array([0.e+00, 1.e-10])"),
        grad=lambda F, a, out, g: (g * (out + 1),),
    ),
    _op(
        "log", 1, "log", _math("log"), ufunc="log", expensive=True, work=24, public="log",
        doc=_doc("Elementwise natural logarithm.", "log", "[1.0, 100.0]",
                 "array([0.        , 4.60517019])"),
        grad=lambda F, a, out, g: (g / a[0],),
    ),
    _op(
        "log1p", 1, "log1p", _math("log1p"), ufunc="log1p", expensive=True, work=24,
        public="log1p",
        doc=_doc("Elementwise log(1 + x), accurate near 0.", "log1p", "[0.0, 1e-10]",
                 "array([0.e+00, 1.e-10])"),
        grad=lambda F, a, out, g: (g / (a[0] + 1),),
    ),
    _op(
        "sqrt", 1, "sqrt", "np.sqrt({0})", ufunc="sqrt", expensive=True, public="sqrt",
        doc=_doc("Elementwise square root.", "sqrt", "[4.0, 2.0]",
                 "array([2.        , 1.41421356])"),
        grad=lambda F, a, out, g: (g * 0.5 / out,),
    ),
    _op(
        "sin", 1, "sin", "np.sin({0})", ufunc="sin", expensive=True, work=100, public="sin",
        doc=_doc("Elementwise sine.", "sin", "[0.0, 1.0]", "array([0.        , 0.84147098])"),
        grad=lambda F, a, out, g: (g * F.cos(a[0]),),
    ),
    _op(
        "cos", 1, "cos", "np.cos({0})", ufunc="cos", expensive=True, work=100, public="cos",
        doc=_doc("Elementwise cosine.", "cos", "[0.0, 1.0]", "array([1.        , 0.54030231])"),
        grad=lambda F, a, out, g: (-g * F.sin(a[0]),),
    ),
    _op(
        "tanh", 1, "tanh", _math("tanh", inline=16), ufunc="tanh", expensive=True, work=24,
        public="tanh",
        doc=_doc("Elementwise hyperbolic tangent.", "tanh", "[0.0, 1.0]",
                 "array([0.        , 0.76159416])"),
        grad=lambda F, a, out, g: (g * (1 - out * out),),
    ),
    # sigmoid has no numpy ufunc: it takes exp's dtype rule; the reference is 1/(1+exp(-x)).
    _op(
        "sigmoid", 1, "exp", _math("sigmoid"), expensive=True, public="sigmoid",
        doc=_doc("Elementwise logistic function 1 / (1 + exp(-x)), with exp's dtype rule.",
                 "sigmoid", "[0.0, 2.0]", "array([0.5       , 0.88079708])"),
        grad=lambda F, a, out, g: (g * out * (1 - out),),
        reference=_sigmoid_ref,
    ),
    _op(
        "floor", 1, "floor", Code("{0}", f="np.floor({0})"), ufunc="floor", public="floor",
        doc=_doc("Elementwise floor.", "floor", "[-1.5, 2.5]", "array([-2.,  2.])"),
        grad=lambda F, a, out, g: (None,),
    ),
    _op(
        "ceil", 1, "ceil", Code("{0}", f="np.ceil({0})"), ufunc="ceil", public="ceil",
        doc=_doc("Elementwise ceiling.", "ceil", "[-1.5, 2.5]", "array([-1.,  3.])"),
        grad=lambda F, a, out, g: (None,),
    ),
    # round half to even: numpy's np.round for floats (``ax.round`` adds ``decimals``)
    _op("rint", 1, "rint", Code("{0}", f="np.rint({0})"), ufunc="rint",
        grad=lambda F, a, out, g: (None,)),
    _op(
        "isnan", 1, "isnan", Code("False", f="({0} != {0})", wrap=False), ufunc="isnan",
        public="isnan", doc=_doc("Elementwise test for NaN.", "isnan", "[np.nan, 1.0]",
                                 "array([ True, False])"),
    ),
    _op(
        "isinf", 1, "isinf", Code("False", f="(abs({0}) == np.inf)", wrap=False),
        ufunc="isinf", public="isinf",
        doc=_doc("Elementwise test for +-inf.", "isinf", "[np.inf, 1.0]",
                 "array([ True, False])"),
    ),
    _op(
        "isfinite", 1, "isfinite", Code("True", f="(abs({0}) < np.inf)", wrap=False),
        ufunc="isfinite", public="isfinite",
        doc=_doc("Elementwise test for finite values.", "isfinite", "[np.inf, 1.0]",
                 "array([False,  True])"),
    ),
    _op(
        "logical_not", 1, "logical_not", Code("(not {0})", wrap=False), ufunc="logical_not",
        public="logical_not",
        doc=_doc("Elementwise logical not.", "logical_not", "[0.0, 1.0]",
                 "array([ True, False])"),
    ),
    # The value of its argument, with no gradient: autograd stops here (``ax.stop_gradient``).
    _op(
        "stop_gradient", 1, "positive", "{0}", public="stop_gradient",
        doc=_doc("The same values, but autograd treats them as a constant (no gradient).",
                 "stop_gradient", "[1.5, -2.0]", "array([ 1.5, -2. ])"),
        grad=lambda F, a, out, g: (None,),
        reference=lambda x: x,
    ),
    # --- ternary --------------------------------------------------------------------------
    _op(
        "where", 3, "where", Code("({1} if {0} else {2})", wrap=False),
        grad=lambda F, a, out, g: (None, F.where(a[0], g, 0.0), F.where(a[0], 0.0, g)),
        reference=_where_ref,
    ),
]
# fmt: on

OPS: dict[str, Op] = {r.name: r for r in _ROWS}


UNARY = frozenset(k for k, v in OPS.items() if v.arity == 1)
BINARY = frozenset(k for k, v in OPS.items() if v.arity == 2)
COMPARISONS = frozenset(
    k
    for k, v in OPS.items()
    if v.dtype_rule in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
)
# numpy ufunc name -> op, for ``np.exp(tensor)`` and friends (lazy, like our functions).
UFUNCS = {v.ufunc: k for k, v in OPS.items() if v.ufunc} | {"true_divide": "truediv"}
# Constant values that are part of an expression's structure (its key), not only run-time
# arguments: rewrites look at them (``1 / (1 + exp(-x))`` is sigmoid, ``x ** 2`` is a
# square), so two expressions differing only there are planned separately.
SPECIAL_CONSTANTS = (0.0, 1.0, 2.0, 0.5, -1.0)


def apply_map(op: str, args: list, out_dtype: np.dtype) -> np.ndarray:
    """Evaluate op on numpy arrays already in their loop dtypes: the reference semantics."""
    row = OPS[op]
    if row.reference is not None:
        value = row.reference(*args)
    else:
        value = getattr(np, row.ufunc)(*args, dtype=None)
    return np.asarray(value).astype(out_dtype, copy=False)
