"""Per-call building: lazy nodes' twin classes, the remembered structures of contractions,
broadcasts and ``x op x``, and the direct path's quiet context. Each against numpy or the
structure built without the memo, and the errors as a first build raises them.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.dag import nodes
from axesarray.dag.nodes import Dot, Map
from axesarray.engine import direct
from axesarray.errors import AxesError
from axesarray.tensors import structures

B, AI, H = ax.Axis("B", 3), ax.Axis("I", 4), ax.Axis("H", 5)


def _t(shape_axes, dtype="float32", seed=0):
    shape = tuple(a.length for a in shape_axes)
    values = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return values, ax.tensor(values, shape_axes)


# --- lazy nodes ---------------------------------------------------------------------------


def _long_sum(count):
    n = ax.Axis("I", 5)
    xs = [ax.tensor(np.arange(5.0) + k, (n,)) for k in range(count)]
    acc = xs[0] * 1.5
    for x in xs[1:]:
        acc = acc + x * 1.5
    return acc, sum((np.arange(5.0) + k) * 1.5 for k in range(count))


def test_a_lazy_node_is_its_kinds_twin_until_finished():
    """A lazy node is of its kind's twin subclass (the only class with ``__getattr__``);
    reading its key finishes it and makes it of its kind's class again."""
    acc, expected = _long_sum(nodes.LAZY_PARAMS + 6)
    node = acc.node
    assert nodes.lazy(node)
    assert type(node) is not Map and isinstance(node, Map) and type(node).__name__ == "Map"
    assert node.kind == "map" and "__getattr__" not in vars(Map)
    assert isinstance(node.key, int) and not nodes.lazy(node)
    assert type(node) is Map
    assert_close(acc, expected)
    with pytest.raises(AttributeError):
        node.no_such_attribute  # noqa: B018 - a finished node has no lookup hook


def test_lazy_nodes_of_every_kind_finish():
    """Cast, reduce, remap and dot nodes over a lazy child are lazy twins too; evaluating
    them gives numpy's values."""
    acc, expected = _long_sum(nodes.LAZY_PARAMS + 2)
    J = ax.Axis("J", 2)
    w = ax.tensor(np.arange(10.0).reshape(5, 2), (ax.Axis("I", 5), J))
    cases = [
        (acc.astype("float32"), expected.astype("float32")),
        (acc.sum(), expected.sum()),
        (acc.isel(I=slice(1, 4)), expected[1:4]),
        (ax.dot(acc, w, over="I"), expected @ np.arange(10.0).reshape(5, 2)),
    ]
    for t, want in cases:
        assert nodes.lazy(t.node) and type(t.node).__bases__[0].kind == t.node.kind
        assert_close(t, want)
        assert not nodes.lazy(t.node) and type(t.node).__name__ == type(t.node).__qualname__


# --- contractions ---------------------------------------------------------------------------


def test_a_remembered_contraction_builds_the_same_dot():
    xn, x = _t((B, AI))
    wn, w = _t((AI, H), seed=1)
    first, again = ax.dot(x, w, over="I"), ax.dot(x, w, over="I")
    assert first.axes is again.axes and first.axes == ax.Axes([B, H])
    assert first.node.key == again.node.key and type(again.node) is Dot
    fresh = Dot(*first.node.children, first.node.a_labels, first.node.b_labels,
                first.node.out_labels, first.node.shape, first.node.dtype)  # fmt: skip
    assert fresh.key == again.node.key
    assert_close(again, xn @ wn)
    assert_close(x @ w, xn @ wn)


def test_contraction_memo_keys_on_dtypes_and_axes_objects():
    """The same axes with other dtypes promote as numpy does; equal axes in another Axes
    object give the same result."""
    xn, x = _t((B, AI))
    wn, w = _t((AI, H), seed=1)
    ax.dot(x, w, over="I")
    x64 = ax.tensor(xn.astype("float64"), (B, AI))
    assert ax.dot(x64, w, over="I").dtype == np.float64
    xi = ax.tensor(np.arange(12, dtype="int32").reshape(3, 4), ax.Axes([B, AI]))
    got = ax.dot(xi, w, over="I")
    assert got.dtype == (np.arange(2, dtype="int32") @ np.ones(2, "float32")).dtype
    assert_close(got, np.arange(12, dtype="int32").reshape(3, 4) @ wn)


