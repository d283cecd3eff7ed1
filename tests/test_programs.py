"""Programs, not expressions (DESIGN §13): long recurrent programs and their gradients.

Planning is linear in the number of nodes (counted Python calls, not wall time: robust
under load), identical steps share compiled code, a program keeps its own plans, and one
compiled function runs correctly from several threads at once (inputs bound by argument).
"""

from __future__ import annotations

import gc
import sys
import threading

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.engine import executor
from axesarray.engine.dispatch import source_for, variant
from axesarray.engine.schedule import KernelStep

B, H = 3, 4


@pytest.fixture(autouse=True)
def _kernels():
    with ax.set_options(engine="numba", tiered=False):
        yield


def _data(steps: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((steps, B, H)), rng.standard_normal(H), rng.standard_normal(H)


def _recurrence(steps: int, seed: int = 0):
    """``h = tanh(h * w + x[k] * u)``: (x, w, u, loss) with ``loss = (h * h).sum()``."""
    x_np, w_np, u_np = _data(steps, seed)
    x = ax.tensor(x_np, "T B H")
    w = ax.variable(w_np * 0.5, "H", name="w")
    u = ax.variable(u_np * 0.5, "H", name="u")
    h = ax.tensor(np.zeros((B, H)), "B H")
    for k in range(steps):
        h = ax.tanh(h * w + x.isel(T=k) * u)
    return x, w, u, (h * h).sum()


def _bptt(x, w, u):
    """numpy oracle: loss and the gradients of w and u, by hand."""
    hs = [np.zeros((B, H))]
    for k in range(x.shape[0]):
        hs.append(np.tanh(hs[-1] * w + x[k] * u))
    dh = 2 * hs[-1]
    gw, gu = np.zeros(H), np.zeros(H)
    for k in range(x.shape[0] - 1, -1, -1):
        da = dh * (1 - hs[k + 1] ** 2)
        gw += (da * hs[k]).sum(0)
        gu += (da * x[k]).sum(0)
        dh = da * w
    return (hs[-1] ** 2).sum(), gw, gu


def _calls(fn) -> int:
    """Python lines, calls and returns executed by ``fn()`` (a count of work,
    deterministic). Lines, not only calls: a pass that loops over the whole DAG inside one
    function (a walk per step) makes few calls but many lines."""
    count = [0]

    def trace(frame, event, arg):
        count[0] += 1
        return trace

    old = sys.gettrace()
    gc.collect()
    gc.disable()  # finalizers would run (and count) at arbitrary points
    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(old)
        gc.enable()
    return count[0]


def _planning_work(steps: int) -> int:
    """Calls to build the gradients, explain one (plan + display), and build and explain
    the function of the loss and both gradients (several outputs planned together)."""
    _, w, u, loss = _recurrence(steps)
    out = {}

    def plan():
        gw, gu = ax.grad(loss, [w, u])
        out["text"] = str(ax.explain(gw))
        f = ax.function([loss, gw, gu])
        out["program"] = str(ax.explain(f))

    return _calls(plan)


def test_planning_is_linear_in_the_program(monkeypatch, tmp_path):
    """Doubling the steps of a recurrence doubles the planning work (a quadratic pass, such
    as one walk of the whole subtree per temporary or per kernel, makes the ratio grow with
    the size: the walk below each kernel that ``explain`` used to name its loops measured
    2.26 from 24 to 48 steps and 2.52 from 48 to 96; linear planning measures ~2.0). A
    kernel cache of its own: explain lists the cache folder again when another process
    writes to it, which is work outside the plan."""
    monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(tmp_path))
    _planning_work(6)  # one-time work (imports, tables) out of the count
    small, mid, big = _planning_work(24), _planning_work(48), _planning_work(96)
    assert mid / small <= 2.15, (small, mid)
    assert big / mid <= 2.15, (mid, big)


def test_identical_steps_share_compiled_code():
    """The gradient's distinct kernels do not grow with the steps (20, 40, 80, 160): steps
    differ only in which arguments they read. The count moves by one at most with where the
    sum over the steps is cut into kernels (its last piece)."""

    def sources(steps):
        _, w, u, loss = _recurrence(steps)
        gw, _ = ax.grad(loss, [w, u])
        plan, _ = executor.schedule_for(gw._node, None)
        found = set()
        for step in plan.steps:
            if type(step) is KernelStep:
                found.add(source_for(step, plan.device, variant(step, plan.device))[0])
        return len(plan.steps), len(found)

    counts = [sources(steps) for steps in (20, 40, 80, 160)]
    assert all(a[0] < b[0] for a, b in zip(counts, counts[1:], strict=False))
    distinct = [d for _, d in counts]
    assert max(distinct) <= min(distinct) + 1, distinct


