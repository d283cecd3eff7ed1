"""``python -m axesarray``: the ``axesarray`` command (see ``axesarray.cli``)."""

from .cli import entry

if __name__ == "__main__":  # importing this module (pkgutil, doctests) runs nothing
    entry()