def test_contraction_errors_are_raised_after_a_remembered_success():
    """A contraction remembered for some axes still checks others: unknown names and
    mismatched lengths raise with the first build's messages."""
    _, x = _t((B, AI))
    _, w = _t((AI, H), seed=1)
    ax.dot(x, w, over="I")
    with pytest.raises(AxesError, match="unknown axis 'K'"):
        ax.dot(x, w, over="K")
    _, w_bad = _t((ax.Axis("I", 7), H))
    for _ in range(2):
        with pytest.raises(AxesError, match="axis 'I' has length 4 in the left operand and 7"):
            ax.dot(x, w_bad, over="I")
    bool_x = ax.tensor(np.ones((3, 4), bool), (B, AI))
    bool_w = ax.tensor(np.ones((4, 5), bool), (AI, H))
    assert ax.dot(bool_x, bool_w, over="I").dtype == np.bool_


def test_contraction_memo_is_bounded():
    structures._CONTRACTS.clear()
    _, x = _t((B, AI))
    for _ in range(1100):
        w = ax.tensor(np.ones((4, 1), "float32"), ax.Axes([AI, ax.Axis("H", 1)]))
        ax.dot(x, w, over="I")
    assert 0 < len(structures._CONTRACTS) <= 1024


# --- broadcasts ---------------------------------------------------------------------------


def test_a_remembered_broadcast_gives_numpys_values_and_one_axes_object():
    dn, d = _t((B, H))
    bn, b = _t((H,), seed=2)
    xn, x = _t((B, AI), seed=3)
    for _ in range(3):
        s, r = d + b, b + d
        assert s.axes == ax.Axes([B, H]) and r.axes == ax.Axes([B, H])
        assert_close(s, dn + bn)
        assert_close(r, bn + dn)
        u = x * b  # a union of names
        assert u.axes == ax.Axes([B, AI, H])
        assert_close(u, xn[:, :, None] * bn)
        assert_close(ax.maximum(d - b, 0), np.maximum(dn - bn, 0))
    assert (d + b).axes is (d + b).axes


def test_a_remembered_broadcast_follows_the_broadcast_option():
    """A union remembered under broadcast="union" is refused under "subset", and a wrong
    length is refused on every build."""
    _, x = _t((B, AI))
    _, b = _t((H,), seed=2)
    x + b
    with (
        ax.set_options(broadcast="subset"),
        pytest.raises(AxesError, match="neither operand's axes contain the other's"),
    ):
        x + b
    assert (x + b).axes == ax.Axes([B, AI, H])
    _, wrong = _t((ax.Axis("I", 9),))
    for _ in range(2):
        with pytest.raises(AxesError, match="axis 'I' has length 4 in the left operand"):
            x + wrong


def _no_check(*args, **kwargs):
    pytest.fail("the broadcast was checked again")


def test_a_remembered_three_operand_structure_is_the_general_paths(monkeypatch):
    """``where`` (three operands: tensors and a Python scalar) remembers its broadcast
    structure per ``Axes`` objects and scalar types (a second call checks no names):
    numpy's values on every call, the key the general path builds, the broadcast option
    and errors as on a first build."""
    from axesarray.tensors import structures as structures_module

    mn, m = _t((AI, B), seed=4)  # another order than x's: a transposed read
    xn, x = _t((B, AI, H), seed=5)
    want = np.where((mn > 0).T[:, :, None], xn, np.float32(0.5))
    keys = set()
    for _ in range(3):
        got = ax.where(m > 0, x, 0.5)
        assert got.axes == ax.Axes([B, AI, H])  # x's axes contain m's: x's order
        assert_close(got, want)
        keys.add(got.node.key)
        monkeypatch.setattr(structures_module, "broadcast_axes", _no_check)
        assert_close(ax.where(m > 0, x, 0.5), want)  # remembered: no broadcast check
        monkeypatch.undo()
    saved = dict(structures_module.MANY)
    structures_module.MANY.clear()
    try:
        keys.add(ax.where(m > 0, x, 0.5).node.key)
    finally:
        structures_module.MANY.update(saved)
    assert len(keys) == 1
    assert_close(ax.where(m > 0, 1, x), np.where((mn > 0).T[:, :, None], 1, xn))
    _, other = _t((ax.Axis("K", 2),), seed=6)
    ax.where(m > 0, x, 0.5)
    with (
        ax.set_options(broadcast="subset"),
        pytest.raises(AxesError, match="neither operand's axes contain the other's"),
    ):
        ax.where(m > 0, other, 0.5)
    _, wrong = _t((ax.Axis("I", 9),))
    for _ in range(2):
        with pytest.raises(AxesError, match="axis 'I' has length"):
            ax.where(m > 0, x, wrong)


# --- x op x -----------------------------------------------------------------------------


