"""Every public function, class, method and property has a docstring with a runnable
example (``>>>``; ``test_misc.py::test_doctests`` runs them), and the API reference of
the documentation site lists every public name."""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path

import pytest

import axesarray as ax

ROOT = Path(__file__).resolve().parent.parent


MODULE_CLASSES = {"optim": ("SGD", "Adam"), "array_api": ("Array",)}


def _public_names():
    return [n for n in ax.__all__ if n != "__version__"]


def _members(cls):
    """(qualified name, docstring) of a class's public methods and properties, inherited
    ones included (as users see them), that are defined in axesarray; attrs fields (data,
    not code) are left out."""
    fields = {f.name for f in getattr(cls, "__attrs_attrs__", ())}
    out = []
    for klass in cls.__mro__:
        if not klass.__module__.startswith("axesarray"):
            continue
        for name, member in vars(klass).items():
            if name.startswith("_") or name in fields or name in {n for n, _ in out}:
                continue
            fn = member.fget if isinstance(member, property) else member
            if isinstance(fn, (classmethod, staticmethod)):
                fn = fn.__func__
            if callable(fn):
                out.append((f"{cls.__name__}.{name}", inspect.getdoc(member) or ""))
    return sorted(out)


def _everything():
    items = []
    for name in _public_names():
        obj = getattr(ax, name)
        items.append((name, inspect.getdoc(obj) or ""))
        if isinstance(obj, types.ModuleType):  # ax.optim, ax.array_api: their public classes
            classes = [getattr(obj, n) for n in MODULE_CLASSES[name]]
        else:
            classes = [obj] if inspect.isclass(obj) else []
        for cls in classes:
            if isinstance(obj, types.ModuleType):
                items.append((f"{name}.{cls.__name__}", inspect.getdoc(cls) or ""))
            items += _members(cls)
    return items


def test_the_walk_sees_the_api():
    """The walk reaches functions, classes, methods, properties and inherited members."""
    names = {n for n, _ in _everything()}
    for expected in (
        "exp",
        "tensor",
        "Tensor",
        "Tensor.sum",
        "Tensor.shape",
        "Tensor.cumsum",
        "Tensor.backward",
        "Layout.parse",
        "optim.SGD",
        "SGD.step",
        "Axis.resize",
    ):
        assert expected in names
    assert "Layout.order" not in names  # an attrs field: data, documented by its class


@pytest.mark.parametrize("name,doc", _everything(), ids=lambda v: v if "\n" not in v else "")
def test_has_an_example(name, doc):
    assert doc.strip(), f"{name} has no docstring"
    assert re.search(r"^\s*>>> ", doc, re.M), f"{name}: the docstring has no >>> example"


def test_api_reference_lists_every_public_name():
    """docs/api/*.md has a ``::: axesarray.NAME`` directive for every name in __all__
    (``optim``: its classes); mkdocs build --strict checks that each one resolves."""
    text = "\n".join(p.read_text() for p in (ROOT / "docs" / "api").glob("*.md"))
    documented = set(re.findall(r"^::: axesarray\.([\w.]+)", text, re.M))
    missing = [
        n
        for n in _public_names()
        if n not in documented and not any(d.startswith(n + ".") for d in documented)
    ]
    assert not missing, f"not in the API reference (docs/api/*.md): {missing}"
