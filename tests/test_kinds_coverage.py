"""Node kinds drive coverage: every table that dispatches on ``node.kind`` covers every kind
in ``dag.nodes.KINDS``, or its module's ``NO_RULE`` names the kind with a reason."""

from __future__ import annotations

import pytest

from axesarray.autograd import rules
from axesarray.dag import nodes, text
from axesarray.dag.chunked_leaf import Chunked
from axesarray.dag.reshape import Reshape
from axesarray.engine import planner, reference
from axesarray.engine.chunked import lowering


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_kinds_is_the_node_family():
    """KINDS lists exactly the kinds of the node classes (no class outside it, no stale name)."""
    kinds = {c.kind for c in _subclasses(nodes.Node)}
    assert kinds == set(nodes.KINDS), kinds ^ set(nodes.KINDS)
    assert Chunked.kind in nodes.KINDS and Reshape.kind in nodes.KINDS
    assert len(set(nodes.KINDS)) == len(nodes.KINDS)


TABLES = {
    "evaluation (engine.reference.EVAL)": (set(reference.EVAL), reference.NO_RULE),
    "fusion (engine.planner._Builder._fuse_<kind>)": (
        {k for k in nodes.KINDS if hasattr(planner._Builder, f"_fuse_{k}")},
        planner.NO_RULE,
    ),
    "gradient (autograd.rules.GRADIENTS)": (set(rules.GRADIENTS), rules.NO_RULE),
    "chunked lowering (engine.chunked.lowering._Lowering._<kind>)": (
        {k for k in nodes.KINDS if hasattr(lowering._Lowering, f"_{k}")},
        lowering.NO_RULE,
    ),
    "formula text (dag.text._FORMULA)": (set(text._FORMULA), text.NO_RULE),
    "tree text (dag.text._NODE_TEXT)": (set(text._NODE_TEXT), text.NO_RULE),
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_table_covers_every_kind_or_says_why_not(table):
    covered, no_rule = TABLES[table]
    missing = set(nodes.KINDS) - covered - set(no_rule)
    assert not missing, f"{table} has no rule for {sorted(missing)} and NO_RULE says nothing"
    stale = set(no_rule) & covered
    assert not stale, f"{table} covers {sorted(stale)}, which NO_RULE still excuses"
    assert set(no_rule) <= set(nodes.KINDS)
    assert all(isinstance(why, str) and len(why) > 10 for why in no_rule.values())
