"""The table of reductions: one row per reduction, everything else is generated.

Modelled on ``ops.OPS`` (and xarray's ``AGGREGATION_METHODS``). A row is either

- **a kernel reduction** (``Reduce`` nodes computed by the fused kernels): its scalar
  code (``init``, ``combine`` and their float / reassociable variants), its accumulator
  dtype rule, how its chunks' partial results combine (dask), and its derivative; or
- **a composed reduction** (``build``): a function of the tensor written with other
  operations (``nansum`` is a ``where`` and a ``sum``; ``median`` a numpy call), which
  then fuses, runs chunked and differentiates as its parts do.

From the table come: the ``Tensor`` methods with their docstrings and ``skipna=``
(``reductions``), the public functions ``ax.nansum``... (``functions``), numpy's
functions on tensors (``np.sum(t, axis=...)``, ``np.nanmax``; ``interop``) and
``ufunc.reduce`` (``np.add.reduce``), the reference engine's values and the result dtypes
(``numpy``), the kernels' scalar code (``kernels.scalar``, ``kernels.cpu``,
``kernels.cuda``), the chunked partials (``engine.chunked``) and autograd's rule
(``grad``). Adding a reduction is one row here plus its row in
``tests/test_reductions_table.py`` (the oracle, numpy's function).

Scalar code templates: ``{acc}`` the accumulator, ``{v}`` the value folded in, ``{index}``
its position (index reductions); ``init`` may use ``{t}`` (the accumulator's numba type),
``{lo}``/``{hi}`` (its lowest and highest value).

``grad(R, x, out, g, axes)`` returns the gradient of the reduction's input: ``x`` its
input, ``out`` its result, ``g`` the incoming gradient (nodes); ``R`` builds nodes
(``R.map(op, args, shape)``, ``R.reduce(op, node, axes)``, ``R.cast(node, dtype)``,
``R.back(v)``: a result-shaped value broadcast back to ``x``'s shape).

``build(x, names, keepdims, **kw)`` receives a ``Tensor`` and uses its methods only.

Imports nothing from the package.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import attrs
import numpy as np

__all__ = ["Reduction", "REDUCTIONS", "REDUCERS", "UFUNC_REDUCE", "KERNEL_REDUCTIONS"]


@attrs.frozen
class Reduction:
    """One reduction. See the module docstring for what is generated from it."""

    name: str  # the method (``x.<name>(...)``) and, for kernel reductions, the node's op
    numpy: Callable  # numpy's meaning: oracle, reference engine, result dtype
    doc: str = ""  # the method's docstring; ``{f}`` is ``x.<name>(`` or ``ax.<name>(x, ``
    # numpy functions that dispatch here (``np.max``, ``np.amax``) and how their arguments
    # read: "reduce" (axis, dtype, out, keepdims), "logical", "extreme", "spread" (ddof),
    # "arg", "median", "quantile"; None: not a numpy function
    numpy_functions: tuple = ()
    signature: str | None = None
    ufunc: str | None = None  # ``np.<ufunc>.reduce`` is this reduction
    function: bool = False  # also a public function ``ax.<name>(x, ...)``
    # the ``Tensor`` method is generated from the row (False: written by hand in
    # ``reductions``, as argmax's dict over several axes, or none, as logsumexp's)
    generated: bool = True
    skipna: str | None = None  # the row ``skipna=True`` uses on floats (xarray's argument)
    empty: bool = True  # an empty reduction has a value (else an AxesError before running)
    # --- kernel reductions ---
    init: str | None = None  # the accumulator's first value
    combine: tuple[str, ...] = ()  # lines folding {v} into {acc}
    combine_float: tuple[str, ...] | None = None  # the same for float values (NaN rules)
    combine_reassoc: tuple[str, ...] | None = None  # CPU: with LLVM's reassoc (vectorizes)
    accumulator: str = "result"  # "float64" (floats accumulate in float64), "value", "result"
    convert: bool = False  # the input is cast to the result dtype (sum of int8 is int64)
    unroll: bool = True  # the inner loop folds into four accumulators
    pairwise: bool = False  # rows-first template: add four rows pairwise first
    index: bool = False  # the result is a position (argmax): one axis, (value, index) partials
    better: str | None = None  # index reductions: the comparison a better value wins by
    input_dtype: str | None = None  # the input is cast to this dtype first (any, all: bool)
    kernel: str = "fold"  # the CPU template: "fold", or "logsumexp" (two sweeps)
    grad: Callable | None = None  # (R, x, out, g, axes) -> gradient of x
    # --- composed reductions ---
    build: Callable | None = None  # (x, names, keepdims, **kw) -> Tensor

    @property
    def is_kernel(self) -> bool:
        return self.build is None

    def combine_lines(self, acc: str, v: str, index: str, fl: bool, reassoc: bool) -> list:
        """The source lines folding ``v`` into ``acc`` (float NaN rules when ``fl``)."""
        lines = self.combine
        if fl and self.combine_float is not None:
            lines = self.combine_float
        if reassoc and self.combine_reassoc is not None:
            lines = self.combine_reassoc
        return [ln.format(acc=acc, v=v, index=index) for ln in lines]

    def init_source(self, t: str, lo: str, hi: str) -> str:
        return self.init.format(t=t, lo=lo, hi=hi)


# --- derivative rules ----------------------------------------------------------------------


def _grad_sum(R, x, out, g, axes):
    return R.back(g)


def _grad_extreme(R, x, out, g, axes):
    # Ties share the gradient evenly (numpy-style subgradient): mask / count.
    mask = R.cast(R.map("eq", (x, R.back(out)), x.shape), x.dtype)
    share = R.map("truediv", (g, R.reduce("sum", mask, axes)), out.shape)
    return R.map("mul", (R.back(share), mask), x.shape)


def _grad_prod(R, x, out, g, axes):
    # the product of the other elements, exact when some are zero
    shape = x.shape
    zero = R.map("eq", (x, 0.0), shape)
    others = R.reduce("prod", R.map("where", (zero, 1.0, x), shape), axes)
    zeros = R.reduce("sum", R.cast(zero, x.dtype), axes)
    none_zero = R.back(R.map("eq", (zeros, 0.0), out.shape))
    one_zero = R.back(R.map("eq", (zeros, 1.0), out.shape))
    others_b = R.back(others)
    lone = R.map("and", (one_zero, zero), shape)
    d = R.map(
        "where",
        (
            none_zero,
            R.map("truediv", (others_b, x), shape),
            R.map("where", (lone, others_b, 0.0), shape),
        ),
        shape,
    )
    return R.map("mul", (R.back(g), d), shape)


# --- numpy meanings -----------------------------------------------------------------------


def _logsumexp(x, axis=None):
    """``m + log(sum(exp(x - m)))`` with ``m = max(x)`` over ``axis``: the stable formula
    and its special values (an all -inf slice gives nan, an empty one -inf), computed in
    float64 and returned with exp's dtype rule."""
    x = np.asarray(x)
    dtype = np.exp(np.zeros(1, x.dtype)).dtype
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        m = np.max(x64, axis=axis, keepdims=True, initial=-np.inf)
        s = np.sum(np.exp(x64 - m), axis=axis, keepdims=True)
        out = np.log(s) + m
    return np.squeeze(out, axis=axis if axis is not None else None).astype(dtype)


