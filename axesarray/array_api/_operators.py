"""The Array's operators: the standard's dunders, set on the class from this table.

An operator of the op table is the Tensor's operator under positional broadcasting (lazy,
fused); shifts and integer powers are numpy call nodes (lazy); complex operands run numpy.
"""

from __future__ import annotations

import operator

import numpy as np

from ..errors import message
from ._array import (
    HOOKS,
    Array,
    _as_operand,
    astype,
    elementwise,
    from_numpy_result,
    is_numpy,
    to_numpy_args,
    ufunc_call,
)

__all__: list[str] = []


def _binary(op_fn, np_fn, name, reflected=False, fallback=None):
    def method(self, other):
        other = _as_operand(other, name)
        if other is NotImplemented:
            return NotImplemented
        pair = (other, self) if reflected else (self, other)
        if is_numpy(self) or is_numpy(other):
            return from_numpy_result(np_fn(*to_numpy_args(pair)))
        use = fallback(self, other) if fallback else False
        if use:
            return ufunc_call(np_fn, pair, name)
        return elementwise(op_fn, pair, name)

    method.__name__ = name
    return method


_INT_KINDS = "iub"


def _inplace(name):
    binop = getattr(Array, f"__{name}__")

    def method(self, other):
        res = binop(self, other)
        if res is NotImplemented:
            return NotImplemented
        if res.shape != self.shape:
            raise ValueError(
                message(
                    f"__i{name}__",
                    "an in-place result must keep the array's shape",
                    f"{self.shape} -> {res.shape}",
                    "Use the out-of-place operator",
                )
            )
        if res.dtype != self.dtype:
            res = astype(res, self.dtype)
        self._t = res._t
        return self

    method.__name__ = f"__i{name}__"
    return method


class _Operators:
    """Namespace of the dunders (copied onto Array below)."""

    # --- operators -----------------------------------------------------------------------
    __add__ = _binary(operator.add, np.add, "__add__")
    __radd__ = _binary(operator.add, np.add, "__radd__", True)
    __sub__ = _binary(operator.sub, np.subtract, "__sub__")
    __rsub__ = _binary(operator.sub, np.subtract, "__rsub__", True)
    __mul__ = _binary(operator.mul, np.multiply, "__mul__")
    __rmul__ = _binary(operator.mul, np.multiply, "__rmul__", True)
    __truediv__ = _binary(operator.truediv, np.true_divide, "__truediv__")
    __rtruediv__ = _binary(operator.truediv, np.true_divide, "__rtruediv__", True)
    __floordiv__ = _binary(operator.floordiv, np.floor_divide, "__floordiv__")
    __rfloordiv__ = _binary(operator.floordiv, np.floor_divide, "__rfloordiv__", True)
    __mod__ = _binary(operator.mod, np.remainder, "__mod__")
    __rmod__ = _binary(operator.mod, np.remainder, "__rmod__", True)
    __pow__ = _binary(operator.pow, np.power, "__pow__", fallback=lambda a, b: _int_pow(a, b))
    __rpow__ = _binary(
        operator.pow, np.power, "__rpow__", True, fallback=lambda a, b: _int_pow(b, a)
    )
    __and__ = _binary(operator.and_, np.bitwise_and, "__and__")
    __rand__ = _binary(operator.and_, np.bitwise_and, "__rand__", True)
    __or__ = _binary(operator.or_, np.bitwise_or, "__or__")
    __ror__ = _binary(operator.or_, np.bitwise_or, "__ror__", True)
    __xor__ = _binary(operator.xor, np.bitwise_xor, "__xor__")
    __rxor__ = _binary(operator.xor, np.bitwise_xor, "__rxor__", True)
    __lshift__ = _binary(None, np.left_shift, "__lshift__", fallback=lambda a, b: True)
    __rlshift__ = _binary(None, np.left_shift, "__rlshift__", True, fallback=lambda a, b: True)
    __rshift__ = _binary(None, np.right_shift, "__rshift__", fallback=lambda a, b: True)
    __rrshift__ = _binary(None, np.right_shift, "__rrshift__", True, fallback=lambda a, b: True)
    __eq__ = _binary(operator.eq, np.equal, "__eq__")  # type: ignore[assignment]
    __ne__ = _binary(operator.ne, np.not_equal, "__ne__")  # type: ignore[assignment]
    __lt__ = _binary(operator.lt, np.less, "__lt__")
    __le__ = _binary(operator.le, np.less_equal, "__le__")
    __gt__ = _binary(operator.gt, np.greater, "__gt__")
    __ge__ = _binary(operator.ge, np.greater_equal, "__ge__")

    def __matmul__(self, other):
        other = _as_operand(other, "__matmul__")
        return NotImplemented if other is NotImplemented else HOOKS["matmul"](self, other)

    def __rmatmul__(self, other):
        other = _as_operand(other, "__rmatmul__")
        return NotImplemented if other is NotImplemented else HOOKS["matmul"](other, self)

    def _unary_np(self, fn):
        return from_numpy_result(fn(self._t))

    def __neg__(self):
        if isinstance(self._t, np.ndarray):
            return self._unary_np(np.negative)
        if self.dtype == np.bool_:
            raise TypeError(
                message("__neg__", "negative of a boolean array", "", "Use ~x (logical not)")
            )
        return Array._new(-self._t)

    def __pos__(self):
        if isinstance(self._t, np.ndarray):  # (numpy gives a scalar for 0-d arrays)
            return self._unary_np(np.positive)
        return Array._new(+self._t)

    def __abs__(self):
        if isinstance(self._t, np.ndarray):
            return self._unary_np(np.abs)
        return Array._new(abs(self._t))

    def __invert__(self):
        if isinstance(self._t, np.ndarray):
            return self._unary_np(np.invert)
        return Array._new(~self._t)


def _int_pow(a, b):
    """Integer powers go to numpy (a fused kernel cannot raise on a negative exponent)."""
    da = a.dtype if isinstance(a, Array) else None
    db = b.dtype if isinstance(b, Array) else None
    return (
        (da is not None and da.kind in "iu")
        and (db is None or db.kind in "iu")
        and not isinstance(b, float)
    )


_SKIP = {"__dict__", "__weakref__", "__module__", "__doc__", "__qualname__"}
for _k, _v in vars(_Operators).items():
    if callable(_v) and _k not in _SKIP:
        setattr(Array, _k, _v)

for _name in (
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "and",
    "or",
    "xor",
    "lshift",
    "rshift",
):
    setattr(Array, f"__i{_name}__", _inplace(_name))


def _matmul_inplace(self, other):
    res = HOOKS["matmul"](self, _as_operand(other, "__imatmul__"))
    if res.shape != self.shape:
        raise ValueError(
            message(
                "__imatmul__",
                "an in-place result must keep the array's shape",
                f"{self.shape} -> {res.shape}",
            )
        )
    self._t = res._t if res.dtype == self.dtype else astype(res, self.dtype)._t
    return self


Array.__imatmul__ = _matmul_inplace  # type: ignore[attr-defined]