def test_x_op_x_is_remembered_with_its_shared_param():
    xn, x = _t((B, AI))
    first, again = x + x, x + x
    rebuilt = Map("add", (x.node, x.node), first.node.dtype)
    for t in (first, again):
        assert t.node.key == rebuilt.key and t.node.params == (x.node,)
    assert (x + x).node.key != (x + ax.tensor(xn.copy(), (B, AI))).node.key
    assert_close(x * x, xn * xn)
    assert_close(x + x, xn + xn)


def test_operands_sharing_params_are_remembered_with_where_they_share(monkeypatch):
    """``x - x.max(K)``, ``e / e.sum(K)``, and operands sharing one of several params:
    remembered per structure and per where the params coincide, each node's key and
    params are ``Map(...)``'s (``_combine``'s), values numpy's; a second build makes no
    ``Map``. Another sharing of the same structures gets its own key."""
    xn, x = _t((B, AI), seed=11)
    yn, y = _t((B, AI), seed=12)

    def cases():
        m = x.max("I")
        e = ax.exp(x - m)
        return [x - m, e / e.sum("I"), (x * y) - y.sum("I"), (y * x) - y.sum("I")]

    def want():
        e = np.exp(xn - xn.max(1, keepdims=True))
        return [
            xn - xn.max(1, keepdims=True),
            e / e.sum(1, keepdims=True),
            xn * yn - yn.sum(1, keepdims=True),
            yn * xn - yn.sum(1, keepdims=True),
        ]

    first = cases()
    monkeypatch.setattr(Map, "__init__", _no_map)
    again = cases()  # remembered: no Map built by its constructor
    monkeypatch.undo()
    for a, b, w in zip(first, again, want(), strict=True):
        rebuilt = Map(b.node.op, b.node.children, b.node.dtype)
        assert a.node.key == b.node.key == rebuilt.key
        assert b.node.params == rebuilt.params
        assert_close(b, w)
    assert first[2].node.key != first[3].node.key  # y shared at another position


def test_a_clip_by_scalars_is_remembered_and_errors_name_clip(monkeypatch):
    """``ax.clip(x, lo, hi)`` with Python scalar bounds takes the remembered structure of
    ``x * 2`` (a second build makes no ``Map``), with the key a fresh build gives and
    numpy's values (NaN kept, -0.0 kept on a tie with 0.0); a bound the dtype cannot hold
    is refused in clip's name on every build."""
    from axesarray.dag import build

    xn = np.array([np.nan, -0.0, -2.0, 0.5, 3.0], np.float32)
    x = ax.tensor(xn, (ax.Axis("N", 5),))
    first = ax.clip(x, 0.0, 1.0)
    monkeypatch.setattr(Map, "__init__", _no_map)
    again = ax.clip(x, 0.0, 1.0)
    monkeypatch.undo()
    saved = dict(build._BUILT)
    build._BUILT.clear()
    try:
        fresh = ax.clip(x, 0.0, 1.0)
    finally:
        build._BUILT.update(saved)
    assert first.node.key == again.node.key == fresh.node.key
    got = again.numpy()
    np.testing.assert_array_equal(got, np.clip(xn, 0.0, 1.0))
    assert np.signbit(got[1]) and np.isnan(got[0])
    i8 = ax.tensor(np.arange(5, dtype=np.int8), "N")
    np.testing.assert_array_equal(ax.clip(i8, 1, 3).numpy(), np.clip(np.arange(5), 1, 3))
    for _ in range(2):
        with pytest.raises(OverflowError, match="^clip: Python integer -1000 is out of bounds"):
            ax.clip(i8, -1000, 3)


def _no_map(*args, **kwargs):
    pytest.fail("a Map was built, not remembered")


# --- the direct path's quiet context --------------------------------------------------------


def test_the_direct_path_inside_its_own_context_still_ignores_errors():
    """The quiet context is entered by one thread at a time; a call that finds it entered
    (here: from inside it) sets numpy's errstate itself, with the same result."""
    big = ax.tensor(np.array([3e38, -3e38], "float32"), "N")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        before = direct.STATS["direct"]
        got = direct._QUIET.run(lambda: (big + big).eval().numpy())
        assert direct.STATS["direct"] == before + 1
    np.testing.assert_array_equal(got, [np.inf, -np.inf])
    assert np.geterr()["over"] == "warn"


def test_the_direct_path_from_several_threads():
    an = np.random.default_rng(0).standard_normal(1000).astype("float32")
    a = ax.tensor(an, "N")
    errors, results = [], []

    def work():
        sums, products = [], []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                for _ in range(200):
                    sums.append((a + a).eval().numpy())
                    products.append((a * a).eval().numpy())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
        results.append((sums, products))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4
    for sums, products in results:
        assert len(sums) == len(products) == 200
        for s, p in zip(sums, products, strict=True):
            np.testing.assert_array_equal(s, an + an)
            np.testing.assert_array_equal(p, an * an)


