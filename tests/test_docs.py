"""The README's tour runs as written, and the demo prints its tour."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_tour_runs():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"print": lambda *a, **k: None})


def test_demo_prints_the_tour():
    out = subprocess.run(
        [sys.executable, "-m", "axesarray.demo"], capture_output=True, text=True, check=True
    ).stdout
    for heading in (
        "Axes instead of shapes",
        "Views never copy",
        "Broadcasting by name",
        "A lazy expression",
        "Reductions by name",
        "Memory layouts",
    ):
        assert heading in out
    assert "round trip exact: True" in out


def test_notebook_runs():
    """notebooks/tour.ipynb executes top to bottom without errors."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / "tour.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors, errors