def quiet(func):
    """numpy's function without its warnings (all-NaN slices, empty means): neither engine
    warns (docs/design.md, "No floating-point warnings")."""

    def run(*args, **kwargs):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            return func(*args, **kwargs)

    run.__name__ = getattr(func, "__name__", "run")
    return run


# --- composed reductions (tensor methods only) --------------------------------------------


def _float(x) -> bool:
    return x.dtype.kind in "fc"


def _valid(x):
    return x == x  # not NaN


def _nansum(x, names=None, keepdims=False):
    return (x.where(_valid(x), 0) if _float(x) else x).sum(names, keepdims)


def _nanprod(x, names=None, keepdims=False):
    return (x.where(_valid(x), 1) if _float(x) else x).prod(names, keepdims)


def _nanextreme(op: str, fill: float):
    def build(x, names=None, keepdims=False):
        if not _float(x):
            return getattr(x, op)(names, keepdims)
        # NaN never wins; a slice of NaN only gives NaN (numpy's value, without its warning)
        best = getattr(x.where(_valid(x), fill), op)(names, keepdims)
        return best.where(_valid(x).any(names, keepdims), np.nan)

    return build


def _nancount(x, names, keepdims):
    """The number of non-NaN elements, in ``x``'s float dtype."""
    return _valid(x).sum(names, keepdims).astype(x.dtype)


