"""Reverse-mode autograd: every rule against float64 central differences (numpy engine, so
broad checks compile nothing), random expression trees (hypothesis), torch autograd on the
same trees when torch is installed, and the fused engine on a few fixed backward passes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, assert_grad_close
from grad_trees import SHAPES, run, run_step, run_torch, trees
from hypothesis import given, settings

import axesarray as ax
from axesarray.core.ops import OPS
from axesarray.dag import nodes as ex

rng = np.random.default_rng(11)


def numeric_grad(loss_fn, arrays: list) -> list:
    """Central differences of ``float(loss_fn())`` over every element of each array (the
    tensors read them in place)."""
    out = []
    for arr in arrays:
        g = np.zeros(arr.shape)
        for idx in np.ndindex(arr.shape):
            old = arr[idx]
            arr[idx] = old + 1e-6
            hi = float(loss_fn())
            arr[idx] = old - 1e-6
            lo = float(loss_fn())
            arr[idx] = old
            g[idx] = (hi - lo) / 2e-6
        out.append(g)
    return out


def check(loss_fn, tensors, arrays):
    """ax.grad of ``loss_fn()`` w.r.t. ``tensors`` against central differences."""
    loss = loss_fn()
    got = ax.grad(loss, tensors)
    want = numeric_grad(loss_fn, arrays)
    scale = 1.0 + abs(float(loss))
    for t, g, w in zip(tensors, got, want, strict=True):
        assert g.axes == t.axes and g.dtype == t.dtype
        assert_grad_close(g, w, scale=scale)


# --- the op table ------------------------------------------------------------------------------

DOMAIN = {
    "log": "pos",
    "log1p": "pos",
    "sqrt": "pos",
    "truediv": "nonzero",
    "mod": "mod",
    "pow": "pow",
    "hypot": "nonzero",
    "floordiv": "mod",
}


def _inputs(op: str, arity: int):
    x = rng.uniform(-2, 2, (3, 4))
    kind = DOMAIN.get(op)
    if kind == "pos":
        x = np.abs(x) + 0.2
    if kind in ("nonzero", "mod", "pow"):
        x = np.where(np.abs(x) < 0.3, 0.7, x)
    args = [x]
    if arity == 2:
        y = rng.uniform(-2, 2, (3, 4))
        if kind == "pow":
            args = [np.abs(x) + 0.5, y]
        elif kind in ("nonzero", "mod"):
            y = np.where(np.abs(y) < 0.3, 0.7, y)
            args = [x, y + 0.05]
        else:
            args = [x, y]
    if arity == 3:
        args = [x, rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (3, 4))]
    return args


def _call(op: str, ts):
    if op == "where":
        return ax.where(ts[0] > 0, ts[1], ts[2])
    return ex_op(op, ts)


def ex_op(op: str, ts):
    from axesarray.tensors.tensor import elementwise

    return elementwise(op, *ts)


# stop_gradient's rule is "no gradient" on purpose (test_stop_gradient_... below).
DIFFERENTIABLE = sorted(k for k, v in OPS.items() if v.grad is not None and k != "stop_gradient")


def test_ops_without_a_rule_have_no_float_results():
    """A row without ``grad`` is not differentiable: on float inputs it either has no
    loop or gives bool/int results, so no gradient can flow through it."""
    x = ax.tensor(np.ones(2), "N")
    for name, row in OPS.items():
        if row.grad is None:
            try:
                out = ex_op(name, [x] * row.arity)
            except TypeError:
                continue  # e.g. bitwise ops have no float loop
            assert out.dtype.kind != "f", name


@pytest.mark.parametrize("op", DIFFERENTIABLE)
def test_each_op_rule_matches_central_differences(op):
    row = OPS[op]
    arrays = _inputs(op, row.arity)
    with ax.set_options(engine="numpy"):
        vs = [ax.variable(a, "A B") for a in arrays]
        bufs = [v.numpy() for v in vs]
        w = ax.tensor(rng.uniform(0.5, 1.5, (3, 4)), "A B")
        take = [v for k, v in enumerate(vs) if not (op == "where" and k == 0)]
        keep = [b for k, b in enumerate(bufs) if not (op == "where" and k == 0)]
        check(lambda: (_call(op, vs) * w).sum(), take, keep)


# --- random trees --------------------------------------------------------------------------------


def _variables(inputs: dict) -> tuple[dict, list]:
    vs = {k: ax.variable(inputs[k], [n for n, _ in SHAPES[k]], name=k) for k in SHAPES}
    return vs, [vs[k].numpy() for k in SHAPES]


@settings(max_examples=60)
@given(trees())
def test_random_trees_match_central_differences(case):
    """Broadcasting both ways, reductions over several names, every view, pad/concat,
    dot, where, clip, softmax family: ax.grad against central differences."""
    steps, inputs = case
    with ax.set_options(engine="numpy"):
        vs, bufs = _variables(inputs)
        check(lambda: run(steps, vs), [vs[k] for k in SHAPES], bufs)


@settings(max_examples=30)
@given(trees())
def test_random_trees_match_torch(case):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)  # tiny tensors: threads only contend with the test workers
    steps, inputs = case
    with ax.set_options(engine="numpy"):
        vs, _ = _variables(inputs)
        pool = [vs[k] for k in SHAPES]
        for step in steps[:-1]:
            pool.append(run_step(step, pool))
        loss = run(steps, vs)
        got = ax.grad(loss, [vs[k] for k in SHAPES])
    leaves = {k: torch.tensor(inputs[k], requires_grad=True) for k in SHAPES}
    t_loss = run_torch(torch, steps, leaves, pool)
    scale = 1 + abs(float(loss))
    assert_grad_close(float(loss), float(t_loss.detach()), table="torch", scale=scale)
    t_loss.backward()
    for k, g in zip(SHAPES, got, strict=True):
        want = leaves[k].grad
        want = np.zeros(inputs[k].shape) if want is None else want.numpy()
        assert_grad_close(g, want, table="torch", scale=scale, err_msg=k)


# --- the rules in detail -----------------------------------------------------------------------


def test_max_and_min_split_ties_evenly():
    """numpy-style subgradient: the elements equal to the extreme share the gradient."""
    with ax.set_options(engine="numpy"):
        x = ax.variable(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 0.0]]), "N K")
        (g,) = ax.grad(x.max("K").sum() + 10 * x.min("K").sum(), [x])
        np.testing.assert_array_equal(g.numpy(), [[10.0, 0.5, 0.5], [1.0, 5.0, 5.0]])
        (g,) = ax.grad(ax.maximum(x, x).sum(), [x])  # elementwise ties: half to each side
        np.testing.assert_array_equal(g.numpy(), np.ones((2, 3)))


def test_prod_gradient_is_exact_with_zeros():
    with ax.set_options(engine="numpy"):
        x = ax.variable(np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]]), "N K")
        (g,) = ax.grad(x.prod("K").sum(), [x])
        want = [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [8.0, 4.0, 2.0]]
        np.testing.assert_array_equal(g.numpy(), want)


def test_relu_at_zero_takes_half():
    """maximum(x, 0) at x == 0 is a tie: the documented subgradient is 0.5."""
    with ax.set_options(engine="numpy"):
        x = ax.variable(np.array([-1.0, 0.0, 2.0]), "K")
        (g,) = ax.grad(ax.relu(x).sum(), [x])
        np.testing.assert_array_equal(g.numpy(), [0.0, 0.5, 1.0])


def test_clip_at_a_bound_passes_the_whole_gradient():
    """As torch.clamp: x exactly at a bound gets gradient 1 (not half, as relu's tie);
    beyond it 0. docs/design.md says so."""
    values = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    for engine in ("numpy", "numba"):
        with ax.set_options(engine=engine):
            x = ax.variable(values, "K")
            (g,) = ax.grad((ax.clip(x, -0.5, 0.5) * 3.0).sum(), [x])
            np.testing.assert_array_equal(g.numpy(), [0.0, 3.0, 3.0, 3.0, 0.0])
            (g,) = ax.grad(x.clip(lo=0.0).sum(), [x])
            np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 1.0, 1.0, 1.0])
            lo = ax.variable(np.zeros(5), "K")  # a tensor bound wins a tie (numpy's value)
            gx, glo = ax.grad(x.clip(lo=lo).sum(), [x, lo])
            np.testing.assert_array_equal(gx.numpy(), [0.0, 0.0, 0.0, 1.0, 1.0])
            np.testing.assert_array_equal(glo.numpy(), [1.0, 1.0, 1.0, 0.0, 0.0])


def test_stop_gradient_and_piecewise_constant_ops_pass_nothing():
    with ax.set_options(engine="numpy"):
        x = ax.variable(np.array([0.3, 1.7]), "K")
        loss = (ax.stop_gradient(x) * x + ax.floor(x) + ax.sign(x) + x.round()).sum()
        (g,) = ax.grad(loss, [x])
        np.testing.assert_array_equal(g.numpy(), [0.3, 1.7])


def test_casts_keep_the_wrt_dtype_and_integer_casts_stop():
    with ax.set_options(engine="numpy"):
        x = ax.variable(np.array([1.5, 2.5], np.float32), "K")
        (g,) = ax.grad((x.astype("float64") ** 2).sum() + x.astype("int32").sum(), [x])
        assert g.dtype == np.float32
        assert_close(g, np.array([3.0, 5.0], np.float32))


def test_a_tensor_the_loss_does_not_read_gets_zeros_of_its_axes():
    x = ax.variable(np.ones((2, 3)), "N K")
    y = ax.variable(np.ones((3, 2)), "K N")
    gx, gy = ax.grad((x * 2).sum(), [x, y])
    assert gy.axes == y.axes
    np.testing.assert_array_equal(gy.numpy(), np.zeros((3, 2)))
    np.testing.assert_array_equal(gx.numpy(), np.full((2, 3), 2.0))


def test_gradients_have_the_wrt_axes_order_and_layout():
    """A transposed wrt gets a gradient in its order; a blocked one keeps its layout."""
    a = rng.uniform(-1, 1, (2, 6, 3, 2))
    with ax.set_options(engine="numpy"):
        x = ax.variable(ax.tensor(a, "N C H W").to_layout("NCHW4"))
        t = ax.variable(a.transpose(3, 1, 0, 2).copy(), "W C N H")
        loss = (ax.tanh(x * t) * x).sum()
        gx, gt = ax.grad(loss, [x, t])
        assert gx.axes == x.axes and str(gx.layout) == "NCHW4" and gt.axes == t.axes
        th = np.tanh(a * a)
        want = th + a * (1 - th**2) * a
        assert_close(gx, want)
        assert_close(gt, (a * (1 - th**2) * a).transpose(3, 1, 0, 2))
        assert str(gx.eval().layout) == "NCHW4" and gx.eval().physical.shape == (2, 2, 3, 2, 4)


def test_a_blocked_variable_matches_central_differences():
    a = rng.uniform(-1, 1, (1, 5, 2, 2))
    with ax.set_options(engine="numpy"):
        x = ax.variable(ax.tensor(a, "N C H W").to_layout("NCHW4"))
        w = ax.tensor(rng.uniform(0.5, 1.5, (5, 2)), "C W")
        loss = lambda: (ax.sin(x[{"H": slice(None, None, -1)}]) * w).sum()  # noqa: E731
        (g,) = ax.grad(loss(), [x])
        want = np.zeros(a.shape)
        for idx in np.ndindex(a.shape):
            sel = dict(zip(x.names, idx, strict=True))
            vals = []
            for d in (1e-6, -1e-6):
                x[sel] = a[idx] + d
                vals.append(float(loss()))
            x[sel] = a[idx]
            want[idx] = (vals[0] - vals[1]) / 2e-6
        assert_grad_close(g, want)


def test_a_shared_subexpression_is_differentiated_once():
    x = ax.variable(np.linspace(-1, 1, 6), "K")
    y = ax.tanh(x * 3.0)
    (g,) = ax.grad((y * y + y).sum(), [x])
    tanhs = [n for n in ex.walk(g._node) if n.kind == "map" and n.op == "tanh"]
    assert len(tanhs) == 1 and tanhs[0] is y._node  # the forward value, reused
    th = np.tanh(3 * np.linspace(-1, 1, 6))
    assert_close(g, (2 * th + 1) * (1 - th**2) * 3)


def test_views_of_a_variable_all_reach_it():
    v = np.arange(6.0)
    w = ax.variable(v, "K")
    parts = w.split("K", (ax.Axis("a", 2), ax.Axis("b", 3)))
    loss = (parts * parts).sum() + w[{"K": slice(None, None, 2)}].sum() + w.rename(K="J").sum()
    (g,) = ax.grad(loss, [w])
    assert_close(g, 2 * v + np.array([2.0, 1, 2, 1, 2, 1]))


# --- errors ---------------------------------------------------------------------------------------


def test_grad_errors():
    w = ax.variable(np.ones(3), "K")
    y = (w * 2).sum()
    with pytest.raises(ax.AxesError, match=r"grad: a loss with axes needs an explicit seed"):
        ax.grad(w * 2, [w])
    with pytest.raises(ax.AxesError, match=r"grad: the seed has axes the loss lacks: 'Q'"):
        ax.grad(w * 2, [w], seed=ax.ones((ax.Axis("K", 3), ax.Axis("Q", 2))))
    with pytest.raises(TypeError, match=r"grad: wrt\[0\] must be an l-tensor \(storage\)"):
        ax.grad(y, [w * 2])
    with pytest.raises(TypeError, match=r"grad: wrt\[0\] must be a float tensor, not int64"):
        ax.grad(y, [ax.tensor(np.arange(3), "K")])
    with pytest.raises(TypeError, match=r"grad: the loss must be a float tensor, not int64"):
        ax.grad(ax.tensor(np.arange(3), "K").sum(), [w])
    with pytest.raises(TypeError, match=r"grad: seed must be a tensor or a number"):
        ax.grad(w * 2, [w], seed="ones")


def test_seed_weights_a_loss_with_axes():
    w = ax.variable(np.array([1.0, 2.0]), "K")
    (g,) = ax.grad(w * w, [w], seed=ax.tensor(np.array([3.0, 0.5]), "K"))
    assert_close(g, np.array([6.0, 2.0]))


# --- backward and .grad -------------------------------------------------------------------------


def test_backward_accumulates_and_resets():
    w = ax.variable(np.array([1.0, -2.0]), "K", name="w")
    b = ax.variable(np.array([0.5]), "J")
    c = ax.constant(np.array([3.0, 4.0]), "K")
    loss = ((w * c).sum("K") + b).sum()
    loss.backward()
    assert_close(w.grad, np.array([3.0, 4.0]))
    assert_close(b.grad, np.array([1.0]))
    loss.backward()
    assert_close(w.grad, np.array([6.0, 8.0]))
    w.grad = None
    loss.backward()
    assert_close(w.grad, np.array([3.0, 4.0]))
    assert c.grad is None and w.transpose("K").grad is None


def test_backward_errors():
    w = ax.variable(np.ones(2), "K", name="w")
    with pytest.raises(ValueError, match=r"backward: the loss reads no variable \(\(\)\)"):
        ax.tensor(np.ones(2), "K").sum().backward()
    with pytest.raises(ax.AxesError, match=r"backward: a loss with axes needs an explicit seed"):
        (w * 2).backward()
    with pytest.raises(TypeError, match=r"grad: only a variable holds a gradient \(K=2\)"):
        ax.tensor(np.ones(2), "K").grad = None
    with pytest.raises(ax.AxesError, match=r"grad: a gradient must have the variable's axes"):
        w.grad = ax.ones((ax.Axis("J", 2),))


# --- the fused engine --------------------------------------------------------------------------


def _mlp_loss(x, w1, b1, w2, y):
    h = ax.tanh(ax.dot(x, w1, over="F") + b1)
    logits = ax.dot(h, w2, over="H")
    return ax.softmax_cross_entropy(logits, y, axis="K").mean()


def test_fused_backward_matches_the_reference_engine():
    """The backward pass planned by the fused engine gives the reference engine's values:
    dot, softmax cross-entropy, a strided slice, pad and concat, reductions."""
    n, f, hdim, k = 5, 4, 3, 2
    x = ax.tensor(rng.standard_normal((n, f)), "N F")
    y = ax.tensor(np.eye(k)[rng.integers(0, k, n)], "N K")
    w1 = ax.variable(rng.standard_normal((f, hdim)), "F H", name="w1")
    b1 = ax.variable(rng.standard_normal(hdim), "H", name="b1")
    w2 = ax.variable(rng.standard_normal((hdim, k)), "H K", name="w2")
    loss = _mlp_loss(x, w1, b1, w2, y)
    z = ax.variable(rng.standard_normal((4, 6)), "A B", name="z")
    tail = z[{"B": slice(0, 3)}] * z.max("B")
    other = ax.concat([ax.pad(z[{"B": slice(5, None, -2)}], A=(1, 0)), tail], "A")
    loss2 = (ax.sigmoid(other) ** 2).sum()
    params = [w1, b1, w2]
    with ax.set_options(engine="numpy"):
        want = [g.numpy() for g in ax.grad(loss, params)] + [ax.grad(loss2, [z])[0].numpy()]
    got = [g.numpy() for g in ax.grad(loss, params)] + [ax.grad(loss2, [z])[0].numpy()]
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)


def test_backward_of_a_sigmoid_sum_is_one_kernel():
    """The planned backward of sum(sigmoid(x * w)) over w (F) for x (N, F) is ONE fused
    reduction kernel: sum over N of s * (1 - s) * x, the sigmoid recomputed inside."""
    x = ax.tensor(rng.standard_normal((64, 8)).astype(np.float32), "N F")
    w = ax.variable(np.ones(8, np.float32), "F", name="w")
    plan = ax.explain(ax.grad(ax.sigmoid(x * w).sum(), [w]))
    assert [s.label for s in plan.stages] == ["grad_w"]
    assert [k.kind for k in plan.kernels] == ["reduction"]
    assert "grad_w = " in str(plan)
    s = 1 / (1 + np.exp(-(x.numpy() * 1.0)))
    (g,) = ax.grad(ax.sigmoid(x * w).sum(), [w])
    assert_close(g, (s * (1 - s) * x.numpy()).sum(0).astype(np.float32))


def test_reshape_node_is_lazy_and_fuses_into_both_engines():
    a = rng.standard_normal((2, 3, 4))
    x = ax.tensor(a, "N H W")
    f = x.sum("N").flatten(("W", "H"), "S")
    assert not f.is_lvalue and type(f._node).__name__ == "Reshape"
    for engine in ("numpy", "numba"):
        with ax.set_options(engine=engine):
            assert_close(f, a.sum(0).T.reshape(-1))
    assert len(ax.explain(f).kernels) == 2  # the reduction into a temp laid out W, H; a copy


def test_a_pad_over_a_rewritten_subtree_keeps_its_value():
    """Engine defect found by the backward passes (which pad gradients back): a rewrite
    below a pad (sigmoid, small powers) rebuilt the Pad node, whose value the planner then
    could not find among the parameters (KeyError)."""
    a = np.array([0.5, -1.0, 2.0])
    x = ax.tensor(a, "N")
    assert_close(
        ax.pad(1 / (1 + ax.exp(-x)), N=(1, 0), value=2.0), np.r_[2.0, 1 / (1 + np.exp(-a))]
    )
    assert_close(ax.pad(x**2, N=(0, 2), value=-1.0), np.r_[a**2, -1.0, -1.0])


# --- calls: scans, sorts, gathers ----------------------------------------------------------------

_X = np.array([[0.3, -1.2, 0.8, 1.7], [2.0, 0.0, -0.6, 0.9], [0.0, 1.1, 0.0, -0.4]])
_X_DISTINCT = np.array([[0.3, -1.2, 0.8, 1.7], [2.0, 0.1, -0.6, 0.9], [0.5, 1.1, 0.2, -0.4]])
_B_IDX = np.array([3, 0, 1])  # per A: a position along B

CALLS = {
    "cumsum": (_X, lambda x: x.cumsum("B")),
    "cumsum_A": (_X, lambda x: x.cumsum("A") * 1.5),
    # rows without a zero, with one zero and with two (the exact rule, as torch's)
    "cumprod": (_X, lambda x: x.cumprod("B")),
    "cumprod_A": (_X_DISTINCT, lambda x: x.cumprod("A")),
    "sort": (_X_DISTINCT, lambda x: x.sort("B")),
    "sort_A": (_X_DISTINCT, lambda x: x.sort("A") ** 2),
    "isel_list": (_X, lambda x: x.isel(B=[2, 0, 2, 3])),  # a repeated index adds up
    "isel_mask": (_X, lambda x: x.isel(A=[True, False, True])),
    "isel_argmax": (_X_DISTINCT, lambda x: x.isel(B=x.argmax("B"))),
    "isel_argmax_2": (_X_DISTINCT, lambda x: x.isel(x.argmax(["A", "B"])) * 3.0),
    "isel_index_new_axis": (
        _X,
        lambda x: x.isel(B=ax.tensor(np.array([[1, -1], [0, 2]]), "P Q")),
    ),
    "isel_pointwise": (_X, lambda x: x.isel(B=ax.tensor(_B_IDX, "A"))),
    "cumsum_len1": (_X[:, :1], lambda x: x.cumsum("B")),
    "cumprod_len1": (_X[:, 1:2], lambda x: x.cumprod("B")),
    "sort_len1": (_X[:1], lambda x: x.sort("A")),
}


@pytest.mark.parametrize("case", sorted(CALLS))
def test_call_gradients_match_central_differences(case):
    """cumsum, cumprod, sort and gathers (lists, masks, index tensors) against float64
    central differences, as torch differentiates them."""
    value, fn = CALLS[case]
    with ax.set_options(engine="numpy"):
        x = ax.variable(value.copy(), "A B")
        out = fn(x)
        w = ax.tensor(rng.uniform(0.5, 1.5, out.shape), out.names)
        check(lambda: (fn(x) * w).sum(), [x], [x.numpy()])


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "sort", "isel"])
def test_call_gradients_of_empty_tensors_are_empty(op):
    x = ax.variable(np.zeros((3, 0)), "A B")
    y = x.isel(B=[]) if op == "isel" else getattr(x, op)("B")
    (g,) = ax.grad((y * 2.0).sum(), [x])
    assert g.axes == x.axes and g.numpy().shape == (3, 0)


def test_call_gradients_run_in_the_fused_engine():
    """The backward pass of a scan and a gather plans like any expression (numpy steps
    between fused kernels) and agrees with the reference engine."""
    loss_of = lambda x: (x.cumsum("B") * x.isel(B=[1, 1, 0, 3])).sum()  # noqa: E731
    got = {}
    for engine in ("numpy", "numba"):
        with ax.set_options(engine=engine):
            x = ax.variable(_X.copy(), "A B")
            loss_of(x).backward()
            got[engine] = x.grad.numpy()
    assert_close(got["numba"], got["numpy"])


def test_a_call_without_a_gradient_says_so():
    """ax.apply (a user's numpy function) has no gradient: a clear error, not a KeyError;
    following the hint (stop_gradient on its input) gives the gradient of the rest."""
    x = ax.variable(_X.copy(), "A B", name="x")
    y = ax.apply(np.tanh, x)
    with pytest.raises(TypeError, match=r"grad: tanh has no gradient \(a numpy call of shape "):
        ax.grad((y * x).sum(), [x])
    with pytest.raises(TypeError, match=r"backward: tanh has no gradient .*ax\.stop_gradient"):
        (y * x).sum().backward()
    y = ax.apply(np.tanh, ax.stop_gradient(x))
    (g,) = ax.grad((y * x).sum(), [x])
    assert_close(g, np.tanh(_X))


def test_a_node_kind_without_a_rule_says_so(monkeypatch):
    """Any kind missing from the gradient table is the same clear error, not a KeyError."""
    from axesarray.autograd import rules

    monkeypatch.delitem(rules.GRADIENTS, "cast")
    x = ax.variable(np.ones(3, np.float32), "K")
    with pytest.raises(TypeError, match=r"grad: cast has no gradient \(a cast node of shape "):
        ax.grad(x.astype("float64").sum(), [x])
