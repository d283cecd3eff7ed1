"""Global options: ``set_options`` (also a context manager) and ``get_option``.

Owns the option table and its validation. Imports only ``errors``.
"""

from __future__ import annotations

import threading

from .errors import message

__all__ = ["get_option", "set_options", "OPTIONS"]

# name -> (default, allowed values or a validator)
_SPEC = {
    # "numba": the fused engine; "numpy": the reference engine (one numpy call per node).
    "engine": ("numba", ("numba", "numpy")),
    # "union": non-subset operands broadcast to left axes + right's new axes;
    # "subset": that case is an error (strict mode).
    "broadcast": ("union", ("union", "subset")),
    # Elements below which the CPU kernels run their serial variant.
    "serial_threshold": (100_000, lambda v: isinstance(v, int) and v >= 0),
    # Answer new cheap expressions with numpy while their kernels compile (engine.tiers).
    "tiered": (True, lambda v: isinstance(v, bool)),
    # How many values a repr prints per axis before eliding with '...'.
    "display_edgeitems": (3, lambda v: isinstance(v, int) and v >= 1),
}

OPTIONS: dict = {k: v[0] for k, v in _SPEC.items()}
_lock = threading.Lock()


def get_option(name: str):
    """Return the current value of an option.

    >>> get_option("broadcast")
    'union'
    """
    return OPTIONS[name]


def _validate(name: str, value) -> None:
    if name not in _SPEC:
        raise ValueError(
            message("set_options", f"unknown option {name!r}", f"options: {', '.join(_SPEC)}")
        )
    allowed = _SPEC[name][1]
    ok = value in allowed if isinstance(allowed, tuple) else allowed(value)
    if not ok:
        hint = f"Use one of {allowed}" if isinstance(allowed, tuple) else None
        raise ValueError(message("set_options", f"bad value for {name!r}", f"got {value!r}", hint))


class set_options:
    """Set global options; as a context manager, restore them on exit.

    Options: ``engine`` ("numba" or "numpy"), ``broadcast`` ("union" or "subset"),
    ``serial_threshold`` (int), ``display_edgeitems`` (int).

    >>> import axesarray as ax
    >>> with ax.set_options(broadcast="subset"):
    ...     ax.get_option("broadcast")
    'subset'
    >>> ax.get_option("broadcast")
    'union'
    """

    def __init__(self, **kwargs) -> None:
        for k, v in kwargs.items():
            _validate(k, v)
        with _lock:
            self._old = {k: OPTIONS[k] for k in kwargs}
            OPTIONS.update(kwargs)

    def __enter__(self) -> set_options:
        return self

    def __exit__(self, *exc) -> None:
        with _lock:
            OPTIONS.update(self._old)
