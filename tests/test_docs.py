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


# --- claims that hold -----------------------------------------------------------------------
# Every "N kernels" sentence of the README, the guides and the notebooks is listed here with
# the check that makes it true (run against ax.explain where the page shows the expression),
# or the reason it counts no expression on the page (a rule, or a count a benchmark runner
# prints and checks itself). A new claim fails test_every_kernel_claim_is_listed until it is
# listed; a plan that changes fails test_kernel_claim_holds.

KERNEL_CLAIM = re.compile(
    r"\b(?:one|two|three|four|five|six|a few|several|single|\d+)\s+"
    r"(?:fused\s+|compiled\s+|elementwise\s+|reduction\s+|BLAS\s+)?kernels?\b"
    r"(?!\s+(?:cache|body|source|code|variant))",
    re.I,
)
CLAIM_PAGES = [
    ROOT / "README.md",
    ROOT / "docs" / "index.md",
    ROOT / "docs" / "getting-started.md",
    *sorted((ROOT / "docs" / "guide").glob("*.md")),
    *NOTEBOOKS,
]
BENCH = "a benchmark runner prints this count from ax.explain (tests/test_benchmarks.py runs it)"
RULE = "a rule of the planner, not a count of an expression on the page"

K = "len(ax.explain({}).kernels)"
CLAIMS = [  # (page, text on the claim's line, check run after the page's code, or why not)
    ("docs/guide/interop.md", "# float32 inside one kernel, one rounding", K.format("e") + " == 1"),
    (
        "docs/guide/layouts.md",
        "one fused kernel reads float32 in logical order",
        "len(ax.explain((x * inv).round().clip(-128, 127).astype('int8'), out=q).kernels) == 1",
    ),
    (
        "docs/guide/layouts.md",
        "evaluated on its own is one kernel too",
        "len(ax.explain((x / scale).round().clip(-128, 127)).kernels) == 1",
    ),
    (
        "docs/guide/layouts.md",
        "assigned into `q` it runs as two kernels",
        "len(ax.explain((x / scale).round().clip(-128, 127).astype('int8'), out=q).kernels) == 2",
    ),
    (
        "02_layouts.ipynb",
        "one fused kernel reads float32 in logical order",
        "len(ax.explain(e, out=q).kernels) == 1",
    ),
    ("README.md", "# 2 kernels: b copied", K.format("e") + " == 2"),
    ("README.md", "# one kernel: the reduction fuses", K.format("s") + " == 1"),
    (
        "README.md",
        "# 6 stages, 8 kernels (2 of them BLAS",
        "(lambda p: (len(p.stages), len(p.kernels), [k.kind for k in p.kernels].count('blas'))"
        " == (6, 8, 2))(ax.explain(step))",
    ),
    ("docs/index.md", "# one fused kernel", K.format("y") + " == 1"),
    (
        "docs/getting-started.md",
        "# 2 kernels: bias / 10 into H W order",
        "[(k.writes, k.loops) for k in ax.explain(e).kernels][0] == "
        "('temporary #0', ((20, 'W H'),)) and " + K.format("e") + " == 2",
    ),
    (
        "docs/guide/dask.md",
        "(one fused kernel per chunk)",
        "[(s.kind, len(s.kernels)) for s in ax.explain(ax.sigmoid(ax.tensor(np.ones((8, 4)), "
        "'N C').chunk({'N': 2}) * 2)).steps] == [('blockwise', 1)]",
    ),
    ("docs/guide/dask.md", "as one fused reduction kernel, or as two kernels", RULE),
    (
        "docs/guide/dask.md",
        "one layer of 8 tasks, each one fused kernel call",
        "[(s.kind, s.tasks, len(s.kernels)) for s in ax.explain(ax.sigmoid(ax.tensor(np.ones("
        "(8, 4)), 'N C').chunk({'N': 1}) * 2 + 1)).steps] == [('blockwise', 8, 1)]",
    ),
    ("docs/guide/dask.md", "**Reductions in two kernels where that is faster.**", RULE),
    (
        "docs/guide/dask.md",
        "| two kernels | one fused kernel | used |",
        "a table of `benchmarks/bench_dask.py split` timings of both ways",
    ),
    ("docs/guide/dask.md", "(now two kernels, above)", RULE),
    ("docs/guide/fusion.md", "**one fused kernel** where it can be", RULE),
    ("docs/guide/fusion.md", "one kernel is computed once.", RULE),
    (
        "docs/guide/fusion.md",
        "# 1 elementwise kernel, no temporary",
        "[k.kind for k in ax.explain(e).kernels] == ['elementwise'] "
        "and ax.explain(e).temporaries == ()",
    ),
    (
        "docs/guide/fusion.md",
        "# 1 kernel: the max, then exp stored, summed, divided",
        "[k.kind for k in ax.explain(softmax).kernels] == ['reduction']",
    ),
    (
        "docs/guide/fusion.md",
        "# 1 kernel: mean, variance, result",
        "[k.kind for k in ax.explain(layer_norm).kernels] == ['reduction'] "
        "and ax.explain(layer_norm).temporaries == ()",
    ),
    (
        "docs/guide/fusion.md",
        "`((a - b) ** 2).sum()` is one kernel",
        K.format("((x - x * 2) ** 2).sum()") + " == 1 == " + K.format("x.mean('C')"),
    ),
    (
        "docs/guide/fusion.md",
        "# one reduction kernel",
        "[k.kind for k in ax.explain(((a - c) ** 2).sum()).kernels] == ['reduction']",
    ),
    (
        "docs/guide/fusion.md",
        "# one kernel writing into out",
        "len(ax.explain(ax.tanh(x) * b, out=out).kernels) == 1",
    ),
    ("docs/guide/layouts.md", "one compiled kernel per word", RULE),
    ("docs/guide/performance.md", "softmax over K, (4096,1000), 2 kernels", BENCH),
    ("docs/guide/performance.md", "batch norm (32,64,56,56) into `out=`, 3 kernels", BENCH),
    ("docs/guide/performance.md", "0.40 s at 32 ops in 2 kernels", BENCH),
    ("docs/guide/performance.md", "128 ops in 8 kernels", BENCH),
    ("docs/guide/performance.md", "(1.24x forward; 4 kernels)", BENCH),
    ("docs/guide/performance.md", "numpy answers while the 3 kernels compile", BENCH),
    (
        "03_fusion.ipynb",
        "Two kernels: `b` is stored `W H`",
        "[(k.kind, k.writes) for k in ax.explain(e).kernels] == "
        "[('elementwise', 'temporary #0'), ('elementwise', 'result')]",
    ),
    (
        "03_fusion.ipynb",
        "# a reduction with its elementwise input: one kernel",
        K.format("sq") + " == 1",
    ),
    (
        "04_autograd.ipynb",
        "kernels, 5 of them BLAS calls",
        "(lambda p: (len(p.stages), len(p.kernels), [k.kind for k in p.kernels].count('blas'))"
        " == (15, 16, 5))(ax.explain(step))",
    ),
]