@pytest.mark.parametrize("steps", [1, 30])
def test_recurrent_gradients_match_numpy(steps):
    x, w, u, loss = _recurrence(steps, seed=steps)
    f = ax.function([loss, *ax.grad(loss, [w, u])])
    want = _bptt(x.numpy(), w.numpy(), u.numpy())
    for _ in range(2):  # the first call plans and compiles, the second runs bound plans
        got = f()
        for g, e in zip(got, want, strict=True):
            assert_close(g, e)


def test_a_program_keeps_its_plans(monkeypatch):
    """A program with more stages than the engine's plan cache holds does not plan again
    on later calls: each stage keeps its bound schedule."""
    monkeypatch.setattr(executor, "_PLANS_MAX", 4)
    x, w, u, loss = _recurrence(12, seed=3)
    f = ax.function([loss, *ax.grad(loss, [w, u])])
    f()
    assert len(f.program.stages) > 4
    before = dict(executor.PLAN_STATS)
    got = f()
    assert executor.PLAN_STATS["misses"] == before["misses"]
    for g, e in zip(got, _bptt(x.numpy(), w.numpy(), u.numpy()), strict=True):
        assert_close(g, e)


def test_deep_programs_explain_without_recursion():
    """The text of a program deeper than Python's recursion limit."""
    n = ax.Axis("I", 3)
    p = ax.placeholder((n,), "float64", name="p")
    h = p
    for _ in range(sys.getrecursionlimit() + 100):
        h = h * 0.5 + p
    f = ax.function(h, inputs=[p])
    assert "output 0" in str(ax.explain(f))
    want = np.ones(3)
    for _ in range(sys.getrecursionlimit() + 100):
        want = want * 0.5 + 1
    assert_close(f(np.ones(3)), want)


def test_concurrent_calls_of_one_function_are_correct():
    """Four threads call one function with their own values at the same time: each gets
    its own result (inputs travel by argument; nothing shared is rebound)."""
    n, k = ax.Axis("N", 64), ax.Axis("K", 5)
    p = ax.placeholder((n, k), "float64", name="p")
    w = ax.variable(np.linspace(-1, 1, 5), "K", name="w")
    y = ax.tanh(p * w)
    loss = (y * y).sum()
    f = ax.function([loss, y.sum("N"), *ax.grad(loss, [w])], inputs=[p])
    values = [np.random.default_rng(s).standard_normal((64, 5)) for s in range(4)]
    expected = []
    for v in values:
        t = np.tanh(v * w.numpy())
        expected.append(((t * t).sum(), t.sum(0), (2 * t * (1 - t * t) * v).sum(0)))
    f(values[0])  # plan and compile first: the threads then race on the bound plans
    start = threading.Barrier(4)
    errors: list = []

    def worker(i):
        start.wait()
        try:
            for _ in range(30):
                for got, want in zip(f(values[i]), expected[i], strict=True):
                    assert_close(got, want)
        except BaseException as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    # outside a call the placeholder still has no value
    with pytest.raises(ValueError, match="has no value outside a call of its function"):
        (p * 2).numpy()


def test_lazy_keys_name_structure_and_params():
    """Past ``LAZY_PARAMS`` params a node's key and params are computed on first use by one
    walk: equal for the same structure over the same params (a plan-cache hit), different
    when the params are laid out differently, params in order of first appearance."""
    from axesarray.dag import nodes

    count = nodes.LAZY_PARAMS + 6
    n = ax.Axis("I", 5)
    xs = [ax.tensor(np.arange(5.0) + k, (n,)) for k in range(count)]

    def total(order):
        acc = xs[order[0]] * 1.5
        for k in order[1:]:
            acc = acc + xs[k] * 1.5
        return acc

    forward = list(range(count))
    a, b = total(forward), total(forward)
    assert nodes.lazy(a._node) and nodes.lazy(b._node)
    assert a._node.key == b._node.key
    leaves = [p for p in a._node.params if type(p) is nodes.Leaf]
    assert leaves == [x._node for x in xs]
    shared = forward[:-1] + [0]  # the last term reads the first leaf again
    assert total(shared)._node.key != a._node.key
    assert_close(a, sum((np.arange(5.0) + k) * 1.5 for k in range(count)))
    before = executor.PLAN_STATS["hits"]
    assert_close(b, sum((np.arange(5.0) + k) * 1.5 for k in range(count)))
    assert executor.PLAN_STATS["hits"] == before + 1


