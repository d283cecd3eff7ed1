"""The straight runner (``engine.runner.Straight``): a program's later calls run as one
generated function. numpy is the oracle; the runner's use is checked by counting Python
calls, not by timing."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.engine import executor

N, F, H, K = ax.Axis("N", 4), ax.Axis("F", 3), ax.Axis("H", 5), ax.Axis("K", 2)


@pytest.fixture(autouse=True)
def _kernels():
    with ax.set_options(engine="numba", tiered=False):
        yield


def _views(n: ax.Axis, f: ax.Axis):
    x = ax.placeholder((n, f), "float64", name="x")
    y = ax.placeholder((f,), "float64", name="y")
    every_other = x[{n.name: slice(None, None, 2)}]
    outs = [(x * y).sum(f.name), x.transpose(f"{f.name} {n.name}") * 2, every_other + y]
    outs.append(ax.exp(y) - x.sum(n.name))

    def oracle(a, b):
        return [(a * b).sum(1), a.T * 2, a[::2] + b, np.exp(b) - a.sum(0)]

    return ax.function(outs, inputs=[x, y]), oracle, [(n.length, f.length), (f.length,)]


def _broadcasting(n: ax.Axis, f: ax.Axis):
    x = ax.placeholder((n, f), "float64", name="x")
    z = ax.placeholder((H,), "float64", name="z")
    outer = x * z  # (N, F, H)
    outs = [outer, ax.tanh(outer).sum(H.name), (outer * outer).sum()]

    def oracle(a, c):
        o = a[:, :, None] * c
        return [o, np.tanh(o).sum(2), (o * o).sum()]

    return ax.function(outs, inputs=[x, z]), oracle, [(n.length, f.length), (5,)]


def _shared(n: ax.Axis, f: ax.Axis):
    """A value several outputs read (computed once into a per-call buffer) and gradients."""
    x = ax.placeholder((n, f), "float64", name="x")
    w = ax.variable(np.linspace(-1, 1, f.length), (f,), name="w")
    t = ax.tanh(x * w)
    loss = (t * t).sum()
    outs = [loss, t.sum(n.name), *ax.grad(loss, [w])]
    w_np = w.numpy()

    def oracle(a):
        tt = np.tanh(a * w_np)
        return [(tt * tt).sum(), tt.sum(0), (2 * tt * (1 - tt * tt) * a).sum(0)]

    return ax.function(outs, inputs=[x]), oracle, [(n.length, f.length)]


def _layout(n: ax.Axis, f: ax.Axis):
    C = ax.Axis("C", 3)
    x = ax.placeholder((n, C, K, f), "float32", name="x")
    outs = [(x * 2).to_layout("NCHW4", H="K", W=f.name), x[{"C": 1}] - 1]

    def oracle(a):
        return [a * 2, a[:, 1] - 1]

    return ax.function(outs, inputs=[x]), oracle, [(n.length, 3, 2, f.length)]


CASES = {"views": _views, "broadcasting": _broadcasting, "shared": _shared, "layout": _layout}


SIZES = [(4, 3), (1, 1), (0, 3), (3, 0)]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("sizes", SIZES, ids=["x".join(map(str, s)) for s in SIZES])
def test_straight_runner_matches_numpy(case, sizes):
    """Later calls of a function (the generated runner) agree with numpy, for views,
    broadcasting, a layout, shared values and gradients, at sizes 0 and 1 too; earlier
    results stay as they were."""
    n, f = ax.Axis("N", sizes[0]), ax.Axis("F", sizes[1])
    fn, oracle, shapes = CASES[case](n, f)
    rng = np.random.default_rng(sum(sizes))
    dtype = np.float32 if case == "layout" else np.float64
    kept = []
    for call in range(4):
        values = [rng.standard_normal(s).astype(dtype) for s in shapes]
        got = fn(*values)
        want = oracle(*values)
        for g, w in zip(got, want, strict=True):
            assert_close(g, w)
        kept.append((got, want))
        if call == 1:
            assert callable(fn.program._straight), "the second call builds the straight runner"
    for got, want in kept:  # results of earlier calls were not overwritten
        for g, w in zip(got, want, strict=True):
            assert_close(g, w)


def _recurrent_function(steps: int):
    x = ax.placeholder((ax.Axis("T", steps), N, H), "float64", name="x")
    w = ax.variable(np.linspace(-0.5, 0.5, 5), (H,), name="w")
    h = ax.tensor(np.zeros((4, 5)), "N H")
    for k in range(steps):
        h = ax.tanh(h * w + x.isel(T=k))
    loss = (h * h).sum()
    return ax.function([loss, *ax.grad(loss, [w])], inputs=[x]), w.numpy()


def _recurrent_oracle(x, w):
    hs = [np.zeros((4, 5))]
    for k in range(x.shape[0]):
        hs.append(np.tanh(hs[-1] * w + x[k]))
    dh, gw = 2 * hs[-1], np.zeros(5)
    for k in range(x.shape[0] - 1, -1, -1):
        da = dh * (1 - hs[k + 1] ** 2)
        gw += (da * hs[k]).sum(0)
        dh = da * w
    return (hs[-1] ** 2).sum(), gw


def _python_calls(fn) -> tuple[int, int]:
    """(Python function calls made by ``fn()``, of which generated straight runners)."""
    count = [0, 0]

    def hook(frame, event, arg):
        if event == "call":
            count[0] += 1
            count[1] += frame.f_code.co_filename.startswith("<straight runner")

    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(old)
    return count[0], count[1]


def test_a_later_call_is_one_generated_function():
    """A call of a 6-step and of a 24-step recurrent gradient (4x the kernels) makes the
    same number of Python calls, one of them the generated runner: the kernels are called
    from it directly, no Python frame per kernel or per stage, and no allocation per
    shared value (they live in a buffer set taken from the runner's free list)."""
    counts = []
    for steps in (6, 24):
        f, w = _recurrent_function(steps)
        a = np.random.default_rng(steps).standard_normal((steps, 4, 5))
        f(a)
        f(a)  # the runner is built at the end of the second run
        f(a)  # its first call allocates the buffer set that later calls take again
        counts.append(_python_calls(lambda f=f, a=a: f(a)))
        loss, gw = f(a)
        want = _recurrent_oracle(a, w)
        assert_close(loss, want[0])
        assert_close(gw, want[1])
    assert counts[0][1] == counts[1][1] == 1, counts
    assert counts[0][0] == counts[1][0], counts


def test_concurrent_calls_get_buffers_of_their_own():
    """Four threads call one recurrent gradient (many per-call buffers for its shared
    values) with their own inputs: every result is right, so no two calls shared a
    buffer set."""
    f, w = _recurrent_function(8)
    values = [np.random.default_rng(s).standard_normal((8, 4, 5)) for s in range(4)]
    expected = [_recurrent_oracle(v, w) for v in values]
    f(values[0])
    f(values[0])
    assert callable(f.program._straight)
    start = threading.Barrier(4)
    errors: list = []

    def worker(i):
        start.wait()
        try:
            for _ in range(40):
                loss, gw = f(values[i])
                assert_close(loss, expected[i][0])
                assert_close(gw, expected[i][1])
        except BaseException as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_stages_it_cannot_run_go_the_general_way():
    """A BLAS step, an output that is an input, and a shared value read by both: the
    runner calls the general path for the stages it does not run itself; results agree
    with numpy call after call."""
    x = ax.placeholder((N, F), "float64", name="x")
    wv = np.random.default_rng(1).standard_normal((3, 2))
    w = ax.variable(wv, "F K", name="w")
    d = ax.dot(x, w, over="F")
    f = ax.function([x, d.sum(), ax.tanh(d) * 2, d.transpose("K N")], inputs=[x])
    rng = np.random.default_rng(2)
    for _ in range(4):
        a = rng.standard_normal((4, 3))
        got = f(a)
        dd = a @ wv
        for g, want in zip(got, [a, dd.sum(), np.tanh(dd) * 2, dd.T], strict=True):
            assert_close(g, want)
    run = f.program._straight
    assert callable(run) and "stage(" in run.source


def test_a_new_serial_threshold_builds_the_runner_again():
    """The runner fixes each kernel's variant under the ``serial_threshold`` it was built
    with; another threshold runs the general way once and builds a new runner."""
    x = ax.placeholder((ax.Axis("I", 64),), "float64", name="x")
    f = ax.function([ax.exp(x) * 2], inputs=[x])
    a = np.linspace(-1, 1, 64)
    f(a)
    f(a)
    first = f.program._straight
    with ax.set_options(serial_threshold=16):  # 64 elements: the parallel variant
        for _ in range(3):
            (got,) = f(a)
            assert_close(got, np.exp(a) * 2)
        assert f.program._straight is not first
        assert f.program._straight.threshold == 16


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_eager_multi_kernel_evaluation_runs_straight(dtype):
    """A cached plan of several kernels (a reduction, then a map reading it) evaluates and
    assigns through its generated runner: the same results as numpy, call after call,
    with new constants and new storage each time; an assignment whose destination is
    read at other indices still goes through a temporary."""
    rng = np.random.default_rng(3)
    tol = {"float16": 1e-2}.get(dtype)
    for k in range(4):
        a = rng.standard_normal((4, 6)).astype(dtype)
        x = ax.tensor(a, "B F")
        c = k + 1.25  # a new constant each time (not one of the special values: same plan)
        # (x / x.sum("F") is one normalize kernel, so is x / (x * x).sum("F"): the
        # reduced values come from x, which the root reads; z's do not)
        zn = a * 2 + 1
        z = ax.tensor(zn, "B F")
        got = (x / (z * z).sum("F") * c).numpy()
        w, wz = a.astype(np.float64), zn.astype(np.float64)
        want = w / (wz * wz).sum(1, keepdims=True) * c
        np.testing.assert_allclose(got, want, rtol=tol or 1e-6, atol=tol or 1e-6)
        y = ax.tensor(np.zeros((4, 6), dtype), "B F")
        y[...] = x / (z * z).sum("F") * c
        np.testing.assert_allclose(y.numpy(), want, rtol=tol or 1e-6, atol=tol or 1e-6)
        # y from itself, transposed: every element reads others of y
        sq = ax.tensor(rng.standard_normal((5, 5)).astype(dtype), "I J")
        before = sq.numpy().astype(np.float64)
        sq[...] = sq.transpose("J I").rename(J="I", I="J") / sq.sum("J")
        want_sq = before.T / before.sum(1, keepdims=True)
        np.testing.assert_allclose(sq.numpy(), want_sq, rtol=tol or 1e-6, atol=tol or 1e-6)
    plan, _ = executor.schedule_for((x / (z * z).sum("F") * 9.25).node, None)
    assert len(plan.steps) == 2 and "straight runner" in plan.fast.__code__.co_filename
    plan, _ = executor.schedule_for((x / (z * z).sum("F") * 9.25).node, y.node)
    assert "straight runner" in plan.fast.__code__.co_filename


def test_a_plan_without_a_runner_is_marked():
    """A plan the straight runner cannot run (a numpy step: a sort) is looked at once:
    later evaluations take the general path without building anything."""
    rng = np.random.default_rng(4)
    a = ax.tensor(rng.standard_normal((8, 8)), "I K")
    for _ in range(3):
        got = (a.sort("K") * 2 + 1).numpy()
        assert_close(got, np.sort(a.numpy(), 1) * 2 + 1)
    plan, _ = executor.schedule_for((a.sort("K") * 2 + 1).node, None)
    assert plan.fast is not None and not plan.fast


@pytest.mark.parametrize("into", [False, True])
def test_blas_steps_run_in_the_straight_runner(into):
    """A plan with BLAS steps (an MLP's two dots between fused kernels) runs straight from
    its third evaluation: each dot one ``host_dot`` of the storage, values numpy's, into a
    fresh result or a destination."""
    rng = np.random.default_rng(5)
    xn, w1n, w2n = (rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 32), (32, 4)))
    b1n = rng.standard_normal(32).astype(np.float32)
    x, w1, w2 = ax.tensor(xn, "B I"), ax.tensor(w1n, "I H"), ax.tensor(w2n, "H O")
    b1 = ax.tensor(b1n, "H")

    def program():
        h = ax.maximum(ax.dot(x, w1, over="I") + b1, 0)
        return (ax.dot(h, w2, over="H") * 2).sum("O")  # a kernel writes the result last

    out = ax.zeros(program().axes, "float32")
    for _ in range(4):
        xn[...] = rng.standard_normal(xn.shape)  # new values each call, same storage
        want = (np.maximum(xn @ w1n + b1n, 0) @ w2n * 2).sum(1).astype(np.float32)
        if into:
            out[...] = program()
            got = out.numpy()
        else:
            got = program().numpy()
        assert_close(got, want)
    e = program()
    plan, _ = executor.schedule_for(e.node, out.node if into else None)
    assert any(type(s).__name__ == "DotStep" for s in plan.steps)
    assert plan.fast and "straight runner" in plan.fast.__code__.co_filename


