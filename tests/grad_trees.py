"""Random expression trees over named axes for gradient checks, as data (a list of steps)
that two interpreters run: axesarray's and, when installed, torch's (positional, with the
names kept beside each tensor and every result laid out in the order axesarray gives).

Inputs: ``a`` (A=3, B=4), ``b`` (B=4, C=2), ``c`` (A=3). Every step appends one tensor to
a pool; the loss is the sum of a few pool entries, each weighted elementwise by fixed
random values, so a shared subexpression is differentiated along several paths.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import axesarray as ax

SHAPES = {"a": (("A", 3), ("B", 4)), "b": (("B", 4), ("C", 2)), "c": (("A", 3),)}

# name -> (axesarray, torch); smooth or piecewise smooth, bounded on the values met here
UNARY = {
    "tanh": (ax.tanh, "tanh"),
    "sigmoid": (ax.sigmoid, "sigmoid"),
    "sin": (ax.sin, "sin"),
    "cos": (ax.cos, "cos"),
    "square": (ax.square, "square"),
    "neg": (lambda x: -x, "neg"),
    "abs": (ax.abs, "abs"),
    "exp_tanh": (lambda x: ax.exp(ax.tanh(x)), lambda t, x: t.exp(t.tanh(x))),
    "log1p_sq": (lambda x: ax.log1p(x * x), lambda t, x: t.log1p(x * x)),
    "log_sq": (lambda x: ax.log(x * x + 1.0), lambda t, x: t.log(x * x + 1.0)),
    "sqrt_sq": (lambda x: ax.sqrt(x * x + 1.0), lambda t, x: t.sqrt(x * x + 1.0)),
    "expm1": (lambda x: ax.expm1(ax.tanh(x)), lambda t, x: t.expm1(t.tanh(x))),
    "relu": (ax.relu, "relu"),
    "clip": (lambda x: ax.clip(x, -0.5, 0.5), lambda t, x: t.clamp(x, -0.5, 0.5)),
    "scale": (lambda x: 2.5 * x - 0.5, lambda t, x: 2.5 * x - 0.5),
    "recip": (lambda x: 1.0 / (2.0 + ax.tanh(x)), lambda t, x: 1.0 / (2.0 + t.tanh(x))),
}
BINARY = {
    "add": (lambda x, y: x + y, lambda t, x, y: x + y),
    "sub": (lambda x, y: x - y, lambda t, x, y: x - y),
    "mul": (lambda x, y: x * y, lambda t, x, y: x * y),
    "div": (lambda x, y: x / (2.0 + ax.tanh(y)), lambda t, x, y: x / (2.0 + t.tanh(y))),
    "maximum": (ax.maximum, lambda t, x, y: t.maximum(x, y)),
    "minimum": (ax.minimum, lambda t, x, y: t.minimum(x, y)),
    "pow": (
        lambda x, y: (1.5 + ax.sigmoid(x)) ** ax.tanh(y),
        lambda t, x, y: (1.5 + t.sigmoid(x)) ** t.tanh(y),
    ),
    "hypot": (lambda x, y: ax.hypot(x, y + 3.0), lambda t, x, y: t.hypot(x, y + 3.0)),
    "where": (lambda x, y: ax.where(x > y, x * 2.0, y), lambda t, x, y: t.where(x > y, x * 2.0, y)),
}
REDUCE = ("sum", "mean", "max", "min", "prod")
SOFT = ("softmax", "log_softmax", "logsumexp")


class _Names:
    def __init__(self) -> None:
        self.k = 0

    def __call__(self) -> str:
        self.k += 1
        return f"X{self.k}"


@st.composite
def trees(draw, max_steps: int = 5):
    """(steps, inputs): steps are tuples the interpreters below run."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    inputs = {k: rng.uniform(-1, 1, tuple(n for _, n in v)) for k, v in SHAPES.items()}
    pool = [ax.tensor(inputs[k], [n for n, _ in SHAPES[k]]) for k in SHAPES]
    fresh = _Names()
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        step = _draw_step(draw, pool, fresh)
        if step is None:
            continue
        pool.append(run_step(step, pool))
        steps.append(step)
    picks = sorted({len(pool) - 1, *draw(st.lists(st.integers(0, len(pool) - 1), max_size=2))})
    steps.append(("loss", tuple(picks), draw(st.integers(0, 2**16))))
    return steps, inputs


