"""``__array_namespace_info__``: devices and default dtypes of the namespace."""

from __future__ import annotations

import numpy as np

from ._array import DTYPES

__all__ = ["__array_namespace_info__"]

_KINDS = {
    "bool": "b",
    "signed integer": "i",
    "unsigned integer": "u",
    "integral": "iu",
    "real floating": "f",
    "complex floating": "c",
    "numeric": "iufc",
}


class Info:
    """What the namespace supports (the standard's inspection API)."""

    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        from ..storage.devices import as_device

        return as_device("cpu")

    def devices(self):
        return [self.default_device()]

    def default_dtypes(self, *, device=None):
        return {
            "real floating": np.dtype("float64"),
            "complex floating": np.dtype("complex128"),
            "integral": np.dtype("int64"),
            "indexing": np.dtype("int64"),
        }

    def dtypes(self, *, device=None, kind=None):
        if kind is None:
            return {d.name: d for d in DTYPES}
        kinds = (kind,) if isinstance(kind, str) else tuple(kind)
        letters = "".join(_KINDS.get(k, "") for k in kinds)
        return {d.name: d for d in DTYPES if d.kind in letters}


def __array_namespace_info__() -> Info:
    """The namespace's inspection object.

    >>> import axesarray.array_api as xp
    >>> xp.__array_namespace_info__().default_dtypes()["integral"]
    dtype('int64')
    """
    return Info()