def _nanmean(x, names=None, keepdims=False):
    if not _float(x):
        return x.mean(names, keepdims)
    if x.dtype == np.float16:  # as mean: numpy sums float16 in float32
        return _nanmean(x.astype("float32"), names, keepdims).astype("float16")
    return _nansum(x, names, keepdims) / _nancount(x, names, keepdims)


def _nanvar(x, names=None, ddof=0, keepdims=False):
    if not _float(x):
        return x.var(names, ddof, keepdims)
    if x.dtype == np.float16:
        return _nanvar(x.astype("float32"), names, ddof, keepdims).astype("float16")
    dev = x - _nanmean(x, names)  # the mean broadcasts back by name
    dof = _nancount(x, names, keepdims) - ddof
    var = _nansum(dev * dev, names, keepdims) / dof
    return var.where(dof > 0, np.nan)  # numpy: nan where n - ddof <= 0


def _nanstd(x, names=None, ddof=0, keepdims=False):
    v = _nanvar(x, names, ddof, keepdims)
    if v.dtype == np.float16:  # numpy takes the root of the float16 variance
        return (v.astype("float32") ** 0.5).astype("float16")
    return v**0.5


def _mean(x, names=None, keepdims=False):
    return x._mean(names, keepdims)


def _var(x, names=None, ddof=0, keepdims=False):
    return x._var(names, ddof, keepdims)


def _std(x, names=None, ddof=0, keepdims=False):
    return x._std(names, ddof, keepdims)


def _median(func):
    run = quiet(func)  # one function object: equal calls share their plan

    def build(x, names=None, keepdims=False):
        return x._over_axes(func.__name__, run, names, keepdims, None, {})

    return build


def _quantile(func):
    run = quiet(func)

    def build(x, q, names=None, keepdims=False, method="linear"):
        kwargs = {"method": method}
        return x._over_axes(func.__name__, run, names, keepdims, q, kwargs, quantile=True)

    return build


# --- docstrings ---------------------------------------------------------------------------


def _doc(line: str, values: str, call: str, result: str) -> str:
    return f"""{line}

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.array({values}), "N C")
    >>> {{f}}{call}
    {result}
    """


_NAMES = "over the named axes (all when None)"