def claim_lines() -> list[tuple[str, int, str, int, int]]:
    """(page, line or cell, its text with line breaks as spaces, start, end) of every kernel
    count, also one that a line break splits ("... 19" / "kernels, ...")."""
    out = []
    for path in CLAIM_PAGES:
        if path.suffix == ".ipynb":
            nb = json.loads(path.read_text())
            texts = [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"])]
            page = path.name
        else:
            texts = [(0, path.read_text())]
            page = str(path.relative_to(ROOT))
        for cell, text in texts:
            flat = text.replace("\n", " ")
            for m in KERNEL_CLAIM.finditer(flat):
                line = text.count("\n", 0, m.start()) + 1
                where = cell if path.suffix == ".ipynb" else line
                out.append((page, where, flat, m.start(), m.end()))
    return out


def _listed(page: str, flat: str, start: int, end: int) -> list:
    """The CLAIMS rows of ``page`` whose text covers part of the count at start:end."""
    rows = []
    for row in CLAIMS:
        if row[0] != page:
            continue
        at = flat.find(row[1])
        while at >= 0:
            if at < end and start < at + len(row[1]):
                rows.append(row)
                break
            at = flat.find(row[1], at + 1)
    return rows


def test_every_kernel_claim_is_listed():
    """Each "N kernels" line of the docs is in CLAIMS (once), and CLAIMS has no stale row."""
    found = claim_lines()
    unlisted = [
        (p, n, flat[max(0, a - 60) : b + 20])
        for p, n, flat, a, b in found
        if len(_listed(p, flat, a, b)) != 1
    ]
    assert not unlisted, f"kernel counts not listed in CLAIMS (or listed twice): {unlisted}"
    for row in CLAIMS:
        hit = any(row in _listed(p, flat, a, b) for p, _, flat, a, b in found)
        assert hit, f"stale row: {row[0]}: {row[1]}"


def test_claim_detector_sees_counts():
    for text in ("# 1 kernel", "two kernels", "one fused kernel", "a few fused kernels"):
        assert KERNEL_CLAIM.search(text), text
    assert not KERNEL_CLAIM.search("the kernel cache") and not KERNEL_CLAIM.search(
        "one kernel cache"
    )


def _page_namespace(page: str, line: int) -> dict:
    """The namespace after running the page's code up to the claim: the python blocks (or
    notebook code cells) up to the first one that ends at or after it."""
    namespace: dict = {"__name__": "__doc_claims__"}
    if page.endswith(".ipynb"):
        nb = json.loads((ROOT / "notebooks" / page).read_text())
        cells = [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"])]
        code = [(i, src) for i, src in cells if nb["cells"][i]["cell_type"] == "code"]
        upto = next((i for i, _ in code if i >= line), code[-1][0])
        blocks = [src for i, src in code if i <= upto]
    else:
        text = (ROOT / page).read_text()
        blocks = []
        for m in BLOCK.finditer(text):
            code = m.group("code")
            first = code.lstrip().splitlines()[0] if code.strip() else ""
            if "notest" in m.group("info").split() or OPT_OUT.match(first):
                continue
            blocks.append(code)
            if text.count("\n", 0, m.end()) + 1 >= line:
                break
    with contextlib.redirect_stdout(io.StringIO()):
        for code in blocks:
            exec(compile(code, page, "exec"), namespace)
    return namespace


@pytest.mark.parametrize(
    "claim",
    [c for c in CLAIMS if c[2] not in (BENCH, RULE) and not c[2].startswith("a table")],
    ids=lambda c: f"{c[0]}:{c[1][:30]}",
)
def test_kernel_claim_holds(claim, tmp_path, monkeypatch):
    """The count the page states is what ax.explain says for the page's own expression."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    page, text, check = claim
    line = next(n for p, n, flat, a, b in claim_lines() if claim in _listed(p, flat, a, b))
    namespace = _page_namespace(page, line)
    namespace.setdefault("ax", ax)
    namespace.setdefault("np", __import__("numpy"))
    assert eval(check, namespace), f"{page}:{line}: {text!r} does not hold ({check})"


if __name__ == "__main__":  # python tests/test_docs.py docs/guide/views.md ...
    for arg in sys.argv[1:]:
        run_page(Path(arg).resolve())
        print("ok", arg)
