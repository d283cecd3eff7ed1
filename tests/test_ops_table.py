"""Every row of the op table (``ops.OPS``) against numpy, under both engines.

Adding an op is one row in ``axesarray/ops.py`` plus one row in ``CASES`` here: how to
call it on tensors, numpy's function, and the inputs it is defined on. The tests below
check each row's values and dtypes (sizes 0, 1 and more; float32, float64 and the
integer/bool dtypes its ufunc accepts), the generated public function and its docstring,
the generated ``Tensor`` operators and the numpy-ufunc map.
"""

from __future__ import annotations

import contextlib
import operator

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.core.ops import OPS, UFUNCS
from axesarray.engine import direct
from axesarray.tensors.tensor import elementwise

rng = np.random.default_rng(7)

# op -> (our call on tensors, numpy's call, input domain: "any", "positive", "unit", "int")
CASES = {
    "add": (operator.add, np.add, "any"),
    "sub": (operator.sub, np.subtract, "any"),
    "mul": (operator.mul, np.multiply, "any"),
    "truediv": (operator.truediv, np.true_divide, "nonzero"),
    "floordiv": (operator.floordiv, np.floor_divide, "nonzero"),
    "mod": (operator.mod, np.remainder, "nonzero"),
    "pow": (operator.pow, np.power, "positive"),
    "maximum": (ax.maximum, np.maximum, "any"),
    "minimum": (ax.minimum, np.minimum, "any"),
    # np.clip against one bound (scalar-bound tie rule: tests/test_special_values.py)
    "clip_lo": (lambda x, b: elementwise("clip_lo", x, b), lambda x, b: np.clip(x, b, None), "any"),
    "clip_hi": (lambda x, b: elementwise("clip_hi", x, b), lambda x, b: np.clip(x, None, b), "any"),
    "hypot": (ax.hypot, np.hypot, "any"),
    "and": (operator.and_, np.bitwise_and, "int"),
    "or": (operator.or_, np.bitwise_or, "int"),
    "xor": (operator.xor, np.bitwise_xor, "int"),
    "eq": (operator.eq, np.equal, "any"),
    "ne": (operator.ne, np.not_equal, "any"),
    "lt": (operator.lt, np.less, "any"),
    "le": (operator.le, np.less_equal, "any"),
    "gt": (operator.gt, np.greater, "any"),
    "ge": (operator.ge, np.greater_equal, "any"),
    "neg": (operator.neg, np.negative, "any"),
    "invert": (operator.invert, np.invert, "int"),
    "abs": (ax.abs, np.absolute, "any"),
    "square": (ax.square, np.square, "any"),
    "sign": (ax.sign, np.sign, "any"),
    "exp": (ax.exp, np.exp, "any"),
    "expm1": (ax.expm1, np.expm1, "any"),
    "log": (ax.log, np.log, "positive"),
    "log1p": (ax.log1p, np.log1p, "positive"),
    "sqrt": (ax.sqrt, np.sqrt, "positive"),
    "sin": (ax.sin, np.sin, "any"),
    "cos": (ax.cos, np.cos, "any"),
    "tanh": (ax.tanh, np.tanh, "any"),
    "sigmoid": (ax.sigmoid, lambda x: 1 / (1 + np.exp(-x)), "any"),
    "floor": (ax.floor, np.floor, "any"),
    "ceil": (ax.ceil, np.ceil, "any"),
    "rint": (lambda x: x.round(), np.round, "any"),
    "isnan": (ax.isnan, np.isnan, "any"),
    "isinf": (ax.isinf, np.isinf, "any"),
    "isfinite": (ax.isfinite, np.isfinite, "any"),
    "logical_not": (ax.logical_not, np.logical_not, "any"),
    "stop_gradient": (ax.stop_gradient, lambda x: x.copy(), "any"),
    "where": (lambda c, a, b: ax.where(c > 0, a, b), lambda c, a, b: np.where(c > 0, a, b), "any"),
}


def _inputs(domain: str, dtype: str, n: int) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = rng.uniform(-3, 3, n)
        if domain == "positive":
            x = np.abs(x) + 0.1
        elif domain == "nonzero":
            x = np.where(np.abs(x) < 0.1, 0.5, x)
    elif dt.kind == "b":
        x = rng.integers(0, 2, n)
    else:
        lo = 1 if domain in ("positive", "nonzero") else (0 if dt.kind == "u" else -5)
        x = rng.integers(lo, 6, n)
    return x.astype(dt)


def test_every_op_has_a_test_row():
    assert set(CASES) == set(OPS), "add a CASES row for each new op (and only for them)"


@pytest.mark.parametrize("engine_name", ["numpy", "numba", "direct"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_each_op_matches_numpy(op, engine_name):
    """``numba``: the kernels (the direct path off); ``direct``: numpy's ufunc where
    ``engine.direct`` answers a single op on plain leaves, else the kernels."""
    ours, theirs, domain = CASES[op]
    row = OPS[op]
    dtypes = ["float32", "float64"] if domain != "int" else ["int8", "int64", "uint16", "bool"]
    off = direct.disabled() if engine_name == "numba" else contextlib.nullcontext()
    with ax.set_options(engine="numpy" if engine_name == "numpy" else "numba"), off:
        for dtype in dtypes:
            for n in (0, 1, 37):
                args = [_inputs(domain, dtype, n) for _ in range(row.arity)]
                try:
                    with np.errstate(all="ignore"):
                        expected = np.asarray(theirs(*args))
                except TypeError:
                    continue  # numpy has no loop for this dtype: nor do we (promotion tests)
                tensors = [ax.tensor(a, "N") for a in args]
                got = ours(*tensors)
                assert_close(got, expected, err_msg=f"{op} {dtype} n={n}")


@pytest.mark.parametrize("name", sorted(r.public for r in OPS.values() if r.public))
def test_public_functions_are_generated_with_examples(name):
    fn = getattr(ax, name)
    assert name in ax.__all__
    assert fn.__name__ == name
    assert f">>> ax.{name}(" in fn.__doc__, "the row's docstring needs a runnable example"


def test_operators_and_ufuncs_are_generated():
    x = ax.tensor(np.array([1.0, 2.0]), "N")
    for row in OPS.values():
        if row.dunder:
            assert hasattr(ax.Tensor, f"__{row.dunder}__"), row.name
        if row.ufunc:
            assert UFUNCS[row.ufunc] == row.name
    assert_close(np.hypot(x, x), np.hypot([1.0, 2.0], [1.0, 2.0]))  # ufunc map: lazy, named
    assert isinstance(np.hypot(x, x), ax.Tensor)


def test_in_place_bitwise_operators_write_the_tensor():
    a = np.array([0b1100, 0b1010], np.int32)
    t = ax.tensor(a, "N")
    t &= 0b0110
    np.testing.assert_array_equal(a, [0b0100, 0b0010])


def test_hypot_broadcasts_by_name():
    a = ax.tensor(np.array([3.0, 5.0]), "N")
    b = ax.tensor(np.array([[4.0], [12.0]]), "M K")
    got = ax.hypot(a, b)
    assert got.names == ("N", "M", "K")
    assert_close(got, np.hypot(np.array([3.0, 5.0])[:, None, None], np.array([[4.0], [12.0]])))


def test_hypot_arity_error():
    with pytest.raises(TypeError, match=r"hypot: takes 2 arguments \(got 1\)"):
        ax.hypot(ax.zeros((ax.Axis("N", 2),)))