def _dot_calls(run) -> list:
    """The BLAS calls a straight runner makes: ``dot_runner``'s functions and
    ``host_dot`` (its fallback), by name."""
    names = {"dot_runner.<locals>.run": "runner", "host_dot": "host_dot"}
    return sorted(
        names[v.__qualname__]
        for v in run.__globals__.values()
        if getattr(v, "__qualname__", None) in names
    )


@pytest.mark.parametrize(
    "case",
    ["plain", "transposed", "batched", "copied", "prefix", "float64"],
)
def test_dot_runner_matches_numpy_and_falls_back_where_numpy_copies(case):
    """Each dot of a straight runner is ``routes.dot_runner``'s function over its storages
    (matrices made by one ``np.ndarray`` each): numpy's values for transposed, batched and
    prefix-view operands; ``host_dot`` when numpy has to copy a transposed operand (its
    matrix is no view of the storage)."""
    rng = np.random.default_rng(11)
    dt = "float64" if case == "float64" else "float32"
    if case == "transposed":
        an, bn = rng.standard_normal((5, 3)), rng.standard_normal((4, 5))
        a, b = ax.tensor(an.astype(dt), "K M"), ax.tensor(bn.astype(dt), "N K")
        oracle = lambda: a.numpy().T @ b.numpy().T  # noqa: E731
    elif case == "batched":
        an, bn = rng.standard_normal((2, 3, 5)), rng.standard_normal((2, 5, 4))
        a, b = ax.tensor(an.astype(dt), "B M K"), ax.tensor(bn.astype(dt), "B K N")
        oracle = lambda: a.numpy() @ b.numpy()  # noqa: E731
    elif case == "copied":  # M and P around K: (M P) is not one stride after the transpose
        an, bn = rng.standard_normal((3, 5, 2)), rng.standard_normal((5, 4))
        a, b = ax.tensor(an.astype(dt), "M K P"), ax.tensor(bn.astype(dt), "K N")
        oracle = lambda: np.einsum("mkp,kn->mpn", a.numpy(), b.numpy())  # noqa: E731
    elif case == "prefix":  # the first rows of a bigger buffer
        big = rng.standard_normal((6, 5)).astype(dt)
        a = ax.tensor(big, "M K").isel(M=slice(0, 3))
        b = ax.tensor(rng.standard_normal((5, 4)).astype(dt), "K N")
        oracle = lambda: big[:3] @ b.numpy()  # noqa: E731
    else:
        a = ax.tensor(rng.standard_normal((3, 5)).astype(dt), "M K")
        b = ax.tensor(rng.standard_normal((5, 4)).astype(dt), "K N")
        oracle = lambda: a.numpy() @ b.numpy()  # noqa: E731

    def program():  # a kernel after the dot: a plan of two steps (a straight runner)
        return ax.dot(a, b, over="K") * 2 + 1

    for _ in range(4):
        a.numpy()[...] = rng.standard_normal(a.shape)  # new values, same storage
        assert_close(program(), oracle() * 2 + 1)
    plan, _ = executor.schedule_for(program().node, None)
    assert plan.fast and "straight runner" in plan.fast.__code__.co_filename
    assert _dot_calls(plan.fast) == (["host_dot"] if case == "copied" else ["runner"])
