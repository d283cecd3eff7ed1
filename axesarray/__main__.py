"""``python -m axesarray``: the ``axesarray`` command (see ``axesarray.io.cli``)."""

from .io.cli import entry

if __name__ == "__main__":  # importing this module (pkgutil, doctests) runs nothing
    entry()
