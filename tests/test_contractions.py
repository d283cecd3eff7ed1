"""Contractions and the BLAS path (issue 18): where a BLAS result is written, and the plans
of programs around a matrix product (attention, cosine similarity, an MLP), against numpy.

Kernel counts and destinations come from ``ax.explain``; values from numpy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.core.strided import View, contiguous
from axesarray.engine import cost
from axesarray.engine.executor import schedule_for

rng = np.random.default_rng(1818)


def _arr(shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def _kinds(plan) -> list:
    return [k.kind for k in plan.kernels]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m, k, n", [(24, 16, 20), (1, 16, 20), (24, 1, 1), (0, 4, 5), (3, 0, 5)])
def test_a_blas_result_is_written_into_the_destination(dtype, m, k, n):
    an, bn = _arr((m, k), dtype), _arr((k, n), dtype)
    a, b = ax.tensor(an, "M K"), ax.tensor(bn, "K N")
    out = ax.tensor(np.full((m, n), np.nan, dtype), "M N")
    e = ax.dot(a, b, over="K")
    plan = ax.explain(e, out)
    if m * n:
        assert [(x.kind, x.writes) for x in plan.kernels] == [("blas", "destination")]
        assert plan.temporaries == ()
    ax.assign(out, e)
    assert_close(out, an @ bn, scale=max(k, 1))


@pytest.mark.parametrize("how", ["names in the other order", "transposed storage"])
def test_a_destination_in_the_other_order_swaps_the_operands(how):
    an, bn = _arr((30, 8)), _arr((8, 40))
    a, b = ax.tensor(an, "M K"), ax.tensor(bn, "K N")
    if how == "names in the other order":
        base = np.empty((40, 30), np.float32)
        out, got = ax.tensor(base, "N M"), lambda: base.T
    else:
        base = np.zeros((50, 30), np.float32)
        out, got = ax.tensor(base[5:45].T, "M N"), lambda: base[5:45].T
    e = ax.dot(a, b, over="K")
    assert [(x.kind, x.writes) for x in ax.explain(e, out).kernels] == [("blas", "destination")]
    ax.assign(out, e)
    assert_close(got(), an @ bn, scale=8)


@pytest.mark.parametrize("view", ["strided rows", "transposed columns", "float64 destination"])
def test_a_destination_blas_cannot_write_gets_a_temporary_and_a_copy(view):
    an, bn = _arr((30, 8)), _arr((8, 40))
    a, b = ax.tensor(an, "M K"), ax.tensor(bn, "K N")
    if view == "strided rows":
        base = np.zeros((30, 80), np.float32)
        out, got = ax.tensor(base[:, ::2], "M N"), lambda: base[:, ::2]
    elif view == "transposed columns":
        base = np.zeros((40, 60), np.float32)  # rows with gaps in either order
        out, got = ax.tensor(base[:, :30].T, "M N"), lambda: base[:, :30].T
    else:
        base = np.zeros((30, 40), np.float64)
        out, got = ax.tensor(base, "M N"), lambda: base
    e = ax.dot(a, b, over="K")
    plan = ax.explain(e, out)
    assert plan.kernels[0].kind == "blas" and plan.kernels[0].writes != "destination"
    assert plan.kernels[-1].writes == "destination"
    ax.assign(out, e)
    want = an @ bn
    assert_close(got(), want.astype(got().dtype), scale=8)


def test_blas_rows_reads_the_layout_in_the_given_order():
    v = contiguous((4, 5, 6))
    assert cost.blas_rows(v, (0, 1, 2))
    assert not cost.blas_rows(v, (0, 2, 1))
    assert cost.blas_rows(View((4, 1, 6), (6, 99, 1), 3), (0, 1, 2))  # length 1: any stride
    assert not cost.blas_rows(View((4, 6), (12, 1)), (0, 1))  # rows with gaps


def test_an_input_sharing_the_destination_is_read_intact():
    # dst[...] = dst @ b: BLAS must not write the destination while reading it
    xn, bn = _arr((16, 16)), _arr((16, 16))
    b = ax.tensor(bn, "K N")
    base = np.zeros((16, 16), np.float32)
    out = ax.tensor(base, "M N")
    xs = ax.tensor(base, "M K")  # the destination's memory, read as an operand
    base[...] = xn
    e = ax.dot(xs, b, over="K") / (xs.sum() + 100)
    assert schedule_for(e.node, out.node)[0].dst_early
    ax.assign(out, e)
    assert_close(base, (xn @ bn) / (xn.sum() + 100), scale=16)


def test_the_final_kernel_reading_the_blas_result_elsewhere_keeps_a_temporary():
    an, bn = _arr((12, 8)), _arr((8, 10))
    a, b = ax.tensor(an, "M K"), ax.tensor(bn, "K N")
    out = ax.tensor(np.empty((12, 10), np.float32), "M N")
    d = ax.dot(a, b, over="K")
    e = d + d.roll(M=1)  # reads the product one row away
    plan = ax.explain(e, out)
    assert plan.kernels[0].writes != "destination"
    ax.assign(out, e)
    dn = an @ bn
    assert_close(out, dn + np.roll(dn, 1, 0), scale=8)


# --- programs around a matrix product ---------------------------------------------------


def _attention(b, h, t, s, d, dtype="float32"):
    qn, kn, vn = _arr((b, h, t, d), dtype), _arr((b, h, s, d), dtype), _arr((b, h, s, d), dtype)
    q, k, v = ax.tensor(qn, "B H T D"), ax.tensor(kn, "B H S D"), ax.tensor(vn, "B H S D")
    out = ax.tensor(np.empty((b, h, t, d), dtype), "B H T D")
    scale = 1 / math.sqrt(max(d, 1))
    p = ax.softmax(ax.dot(q, k, over="D") * scale, "S")
    e = ax.dot(p, v, over="S")
    sn = qn @ kn.transpose(0, 1, 3, 2) * scale
    en = np.exp(sn - sn.max(-1, keepdims=True))
    return out, e, (en / en.sum(-1, keepdims=True)) @ vn


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(2, 3, 16, 24, 8), (1, 1, 1, 1, 1), (2, 2, 8, 1, 4)])
def test_attention_by_names_writes_its_second_product_in_place(dtype, shape):
    out, e, want = _attention(*shape, dtype=dtype)
    plan = ax.explain(e, out)
    kinds = _kinds(plan)
    assert kinds.count("blas") == 2
    assert plan.kernels[-1].kind == "blas" and plan.kernels[-1].writes == "destination"
    ax.assign(out, e)
    assert_close(out, want, scale=shape[3])


def test_attention_stores_its_softmax_once_between_the_products():
    """The softmax between attention's products is stored for the second product anyway:
    the normalize kernel computes ``e`` once and stores it there (one exp an element),
    not the logsumexp rewrite (a reduction then an elementwise kernel, two exps an
    element): 2 BLAS calls and 1 fused kernel. Later calls run a straight runner whose
    last step writes the destination by BLAS (no general path per call); an operand
    sharing the destination's storage takes the general path."""
    from axesarray.engine import executor

    out, e, want = _attention(2, 3, 16, 24, 8)
    assert _kinds(ax.explain(e, out)) == ["blas", "reduction", "blas"]
    with ax.set_options(tiered=False):
        for _ in range(3):
            ax.assign(out, e)
            assert_close(out, want, scale=24)
        plan = executor.schedule_for(e.node, out.node)[0]
        assert callable(plan.fast) and plan.fast.__name__ == "run"
        qn = _arr((2, 3, 16, 8))
        buf = ax.tensor(qn.copy(), "B H T D")  # the destination is also the query
        k = ax.tensor(_arr((2, 3, 24, 8)), "B H S D")
        v = ax.tensor(_arr((2, 3, 24, 8)), "B H S D")
        scale = 1 / math.sqrt(8)
        e2 = ax.dot(ax.softmax(ax.dot(buf, k, over="D") * scale, "S"), v, over="S")
        sn = qn @ k.numpy().transpose(0, 1, 3, 2) * scale
        en = np.exp(sn - sn.max(-1, keepdims=True))
        want2 = (en / en.sum(-1, keepdims=True)) @ v.numpy()
        for _ in range(3):
            buf[...] = ax.tensor(qn, "B H T D")
            ax.assign(buf, e2)
            assert_close(buf, want2, scale=24)


