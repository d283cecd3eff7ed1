"""Tensor kinds (Nervana graph's seed table): constant, placeholder, persistent, variable."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax

K = ax.Axis("K", 3)


def test_the_seed_table():
    """kind and trainable per constructor; views share their storage's kind."""
    made = {
        "constant": ax.constant(np.ones(3), "K"),
        "placeholder": ax.placeholder((K,), "float64"),
        "persistent": ax.persistent_tensor(np.ones(3), "K"),
        "variable": ax.variable(np.ones(3), "K"),
    }
    for kind, t in made.items():
        assert t.kind == kind
        assert t.trainable == (kind == "variable")
        assert t.is_lvalue
        assert t.isel(K=slice(1, None)).kind == kind and t.rename(K="J").kind == kind
    plain = ax.tensor(np.ones(3), "K")
    assert plain.kind is None and not plain.trainable and (plain + 1).kind is None
    assert "variable" in repr(made["variable"])


def test_values_are_copied():
    a = np.array([1.0, 2.0, 3.0])
    c = ax.constant(a, "K")
    v = ax.variable(a, "K")
    a[0] = 99.0
    assert_close(c, np.array([1.0, 2.0, 3.0]))
    assert_close(v, np.array([1.0, 2.0, 3.0]))
    s = ax.persistent_tensor(0.5, (K, ax.Axis("J", 2)), dtype="float32")
    assert s.dtype == np.float32 and s.axes.names == ("K", "J")
    assert_close(s, np.full((3, 2), 0.5, np.float32))


def test_writing_a_constant_raises_naming_it_and_changes_nothing():
    c = ax.constant(np.array([1.0, 2.0, 3.0]), "K", name="c")
    msg = r"assign: the destination is the constant 'c', which cannot be written \(K=3\)"
    with pytest.raises(TypeError, match=msg):
        c[...] = 5.0
    with pytest.raises(TypeError, match=r"assign: the destination is the constant 'c'"):
        c[{"K": 0}] = 5.0  # through a view
    with pytest.raises(TypeError, match=r"assign: the destination is the constant 'c'"):
        c += 1.0
    with pytest.raises(TypeError, match=r"assign: the destination is the constant \(K=3\)"):
        ax.assign(ax.constant(np.ones(3), "K"), ax.tensor(np.ones(3), "K"))
    assert_close(c, np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(c)[0] = 7.0


def test_an_unbound_placeholder_raises_naming_it():
    x = ax.placeholder((K,), "float64", name="x")
    msg = r"placeholder 'x' has no value outside a call of its function \(K=3\)"
    with pytest.raises(ValueError, match="evaluate: " + msg):
        (x * 2).eval()
    with pytest.raises(ValueError, match="numpy: " + msg):
        x.numpy()
    out = ax.zeros((K,))
    with pytest.raises(ValueError, match="assign: " + msg):
        out[...] = x + 1
    assert_close(out, np.zeros(3))
    with pytest.raises(ValueError, match=r"evaluate: placeholder \(K=3\) has no value"):
        (ax.placeholder((K,), "float64") + 1).eval()
    with pytest.raises(TypeError, match=r"assign: the destination is the placeholder 'x'"):
        x[...] = 1.0
    assert ax.explain(x * 2).kernels  # planning needs no value


def test_variables_yields_the_very_objects_through_views():
    w = ax.variable(np.ones((2, 3)), "A B", name="w")
    b = ax.variable(np.ones(3), "B", name="b")
    c = ax.constant(np.ones(3), "B")
    s = ax.persistent_tensor(np.ones(3), "B")
    e = (w.transpose("B A").flatten(("A", "B"), "S") * 2).sum() + (b * c * s).sum() + w.sum()
    got = list(ax.variables(e))
    assert len(got) == 2 and got[0] is w and got[1] is b
    assert list(ax.variables(c + s)) == []


def test_kind_errors():
    with pytest.raises(TypeError, match="variable: a variable must have a float dtype, not int64"):
        ax.variable(np.arange(3), "K")
    with pytest.raises(TypeError, match=r"constant: a value that is not a tensor needs axes"):
        ax.constant(np.ones(3))
    with pytest.raises(TypeError, match=r"variable: name must be a string \(3\)"):
        ax.variable(np.ones(3), "K", name=3)
    with pytest.raises(ax.AxesError, match="variable: the axes differ from the initial tensor's"):
        ax.variable(ax.tensor(np.ones(3), "K"), "J")
    with pytest.raises(ax.AxesError, match="placeholder: axis names alone do not give lengths"):
        ax.placeholder("K")


def test_graph_tensors_stay_lazy_where_a_plain_tensor_would_copy():
    """flatten that cannot be a view and to_layout of a graph tensor stay lazy (an eager
    copy would cut autograd and placeholders off); the gradient passes through them."""
    a = np.arange(24.0).reshape(2, 3, 2, 2)
    w = ax.variable(a, "N C H W", name="w")
    flat = w.transpose("W H C N").flatten(("H", "C"), "S")
    packed = w.to_layout("NCHW4")
    assert not flat.is_lvalue and not packed.is_lvalue
    assert str(packed.layout) == "NCHW4" and packed.eval().physical.shape == (2, 1, 2, 2, 4)
    assert_close(flat, a.transpose(3, 2, 1, 0).reshape(2, 6, 2))
    (g_flat,) = ax.grad((flat * flat).sum(), [w])
    (g_pack,) = ax.grad((packed * 3.0).sum(), [w])
    assert_close(g_flat, 2 * a)
    assert_close(g_pack, np.full(a.shape, 3.0))
    plain = ax.tensor(a, "N C H W")
    assert plain.to_layout("NCHW4").is_lvalue  # plain tensors keep the eager copy


def test_every_name_of_the_contract_section_exists():
    """DESIGN §8's names are all there."""
    for name in (
        "constant",
        "placeholder",
        "persistent_tensor",
        "variable",
        "variables",
        "function",
        "grad",
        "stop_gradient",
        "softmax",
        "log_softmax",
        "logsumexp",
        "softmax_cross_entropy",
        "optim",
    ):
        assert hasattr(ax, name) and name in ax.__all__, name
    assert hasattr(ax.optim, "SGD") and hasattr(ax.optim, "Adam")
    for member in ("kind", "trainable", "grad", "backward"):
        assert hasattr(ax.Tensor, member), member


def test_reprs_of_placeholders_do_not_evaluate():
    x = ax.placeholder((K,), "float32", name="x")
    for t in (x, x * 2):
        assert "no value: a placeholder has one only during a call" in repr(t)
        assert "no value" in t._repr_html_()
