"""Optimizers (SGD with momentum, Adam) against numpy, their kernels, and the MLP example."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax

rng = np.random.default_rng(3)
ROOT = Path(__file__).resolve().parent.parent


def _problem(dtype="float64"):
    """A quadratic loss of two parameters, and numpy's gradient of it."""
    a = rng.standard_normal((3, 4)).astype(dtype)
    target = rng.standard_normal((3, 4)).astype(dtype)
    w = ax.variable(a, "A B", name="w")
    b = ax.variable(np.zeros(4, dtype), "B", name="b")
    tg = ax.tensor(target, "A B")

    def loss():
        return ((w + b - tg) ** 2).sum()

    def numpy_grads(wv, bv):
        d = 2 * (wv + bv - target)
        return d, d.sum(0)

    return w, b, loss, numpy_grads


def test_sgd_with_momentum_matches_numpy():
    w, b, loss, numpy_grads = _problem()
    wv, bv = w.numpy().copy(), b.numpy().copy()
    vw, vb = np.zeros_like(wv), np.zeros_like(bv)
    opt = ax.optim.SGD([w, b], lr=0.05, momentum=0.9)
    for _ in range(3):
        opt.zero_grad()
        loss().backward()
        opt.step()
        gw, gb = numpy_grads(wv, bv)
        vw, vb = 0.9 * vw + gw, 0.9 * vb + gb
        wv, bv = wv - 0.05 * vw, bv - 0.05 * vb
    assert_close(w, wv)
    assert_close(b, bv)
    assert_close(opt.velocity[0], vw)


def test_plain_sgd_is_one_kernel_per_parameter():
    w, b, loss, numpy_grads = _problem("float32")
    wv, bv = w.numpy().copy(), b.numpy().copy()
    opt = ax.optim.SGD([w, b], lr=0.1)
    loss().backward()
    plan = ax.explain(opt)
    assert [s.label for s in plan.stages] == ["update of w", "update of b"]
    assert [k.kind for k in plan.kernels] == ["elementwise", "elementwise"]
    opt.step()
    gw, gb = numpy_grads(wv, bv)
    assert_close(w, wv - np.float32(0.1) * gw)
    assert_close(b, bv - np.float32(0.1) * gb)


def test_momentum_step_kernels():
    """Each parameter: its velocity and the parameter in ONE multi-output kernel."""
    w, b, loss, _ = _problem("float32")
    opt = ax.optim.SGD([w, b], lr=0.1, momentum=0.5)
    loss().backward()
    plan = ax.explain(opt)
    labels = sorted(s.label for s in plan.stages)
    assert labels == ["velocity of b + update of b", "velocity of w + update of w"]
    assert all(len(s.plan.kernels) == 1 for s in plan.stages)
    assert all(k.writes == "2 destinations" for k in plan.kernels)


def test_adam_matches_numpy():
    w, b, loss, numpy_grads = _problem()
    wv, bv = w.numpy().copy(), b.numpy().copy()
    state = {"w": [np.zeros_like(wv), np.zeros_like(wv)], "b": [np.zeros_like(bv)] * 2}
    opt = ax.optim.Adam([w, b], lr=0.01, betas=(0.8, 0.99), eps=1e-6)
    for t in range(1, 4):
        opt.zero_grad()
        loss().backward()
        opt.step()
        grads = dict(zip("wb", numpy_grads(wv, bv), strict=True))
        new = {}
        for k, p in (("w", wv), ("b", bv)):
            m, v = state[k]
            m = 0.8 * m + 0.2 * grads[k]
            v = 0.99 * v + 0.01 * grads[k] ** 2
            state[k] = [m, v]
            new[k] = p - 0.01 * (m / (1 - 0.8**t)) / (np.sqrt(v / (1 - 0.99**t)) + 1e-6)
        wv, bv = new["w"], new["b"]
    assert_close(w, wv)
    assert_close(b, bv)


def test_zero_grad_and_parameters_without_a_gradient():
    w, b, loss, _ = _problem()
    opt = ax.optim.SGD([w, b], lr=0.1)
    (w * w).sum().backward()  # b gets no gradient
    before = b.numpy().copy()
    opt.step()
    assert_close(b, before)
    opt.zero_grad()
    assert w.grad is None and b.grad is None
    assert ax.explain(opt).stages == ()