def test_cosine_similarity_by_names_divides_the_blas_result_in_place():
    an, bn = _arr((64, 16)), _arr((48, 16))
    a, b = ax.tensor(an, "N D"), ax.tensor(bn, "M D")
    out = ax.tensor(np.empty((64, 48), np.float32), "N M")
    e = (a * b).sum("D") / ax.sqrt((a * a).sum("D") * (b * b).sum("D"))
    plan = ax.explain(e, out)
    assert _kinds(plan) == ["blas", "reduction", "reduction", "elementwise"]
    assert plan.kernels[0].writes == "destination"
    assert all(t[1] != (64, 48) for t in plan.temporaries)  # no full-size temporary
    ax.assign(out, e)
    na, nb = np.linalg.norm(an, axis=1), np.linalg.norm(bn, axis=1)
    assert_close(out, (an @ bn.T) / np.outer(na, nb), scale=16)


def test_a_plan_writing_its_destination_by_blas_first_runs_straight():
    """Cosine writes its product into the destination first, then divides it in place:
    later calls run a straight runner (not the general path each call). A destination
    that shares storage with an operand still goes through a scratch copy: numpy's
    values, as if the right side were computed before the write."""
    from axesarray.engine import executor

    an, bn = _arr((64, 16)), _arr((48, 16))
    a, b = ax.tensor(an, "N D"), ax.tensor(bn, "M D")
    out = ax.tensor(np.empty((64, 48), np.float32), "N M")

    def cosine(x, y):
        return (x * y).sum("D") / ax.sqrt((x * x).sum("D") * (y * y).sum("D"))

    def want(xn, yn):
        nx, ny = np.linalg.norm(xn, axis=1), np.linalg.norm(yn, axis=1)
        return (xn @ yn.T) / np.outer(nx, ny)

    with ax.set_options(tiered=False):
        for _ in range(3):
            out[...] = cosine(a, b)
            assert_close(out, want(an, bn), scale=16)
        plan = executor.schedule_for(cosine(a, b).node, out.node)[0]
        assert plan.dst_early and callable(plan.fast) and plan.fast.__name__ == "run"
        storage = np.zeros(64 * 48, np.float32)  # the destination; b's values live in it
        storage[: 48 * 16] = bn.reshape(-1)
        shared = ax.tensor(storage.reshape(64, 48), "N M")
        b2 = ax.tensor(storage[: 48 * 16].reshape(48, 16), "M D")
        for _ in range(3):
            storage[: 48 * 16] = bn.reshape(-1)
            shared[...] = cosine(a, b2)
            assert_close(shared, want(an, bn), scale=16)


