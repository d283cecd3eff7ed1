"""Module-level imports flow one way (DESIGN §7): a module imports only modules listed
before it here. Methods that delegate upward (``Tensor.to_layout``, ``.to``, ``repr``)
import their module when called, which this test does not see by design."""

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
    "layouts",
    "expr",
    "devices",
    "kernels.numba_private",
    "kernels.loops",
    "kernels.ir",
    "kernels.scalar",
    "kernels.lower",
    "kernels.repack_plan",
    "kernels.repack_simd",
    "kernels.mathlib",
    "kernels.repack_cuda_kernels",
    "kernels.repack_cuda",
    "kernels.repack",
    "kernels.cpu",
    "kernels.cuda",
    "kernels.cache",
    "kernels",
    "engine.order",
    "engine.reference",
    "engine.planner",
    "engine.explain",
    "engine.fused",
    "engine",
    "views",
    "reductions",
    "tensor",
    "functions",
    "creation",
    "layout_ops",
    "npyio",
    "_repr",
    "cli",
    "__main__",
    "demo",
    "__init__",
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Package modules imported at module level (relative imports)."""
    name = _module_name(path)
    package = name.split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            if node.module:
                found.add(".".join([*base, node.module]))
            else:
                found.update(".".join([*base, a.name]) for a in node.names)
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
