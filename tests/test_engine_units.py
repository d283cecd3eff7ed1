"""Thin unit tests of the layers under the fused engine: keys, rewrites, loop nests, scalar
code, lowering, the planner, and one golden generated source. The end-to-end tests
(test_fused, test_expressions) check values; these pin how each layer decides."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from conftest import assert_close

import axesarray as ax
from axesarray.core.strided import View, contiguous
from axesarray.dag import nodes as ex
from axesarray.engine.dispatch import source_for
from axesarray.engine.executor import schedule_for
from axesarray.engine.planner import build_schedule
from axesarray.engine.rewrite import rewrite
from axesarray.engine.schedule import DotStep, KernelStep
from axesarray.kernels.ir import KConst, KLeaf, KMap, KPad, kernel_nodes, reindex
from axesarray.kernels.loops import build_loop_nest
from axesarray.kernels.lower import Lowered
from axesarray.kernels.scalar import Body, op_source
from axesarray.tensors.tensor import checked_assignment

F32, F64, I8, B = (np.dtype(t) for t in ("float32", "float64", "int8", "bool"))
N, C, H = ax.Axis("N", 4), ax.Axis("C", 3), ax.Axis("H", 5)
GOLDEN = Path(__file__).parent / "golden"


def _schedule(t, out=None):
    if out is None:
        return schedule_for(t._node, None)[0]
    dst, node = checked_assignment(out, t)
    return schedule_for(node, dst)[0]


# --- structural keys ------------------------------------------------------------


def test_keys_are_structure_not_data():
    a, b = ax.zeros((N, C)), ax.ones((N, C))
    assert (a + b)._node.key == (b + a)._node.key  # same structure, different leaves
    assert (a * a)._node.key != (a * b)._node.key  # a shared leaf is structure
    assert (a + 1.5)._node.key == (a + 2.5)._node.key  # scalar values are run-time
    assert (a**2.0)._node.key != (a**3.0)._node.key  # ... except the special ones
    assert (a + b)._node.params == (a._node, b._node)
    assert (a * a)._node.params == (a._node,)


def test_shared_dags_build_in_linear_time():
    """x = x + x sixty times is a DAG of 61 nodes and 2**60 paths: keys and params must
    not unfold it (a backward pass shares subtrees like this)."""
    x = ax.ones((N,))
    start = time.perf_counter()
    for _ in range(60):
        x = x + x
    assert time.perf_counter() - start < 1.0
    assert len(x._node.params) == 1
    assert x.numpy()[0] == 2.0**60


def test_views_remember_the_leaf_they_came_from():
    base = ax.zeros((N, C))
    v = base.transpose("C N").isel(N=slice(1, 3)).rename(C="K")
    assert v._node.origin[0].origin[0] is base._node
    assert ex.leaf_roots((v.sum() * 2 + base.sum())._node) == [base._node]
    flat = base.flatten(("N", "C"), "S")
    assert flat._node.origin == (base._node, ("merge", (0, 1), 0))


# --- rewrites ------------------------------------------------------------


def test_rewrites():
    x = ax.zeros((N,), "float32")
    sig = rewrite((1 / (1 + ax.exp(-x)))._node)
    assert sig.kind == "map" and sig.op == "sigmoid" and sig.children == (x._node,)
    assert rewrite((x**2)._node).op == "square"
    assert rewrite((x**0.5)._node).op == "sqrt"
    recip = rewrite((x**-1)._node)
    assert recip.op == "truediv" and recip.children[0].special == 1.0
    assert rewrite((x**1)._node) is x._node
    assert rewrite((x**3)._node).op == "pow"
    assert rewrite((2 / (1 + ax.exp(-x)))._node).op == "truediv"  # not sigmoid


# --- loop nests ------------------------------------------------------------


def test_loop_nest_drops_merges_and_orders():
    # contiguous 2x3x4: one loop of 24
    nest = build_loop_nest((2, 3, 4), 3, [(12, 4, 1), (12, 4, 1)])
    assert nest.lengths == (24,) and nest.groups == ((0, 1, 2),)
    # length-1 dims are dropped, a transposed output orders the loops by its strides
    nest = build_loop_nest((2, 1, 3), 3, [(1, 0, 2), (3, 0, 1)])
    assert nest.groups == ((2,), (0,))
    # reduce dims stay innermost, never merged with output dims
    nest = build_loop_nest((4, 5), 1, [(1,), (5, 1)])
    assert nest.n_out == 1 and nest.groups == ((0,), (1,))
    # a pinned (guard) dim keeps its own loop, even at length 1
    nest = build_loop_nest((2, 1, 3), 3, [(3, 3, 1)], frozenset({1}))
    assert (1,) in nest.groups


# --- scalar code ------------------------------------------------------------


def test_op_source_from_the_table():
    assert op_source("add", B, B, ["a", "b"]) == "bool((a or b))"
    assert op_source("add", I8, I8, ["a", "b"]) == "np.int8(a + b)"  # wraps as numpy
    assert op_source("floordiv", F32, F32, ["a", "b"]) == "np.float32(floordiv_float(a, b))"
    assert op_source("exp", F64, F64, ["x"]) == "np.float64(exp_f64(x))"
    assert op_source("lt", B, F32, ["a", "b"]) == "(a < b)"  # comparisons need no cast
    assert op_source("hypot", F32, F32, ["a", "b"]) == "np.float32(math.hypot(a, b))"


def test_body_emits_a_guarded_read_once_per_node():
    leaf = KLeaf(contiguous((5,)), F32, ("param", 0))
    pad = KPad(leaf, 0, 1, 4, KConst(F32, ("param", 1)))
    tree = KMap("add", (pad, pad), F32)
    body = Body(lambda n: "A1[i0]", lambda d: f"i{d}", lambda k: "c0" if k is pad.value else "g")
    name = body.emit(tree, 1, {})
    text = "\n".join(body.lines)
    assert text.count("if g <= i0 < g:") == 1  # the shared pad is computed once
    assert name in text and "else:" in text


def test_reindex_shifts_guards_and_permutes_leaves():
    leaf = KLeaf(View((2, 3), (3, 1), 0), F32, ("param", 0))
    pad = KPad(leaf, 1, 0, 3, KConst(F32, ("param", 1)))
    moved = reindex(pad, (3, 2), ((1, 0, 1), (0, -2, 1)))  # transpose, shift dim 1 by 2
    assert moved.dim == 0 and (moved.lo, moved.hi) == (2, 5)
    assert moved.child.view.strides == (1, 3)


# --- lowering ------------------------------------------------------------


def test_lowering_arguments():
    out = KLeaf(contiguous((4, 3)), F32, ("dst",))
    a = KLeaf(View((4, 3), (3, 1), 0), F32, ("param", 0))
    b = KLeaf(View((4, 3), (0, 1), 0), F32, ("param", 1))  # broadcast over dim 0
    tree = KMap("mul", (a, b), F32)
    nest = build_loop_nest((4, 3), 2, [(3, 1), (3, 1), (0, 1)])
    low = Lowered(out, tree, nest)
    arrays = [name for name in low.names if name.startswith("A")]
    assert arrays == ["A0", "A1", "A2"] and "n0" in low.names and "n1" in low.names
    assert [r[0] for r in low.recipe].count("array") == 3
    assert low.terms[2] == [None, "i1"]  # b: stride 0 on the outer loop, 1 inside


# --- the planner ------------------------------------------------------------


def test_kernel_counts_by_materialization_rule():
    a, b = ax.random((N, C), seed=0), ax.random((C,), seed=1)
    assert len(_schedule((a + b).sum("C")).steps) == 1  # a reduction fuses its input
    soft = ax.exp(a - a.max("C"))
    plan = _schedule(soft / soft.sum("C"))
    # the max broadcast back: the normalize kernel's first sweep (one value per output)
    assert [type(s) for s in plan.steps] == [KernelStep] and not plan.temps[:-1]
    dot = _schedule(ax.dot(a + 1, ax.random((C, H)), over="C"))
    assert [type(s) for s in dot.steps] == [KernelStep, DotStep]  # operand materialized


def test_hash_consing_computes_a_repeated_subexpression_once():
    a = ax.random((N, C), seed=0)
    e = a - a.max("C") + a.max("C") * 2  # two separately built, identical reductions
    plan = _schedule(e)
    reductions = [n for s in plan.steps for n in kernel_nodes(s.tree) if n.kind == "reduce"]
    assert len(reductions) == 1  # (the result's kernel: a normalize kernel, E = a)
    assert_close(e.eval(), a.numpy() + a.numpy().max(1, keepdims=True))


def test_fresh_outputs_name_the_input_that_set_their_order():
    big = ax.random((H, C, N), seed=0).transpose("N C H")
    small = ax.random((C,), seed=1)
    node = (small + big)._node
    plan = build_schedule(node, node.params, None)
    assert plan.steps[0].order_from == 1  # the second input (t1) is the big one
    assert "order from input t1" in str(ax.explain(small + big))


def test_explain_of_an_l_tensor_runs_nothing():
    assert len(ax.explain(ax.zeros((N,))).kernels) == 0


def test_golden_source_of_a_fused_reduction_into_out():
    """``out[...] = (a + b).sum("C")``: one kernel, reduction innermost, b broadcast,
    float32 sum accumulated in float64 through the reassociable add."""
    a, b = ax.zeros((N, C), "float32"), ax.zeros((C,), "float32")
    out = ax.zeros((N,), "float32")
    plan = _schedule((a + b).sum("C"), out)
    assert len(plan.steps) == 1
    source = source_for(plan.steps[0], plan.device, "serial")[0].split("\n", 1)[1]
    golden = (GOLDEN / "sum_a_plus_b_into_out.txt").read_text()
    assert source == golden, "generated source changed: review it, then update the golden"


def test_a_small_input_read_across_the_output_rows_is_staged():
    """``a(N,C,H,W) + b(W,H)``: b is copied in the output's order first (a small kernel),
    so the main kernel reads it contiguously and merges H W into one loop."""
    n, c, h, w = 4, 32, 32, 24
    rng = np.random.default_rng(0)
    an, bn = rng.random((n, c, h, w)), rng.random((w, h))
    a, b = ax.tensor(an, "N C H W"), ax.tensor(bn, "W H")
    out = ax.empty(a.axes)
    plan = _schedule(a + b, out)
    assert [s.why for s in plan.steps] == ["staged broadcast input", "assignment"]
    assert plan.steps[1].nest.lengths == (n * c, h * w)
    out[...] = a + b
    np.testing.assert_array_equal(out.numpy(), an + bn.T)
    small = ax.tensor(rng.random((2, 3, 4, 5)), "N C H W")  # below the size that pays
    assert len(_schedule(small + ax.tensor(rng.random((5, 4)), "W H")).steps) == 1
