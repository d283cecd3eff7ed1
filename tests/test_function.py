"""ax.function: placeholders bound per call, planned once, shared values computed once."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.engine import executor

N, F, H, K = ax.Axis("N", 4), ax.Axis("F", 3), ax.Axis("H", 5), ax.Axis("K", 2)
rng = np.random.default_rng(5)


def test_values_bind_per_call_and_outputs_are_new_tensors():
    x = ax.placeholder((N, F), "float64", name="x")
    y = ax.placeholder((F,), "float64", name="y")
    f = ax.function([(x * y).sum("F"), x.transpose("F N"), ax.exp(y)], inputs=[x, y])
    a, b = rng.standard_normal((4, 3)), rng.standard_normal(3)
    s, t, e = f(a, ax.tensor(b, "F"))
    assert s.names == ("N",) and t.names == ("F", "N") and e.is_lvalue
    assert_close(s, (a * b).sum(1))
    assert_close(t, a.T)
    assert_close(e, np.exp(b))
    s2, _, _ = f(ax.tensor(a.T.copy(), "F N"), b * 2)  # any axis order; numpy arrays
    assert_close(s2, (a * b * 2).sum(1))
    assert_close(s, (a * b).sum(1))  # an earlier result is not overwritten
    with pytest.raises(ValueError, match="placeholder 'x' has no value"):
        x.numpy()  # bound only during the call


def test_a_single_output_and_python_values():
    x = ax.placeholder((K,), "float32", name="x")
    f = ax.function(ax.sigmoid(x), inputs=[x])
    out = f([0.0, 2.0])
    assert isinstance(out, ax.Tensor) and out.dtype == np.float32
    assert_close(out, (1 / (1 + np.exp(-np.array([0.0, 2.0])))).astype(np.float32))


def test_wrong_values_raise_naming_the_placeholder_and_change_nothing():
    x = ax.placeholder((N, F), "float32", name="x")
    w = ax.variable(np.ones(3, np.float32), "F", name="w")
    f = ax.function((x * w).sum("F"), inputs=[x])
    good = f(np.ones((4, 3), np.float32))
    before = good.numpy().copy()
    with pytest.raises(
        ax.AxesError,
        match=r"function: input 0 \(placeholder 'x'\) has axes N=4, F=3, shape \(4, 3\) "
        r"\(got shape \(3, 4\)\)",
    ):
        f(np.ones((3, 4), np.float32))
    with pytest.raises(
        ax.AxesError,
        match=r"function: input 0 \(placeholder 'x'\) has axes N=4, F=3 \(got N=4, H=5\)",
    ):
        f(ax.zeros((N, H), "float32"))
    with pytest.raises(
        TypeError, match=r"function: input 0 \(placeholder 'x'\) has dtype float32 \(got float64\)"
    ):
        f(np.ones((4, 3)))
    with pytest.raises(TypeError, match=r"function: takes 1 input\(s\) \(got 2\)"):
        f(np.ones((4, 3), np.float32), np.ones(3))
    with pytest.raises(TypeError, match=r"function: input 0 \(placeholder 'x'\) takes a numpy"):
        f("values")
    assert_close(good, before)
    assert_close(w, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="has no value"):
        (x + 1).eval()


def test_construction_errors():
    x = ax.placeholder((N,), "float64", name="x")
    y = ax.placeholder((N,), "float64", name="y")
    with pytest.raises(
        ValueError,
        match=r"function: the outputs read the placeholder 'y', which is not among the inputs",
    ):
        ax.function(x + y, inputs=[x])
    with pytest.raises(TypeError, match=r"function: input 0 is not a placeholder \(N=4\)"):
        ax.function(x * 2, inputs=[ax.zeros((N,))])
    with pytest.raises(ValueError, match=r"function: a placeholder is listed twice in inputs"):
        ax.function(x * 2, inputs=[x, x])
    with pytest.raises(TypeError, match=r"function: output 1 is not a Tensor \(int\)"):
        ax.function([x, 3], inputs=[x])


def test_planned_once():
    """A second call plans nothing: every stage hits the plan cache."""
    x = ax.placeholder((N, F), "float64", name="x")
    w = ax.variable(rng.standard_normal(3), "F", name="w")
    loss = (ax.tanh(x * w) ** 2).sum()
    f = ax.function([loss, *ax.grad(loss, [w])], inputs=[x])
    f(rng.standard_normal((4, 3)))
    misses = executor.PLAN_STATS["misses"]
    a = rng.standard_normal((4, 3))
    value, gw = f(a)
    assert executor.PLAN_STATS["misses"] == misses
    t = np.tanh(a * w.numpy())
    assert_close(value, np.array((t**2).sum()))
    assert_close(gw, (2 * t * (1 - t**2) * a).sum(0))


def _mlp(x, y, w1, w2):
    h = ax.tanh(ax.dot(x, w1, over="F"))
    return ax.softmax_cross_entropy(ax.dot(h, w2, over="H"), y, axis="K").mean()


def test_values_shared_by_the_outputs_are_computed_once():
    """The loss and its gradients share the dots of the forward pass: the function
    computes each once (a stage) and every output reads it."""
    x = ax.placeholder((N, F), "float64", name="x")
    y = ax.placeholder((N, K), "float64", name="y")
    w1 = ax.variable(rng.standard_normal((3, 5)), "F H", name="w1")
    w2 = ax.variable(rng.standard_normal((5, 2)), "H K", name="w2")
    loss = _mlp(x, y, w1, w2)
    g1, g2 = ax.grad(loss, [w1, w2])
    f = ax.function([loss, g1, g2], inputs=[x, y])
    plan = ax.explain(f)
    labels = [s.label for s in plan.stages]
    assert "shared #0 (dot)" in labels and labels[-2:] == ["grad_w1", "grad_w2"]
    assert sum(k.kind == "blas" for k in plan.kernels) < 2 * 3  # not every dot per output
    a, lab = rng.standard_normal((4, 3)), np.eye(2)[rng.integers(0, 2, 4)]
    got = f(a, lab)
    xs, ys = ax.tensor(a, "N F"), ax.tensor(lab, "N K")
    want = [_mlp(xs, ys, w1, w2), *ax.grad(_mlp(xs, ys, w1, w2), [w1, w2])]
    for g, w in zip(got, want, strict=True):
        assert_close(g, w.numpy())


def test_outputs_keep_a_layout_and_views_of_inputs_work():
    C = ax.Axis("C", 3)
    x = ax.placeholder((N, C, K, F), "float32", name="x")
    f = ax.function([(x * 2).to_layout("NCHW4", H="K", W="F"), x[{"C": 1}]], inputs=[x])
    a = rng.standard_normal((4, 3, 2, 3)).astype(np.float32)
    packed, picked = f(a)
    assert str(packed.layout) == "NCHW4" and packed.physical.shape == (4, 1, 2, 3, 4)
    assert_close(packed, a * 2)
    assert_close(picked, a[:, 1])


def test_a_shared_expensive_value_is_computed_once():
    """tanh(x * w + b) feeds the loss and both gradients: one kernel computes it (as the
    planner materializes a heavy subexpression used by several kernels)."""
    x = ax.tensor(rng.standard_normal((4, 3)).astype(np.float32), "N F")
    w = ax.variable(np.ones(3, np.float32), "F", name="w")
    b = ax.variable(np.zeros(3, np.float32), "F", name="b")
    loss = (ax.tanh(x * w + b) ** 2).sum()
    f = ax.function([loss, *ax.grad(loss, [w, b])])
    plan = ax.explain(f)
    assert [s.label for s in plan.stages] == ["shared #0 (map)", "output 0", "grad_w", "grad_b"]
    assert [len(s.plan.kernels) for s in plan.stages] == [1, 1, 1, 1]
    value, gw, gb = f()
    t = np.tanh(x.numpy())
    assert_close(gw, (2 * t * (1 - t * t) * x.numpy()).sum(0))
    assert_close(gb, (2 * t * (1 - t * t)).sum(0))


def test_outputs_that_are_inputs_variables_or_slots_are_new_tensors():
    """An output that is a placeholder, a variable, or a view of one (or of a value the
    outputs share) is a copy: refilling the batch buffer, stepping the optimizer or calling
    again leaves results already returned unchanged."""
    x = ax.placeholder((N, F), "float64", name="x")
    w = ax.variable(rng.standard_normal((3, 2)), "F K", name="w")
    d = ax.dot(x, w, over="F")
    outputs = [x, x.transpose("F N"), x[{"N": 1}], w, w.astype("float64")]
    f = ax.function([*outputs, d.sum(), d.transpose("K N")], inputs=[x])
    buf = rng.standard_normal((4, 3))
    first = buf.copy()
    w0 = w.numpy().copy()
    out = f(buf)
    buf[...] = 7.0  # the next batch goes into the same buffer
    opt = ax.optim.SGD([w], lr=0.5)
    (w * w).sum().backward()
    opt.step()
    again = f(buf)
    assert_close(out[0], first)
    assert_close(out[1], first.T)
    assert_close(out[2], first[1])
    assert_close(out[3], w0)
    assert_close(out[4], w0)
    assert_close(out[5], (first @ w0).sum())
    assert_close(out[6], (first @ w0).T)
    assert_close(again[0], buf)
    assert_close(again[3], w0 * 0.0)  # lr 0.5 on w*w: w - 0.5 * 2w
    assert_close(again[6], (buf @ w.numpy()).T)
    for t in out:
        assert not np.shares_memory(t.numpy(), buf) and not np.shares_memory(t.numpy(), w.numpy())
        assert t.kind is None and t.is_lvalue
