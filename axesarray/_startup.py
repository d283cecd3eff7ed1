"""Ctrl-C while the ``axesarray`` program imports the package.

Imported first by ``axesarray/__init__``. When this process is the ``axesarray`` program
(``python -m axesarray`` or the console script), SIGINT only sets ``HIT`` from here on:
an interrupt raised inside the imports (numba's, in a class body or an import hook) can
come out as another error (``RuntimeError``, exit 1) instead of an interrupt. The
program checks ``HIT`` once the imports are done (``cli.entry``) and exits with 130. A
library import is left alone: Python's own handling stays.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

__all__ = ["HIT", "is_program"]

HIT: list[int] = []


def _handler(signum, frame) -> None:
    HIT.append(signum)


def is_program() -> bool:
    """Whether this process runs the ``axesarray`` command.

    >>> is_program()
    False
    """
    argv = list(getattr(sys, "orig_argv", ()))
    if "-m" in argv[1:-1]:  # python [options] -m axesarray[.cli]: runpy imports us first
        module = argv[argv.index("-m", 1) + 1]
        return module in ("axesarray", "axesarray.__main__", "axesarray.io.cli")
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    return (
        bool(sys.argv)
        and os.path.basename(sys.argv[0]) in ("axesarray", "axesarray.exe")
        and script is not None
        and os.path.abspath(script) == os.path.abspath(sys.argv[0])
    )


if is_program():
    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGINT, _handler)
