"""Imports flow one way (DESIGN §7): a module imports only modules listed before it here,
at any depth: inside functions too, so a lazy import cannot hide a circle. Generated
kernel sources (strings) import ``axesarray.kernels.mathlib``; they are not modules of the
package and are not checked here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "axesarray"

ORDER = [
    "errors",
    "options",
    "ops",
    "_version",
    "axes",
    "dtypes",
    "strided",
    "storage",
    "numba_private",
    "devices",
    "layouts",
    "expr",
    "expr_ops",
    "expr_chunked",
    "expr_views",
    "reshape",
    "_exprtext",
    "memory_map",
    "pictures",
    "_html",
    "_planrepr",
    "_repr",
    "kernels.loops",
    "kernels.ir",
    "kernels.scalar",
    "kernels.lower",
    "kernels.repack_plan",
    "kernels.repack_simd",
    "kernels.mathlib",
    "kernels.threads",
    "kernels.repack_cuda_kernels",
    "kernels.repack_cuda",
    "kernels.repack",
    "kernels.cpu",
    "kernels.cuda",
    "kernels.cache",
    "kernels",
    "engine.schedule",
    "engine.order",
    "engine.reference",
    "engine.rewrite",
    "engine.planner",
    "engine.binder",
    "engine.dispatch",
    "engine.plan",
    "engine.alias",
    "engine.routes",
    "engine.tiers",
    "engine.executor",
    "engine.multi",
    "engine.chunk_run",
    "engine.chunked",
    "engine",
    "autograd",
    "program",
    "calls",
    "views",
    "reductions",
    "layout_views",
    "interop",
    "chunked",
    "grads",
    "scalars",
    "describe",
    "tensor",
    "functions",
    "everyday",
    "layout_ops",
    "creation",
    "graph",
    "nn",
    "optim",
    "npyio",
    "zarr_io",
    "cli",
    "__init__",
    "__main__",
    "demo",
    "testing.asserts",
    "testing.strategies",
    "testing.programs",
    "testing.expressions",
    "testing",
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Package modules imported anywhere in a file (relative or ``axesarray.`` imports)."""
    name = _module_name(path)
    package = name.split(".") if name != "__init__" else []
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            if node.module:
                found.add(".".join([*base, node.module]))
            else:
                found.update(".".join([*base, a.name]) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("axesarray"):
            found.add(node.module.removeprefix("axesarray").lstrip(".") or "__init__")
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("axesarray").lstrip(".") or "__init__"
                for a in node.names
                if a.name == "axesarray" or a.name.startswith("axesarray.")
            )
    return {m for m in found if m}


def test_every_module_is_placed():
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    assert modules <= set(ORDER), sorted(modules - set(ORDER))


def test_imports_flow_one_way():
    rank = {m: i for i, m in enumerate(ORDER)}
    upward = []
    for path in PACKAGE.rglob("*.py"):
        me = _module_name(path)
        for dep in _imports(path):
            if dep in rank and rank[dep] >= rank[me]:
                upward.append(f"{me} imports {dep}")
    assert not upward, upward


def test_the_check_sees_imports_inside_functions(tmp_path):
    """A lazy upward import inside a function is found (the rule holds at any depth)."""
    pkg = tmp_path / "axesarray"
    pkg.mkdir()
    mod = pkg / "errors.py"
    mod.write_text("def f():\n    from .tensor import Tensor\n    import axesarray.engine\n")
    global PACKAGE
    saved, PACKAGE = PACKAGE, pkg
    try:
        assert _imports(mod) == {"tensor", "engine"}
    finally:
        PACKAGE = saved


def test_the_design_map_lists_every_module_in_import_order():
    """docs/design.md's layer map is the same list as ORDER: it cannot drift from the code."""
    text = (PACKAGE.parent / "docs" / "design.md").read_text()
    table = text.split("<!-- layer map: begin -->")[1].split("<!-- layer map: end -->")[0]
    listed = [line.split("|")[2].strip().strip("`") for line in table.splitlines()[3:] if line]
    assert listed == ORDER


def test_no_module_is_over_600_lines():
    big = {
        _module_name(p): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600
    }
    assert not big, big
