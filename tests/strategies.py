"""The project's hypothesis strategies, which live in ``axesarray.testing`` so that users can
test their own code the way this project tests itself; tests import them from here."""

from __future__ import annotations

from axesarray.testing.expressions import programs
from axesarray.testing.programs import (
    BINARY,
    COMPARE,
    NP_BINARY,
    REDUCE,
    UNARY,
    Input,
    ProgramSpec,
    Shadow,
    build,
    shadow_eval,
)
from axesarray.testing.strategies import (
    DTYPES,
    FLOATS,
    INTS,
    NAMES,
    Source,
    apply_view_op,
    axes,
    dtypes,
    make_array,
    np_align,
    numpy_tensors,
    random_values,
    shadow_view_op,
    sources,
    spec_broadcast,
    tensors,
    view_ops,
)

__all__ = [
    "BINARY",
    "COMPARE",
    "DTYPES",
    "FLOATS",
    "INTS",
    "NAMES",
    "NP_BINARY",
    "REDUCE",
    "UNARY",
    "Input",
    "ProgramSpec",
    "Shadow",
    "Source",
    "apply_view_op",
    "axes",
    "build",
    "dtypes",
    "make_array",
    "np_align",
    "numpy_tensors",
    "programs",
    "random_values",
    "shadow_eval",
    "shadow_view_op",
    "sources",
    "spec_broadcast",
    "tensors",
    "view_ops",
]