# --- reductions ---------------------------------------------------------------------------


def test_remembered_reductions_give_numpys_values_and_keys():
    xn, x = _t((B, AI))
    for _ in range(3):
        for names, axis in ((None, None), ("I", 1), ("B", 0), ("B I", (0, 1))):
            assert_close(x.sum(names), xn.sum(axis=axis))
            assert_close(x.mean(names), xn.mean(axis=axis))
            assert_close(x.max(names, keepdims=True), xn.max(axis=axis, keepdims=True))
        assert (x * 2).sum("I").node.key == (x * 2).sum("I").node.key
    i8 = ax.tensor(np.arange(12, dtype="int8").reshape(3, 4), (B, AI))
    for _ in range(2):  # a reduction with a cast below it (sum of int8 is int64)
        got = i8.sum("I")
        assert got.dtype == np.int64
        assert_close(got, np.arange(12, dtype="int8").reshape(3, 4).sum(axis=1))


def test_reduction_errors_after_a_remembered_success():
    _, x = _t((B, AI))
    x.max("I")
    with pytest.raises(AxesError, match="unknown axis 'K'"):
        x.max("K")
    empty = ax.tensor(np.zeros((3, 0), "float32"), (B, ax.Axis("I", 0)))
    empty.sum("I")
    for _ in range(2):
        with pytest.raises(AxesError, match="cannot reduce over an empty axis"):
            empty.max("I")


def test_reduced_dims_keep_their_names_in_explain():
    _, x = _t((B, AI))
    for _ in range(2):
        text = str(ax.explain((x * 2).sum("I")))
        assert "I" in text and "r0" not in text


# --- remembered dot keys, parsed names, mean counts ------------------------------------------


def _fresh_dot(node):
    return Dot(*node.children, node.a_labels, node.b_labels, node.out_labels, node.shape,
               node.dtype)  # fmt: skip


def test_remembered_dot_keys_equal_interned_keys_and_see_shared_params():
    """A Dot rebuilt from a remembered key has the key and params ``Dot(...)`` computes,
    for leaves, computed operands, and operands that share a param (another key)."""
    xn, x = _t((B, AI))
    wn, w = _t((AI, H), seed=1)
    x2 = x.rename(B="H").transpose("I H")  # x again, as an I H operand: shares x's storage
    cases = [
        (lambda: ax.dot(x, w, over="I"), xn @ wn),
        (lambda: ax.dot(x * 2, w + 1, over="I"), (xn * 2) @ (wn + 1)),
        (lambda: ax.dot(x * 2, x2 * 3 + x2, over="I"), (xn * 2) @ (xn.T * 4)),
        (lambda: ax.dot(x * 2, w + x.sum("B"), over="I"),  # x itself on both sides
         (xn * 2) @ (wn + xn.sum(0)[:, None])),
    ]  # fmt: skip
    keys = set()
    for build, want in cases:
        for _ in range(3):
            t = build()
            fresh = _fresh_dot(t.node)
            assert t.node.key == fresh.key
            assert [id(p) for p in t.node.params] == [id(p) for p in fresh.params]
            assert_close(t, want)
        keys.add(t.node.key)
    assert len(keys) == len(cases)
    shared = ax.dot(x * 2, w + x.sum("B"), over="I").node
    assert set(map(id, shared.children[0].params)) & set(map(id, shared.children[1].params))


def test_dot_memo_is_bounded_and_skips_one_operand_twice():
    from axesarray.dag import build

    _, x = _t((AI,))
    for _ in range(2):  # x . x: one param read twice, never from the memo
        assert_close(ax.dot(x, x, over="I"), (x.numpy() ** 2).sum())
    build._DOTS.clear()
    for k in range(1, build._MEMO_MAX + 10):  # a new length, so a new key, each time
        w = ax.tensor(np.ones((4, k), "float32"), ax.Axes([AI, ax.Axis("H", k)]))
        ax.dot(x, w, over="I")
    assert 0 < len(build._DOTS) <= build._MEMO_MAX


def test_parsed_names_are_remembered_and_bad_names_still_raise():
    from axesarray.core.axes import parse_names

    assert parse_names("N C, H") == ("N", "C", "H") == parse_names("N C, H")
    _, x = _t((B, AI))
    for _ in range(2):
        assert_close(x.sum("B I"), x.numpy().sum())
        with pytest.raises(AxesError, match="axis name 'B' appears twice"):
            x.sum("B B")
        with pytest.raises(AxesError, match="an axis name must be a string identifier"):
            parse_names("B 1x", "sum")