def test_gradients_share_the_backward_chain():
    """The gradients of w and u read one backward chain: it is computed once per step
    (a stage), not once per gradient, and the whole function runs a few kernels per step
    (forward, backward, one reduction per gradient), not one per node."""
    steps = 20
    _, w, u, loss = _recurrence(steps)
    gw, gu = ax.grad(loss, [w, u])
    f = ax.function([loss, gw, gu])
    kernels = len(ax.explain(f).kernels)
    nodes = len(ax.dag.nodes.walk(gw._node))
    assert kernels <= 4 * steps + 4, kernels
    assert kernels < nodes / 3, (kernels, nodes)


def test_a_lazy_recurrent_gradient_plans_three_kernels_per_step():
    """``gw.numpy()`` of a recurrence: each step is one forward kernel (``h`` is read by
    the next step and by the backward: stored), one backward kernel and one reduction
    into the gradient. A value read by one node (``h * w``, the pre-activation) is fused
    into that node, not stored because the first planning pass saw it in many kernels."""

    def kernels(steps):
        _, w, u, loss = _recurrence(steps)
        gw, _ = ax.grad(loss, [w, u])
        return len(ax.explain(gw).kernels)

    assert kernels(40) - kernels(20) == 3 * 20


@pytest.mark.parametrize("steps", [1, 2, 7, 60])
def test_lazy_recurrent_gradients_match_numpy(steps):
    """The lazy way (``ax.grad`` then ``.numpy()``), planned with the structural rule
    from about 6 steps on, against the hand-written BPTT."""
    x, w, u, loss = _recurrence(steps, seed=steps + 1)
    gw, gu = ax.grad(loss, [w, u])
    want = _bptt(x.numpy(), w.numpy(), u.numpy())
    assert_close(loss, want[0])
    assert_close(gw, want[1])
    assert_close(gu, want[2])


def test_a_long_lazy_gradient_plans_without_recursion():
    """Stored values are realized bottom-up: fusing the result never recurses down the
    chain (here about 6 nodes deep per step: deeper than Python's recursion limit)."""
    steps = sys.getrecursionlimit() // 4
    x, w, u, loss = _recurrence(steps)
    gw, _ = ax.grad(loss, [w, u])
    plan = ax.explain(gw)
    assert len(plan.kernels) <= 3 * steps + 8
    assert_close(gw, _bptt(x.numpy(), w.numpy(), u.numpy())[1])


def test_explain_plans_a_new_expression_once(monkeypatch):
    """``explain`` of an expression not planned yet plans it once, recording which node
    each step computes as it goes (it used to plan it twice); a cached plan is planned
    again only to name its loops. The loop names are the same either way."""
    calls = []
    real = executor.build_schedule

    def counting(*args, **kwargs):
        calls.append(kwargs.get("record") is not None)
        return real(*args, **kwargs)

    monkeypatch.setattr(executor, "build_schedule", counting)
    x = ax.tensor(np.arange(24.0).reshape(2, 3, 4), "N C W")
    e = ax.exp(x - x.max("C")).sum("W") * 3.0
    first = ax.explain(e)
    assert calls == [True] and not first.cached
    again = ax.explain(e)
    assert calls == [True, True] and again.cached
    assert [k.loops for k in first.kernels] == [k.loops for k in again.kernels]
    assert {n for k in first.kernels for _, lb in k.loops for n in lb.split()} == {"N", "C", "W"}
    assert_close(e, np.exp(x.numpy() - x.numpy().max(1, keepdims=True)).sum(2) * 3.0)


def test_a_kernel_reads_a_bounded_number_of_operands():
    """Each operand a kernel reads counts toward its compile budget (numba types and
    addresses every array argument): a sum of 41 arrays is cut into kernels that each read
    at most ``KERNEL_BUDGET / _READ_COST`` operands plus the piece before, and adds up as
    numpy does."""
    from axesarray.engine.planner import _READ_COST, KERNEL_BUDGET

    n = ax.Axis("I", 5)
    arrays = [np.arange(5.0) * (k + 1) - k for k in range(41)]
    total = ax.tensor(arrays[0], (n,))
    for a in arrays[1:]:
        total = total + ax.tensor(a, (n,))
    plan = ax.explain(total)
    assert len(plan.kernels) > 1
    assert all(k.operands <= KERNEL_BUDGET // _READ_COST + 1 for k in plan.kernels)
    assert_close(total, np.sum(arrays, axis=0))
