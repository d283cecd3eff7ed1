"""Pure value math, no storage and no numba: ``Axis``/``Axes`` and the broadcasting rule,
dtypes, strided view arithmetic, and the op table."""