def test_remembered_mean_counts_give_numpys_values_and_errors():
    xn, x = _t((B, AI))
    for _ in range(3):
        for names, axis in ((None, None), ("I", 1), ("B", 0), ("B I", (0, 1))):
            assert_close(x.mean(names), xn.mean(axis=axis))
            assert_close(x.mean(names, keepdims=True), xn.mean(axis=axis, keepdims=True))
        with pytest.raises(AxesError, match="unknown axis 'K'"):
            x.mean("K")
    empty = ax.tensor(np.zeros((3, 0), "float32"), (B, ax.Axis("I", 0)))
    for _ in range(2):
        assert np.isnan(empty.mean("I").numpy()).all()
    h = ax.tensor(np.arange(12, dtype="float16").reshape(3, 4), (B, AI))
    for _ in range(2):
        assert h.mean("I").dtype == np.float16
        assert_close(h.mean("I"), np.arange(12, dtype="float16").reshape(3, 4).mean(axis=1))


def test_a_view_of_a_declared_tensor_is_in_the_graph():
    """``in_graph`` reads the params' tags: a view of a variable has its tag, a view of a
    plain tensor none (as the walk to their roots said)."""
    from axesarray.autograd.rules import in_graph
    from axesarray.dag.nodes import leaf_roots

    _, x = _t((B, AI))
    v = ax.variable(np.ones((3, 4), "float32"), (B, AI))
    for t in (x, x.isel(B=slice(1, 3)), x * 2, v, v.isel(B=slice(1, 3)) * 2, x + v,
              v.transpose("I B").sum("I")):  # fmt: skip
        walked = any(leaf.tag is not None for leaf in leaf_roots(t.node))
        assert in_graph(t.node) == walked
    assert in_graph(v.isel(B=slice(1, 3)).node) and not in_graph(x.isel(B=slice(1, 3)).node)


def test_rebuilt_maps_under_a_view_keep_interned_keys():
    """A broadcast pushed through an expression rebuilds its Maps with remembered keys:
    each equals the key ``Map.rebuild`` interns, and the values are numpy's (sharing a
    param, a constant child, a reduction kept whole under them)."""
    xn, x = _t((B, AI))
    wn, w = _t((AI, H), seed=1)
    vn, v = _t((H, ax.Axis("O", 2)), seed=2)
    builds = [
        (lambda: ax.maximum(ax.dot(x, w, over="I") + 1.5, 0) * v,
         np.maximum(xn @ wn + 1.5, 0)[:, :, None] * vn),
        (lambda: (x * 2 + x) * w, (xn * 3)[:, :, None] * wn),
        (lambda: -(x.sum("B") * 3) * w, -(xn.sum(0) * 3)[:, None] * wn),
    ]  # fmt: skip
    for build, want in builds:
        for _ in range(3):
            t = build()
            for n in nodes.walk(t.node):
                if type(n) is Map:
                    assert n.key == n.rebuild(n.children).key
            assert_close(t, want)


def _fields(node):
    """A node's fields as a fresh build compares them (children by their fields too)."""
    if type(node) is nodes.Leaf:
        origin = None if node.origin is None else (id(node.origin[0]), node.origin[1])
        return ("L", id(node.data), node.view, node.shape, node.dtype, node.writeable,
                origin, node.tag, node.key)  # fmt: skip
    params = tuple(_fields(p) if type(p) is nodes.Leaf else (p.key, p.value) for p in node.params)
    if type(node) is nodes.Remap:
        return ("X", node.maps, node.shape, node.dtype, node.key, params,
                _fields(node.children[0]))  # fmt: skip
    return (type(node).__name__, node.key, params, tuple(_fields(c) for c in node.children))