def test_the_kernel_rewriting_a_blas_result_in_place_binds_one_array():
    # two arguments over the same memory fail LLVM's overlap check: the scalar loop runs
    from axesarray.engine.binder import lowered

    a, b = ax.tensor(_arr((40, 8)), "N D"), ax.tensor(_arr((30, 8)), "M D")
    out = ax.tensor(np.empty((40, 30), np.float32), "N M")
    e = ax.dot(a, b, over="D") * 2 + 1
    plan = schedule_for(e.node, out.node)[0]
    final = plan.steps[-1]
    assert any(lf.src == ("dst",) for lf in final.leaves())
    assert [op.src for op in lowered(final).operands] == [("dst",)]
    ax.assign(out, e)
    assert_close(out, (a.numpy() @ b.numpy().T) * 2 + 1, scale=8)


def _mlp(b, i, h, o, dtype="float32"):
    xn, w1n, b1n = _arr((b, i), dtype), _arr((i, h), dtype), _arr(h, dtype)
    w2n, b2n, yn = _arr((h, o), dtype), _arr(o, dtype), _arr((b, o), dtype)
    x, w1, b1 = ax.tensor(xn, "B I"), ax.tensor(w1n, "I H"), ax.tensor(b1n, "H")
    w2, b2, y = ax.tensor(w2n, "H O"), ax.tensor(b2n, "O"), ax.tensor(yn, "B O")
    hid = ax.maximum(ax.dot(x, w1, over="I") + b1, 0)
    loss = ((ax.dot(hid, w2, over="H") + b2 - y) ** 2).mean()
    hn = np.maximum(xn @ w1n + b1n, 0)
    return loss, ((hn @ w2n + b2n - yn) ** 2).mean()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sizes", [(16, 24, 32, 8), (1, 1, 1, 1), (3, 5, 1, 2)])
def test_an_mlp_writes_its_hidden_layer_over_the_first_product(dtype, sizes):
    loss, want = _mlp(*sizes, dtype=dtype)
    plan = ax.explain(loss)
    assert _kinds(plan) == ["blas", "elementwise", "blas", "reduction"]
    assert plan.kernels[1].computes == "temporary (in place)"
    assert plan.kernels[1].writes == plan.kernels[0].writes  # no second temporary
    assert len(plan.temporaries) == 2  # the hidden layer over the first product; the second
    assert_close(loss, want, scale=sizes[1] * sizes[2])


def test_a_product_read_again_after_it_was_written_over_keeps_its_temporary():
    # tanh(x @ w) is stored for the second product and recomputed from x @ w elsewhere
    xn, wn, vn = _arr((6, 4), "float64"), _arr((4, 5), "float64"), _arr((5, 3), "float64")
    x, w, v = ax.tensor(xn, "N F"), ax.tensor(wn, "F H"), ax.tensor(vn, "H K")
    h = ax.tanh(ax.dot(x, w, over="F"))
    e = ax.dot(h, v, over="H").sum("K") + (1 - h * h).sum("H")
    assert "temporary (in place)" not in [k.computes for k in ax.explain(e).kernels]
    hn = np.tanh(xn @ wn)
    assert_close(e, (hn @ vn).sum(1) + (1 - hn * hn).sum(1), scale=8)