def _draw_step(draw, pool, fresh):
    i = draw(st.integers(0, len(pool) - 1))
    t = pool[i]
    names = t.names
    kind = draw(
        st.sampled_from(
            [
                "unary",
                "binary",
                "reduce",
                "transpose",
                "slice",
                "index",
                "flatten",
                "split",
                "broadcast",
                "pad",
                "concat",
                "dot",
                "soft",
                "squeeze",
            ]
        )
    )
    if kind == "unary":
        return ("unary", draw(st.sampled_from(sorted(UNARY))), i)
    if kind == "binary":
        j = draw(st.integers(0, len(pool) - 1))
        try:
            ax.broadcast_axes(t.axes, pool[j].axes)
        except ax.AxesError:
            return None
        return ("binary", draw(st.sampled_from(sorted(BINARY))), i, j)
    if not names:
        return None
    name = draw(st.sampled_from(names))
    n = t.axes[name].length
    if kind == "reduce":
        over = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
        op = draw(st.sampled_from(REDUCE))
        if op in ("max", "min") and any(t.axes[o].length == 0 for o in over):
            return None
        return ("reduce", op, i, tuple(over))
    if kind == "transpose":
        return ("transpose", i, tuple(draw(st.permutations(names))))
    if kind == "slice" and n > 1:
        start = draw(st.integers(0, n - 1))
        step = draw(st.sampled_from([1, 2, -1, -2]))
        stop = draw(st.sampled_from([None, n // 2]))
        sl = slice(start, stop, step)
        if len(range(*sl.indices(n))) == 0:
            return None
        return ("slice", i, name, (start, stop, step), fresh())
    if kind == "index":
        return ("index", i, name, draw(st.integers(-n, n - 1)))
    if kind == "flatten" and len(names) >= 2:
        pair = tuple(draw(st.lists(st.sampled_from(names), min_size=2, max_size=2, unique=True)))
        return ("flatten", i, pair, fresh())
    if kind == "split" and n in (4, 6):
        return ("split", i, name, (2, n // 2), (fresh(), fresh()))
    if kind == "broadcast":
        return ("broadcast", i, fresh(), draw(st.sampled_from([1, 2])))
    if kind == "pad":
        lo, hi = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        return ("pad", i, name, lo, hi, draw(st.sampled_from([0.0, 0.5])), fresh())
    if kind == "concat":
        return ("concat", i, name, draw(st.sampled_from(sorted(UNARY))), fresh())
    if kind == "dot":
        j = draw(st.integers(0, len(pool) - 1))
        common = [m for m in names if m in pool[j].names]
        if not common:
            return None
        try:
            ax.broadcast_axes(t.axes, pool[j].axes, mode="union")
        except ax.AxesError:
            return None
        return ("dot", i, j, draw(st.sampled_from(common)))
    if kind == "soft":
        return ("soft", draw(st.sampled_from(SOFT)), i, name)
    if kind == "squeeze":
        return ("squeeze", i, fresh())
    return None


def run_step(step, pool):
    """One step with axesarray."""
    kind = step[0]
    if kind == "unary":
        return UNARY[step[1]][0](pool[step[2]])
    if kind == "binary":
        return BINARY[step[1]][0](pool[step[2]], pool[step[3]])
    t = pool[step[2] if kind in ("reduce", "dot", "soft") else step[1]]
    if kind == "reduce":
        return getattr(pool[step[2]], step[1])(step[3])
    if kind == "transpose":
        return t.transpose(step[2])
    if kind == "slice":
        _, _, name, (start, stop, sl_step), new = step
        return t.isel({name: slice(start, stop, sl_step)}).rename({name: new})
    if kind == "index":
        return t.isel({step[2]: step[3]})
    if kind == "flatten":
        return t.flatten(step[2], step[3])
    if kind == "split":
        _, _, name, lengths, new = step
        return t.split(name, [ax.Axis(m, k) for m, k in zip(new, lengths, strict=True)])
    if kind == "broadcast":
        return t.expand_dims(ax.Axis(step[2], step[3]), position=len(t.names) // 2)
    if kind == "pad":
        _, _, name, lo, hi, value, new = step
        return ax.pad(t, {name: (lo, hi)}, value=value).rename({name: new})
    if kind == "concat":
        _, _, name, fn, new = step
        return ax.concat([t, UNARY[fn][0](t)], name).rename({name: new})
    if kind == "dot":
        return ax.dot(pool[step[1]], pool[step[2]], over=step[3])
    if kind == "soft":
        return getattr(ax, step[1])(pool[step[2]], axis=step[3])
    if kind == "squeeze":
        return t.expand_dims(step[2]).squeeze(step[2])
    raise AssertionError(kind)


def weights(t, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 1.5, t.shape)


def run(steps, leaves: dict):
    """The loss (a scalar tensor) of ``steps`` over the tensors ``leaves`` (a, b, c)."""
    pool = [leaves[k] for k in SHAPES]
    for step in steps[:-1]:
        pool.append(run_step(step, pool))
    _, picks, seed = steps[-1]
    total = None
    for k in picks:
        t = pool[k]
        term = (t * ax.tensor(weights(t, seed + k), t.names)).sum()
        total = term if total is None else total + term
    return total


# --- torch ----------------------------------------------------------------------------------


def _torch_fn(torch, spec, *args):
    return getattr(torch, spec)(*args) if isinstance(spec, str) else spec(torch, *args)


def _to(torch, x, names, target):
    """``x`` (dims ``names``) permuted and unsqueezed to ``target``'s order."""
    order = [names.index(n) for n in target if n in names]
    x = x.permute(order) if order else x
    present = [n for n in target if n in names]
    shape = [x.shape[present.index(n)] if n in names else 1 for n in target]
    return x.reshape(shape)


def run_torch(torch, steps, leaves: dict, ax_pool: list):
    """The same loss with torch; ``ax_pool`` holds axesarray's results (their names give
    each torch result's dim order)."""
    pool = [(leaves[k], [n for n, _ in SHAPES[k]]) for k in SHAPES]
    for step, ref in zip(steps[:-1], ax_pool[len(SHAPES) :], strict=True):
        pool.append((_torch_step(torch, step, pool, ref), list(ref.names)))
    _, picks, seed = steps[-1]
    total = 0
    for k in picks:
        x, names = pool[k]
        w = torch.tensor(weights(ax_pool[k], seed + k))
        total = total + (x * w).sum()
    return total


def _torch_step(torch, step, pool, ref):
    F = torch.nn.functional
    target = list(ref.names)
    kind = step[0]
    if kind == "unary":
        x, names = pool[step[2]]
        return _torch_fn(torch, UNARY[step[1]][1], x)
    if kind == "binary":
        (x, nx), (y, ny) = pool[step[2]], pool[step[3]]
        return BINARY[step[1]][1](torch, _to(torch, x, nx, target), _to(torch, y, ny, target))
    if kind == "reduce":
        x, names = pool[step[2]]
        dims = [names.index(n) for n in step[3]]
        op = step[1]
        if op in ("sum", "mean"):
            return getattr(x, op)(dim=dims)
        if op == "prod":
            for d in sorted(dims, reverse=True):
                x = x.prod(dim=d)
            return x
        return getattr(x, "amax" if op == "max" else "amin")(dim=dims)
    if kind == "dot":
        (x, nx), (y, ny) = pool[step[1]], pool[step[2]]
        letters = {n: chr(97 + k) for k, n in enumerate(dict.fromkeys(nx + ny))}
        spec = "".join(letters[n] for n in nx) + "," + "".join(letters[n] for n in ny)
        return torch.einsum(spec + "->" + "".join(letters[n] for n in target), x, y)
    if kind == "soft":
        x, names = pool[step[2]]
        d = names.index(step[3])
        if step[1] == "logsumexp":
            return torch.logsumexp(x, dim=d)
        return getattr(torch, step[1])(x, dim=d)
    x, names = pool[step[1]]
    if kind == "transpose":
        return x.permute([names.index(n) for n in step[2]])
    if kind == "slice":
        _, _, name, (start, stop, sl_step), _ = step
        d = names.index(name)
        idx = list(range(*slice(start, stop, sl_step).indices(x.shape[d])))
        return x.index_select(d, torch.tensor(idx, dtype=torch.long))
    if kind == "index":
        d = names.index(step[2])
        return x.select(d, step[3])
    if kind == "flatten":
        pair = step[2]
        rest = [n for n in names if n not in pair]
        pos = min(names.index(n) for n in pair)
        order = rest[:pos] + list(pair) + rest[pos:]
        y = x.permute([names.index(n) for n in order])
        return y.reshape([int(s) for s in ref.shape])
    if kind == "split":
        return x.reshape([int(s) for s in ref.shape])
    if kind == "broadcast":
        return _to(torch, x, names, target).expand([int(s) for s in ref.shape])
    if kind == "pad":
        _, _, name, lo, hi, value, _ = step
        d = names.index(name)
        widths = [0, 0] * (x.ndim - 1 - d) + [lo, hi]
        return F.pad(x, widths, value=value)
    if kind == "concat":
        d = names.index(step[2])
        return torch.cat([x, _torch_fn(torch, UNARY[step[3]][1], x)], dim=d)
    if kind == "squeeze":
        return x
    raise AssertionError(kind)
