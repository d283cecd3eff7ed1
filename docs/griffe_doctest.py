"""A griffe extension for the API reference: docstring examples become code blocks.

The package's docstrings are plain text with doctest examples (``>>>`` lines and their
output, run by ``tests/test_misc.py::test_doctests``). Rendered as Markdown, ``>>>`` would
be a nested quote; this wraps each example run in a ``pycon`` fence instead.
"""

from __future__ import annotations

import griffe


def fence_doctests(text: str) -> str:
    """Wrap every run of doctest lines (prompt, continuation, output) in a pycon fence."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
                i += 1
            out += [indent + "```pycon", *(indent + b for b in block), indent + "```"]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fences the examples of every docstring griffe loads (statically or by inspection)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