def test_a_program_writes_a_shared_product_into_its_slot_by_blas():
    x = ax.placeholder((ax.Axis("N", 4), ax.Axis("F", 3)), "float64", name="x")
    w = ax.variable(rng.standard_normal((3, 5)), "F H", name="w")
    h = ax.tanh(ax.dot(x, w, over="F"))
    loss = (h * h).sum()
    (g,) = ax.grad(loss, [w])
    f = ax.function([loss, g], inputs=[x])
    plan = ax.explain(f)
    stage = next(s for s in plan.stages if s.label.endswith("(dot)"))
    assert [(k.kind, k.writes) for k in stage.plan.kernels] == [("blas", "destination")]
    a = rng.standard_normal((4, 3))
    got_loss, got_g = f(a)
    hn = np.tanh(a @ w.numpy())
    assert_close(got_loss, np.array((hn * hn).sum()))
    assert_close(got_g, a.T @ (2 * hn * (1 - hn * hn)))


# --- contractions with computed operands --------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_contraction_with_a_computed_operand_runs_on_blas(dtype):
    # an MLP written by names with arithmetic: the second layer's operand is computed
    xn, w1n, b1n, w2n = (_arr(s, dtype) for s in [(64, 48), (48, 40), (40,), (40, 24)])
    x, w1 = ax.tensor(xn, "B I"), ax.tensor(w1n, "I H")
    b1, w2 = ax.tensor(b1n, "H"), ax.tensor(w2n, "H O")
    h = ax.maximum((x * w1).sum("I") + b1, 0)
    e = (h * w2).sum("H")
    plan = ax.explain(e)
    assert _kinds(plan) == ["blas", "elementwise", "blas"]
    assert plan.kernels[1].computes == "temporary (in place)"  # relu over the product
    assert_close(e, np.maximum(xn @ w1n + b1n, 0) @ w2n, scale=40)


@pytest.mark.parametrize(
    "shape", [(2, 40, 30, 16), (1, 2, 200, 100), (1, 1, 200, 200), (3, 0, 40, 8)]
)
def test_a_scaled_operand_is_computed_at_its_own_size(shape):
    b, t, s, d = shape
    qn, kn = _arr((b, t, d)), _arr((b, s, d))
    q, k = ax.tensor(qn, "B T D"), ax.tensor(kn, "B S D")
    e = ((q * 0.25) * k).sum("D")
    plan = ax.explain(e)
    if t > 1 and s > 1 and b * t * s * d >= 1 << 15:  # a matrix product that pays
        assert _kinds(plan) == ["elementwise", "blas"]
        assert all(math.prod(tmp[1]) <= b * t * d for tmp in plan.temporaries)  # q, scaled
    want = np.einsum("btd,bsd->bts", qn * np.float32(0.25), kn)
    assert_close(e, want, scale=d)


def test_an_operand_varying_along_the_other_sides_free_dim_stays_fused():
    # (a(N, D) + c(M)) * b(M, D) summed over D: a side of the product varies along M too
    an, cn, bn = _arr((64, 32)), _arr(48), _arr((48, 32))
    a, c, b = ax.tensor(an, "N D"), ax.tensor(cn, "M"), ax.tensor(bn, "M D")
    e = ((a + c) * b).sum("D")
    assert "blas" not in _kinds(ax.explain(e))
    want = ((an[:, None, :] + cn[None, :, None]) * bn[None]).sum(2)
    assert_close(e.transpose("N", "M"), want, scale=32)


@pytest.mark.parametrize("out", ["A X1 X2", "X2 A X1", "X1 X2 A", "X2 X1 A", "A X2 X1"])
def test_a_product_read_in_any_order_of_its_dims(out):
    """A product whose result dims are a permutation of the order BLAS writes them in
    (``(X1 X2 B) . (A B)`` over B is laid out ``X1 X2 A``): read back through the right
    permutation, not its inverse, which differs for a cycle of three dims (a gradient of
    a split product built one: ``tests/test_autograd.py::test_random_trees_match_torch``)."""
    from axesarray.dag.nodes import Dot
    from axesarray.tensors.tensor import Tensor

    rng = np.random.default_rng(3)
    bn, an = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4))
    b, a = ax.tensor(bn, "X1 X2 B"), ax.tensor(an, "A B")
    labels = {"X1": 0, "X2": 1, "B": 2, "A": 3}
    names = out.split()
    size = {"X1": 2, "X2": 3, "A": 5}
    node = Dot(
        b.node,
        a.node,
        (0, 1, 2),
        (3, 2),
        tuple(labels[n] for n in names),
        tuple(size[n] for n in names),
        np.dtype(np.float64),
    )
    t = Tensor(ax.Axes([ax.Axis(n, size[n]) for n in names]), node)
    want = np.einsum(
        "xyb,ab->" + "".join({"X1": "x", "X2": "y", "A": "a"}[n] for n in names), bn, an
    )
    assert_close(t.numpy(), want)
    assert_close((t * 2).numpy(), want * 2)  # read by a kernel through the temp's view
