"""Imports flow one way (DESIGN §7): a module imports only modules listed before it here,
at any depth: inside functions too, so a lazy import cannot hide a circle. The folders are
the layers: each folder's modules (its subfolders included) stand together in this order,
lowest layer first, and a package's ``__init__`` comes after its modules. Generated
kernel sources (strings) import ``axesarray.kernels.mathlib``; they are not modules of the
package and are not checked here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "axesarray"

ORDER = [
    "_startup",
    "errors",
    "options",
    "_version",
    "core.ops",
    "core.reductions_table",
    "core.axes",
    "core.dtypes",
    "core.strided",
    "core",
    "storage.memory",
    "storage.numba_private",
    "storage.devices",
    "storage.layouts",
    "storage",
    "dag.nodes",
    "dag.resize",
    "dag.replay",
    "dag.build",
    "dag.chunked_leaf",
    "dag.views",
    "dag.reshape",
    "dag.text",
    "dag",
    "display.memory_map",
    "display.pictures",
    "display.htmlparts",
    "display.planviews",
    "display.reprs",
    "display",
    "kernels.loops",
    "kernels.ir",
    "kernels.scalar",
    "kernels.lower",
    "kernels.atomics",
    "kernels.threads",
    "kernels.repack.plan",
    "kernels.repack.simd",
    "kernels.repack.cuda_source",
    "kernels.repack.run_cuda",
    "kernels.repack.run_cpu",
    "kernels.repack",
    "kernels.mathlib",
    "kernels.tier_loops",
    "kernels.tier_math",
    "kernels.scan_loops",
    "kernels.scans",
    "kernels.cpu_parts",
    "kernels.cpu_normalize",
    "kernels.cpu",
    "kernels.cuda",
    "kernels.cache_key",
    "kernels.cache",
    "kernels",
    "engine.schedule",
    "engine.cost",
    "engine.order",
    "engine.direct",
    "engine.reference",
    "engine.rewrite",
    "engine.normalize",
    "engine.planner",
    "engine.binder",
    "engine.dispatch",
    "engine.explain",
    "engine.alias",
    "engine.routes",
    "engine.worker",
    "engine.tier_ops",
    "engine.tier_write",
    "engine.tier_eval",
    "engine.tiers",
    "engine.runner",
    "engine.executor",
    "engine.multi",
    "engine.chunked.tasks",
    "engine.chunked.lowering",
    "engine.chunked",
    "engine",
    "autograd.rules",
    "autograd.program",
    "autograd",
    "tensors.base",
    "tensors.structures",
    "tensors.calls",
    "tensors.indexing",
    "tensors.reducing",
    "tensors.layout_methods",
    "tensors.interop",
    "tensors.chunking",
    "tensors.gradients",
    "tensors.numbers",
    "tensors.metadata",
    "tensors.tensor",
    "tensors",
    "functions",
    "everyday",
    "layout_ops",
    "creation",
    "nn.graph",
    "nn.functional",
    "nn.optim",
    "nn",
    "io.npy",
    "io.zarr_store",
    "io.cli",
    "io",
    "array_api._array",
    "array_api._operators",
    "array_api._indexing",
    "array_api._creation",
    "array_api._functions",
    "array_api._linalg",
    "array_api._numpy",
    "array_api._info",
    "array_api._xarray",
    "array_api",
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


def _folder(module: str) -> tuple[str, ...]:
    """The folder a module lives in (a package's ``__init__`` lives in its own folder)."""
    parts = tuple(module.split(".")) if module != "__init__" else ()
    return parts if module in PACKAGES else parts[:-1]


PACKAGES = {_module_name(p) for p in PACKAGE.rglob("__init__.py")}


def test_folders_are_layers():
    """Each folder's modules, subfolders included, are one run of ORDER, with the package's
    ``__init__`` last: a folder is a layer (or a wing of one), never interleaved with another."""
    folders = {_folder(m) for m in ORDER}
    for folder in folders - {()}:
        inside = [i for i, m in enumerate(ORDER) if _folder(m)[: len(folder)] == folder]
        assert inside == list(range(inside[0], inside[-1] + 1)), (
            folder,
            [ORDER[i] for i in inside],
        )
        assert ORDER[inside[-1]] == ".".join(folder), f"{'.'.join(folder)}/__init__ is not last"


def test_no_two_modules_share_a_base_name():
    """One name, one module: ``chunked`` or ``plan`` never means two files."""
    seen: dict[str, list[str]] = {}
    for p in PACKAGE.rglob("*.py"):
        if p.name != "__init__.py":
            seen.setdefault(p.stem, []).append(_module_name(p))
    assert not {k: v for k, v in seen.items() if len(v) > 1}


def test_one_concept_per_module():
    """Every module opens with a docstring naming its one concept; 800 lines is the ceiling
    (a module that grows past ~600 is usually two concepts and worth splitting)."""
    for p in PACKAGE.rglob("*.py"):
        text = p.read_text()
        doc = ast.get_docstring(ast.parse(text))
        assert doc and doc.strip(), f"{_module_name(p)} has no docstring"
        assert len(text.splitlines()) <= 800, _module_name(p)