# fmt: off
_ROWS = [
    Reduction(
        "sum", np.sum, _doc(f"Sum {_NAMES}. ``x.sum('C')``, ``x.sum(('H', 'W'))``.",
                            "[[1.0, 2.0], [3.0, 4.0]]", '"C", keepdims=True).numpy()',
                            "array([[3.],\n           [7.]])"),
        (np.sum,), "reduce", ufunc="add", skipna="nansum",
        init="{t}(0)", combine=("{acc} += {v}",),
        combine_reassoc=("{acc} = radd({acc}, {v})",), accumulator="float64",
        convert=True, unroll=False, pairwise=True, grad=_grad_sum,
    ),
    Reduction(
        "prod", np.prod, _doc(f"Product {_NAMES}, with numpy's result dtype.",
                              "[[1, 2], [3, 4]]", '"C").numpy()', "array([ 2, 12])"),
        (np.prod,), "reduce", ufunc="multiply", skipna="nanprod",
        init="{t}(1)", combine=("{acc} *= {v}",),
        combine_reassoc=("{acc} = rmul({acc}, {v})",), accumulator="float64",
        convert=True, unroll=False, grad=_grad_prod,
    ),
    Reduction(
        "max", np.max, _doc(f"Maximum {_NAMES}; NaN wins, as ``np.max`` (``skipna=True``: "
                            "``nanmax``).", "[[1, 5], [3, 4]]", '"N").numpy()',
                            "array([3, 5])"),
        (np.max, np.amax), "extreme", ufunc="maximum", skipna="nanmax", empty=False,
        init="{t}({lo})", combine=("{acc} = max({acc}, {v})",),
        combine_float=("{acc} = fmax_nan({acc}, {v})",), grad=_grad_extreme,
    ),
    Reduction(
        "min", np.min, _doc(f"Minimum {_NAMES}; NaN wins, as ``np.min`` (``skipna=True``: "
                            "``nanmin``).", "[[1, 5], [3, 4]]", '"N").numpy()',
                            "array([1, 4])"),
        (np.min, np.amin), "extreme", ufunc="minimum", skipna="nanmin", empty=False,
        init="{t}({hi})", combine=("{acc} = min({acc}, {v})",),
        combine_float=("{acc} = fmin_nan({acc}, {v})",), grad=_grad_extreme,
    ),
    Reduction(
        "any", np.any, _doc(f"Whether any element is true (non-zero) {_NAMES}.",
                            "[[0, 0], [0, 2]]", '"C").numpy()', "array([False,  True])"),
        (np.any,), "logical", ufunc="logical_or", input_dtype="bool",
        init="False", combine=("{acc} = {acc} or {v}",),
    ),
    Reduction(
        "all", np.all, _doc(f"Whether every element is true (non-zero) {_NAMES}.",
                            "[[1, 0], [1, 2]]", '"C").numpy()', "array([False,  True])"),
        (np.all,), "logical", ufunc="logical_and", input_dtype="bool",
        init="True", combine=("{acc} = {acc} and {v}",),
    ),
    Reduction(
        "argmax", np.argmax, "", (np.argmax,), "arg", generated=False, empty=False,
        index=True, better=">",
        unroll=False, init="{t}({lo})", accumulator="value",
        combine=("if {v} > {acc}:", "    {acc} = {v}", "    ai = {index}"),
        combine_float=("if {v} > {acc} or ({v} != {v} and {acc} == {acc}):",
                       "    {acc} = {v}", "    ai = {index}"),
    ),
    Reduction(
        "argmin", np.argmin, "", (np.argmin,), "arg", generated=False, empty=False,
        index=True, better="<",
        unroll=False, init="{t}({hi})", accumulator="value",
        combine=("if {v} < {acc}:", "    {acc} = {v}", "    ai = {index}"),
        combine_float=("if {v} < {acc} or ({v} != {v} and {acc} == {acc}):",
                       "    {acc} = {v}", "    ai = {index}"),
    ),
    # made by the CPU rewrites of softmax and logsumexp only (no method; see engine.rewrite)
    Reduction("logsumexp", _logsumexp, generated=False, kernel="logsumexp"),
    Reduction(
        "mean", np.mean, _doc("Arithmetic mean over the named axes, with numpy's result dtype.",
                              "[[1, 2], [3, 4]]", '"N").numpy()', "array([2., 3.])"),
        (np.mean,), "reduce", skipna="nanmean", build=_mean,
    ),
    Reduction(
        "var", np.var, _doc("Variance over the named axes: ``sum((x - mean)**2) / (n - ddof)``,"
                            " as ``np.var`` (integers and bools give float64; ``n - ddof <= 0``"
                            " gives inf or nan).", "[[1.0, 2.0, 3.0, 4.0]]",
                            '"C", ddof=1).numpy()', "array([1.66666667])"),
        (np.var,), "spread", skipna="nanvar", build=_var,
    ),
    Reduction(
        "std", np.std, _doc("Standard deviation: the square root of ``var`` (same arguments).",
                            "[[1.0, 3.0]]", '"C", ddof=1).numpy()', "array([1.41421356])"),
        (np.std,), "spread", skipna="nanstd", build=_std,
    ),
    Reduction(
        "nansum", np.nansum, _doc(f"Sum {_NAMES}, NaN counted as 0 (``np.nansum``; fused).",
                                  "[[1.0, np.nan], [3.0, 4.0]]", '"C").numpy()',
                                  "array([1., 7.])"),
        (np.nansum,), "reduce", function=True, build=_nansum,
    ),
    Reduction(
        "nanprod", np.nanprod, _doc(f"Product {_NAMES}, NaN counted as 1 (``np.nanprod``).",
                                    "[[2.0, np.nan], [3.0, 4.0]]", '"C").numpy()',
                                    "array([ 2., 12.])"),
        (np.nanprod,), "reduce", function=True, build=_nanprod,
    ),
    Reduction(
        "nanmax", quiet(np.nanmax), _doc(f"Maximum {_NAMES} ignoring NaN; NaN where every "
                                         "element is NaN (``np.nanmax``, without its warning).",
                                         "[[1.0, np.nan], [np.nan, np.nan]]", '"C").numpy()',
                                         "array([ 1., nan])"),
        (np.nanmax,), "extreme", function=True, empty=False,
        build=_nanextreme("max", -np.inf),
    ),
    Reduction(
        "nanmin", quiet(np.nanmin), _doc(f"Minimum {_NAMES} ignoring NaN; NaN where every "
                                         "element is NaN (``np.nanmin``, without its warning).",
                                         "[[1.0, np.nan], [0.5, 2.0]]", '"C").numpy()',
                                         "array([1. , 0.5])"),
        (np.nanmin,), "extreme", function=True, empty=False,
        build=_nanextreme("min", np.inf),
    ),
    Reduction(
        "nanmean", quiet(np.nanmean), _doc(f"Mean {_NAMES} of the non-NaN elements "
                                           "(``np.nanmean``; NaN where there are none).",
                                           "[[1.0, np.nan], [3.0, 4.0]]", '"C").numpy()',
                                           "array([1. , 3.5])"),
        (np.nanmean,), "reduce", function=True, build=_nanmean,
    ),
    Reduction(
        "nanvar", quiet(np.nanvar), _doc(f"Variance {_NAMES} of the non-NaN elements "
                                         "(``np.nanvar``; ``ddof`` as ``var``).",
                                         "[[1.0, np.nan, 3.0]]", '"C").numpy()',
                                         "array([1.])"),
        (np.nanvar,), "spread", function=True, build=_nanvar,
    ),
    Reduction(
        "nanstd", quiet(np.nanstd), _doc(f"Standard deviation {_NAMES} of the non-NaN "
                                         "elements (``np.nanstd``).",
                                         "[[1.0, np.nan, 3.0]]", '"C").numpy()',
                                         "array([1.])"),
        (np.nanstd,), "spread", function=True, build=_nanstd,
    ),
    Reduction(
        "median", quiet(np.median), _doc(f"Median {_NAMES} (``np.median``: NaN propagates; "
                                         "``skipna=True``: ``nanmedian``). A numpy call.",
                                         "[[1.0, 9.0, 2.0], [4.0, 5.0, 6.0]]",
                                         '"C").numpy()', "array([2., 5.])"),
        (np.median,), "median", function=True, skipna="nanmedian", build=_median(np.median),
    ),
    Reduction(
        "nanmedian", quiet(np.nanmedian), _doc(f"Median {_NAMES} of the non-NaN elements "
                                               "(``np.nanmedian``).",
                                               "[[1.0, np.nan, 2.0], [4.0, 5.0, 6.0]]",
                                               '"C").numpy()', "array([1.5, 5. ])"),
        (np.nanmedian,), "median", function=True, build=_median(np.nanmedian),
    ),
    Reduction(
        "quantile", quiet(np.quantile),
        _doc("Quantile(s) ``q`` (in [0, 1]) over the named axes, as ``np.quantile`` (its "
             "``method=``). A list of ``q`` gives a leading axis ``quantile`` (xarray's "
             "name). A numpy call.", "[[1.0, 2.0, 3.0, 4.0]]",
             '[0.25, 0.5], "C").numpy()', "array([[1.75],\n           [2.5 ]])"),
        (np.quantile,), "quantile", function=True, skipna="nanquantile", empty=False,
        build=_quantile(np.quantile),
    ),
    Reduction(
        "nanquantile", quiet(np.nanquantile),
        _doc("Quantile(s) of the non-NaN elements (``np.nanquantile``; as ``quantile``).",
             "[[1.0, np.nan, 3.0]]", '0.5, "C").numpy()', "array([2.])"),
        (np.nanquantile,), "quantile", function=True, empty=False, build=_quantile(np.nanquantile),
    ),
]
# fmt: on

REDUCTIONS: dict[str, Reduction] = {r.name: r for r in _ROWS}
# Reductions the kernels compute (``Reduce`` nodes), and numpy's meaning of each.
KERNEL_REDUCTIONS = tuple(r.name for r in _ROWS if r.is_kernel)
REDUCERS = {r.name: r.numpy for r in _ROWS if r.is_kernel}
# ``np.<ufunc>.reduce`` -> the reduction it is
UFUNC_REDUCE = {r.ufunc: r.name for r in _ROWS if r.ufunc}