def test_a_blocked_parameter_keeps_its_layout():
    a = rng.standard_normal((1, 5, 2, 2))
    w = ax.variable(ax.tensor(a, "N C H W").to_layout("NCHW4"), name="w")
    opt = ax.optim.Adam([w], lr=0.1, eps=0.0)
    (w * w).sum().backward()
    assert str(w.grad.layout) == "NCHW4" and str(opt.m[0].layout) == "NCHW4"
    opt.step()
    assert_close(w, a - 0.1 * np.sign(a))  # Adam's first step moves each weight by lr


def test_optimizer_errors():
    w = ax.variable(np.ones(2), "K")
    with pytest.raises(TypeError, match=r"SGD: parameter 0 is not a variable \(K=2\)"):
        ax.optim.SGD([ax.tensor(np.ones(2), "K")], lr=0.1)
    with pytest.raises(TypeError, match=r"SGD: parameter 1 is not a variable \(K=2\)"):
        ax.optim.SGD([w, w.transpose("K")], lr=0.1)
    with pytest.raises(ValueError, match="SGD: parameter 1 is listed twice"):
        ax.optim.SGD([w, w], lr=0.1)
    with pytest.raises(ValueError, match="SGD: got no parameters"):
        ax.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match=r"SGD: lr must be in \[0.0, inf\] \(got -1\)"):
        ax.optim.SGD([w], lr=-1)
    with pytest.raises(ValueError, match=r"SGD: momentum must be in \[0.0, 1.0\) \(got 1.0\)"):
        ax.optim.SGD([w], lr=0.1, momentum=1.0)
    with pytest.raises(TypeError, match=r"Adam: lr must be a number \('0.1'\)"):
        ax.optim.Adam([w], lr="0.1")
    with pytest.raises(TypeError, match=r"Adam: betas must be a pair of numbers \(0.9\)"):
        ax.optim.Adam([w], betas=0.9)
    with pytest.raises(ValueError, match=r"Adam: lr must be in \[0.0, inf\] \(got nan\)"):
        ax.optim.Adam([w], lr=float("nan"))


def test_the_mlp_example_trains():
    """examples/mlp.py at a small size: the loss falls."""
    spec = importlib.util.spec_from_file_location("mlp", ROOT / "examples" / "mlp.py")
    mlp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mlp)
    losses = mlp.main(steps=40, batch=32, features=4, hidden=8, classes=3, quiet=True)
    assert len(losses) == 40
    assert np.mean(losses[-5:]) < 0.5 * losses[0]


def _torch_adam(p, g, state, lr, betas, eps):
    """torch.optim.Adam's update of one parameter (its defaults: no weight decay, no
    amsgrad), in numpy: the step count is the parameter's own (``state["step"]``)."""
    b1, b2 = betas
    state["step"] += 1
    t = state["step"]
    state["m"] = b1 * state["m"] + (1 - b1) * g
    state["v"] = b2 * state["v"] + (1 - b2) * g * g
    denom = np.sqrt(state["v"]) / np.sqrt(1 - b2**t) + eps
    return p - (lr / (1 - b1**t)) * state["m"] / denom


def test_adam_counts_steps_per_parameter_as_torch():
    """A step() before any backward changes nothing and counts for no parameter; a
    parameter whose gradient appears later starts its own count (its bias correction is
    that of its first update), as torch.optim.Adam and the paper."""
    w, b, loss, numpy_grads = _problem()
    wv, bv = w.numpy().copy(), b.numpy().copy()
    lr, betas, eps = 0.05, (0.8, 0.99), 1e-8
    sw = {"step": 0, "m": np.zeros_like(wv), "v": np.zeros_like(wv)}
    sb = {"step": 0, "m": np.zeros_like(bv), "v": np.zeros_like(bv)}
    opt = ax.optim.Adam([w, b], lr=lr, betas=betas, eps=eps)
    opt.step()  # no gradient yet: nothing moves, nothing counts
    assert_close(w, wv)
    target = ax.tensor(np.full((3, 4), 0.5), "A B")
    for _ in range(2):  # only w has a gradient
        opt.zero_grad()
        ((w - target) ** 2).sum().backward()
        opt.step()
        wv = _torch_adam(wv, 2 * (wv - 0.5), sw, lr, betas, eps)
    assert_close(w, wv)
    assert_close(b, bv)
    for _ in range(3):  # now both
        opt.zero_grad()
        loss().backward()
        gw, gb = numpy_grads(wv, bv)
        opt.step()
        wv = _torch_adam(wv, gw, sw, lr, betas, eps)
        bv = _torch_adam(bv, gb, sb, lr, betas, eps)
    assert_close(w, wv)
    assert_close(b, bv)
    assert opt.counts == [5, 3]
