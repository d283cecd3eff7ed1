"""The documentation runs as written: every ```python block of README.md and docs/**/*.md,
the demo, and every notebook (with a real Jupyter kernel); committed notebooks carry no
outputs."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import axesarray as ax

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
TEACHING = ("README.md", "index.md", "getting-started.md")  # and docs/guide/*
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# A block opts out with this first line, saying why (only for what CI cannot run: a GPU).
OPT_OUT = re.compile(r"#\s*doc-test:\s*skip\b(?P<why>.*)")
BLOCK = re.compile(r"^```python[ \t]*(?P<info>[^\n]*)\n(?P<code>.*?)^```", re.S | re.M)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block that runs: not ```python notest, and
    not opting out with a ``# doc-test: skip (reason)`` first line."""
    out = []
    for m in BLOCK.finditer(text):
        code = m.group("code")
        first = code.lstrip().splitlines()[0] if code.strip() else ""
        if "notest" in m.group("info").split() or OPT_OUT.match(first):
            continue
        out.append((text.count("\n", 0, m.start()) + 2, code))
    return out


def test_block_extraction():
    text = (
        "```python\na = 1\n```\ntext\n```python notest\nb = 2\n```\n"
        "```python\n# doc-test: skip (needs a GPU)\nc = 3\n```\n```bash\nd\n```\n"
        "```python\ne = 4\n```\n"
    )
    assert python_blocks(text) == [(2, "a = 1\n"), (16, "e = 4\n")]


def run_page(path: Path) -> None:
    """Run a page's blocks in order in one namespace (as a reader would in one session),
    reporting the page and line of a failure."""
    namespace = {"__name__": "__doc_page__"}
    rel = path.relative_to(ROOT)
    for line, code in python_blocks(path.read_text()):
        # Line numbers of the page in tracebacks: pad the code to where the block starts.
        compiled = compile("\n" * (line - 1) + code, str(rel), "exec")
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compiled, namespace)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_runs(page, tmp_path, monkeypatch):
    """Each page's python blocks run in order, in a fresh directory (examples write files)."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    teaching = page.parent.name == "guide" or page.name in TEACHING
    assert python_blocks(page.read_text()) or not teaching, f"{page} has no python example"
    with ax.set_options(tiered=True):  # as a reader runs them (conftest turns tiers off)
        run_page(page)


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


def test_notebooks_are_committed_without_outputs():
    """Outputs are produced by running (CI does); committed notebooks hold only sources."""
    assert len(NOTEBOOKS) >= 5
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert cell.get("outputs") == [], f"{path.name}: a cell has outputs"
                assert cell.get("execution_count") is None, f"{path.name}: execution counts"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    """The notebook executes top to bottom in a real Jupyter kernel; a failing cell fails."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()  # raises CellExecutionError on the first failing cell
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors, errors


if __name__ == "__main__":  # python tests/test_docs.py docs/guide/views.md ...
    for arg in sys.argv[1:]:
        run_page(Path(arg).resolve())
        print("ok", arg)