def test_remembered_views_and_kept_values_are_the_built_ones(monkeypatch):
    """A leaf broadcast each call (a derived leaf: its key from the leaf's key and the
    view) and a computed value kept whole under a broadcast (a Remap: its key by the
    value's key and the maps) are, field for field, what a build without the memos makes:
    keys, params, origin, tag, writeable; values numpy's. A read-only leaf and a leaf of
    another dtype get keys of their own."""
    from axesarray.dag import views

    xn, x = _t((B, AI), seed=21)
    bn, b = _t((H,), seed=22)
    ro = ax.tensor(np.frombuffer(xn.tobytes(), np.float32).reshape(3, 4), (B, AI))
    x64 = ax.tensor(xn.astype(np.float64), (B, AI))

    def cases():
        mu = x.mean("I")  # kept whole (a division) under the broadcast back over I
        s = ax.sqrt((x * x).sum("I") + 1e-5)
        h = ax.maximum(x.sum("I") + 1.0, 0.0)  # cheap: pushed down to the sum, kept there
        return [x * b, b + x, x - mu, x / s, ro * b, x64 * b, h * b]

    want = [xn[:, :, None] * bn, bn[:, None, None] + xn, xn - xn.mean(1, keepdims=True),
            xn / np.sqrt((xn * xn).sum(1, keepdims=True) + np.float32(1e-5)),
            xn[:, :, None] * bn, xn.astype(np.float64)[:, :, None] * bn,
            np.maximum(xn.sum(1) + 1, 0)[:, None] * bn]  # fmt: skip
    first = [_fields(t.node) for t in cases()]
    monkeypatch.setattr(nodes.Remap, "__init__", _no_map)  # every Remap's key remembered
    again = cases()  # from the memos now
    monkeypatch.undo()
    assert nodes._DERIVED and views._WHOLE
    monkeypatch.setattr(nodes, "_DERIVED", {})
    monkeypatch.setattr(views, "_WHOLE", {})
    fresh = [_fields(t.node) for t in cases()]
    assert [_fields(t.node) for t in again] == fresh == first
    assert isinstance(again[2].node.children[1], nodes.Remap)  # the mean, kept whole
    add = again[6].node.children[0].children[0]  # maximum(add(Remap(sum), 1.0), 0.0) * b
    assert isinstance(add.children[0], nodes.Remap) and add.children[0].children[0].op == "sum"
    assert again[4].node.key != again[0].node.key != again[5].node.key
    assert not again[4].node.children[0].writeable and again[0].node.children[0].writeable
    for t, w in zip(again, want, strict=True):
        assert_close(t, w)


# --- formulas replayed from a recipe (dag.replay, nn.functional) -----------------------------


def _numpy_softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _fresh(build):
    """``build()`` with no recipe remembered: the formula built by the operators."""
    from axesarray.nn import functional

    saved = dict(functional._RECIPES)
    functional._RECIPES.clear()
    try:
        return build()
    finally:
        functional._RECIPES.clear()
        functional._RECIPES.update(saved)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "logsumexp"])
def test_a_replayed_formula_is_the_built_one_over_the_new_input(fn, monkeypatch):
    """The second call with an input of the same structure replays the recipe (the formula
    is not built: ``_parts`` is not called) over the new input's storage: numpy's values
    for the new data, the keys and params a fresh build has, and its gradient."""
    from axesarray.nn import functional

    f = getattr(ax, fn)
    an, a = _t((B, AI), seed=1)
    bn, b = _t((B, AI), seed=2)
    first = f(a, "I")
    built = _fresh(lambda: f(b, "I"))
    calls = []
    monkeypatch.setattr(functional, "_parts", lambda *args: calls.append(args))
    again = f(b, "I")
    assert calls == []
    assert again.node.key == built.node.key and again.node.key == first.node.key
    assert again.node.params == built.node.params and again.node.params[0] is b.node
    want = {
        "softmax": _numpy_softmax(bn, 1),
        "log_softmax": np.log(_numpy_softmax(bn.astype("float64"), 1)),
        "logsumexp": np.log(np.exp(bn.astype("float64")).sum(axis=1)),
    }[fn]
    assert_close(again, want.astype("float32"))
    monkeypatch.undo()
    assert_close(first, _fresh(lambda: f(a, "I")).numpy())
    (gb,) = ax.grad((f(b, "I") * f(b, "I")).sum(), [b])
    (want_grad,) = _fresh(lambda: ax.grad((f(b, "I") * f(b, "I")).sum(), [b]))
    assert_close(gb, want_grad.numpy())
    assert "I" in str(ax.explain(again.sum())) and "r0" not in str(ax.explain(again.sum()))


def test_a_replayed_formula_over_views_and_computed_inputs():
    """Inputs of other structures get recipes of their own: a transposed view, a computed
    value (a formula over two leaves), float64; each matches numpy on new data."""
    for seed in (3, 4):
        an, a = _t((B, AI), seed=seed)
        cn, c = _t((B, AI), seed=seed + 10)
        got_t = ax.softmax(a.transpose("I", "B"), "I")
        assert_close(got_t, _numpy_softmax(an.T, 0))
        got_sum = ax.softmax(a + c * 2, "B")
        assert_close(got_sum, _numpy_softmax(an + cn * 2, 0))
        dn, d = _t((B, AI), "float64", seed=seed)
        assert_close(ax.log_softmax(d, ("B", "I")), np.log(_numpy_softmax(dn, (0, 1))))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: ax.softmax(x, "I"),
        lambda x: ax.log_softmax(x, "I"),
        lambda x: ax.logsumexp(x, "I"),
        lambda x: ax.softmax_cross_entropy(x, ax.softmax(x, "I"), "I"),
    ],
    ids=["softmax", "log_softmax", "logsumexp", "softmax_cross_entropy"],
)
def test_symbolic_operators_and_their_recipes_keep_no_storage_alive(fn):
    """Neither the recipe nor the gradient's registration keeps an input alive: a backward
    that closed over its own result held its weak key through the value, so every call's
    graph and input storage stayed for ever."""
    import gc
    import weakref

    refs = []
    for seed in range(3):
        values = np.random.default_rng(seed).standard_normal((3, 4)).astype("float32")
        refs.append(weakref.ref(values))
        x = ax.tensor(values, (B, AI))
        fn(x)
        del x, values
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_a_recipe_is_not_replayed_over_inputs_that_share_its_constants():
    """An input whose params hold one of the recipe's shared constants (the guard's 0.0
    at the input's shape) is built anew: the key records that sharing."""
    from axesarray.dag import replay

    _, y = _t((B, AI), seed=5)
    x = ax.where(y > 0, y, 0.0)
    for _ in range(2):
        got = ax.softmax(x, "I")
        assert_close(got, _numpy_softmax(np.where(y.numpy() > 0, y.numpy(), 0), 1))
    inner = ax.softmax(y, "I")  # the guard's 0.0 broadcast to (B, I): a param of the recipe
    recipe = replay.record((y.node,), (inner.node,))
    consts = [p for p in inner.node.params if p.kind == "const"]
    assert recipe is not None and consts
    assert replay.replay(recipe, (y.node,)) is not None
    assert replay.replay(recipe, (x.node,)) is None  # another key
    assert any(c in x.node.params for c in consts)  # the same shared Const object
    assert replay.record((x.node,), (ax.softmax(x, "I").node,)) is None


def test_a_replayed_cross_entropy_over_new_logits_and_labels(monkeypatch):
    """``softmax_cross_entropy`` replays its recipe over two inputs (the logits, and the
    labels laid out like them: here a transposed view each call): numpy's values for new
    data, a fresh build's keys and gradients; labels that are the logits themselves share
    params, so that call is built anew (still right)."""
    from axesarray.nn import functional

    def numpy_ce(z, y):
        m = z.max(axis=1, keepdims=True)
        lse = (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))[:, 0]
        return lse - (y * z).sum(axis=1)

    def labels(seed):
        values = np.random.default_rng(seed).random((4, 3)).astype("float32")  # I B
        return values, ax.tensor(values, (AI, B))

    zn, z = _t((B, AI), seed=6)
    yn, y = labels(7)
    ax.softmax_cross_entropy(z, y, "I")
    zn2, z2 = _t((B, AI), seed=8)
    yn2, y2 = labels(9)
    built = _fresh(lambda: ax.softmax_cross_entropy(z2, y2, "I"))
    monkeypatch.setattr(functional, "_parts", lambda *a: pytest.fail("built, not replayed"))
    again = ax.softmax_cross_entropy(z2, y2, "I")
    monkeypatch.undo()
    assert again.node.key == built.node.key
    assert_close(again, numpy_ce(zn2.astype("float64"), yn2.T).astype("float32"))
    grads = ax.grad(ax.softmax_cross_entropy(z2, y2, "I").sum(), [z2, y2])
    want = _fresh(lambda: ax.grad(ax.softmax_cross_entropy(z2, y2, "I").sum(), [z2, y2]))
    for g, w in zip(grads, want, strict=True):
        assert_close(g, w.numpy())
    same = ax.softmax_cross_entropy(z2, z2, "I")
    assert_close(same, numpy_ce(zn2.astype("float64"), zn2).astype("float32"))


def test_a_remembered_slice_is_the_built_view_and_errors_stay(monkeypatch):
    """``x.isel(T=slice)`` by keyword is remembered by the axes and the slice's bounds: the
    same axes, maps and leaf a fresh build gives, over a computed value too; a bound that
    is not an int (a float equal to one, a zero step) is refused on every call."""
    from axesarray.tensors import indexing

    xn = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    x = ax.tensor(xn, "B T K")
    y = x * 2

    def cases():
        return [x.isel(T=slice(1, None)), x.isel(T=slice(None, -1)),
                x.isel(K=slice(None, None, -2)), y.isel(T=slice(1, 3)),
                x.isel(T=slice(None))]  # fmt: skip

    want = [xn[:, 1:], xn[:, :-1], xn[:, :, ::-2], 2 * xn[:, 1:3], xn]
    first = cases()
    assert indexing._SLICED
    again = cases()
    monkeypatch.setattr(indexing, "_SLICED", {})
    fresh = cases()
    for a, b, c, w in zip(first, again, fresh, want, strict=True):
        assert a.axes == b.axes == c.axes and a.axes is not None
        assert _fields(a.node) == _fields(b.node) == _fields(c.node)
        assert_close(b, w)
    assert again[0].axes[1] == ax.Axis("T", 3) and again[4].axes == x.axes
    for _ in range(2):
        with pytest.raises(TypeError, match="slice indices must be integers"):
            x.isel(T=slice(1.0, None))
        with pytest.raises(ax.AxesError, match="the slice step for axis 'T' is zero"):
            x.isel(T=slice(None, None, 0))


def test_a_map_over_casts_is_remembered_by_the_casts_keys(monkeypatch):
    """``x32 / n64`` (numpy promotes both to float64) built again makes no Cast and no Map
    by their constructors: the same keys, params and fields as a fresh build, the leaf
    ``x / x64`` reads twice seen as shared."""
    from axesarray.dag import build

    xn = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    nn = np.array([2, 4], np.int64)
    x, n = ax.tensor(xn, "B D"), ax.tensor(nn, "B")
    x64 = x.astype("float64")

    def cases():
        return [x / n, n * x, x / x64, (x / n) / n]

    want = [xn / nn[:, None], nn[:, None] * xn, xn / xn.astype(np.float64),
            xn / nn[:, None] / nn[:, None]]  # fmt: skip
    first = [_fields(t.node) for t in cases()]
    monkeypatch.setattr(Map, "__init__", _no_map)
    monkeypatch.setattr(nodes.Cast, "__init__", _no_map)
    again = cases()
    monkeypatch.undo()
    assert build._CASTS
    monkeypatch.setattr(build, "_CASTS", {})
    monkeypatch.setattr(build, "_BUILT", {})
    fresh = [_fields(t.node) for t in cases()]
    assert [_fields(t.node) for t in again] == fresh == first
    for t, w in zip(again, want, strict=True):
        assert t.dtype == np.float64
        assert_close(t, w)


def test_where_built_each_call_is_remembered_with_its_scalars(monkeypatch):
    """``ax.where(mask, x, 0.0)`` (three operands) built again: the same key, params and
    fields as a fresh build, the scalar's shared Const; -0.0 and 0.0 stay apart, NaN is
    never found, and an int the dtype cannot hold is refused on every build."""
    from axesarray.dag import build

    xn = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)
    x = ax.tensor(xn, "B T")
    pos = ax.arange(ax.Axis("T", 3))
    lens = ax.tensor(np.array([1, 3]), "B")
    i8 = ax.tensor(np.array([[1, 2, 3], [4, 5, 6]], np.int8), "B T")

    def cases():
        m = pos < lens
        return [ax.where(m, x, 0.0), ax.where(m, x, -0.0), ax.where(m, 1.0, x),
                ax.where(m, x, x * 2), ax.where(m, i8, 7)]  # fmt: skip

    mn = np.arange(3)[None, :] < np.array([1, 3])[:, None]
    want = [np.where(mn, xn, 0), np.where(mn, xn, -0.0), np.where(mn, 1, xn),
            np.where(mn, xn, xn * 2), np.where(mn, i8.numpy(), 7)]  # fmt: skip
    first = [_fields(t.node) for t in cases()]
    assert any(k[0] == "n" for k in build._BUILT if type(k) is tuple)
    monkeypatch.setattr(build, "_operand", _no_map)  # a remembered build casts nothing
    again = cases()
    monkeypatch.undo()
    monkeypatch.setattr(build, "_BUILT", {})
    fresh = [_fields(t.node) for t in cases()]
    assert [_fields(t.node) for t in again] == fresh == first
    assert again[0].node.key != again[1].node.key  # 0.0 and -0.0: two constants
    got = [t.transpose("B", "T").numpy() for t in again]  # (pos < lens) is T B
    assert np.signbit(got[1][0, 1]) and not np.signbit(got[0][0, 1])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    for _ in range(2):
        assert np.isnan(ax.where(pos < lens, x, float("nan")).transpose("B", "T").numpy()[0, 1])
        with pytest.raises(OverflowError, match="300"):
            ax.where(pos < lens, i8, 300)
