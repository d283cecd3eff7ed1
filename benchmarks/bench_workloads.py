"""Programs written the way users write them (DESIGN §13), each against numpy written the way
numpy users write it (and torch when installed), measured in the same run.

    python benchmarks/bench_workloads.py            # full sizes
    python benchmarks/bench_workloads.py --quick    # tiny sizes, a smoke run
    python benchmarks/bench_workloads.py --mid      # ~1e5 elements, the target's smallest
    python benchmarks/bench_workloads.py --only softmax,quantize

Per program: the steady state (``tiered=False``, kernels compiled; median of interleaved
rounds), the first call (default options, a never-seen program: a fresh kernel cache
directory unless ``--warm-cache``; one sample, after writing 128 MiB so its inputs come
from memory, and the same for numpy's first call), the numpy tier's steady state (the tier
answering every call, its values checked: what runs while kernels compile), the number of
kernels (``ax.explain`` of each statement), and the bytes moved: the minimum (inputs read
once, outputs written once) and the plan's (the minimum plus every temporary written and
read once; with the planner's ``est_bytes`` per kernel when the plan has it), and ``x
roof``: the minimum bytes at the speed of a plain copy measured in the same run, over
axesarray's time (1.0: the memory roof). Ratios are numpy's time / axesarray's (> 1:
axesarray is faster). Target (DESIGN §13): every row at >= 1e5 elements >= 1.0, the
reductions with transcendentals >= 1.5.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import optional, round_robin  # noqa: E402

import axesarray as ax  # noqa: E402
from axesarray.engine import tiers  # noqa: E402

torch = optional("torch")

F32 = np.float32


class Workload:
    """One program: ``ax_program()`` yields ``(out or None, expression)`` statements (built
    anew on every call, as a user's loop does); ``numpy()`` and ``torch()`` do the same."""

    name = ""
    transcendental_reduction = False  # target >= 1.5x numpy

    def elements(self) -> int:
        raise NotImplementedError

    def min_bytes(self) -> int:
        raise NotImplementedError

    def ax_program(self):
        raise NotImplementedError

    def run_ax(self) -> None:
        for out, e in self.ax_program():
            if out is None:
                e.eval()
            else:
                ax.assign(out, e)

    def plans(self) -> list:
        return [ax.explain(e, out) for out, e in self.ax_program()]

    def numpy(self) -> None:
        raise NotImplementedError

    torch_fn = None  # a callable when torch is installed and the program has a torch twin

    def check(self) -> None:
        """axesarray's result against numpy's (a wrong fast result is no result)."""


def _nbytes(*arrays) -> int:
    return sum(a.nbytes for a in arrays)


def _t(a):
    return torch.from_numpy(a) if torch is not None else None


def _close(got, want, rtol=1e-4, atol=1e-5):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# --- the programs ------------------------------------------------------------------------


class SoftmaxByHand(Workload):
    """``e = exp(x - x.max(K)); e / e.sum(K)`` over C of an NCHW tensor (a strided reduced
    dim: rows-first), or over the last dim K of a matrix (``rows=True``)."""

    transcendental_reduction = True

    def __init__(self, shape, rows=False):
        self.shape = shape
        self.names, self.axis = ("N K", 1) if rows else ("N C H W", 1)
        self.over = self.names.split()[self.axis]
        self.name = f"softmax by hand over {self.over}" + (" (rows)" if rows else "")
        self.x_np = np.random.default_rng(0).standard_normal(shape).astype(F32)
        self.out_np = np.empty_like(self.x_np)
        self.x = ax.tensor(self.x_np, self.names)
        self.out = ax.tensor(self.out_np, self.names)
        if torch is not None:
            tx = _t(self.x_np)
            self.torch_fn = lambda: torch.softmax(tx, self.axis)

    def elements(self):
        return self.x_np.size

    def min_bytes(self):
        return 2 * self.x_np.nbytes

    def ax_program(self):
        e = ax.exp(self.x - self.x.max(self.over))
        yield self.out, e / e.sum(self.over)

    def numpy(self):
        e = np.exp(self.x_np - self.x_np.max(axis=self.axis, keepdims=True))
        return e / e.sum(axis=self.axis, keepdims=True)

    def check(self):
        self.run_ax()
        _close(self.out_np, self.numpy())


class Quantize(Workload):
    """float32 NCHW -> int8 NCHW4: ``clip(round(x / s), -128, 127).astype(int8)``."""

    def __init__(self, shape, how="clip"):
        self.how = how
        self.name = "int8 quantize (clip) NCHW4" if how == "clip" else "int8 quantize (min/max)"
        n, c, h, w = shape
        self.shape = shape
        self.x_np = (np.random.default_rng(1).standard_normal(shape) * 40).astype(F32)
        self.scale = 0.5
        axes = ax.Axes([ax.Axis("N", n), ax.Axis("C", c), ax.Axis("H", h), ax.Axis("W", w)])
        self.x = ax.tensor(self.x_np, "N C H W")
        self.out = ax.empty_like_layout(axes, "int8", ax.Layout.parse("NCHW4"))
        self.out_np = np.empty((n, (c + 3) // 4, h, w, 4), np.int8)
        if torch is not None:
            tx = _t(self.x_np)
            to = _t(self.out_np)

            def torch_fn():
                q = torch.clamp(torch.round(tx / self.scale), -128, 127).to(torch.int8)
                to.copy_(q.reshape(n, c // 4, 4, h, w).permute(0, 1, 3, 4, 2))

            self.torch_fn = torch_fn

    def elements(self):
        return self.x_np.size

    def min_bytes(self):
        return self.x_np.nbytes + self.out_np.nbytes

    def ax_program(self):
        r = ax.round(self.x / self.scale)
        q = ax.clip(r, -128, 127) if self.how == "clip" else ax.minimum(ax.maximum(r, -128), 127)
        yield self.out, q.astype("int8")

    def numpy(self):
        n, c, h, w = self.shape
        q = np.clip(np.round(self.x_np / self.scale), -128, 127).astype(np.int8)
        self.out_np[...] = q.reshape(n, c // 4, 4, h, w).transpose(0, 1, 3, 4, 2)

    def check(self):
        self.run_ax()
        got = self.out.numpy()
        want = np.clip(np.round(self.x_np / self.scale), -128, 127).astype(np.int8)
        np.testing.assert_array_equal(got, want)


class Attention(Workload):
    name = "attention dot/softmax/dot"
    transcendental_reduction = False

    def __init__(self, b, h, t, s, d):
        rng = np.random.default_rng(2)
        self.q_np = rng.standard_normal((b, h, t, d)).astype(F32)
        self.k_np = rng.standard_normal((b, h, s, d)).astype(F32)
        self.v_np = rng.standard_normal((b, h, s, d)).astype(F32)
        self.out_np = np.empty((b, h, t, d), F32)
        self.q = ax.tensor(self.q_np, "B H T D")
        self.k = ax.tensor(self.k_np, "B H S D")
        self.v = ax.tensor(self.v_np, "B H S D")
        self.out = ax.tensor(self.out_np, "B H T D")
        self.scale = 1.0 / math.sqrt(d)
        if torch is not None:
            tq, tk, tv = _t(self.q_np), _t(self.k_np), _t(self.v_np)
            self.torch_fn = lambda: torch.softmax(tq @ tk.transpose(-1, -2) * self.scale, -1) @ tv

    def elements(self):
        b, h, t, _ = self.q_np.shape
        return b * h * t * self.k_np.shape[2]

    def min_bytes(self):
        return _nbytes(self.q_np, self.k_np, self.v_np, self.out_np)

    def ax_program(self):
        s = ax.dot(self.q, self.k, over="D") * self.scale
        p = ax.softmax(s, "S")
        yield self.out, ax.dot(p, self.v, over="S")

    def numpy(self):
        s = self.q_np @ self.k_np.transpose(0, 1, 3, 2) * self.scale
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ self.v_np

    def check(self):
        self.run_ax()
        _close(self.out_np, self.numpy(), rtol=1e-3, atol=1e-4)


class LayerNorm(Workload):
    name = "layer norm over D"

    def __init__(self, n, d):
        rng = np.random.default_rng(3)
        self.x_np = rng.standard_normal((n, d)).astype(F32)
        self.g_np = rng.standard_normal(d).astype(F32)
        self.b_np = rng.standard_normal(d).astype(F32)
        self.out_np = np.empty_like(self.x_np)
        self.x = ax.tensor(self.x_np, "N D")
        self.g, self.b = ax.tensor(self.g_np, "D"), ax.tensor(self.b_np, "D")
        self.out = ax.tensor(self.out_np, "N D")
        if torch is not None:
            tx, tg, tb = _t(self.x_np), _t(self.g_np), _t(self.b_np)
            self.torch_fn = lambda: torch.nn.functional.layer_norm(tx, (d,), tg, tb, 1e-5)

    def elements(self):
        return self.x_np.size

    def min_bytes(self):
        return 2 * self.x_np.nbytes

    def ax_program(self):
        x = self.x
        mu = x.mean("D")
        xc = x - mu
        var = (xc * xc).mean("D")
        yield self.out, xc / ax.sqrt(var + 1e-5) * self.g + self.b

    def numpy(self):
        x = self.x_np
        mu = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * self.g_np + self.b_np

    def check(self):
        self.run_ax()
        _close(self.out_np, self.numpy(), rtol=1e-3, atol=1e-4)


class GeluByHand(Workload):
    name = "GELU by hand (tanh form)"

    def __init__(self, n):
        self.x_np = np.random.default_rng(4).standard_normal(n).astype(F32)
        self.out_np = np.empty_like(self.x_np)
        self.x, self.out = ax.tensor(self.x_np, "I"), ax.tensor(self.out_np, "I")
        self.c = math.sqrt(2 / math.pi)
        if torch is not None:
            tx = _t(self.x_np)
            self.torch_fn = lambda: torch.nn.functional.gelu(tx, approximate="tanh")

    def elements(self):
        return self.x_np.size

    def min_bytes(self):
        return 2 * self.x_np.nbytes

    def ax_program(self):
        x = self.x
        yield self.out, 0.5 * x * (1 + ax.tanh(self.c * (x + 0.044715 * x**3)))

    def numpy(self):
        x = self.x_np
        return 0.5 * x * (1 + np.tanh(self.c * (x + 0.044715 * x**3)))

    def check(self):
        self.run_ax()
        _close(self.out_np, self.numpy())


class MaskedMean(Workload):
    name = "masked mean over lengths"

    def __init__(self, b, t, d):
        rng = np.random.default_rng(5)
        self.x_np = rng.standard_normal((b, t, d)).astype(F32)
        self.len_np = rng.integers(1, t + 1, size=b)
        self.out_np = np.empty((b, d), F32)
        self.x = ax.tensor(self.x_np, "B T D")
        self.lens = ax.tensor(self.len_np, "B")
        self.pos = ax.arange(ax.Axis("T", t))
        self.out = ax.tensor(self.out_np, "B D")
        if torch is not None:
            tx, tl = _t(self.x_np), _t(self.len_np)
            tpos = torch.arange(t)

            def torch_fn():
                mask = (tpos[None, :] < tl[:, None]).to(tx.dtype)
                return (tx * mask[:, :, None]).sum(1) / tl[:, None]

            self.torch_fn = torch_fn

    def elements(self):
        return self.x_np.size

    def min_bytes(self):
        return self.x_np.nbytes + self.out_np.nbytes

    def ax_program(self):
        mask = self.pos < self.lens
        yield self.out, ax.where(mask, self.x, 0.0).sum("T") / self.lens

    def numpy(self):
        mask = np.arange(self.x_np.shape[1])[None, :] < self.len_np[:, None]
        return (self.x_np * mask[:, :, None]).sum(axis=1) / self.len_np[:, None]

    def check(self):
        self.run_ax()
        _close(self.out_np, self.numpy(), rtol=1e-4, atol=1e-5)


class Cosine(Workload):
    name = "cosine similarity by names"

    def __init__(self, n, m, d):
        rng = np.random.default_rng(6)
        self.a_np = rng.standard_normal((n, d)).astype(F32)
        self.b_np = rng.standard_normal((m, d)).astype(F32)
        self.out_np = np.empty((n, m), F32)
        self.a, self.b = ax.tensor(self.a_np, "N D"), ax.tensor(self.b_np, "M D")
        self.out = ax.tensor(self.out_np, "N M")
        if torch is not None:
            ta, tb = _t(self.a_np), _t(self.b_np)
            self.torch_fn = lambda: (ta @ tb.T) / (ta.norm(dim=1)[:, None] * tb.norm(dim=1))

    def elements(self):
        return self.out_np.size

    def min_bytes(self):
        return _nbytes(self.a_np, self.b_np, self.out_np)

    def ax_program(self):
        a, b = self.a, self.b
        yield self.out, (a * b).sum("D") / ax.sqrt((a * a).sum("D") * (b * b).sum("D"))

    def numpy(self):
        a, b = self.a_np, self.b_np
        na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
        return (a @ b.T) / np.outer(na, nb)

    def check(self):
        self.run_ax()
        _close(self.out_np, self.numpy(), rtol=1e-3, atol=1e-5)


class AdamStep(Workload):
    name = "Adam step by hand (3 statements)"

    def __init__(self, n):
        rng = np.random.default_rng(7)
        self.arrays = [rng.standard_normal(n).astype(F32) for _ in range(3)]
        self.arrays.append(np.abs(rng.standard_normal(n)).astype(F32))
        self.p_np, self.g_np, self.m_np, self.v_np = self.arrays
        self.p, self.g, self.m, self.v = (ax.tensor(a, "I") for a in self.arrays)
        self.lr, self.b1, self.b2, self.eps, self.t = 1e-3, 0.9, 0.999, 1e-8, 10
        if torch is not None:
            tp, tg, tm, tv = (_t(a.copy()) for a in self.arrays)
            c1, c2 = 1 - self.b1**self.t, 1 - self.b2**self.t

            def torch_fn():
                tm.mul_(self.b1).add_(tg, alpha=1 - self.b1)
                tv.mul_(self.b2).addcmul_(tg, tg, value=1 - self.b2)
                tp.addcdiv_(tm / c1, (tv / c2).sqrt_().add_(self.eps), value=-self.lr)

            self.torch_fn = torch_fn

    def elements(self):
        return self.p_np.size

    def min_bytes(self):
        return 4 * self.p_np.nbytes + 3 * self.p_np.nbytes

    def ax_program(self):
        b1, b2 = self.b1, self.b2
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        yield self.m, b1 * self.m + (1 - b1) * self.g
        yield self.v, b2 * self.v + (1 - b2) * self.g * self.g
        yield self.p, self.p - self.lr * (self.m / c1) / (ax.sqrt(self.v / c2) + self.eps)

    def numpy(self):
        b1, b2 = self.b1, self.b2
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        p, g, m, v = self.p_np, self.g_np, self.m_np, self.v_np
        m[...] = b1 * m + (1 - b1) * g
        v[...] = b2 * v + (1 - b2) * g * g
        p[...] = p - self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)


class MlpStep(Workload):
    name = "MLP forward + MSE loss"

    def __init__(self, b, i, h, o, how="dot"):
        self.how = how  # "dot": ax.dot by names; "sum": (x * w).sum(name), as torchdim users
        if how == "sum":
            self.name = "MLP forward by (x * w).sum(name)"
        rng = np.random.default_rng(8)
        self.x_np = rng.standard_normal((b, i)).astype(F32)
        self.w1_np = (rng.standard_normal((i, h)) / math.sqrt(i)).astype(F32)
        self.b1_np = rng.standard_normal(h).astype(F32)
        self.w2_np = (rng.standard_normal((h, o)) / math.sqrt(h)).astype(F32)
        self.b2_np = rng.standard_normal(o).astype(F32)
        self.y_np = rng.standard_normal((b, o)).astype(F32)
        self.x = ax.tensor(self.x_np, "B I")
        self.w1, self.b1 = ax.tensor(self.w1_np, "I H"), ax.tensor(self.b1_np, "H")
        self.w2, self.b2 = ax.tensor(self.w2_np, "H O"), ax.tensor(self.b2_np, "O")
        self.y = ax.tensor(self.y_np, "B O")
        if torch is not None:
            tx, tw1, tb1, tw2, tb2, ty = (
                _t(a)
                for a in (self.x_np, self.w1_np, self.b1_np, self.w2_np, self.b2_np, self.y_np)
            )
            self.torch_fn = lambda: float(
                ((torch.relu(tx @ tw1 + tb1) @ tw2 + tb2 - ty) ** 2).mean()
            )

    def elements(self):
        return self.x_np.shape[0] * self.w1_np.shape[1]

    def min_bytes(self):
        return _nbytes(self.x_np, self.w1_np, self.b1_np, self.w2_np, self.b2_np, self.y_np)

    def ax_program(self):
        if self.how == "sum":
            h = ax.maximum((self.x * self.w1).sum("I") + self.b1, 0)
            yhat = (h * self.w2).sum("H") + self.b2
        else:
            h = ax.maximum(ax.dot(self.x, self.w1, over="I") + self.b1, 0)
            yhat = ax.dot(h, self.w2, over="H") + self.b2
        yield None, ((yhat - self.y) ** 2).mean()

    def run_ax(self):
        for _, e in self.ax_program():
            float(e)

    def numpy(self):
        h = np.maximum(self.x_np @ self.w1_np + self.b1_np, 0)
        return float(((h @ self.w2_np + self.b2_np - self.y_np) ** 2).mean())

    def check(self):
        ((_, e),) = self.ax_program()
        _close(float(e), self.numpy(), rtol=1e-3)


class LogSumExpByHand(Workload):
    name = "logsumexp by hand over K"
    transcendental_reduction = True

    def __init__(self, n, k):
        self.x_np = np.random.default_rng(9).standard_normal((n, k)).astype(F32)
        self.out_np = np.empty(n, F32)
        self.x, self.out = ax.tensor(self.x_np, "N K"), ax.tensor(self.out_np, "N")
        if torch is not None:
            tx = _t(self.x_np)
            self.torch_fn = lambda: torch.logsumexp(tx, 1)

    def elements(self):
        return self.x_np.size

    def min_bytes(self):
        return self.x_np.nbytes + self.out_np.nbytes

    def ax_program(self):
        m = self.x.max("K")
        yield self.out, m + ax.log(ax.exp(self.x - m).sum("K"))

    def numpy(self):
        m = self.x_np.max(axis=1, keepdims=True)
        return (m + np.log(np.exp(self.x_np - m).sum(axis=1, keepdims=True)))[:, 0]

    def check(self):
        self.run_ax()
        _close(self.out_np, self.numpy())


class ExpSum(Workload):
    name = "exp(x).sum over K"
    transcendental_reduction = True

    def __init__(self, n, k):
        self.x_np = np.random.default_rng(10).standard_normal((n, k)).astype(F32)
        self.out_np = np.empty(n, F32)
        self.x, self.out = ax.tensor(self.x_np, "N K"), ax.tensor(self.out_np, "N")
        if torch is not None:
            tx = _t(self.x_np)
            self.torch_fn = lambda: torch.exp(tx).sum(1)

    def elements(self):
        return self.x_np.size

    def min_bytes(self):
        return self.x_np.nbytes + self.out_np.nbytes

    def ax_program(self):
        yield self.out, ax.exp(self.x).sum("K")

    def numpy(self):
        return np.exp(self.x_np).sum(axis=1)

    def check(self):
        self.run_ax()
        _close(self.out_np, self.numpy(), rtol=1e-4)


class ImagePipeline(Workload):
    """uint8 NHWC images -> normalized per channel -> int8 NCHW4 (a CNN's input)."""

    name = "image uint8 NHWC -> int8 NCHW4"

    def __init__(self, n, h, w):
        c = 3
        rng = np.random.default_rng(11)
        self.img_np = rng.integers(0, 256, size=(n, h, w, c), dtype=np.uint8)
        self.mean_np = np.array([0.485, 0.456, 0.406], F32)
        self.std_np = np.array([0.229, 0.224, 0.225], F32)
        self.scale = 1 / 32
        axes = ax.Axes([ax.Axis("N", n), ax.Axis("C", c), ax.Axis("H", h), ax.Axis("W", w)])
        self.img = ax.tensor(self.img_np, "N H W C")
        self.mean, self.std = ax.tensor(self.mean_np, "C"), ax.tensor(self.std_np, "C")
        self.out = ax.empty_like_layout(axes, "int8", ax.Layout.parse("NCHW4"))
        self.out_np = np.zeros((n, 1, h, w, 4), np.int8)
        if torch is not None:
            ti, tm, ts, to = _t(self.img_np), _t(self.mean_np), _t(self.std_np), _t(self.out_np)

            def torch_fn():
                x = (ti.to(torch.float32) / 255 - tm) / ts
                to[:, 0, :, :, :3] = torch.clamp(torch.round(x / self.scale), -128, 127).to(
                    torch.int8
                )

            self.torch_fn = torch_fn

    def elements(self):
        return self.img_np.size

    def min_bytes(self):
        return self.img_np.nbytes + self.out_np.nbytes

    def ax_program(self):
        x = (self.img.astype("float32") / 255 - self.mean) / self.std
        yield self.out, ax.clip(ax.round(x / self.scale), -128, 127).astype("int8")

    def numpy(self):
        x = (self.img_np.astype(np.float32) / 255 - self.mean_np) / self.std_np
        q = np.clip(np.round(x / self.scale), -128, 127).astype(np.int8)
        self.out_np[:, 0, :, :, :3] = q

    def check(self):
        self.run_ax()
        self.numpy()
        want = self.out_np[:, 0, :, :, :3].transpose(0, 3, 1, 2)
        got = self.out.numpy()
        # float32 rounding of x / scale may land a tie differently: at most one step.
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


class SoftmaxByName(Workload):
    name = "ax.softmax over K (rows)"
    transcendental_reduction = True
    fn, seed = "softmax", 12  # the function of ax and of torch by that name

    def __init__(self, n, k):
        self.x_np = np.random.default_rng(self.seed).standard_normal((n, k)).astype(F32)
        self.out_np = np.empty_like(self.x_np)
        self.x, self.out = ax.tensor(self.x_np, "N K"), ax.tensor(self.out_np, "N K")
        if torch is not None:
            tx, torch_fn = _t(self.x_np), getattr(torch, self.fn)
            self.torch_fn = lambda: torch_fn(tx, 1)

    def elements(self):
        return self.x_np.size

    def min_bytes(self):
        return 2 * self.x_np.nbytes

    def ax_program(self):
        yield self.out, getattr(ax, self.fn)(self.x, "K")

    def numpy(self):
        e = np.exp(self.x_np - self.x_np.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def check(self):
        self.run_ax()
        _close(self.out_np, self.numpy())


class MaxOverK(Workload):
    """A plain max reduction: a NaN-propagating fold that vectorizes (``rmax``)."""

    name = "x.max over K"

    def __init__(self, n, k):
        self.x_np = np.random.default_rng(13).standard_normal((n, k)).astype(F32)
        self.out_np = np.empty(n, F32)
        self.x, self.out = ax.tensor(self.x_np, "N K"), ax.tensor(self.out_np, "N")
        if torch is not None:
            tx = _t(self.x_np)
            self.torch_fn = lambda: torch.amax(tx, 1)

    def elements(self):
        return self.x_np.size

    def min_bytes(self):
        return self.x_np.nbytes + self.out_np.nbytes

    def ax_program(self):
        yield self.out, self.x.max("K")

    def numpy(self):
        return self.x_np.max(axis=1)

    def check(self):
        self.run_ax()
        np.testing.assert_array_equal(self.out_np, self.numpy())


class LogSoftmaxByName(SoftmaxByName):
    name = "ax.log_softmax over K (rows)"
    fn, seed = "log_softmax", 14

    def numpy(self):
        d = self.x_np - self.x_np.max(axis=1, keepdims=True)
        return d - np.log(np.exp(d).sum(axis=1, keepdims=True))


def workloads(quick: bool, mid: bool = False) -> list[Workload]:
    """The suite: full sizes (1e6-4e6 elements, most rows), ``quick`` (tiny: a smoke run)
    or ``mid`` (the same programs at ~1e5 elements, the smallest size the target covers:
    where per-call costs and cache-resident kernels show)."""
    if mid:
        return [
            SoftmaxByHand((2, 16, 64, 64)),
            SoftmaxByHand((128, 1024), rows=True),
            Quantize((2, 16, 56, 56), "clip"),
            Quantize((2, 16, 56, 56), "minmax"),
            Attention(2, 4, 128, 128, 32),
            LayerNorm(256, 512),
            GeluByHand(1 << 17),
            MaskedMean(8, 128, 128),
            Cosine(256, 512, 64),
            AdamStep(1 << 17),
            MlpStep(128, 256, 1024, 128),
            MlpStep(128, 256, 1024, 128, "sum"),
            LogSumExpByHand(128, 1024),
            ExpSum(128, 1024),
            ImagePipeline(2, 128, 128),
            SoftmaxByName(128, 1024),
            LogSoftmaxByName(128, 1024),
            MaxOverK(128, 1024),
        ]
    if quick:
        return [
            SoftmaxByHand((2, 8, 4, 4)),
            SoftmaxByHand((8, 16), rows=True),
            Quantize((2, 8, 4, 4), "clip"),
            Quantize((2, 8, 4, 4), "minmax"),
            Attention(2, 2, 8, 8, 4),
            LayerNorm(8, 16),
            GeluByHand(64),
            MaskedMean(4, 8, 4),
            Cosine(8, 6, 4),
            AdamStep(64),
            MlpStep(4, 8, 16, 4),
            MlpStep(4, 8, 16, 4, "sum"),
            LogSumExpByHand(8, 16),
            ExpSum(8, 16),
            ImagePipeline(1, 8, 8),
            SoftmaxByName(8, 16),
            LogSoftmaxByName(8, 16),
            MaxOverK(8, 16),
        ]
    return [
        SoftmaxByHand((8, 32, 64, 64)),
        SoftmaxByHand((4096, 1024), rows=True),
        Quantize((8, 64, 56, 56), "clip"),
        Quantize((8, 64, 56, 56), "minmax"),
        Attention(8, 8, 128, 128, 64),
        LayerNorm(8192, 512),
        GeluByHand(1 << 22),
        MaskedMean(64, 256, 128),
        Cosine(1024, 1024, 128),
        AdamStep(1 << 22),
        MlpStep(256, 512, 1024, 256),
        MlpStep(256, 512, 1024, 256, "sum"),
        LogSumExpByHand(4096, 1024),
        ExpSum(4096, 1024),
        ImagePipeline(16, 224, 224),
        SoftmaxByName(4096, 1024),
        LogSoftmaxByName(4096, 1024),
        MaxOverK(4096, 1024),
    ]


# --- measuring -----------------------------------------------------------------------------


# Each comparison's rounds: at least ``repeat``, more while they fit in this many seconds
# (a row at ~1e5 elements takes ~0.1-0.7 ms a round: 9 rounds gave medians 20% apart).
ROUND_SECONDS = 0.4


def _interleaved(fns: dict, repeat: int, seconds: float = 0.0) -> dict:
    return round_robin(fns, repeat, seconds)


def _plan_numbers(w: Workload) -> tuple[int, int, int | None]:
    """(kernels, temporary bytes, sum of the planner's est_bytes or None)."""
    plans = w.plans()
    kernels = sum(len(p.kernels) for p in plans)
    temps = sum(p.temporary_bytes for p in plans)
    est = [getattr(k, "est_bytes", None) for p in plans for k in p.kernels]
    est_total = sum(est) if est and all(e is not None for e in est) else None
    return kernels, temps, est_total


def _fmt_s(s: float) -> str:
    return f"{s * 1e3:8.2f} ms" if s >= 1e-3 else f"{s * 1e6:8.1f} us"


_EVICT: list = []


def _evict_caches() -> None:
    """Write 128 MiB, more than any CPU cache (35.8 MiB of L3 here): what a first call
    reads then comes from memory, for both engines alike."""
    if not _EVICT:
        _EVICT.append(np.zeros(128 << 20, np.uint8))
    _EVICT[0] += 1


def measure(w: Workload, repeat: int, seconds: float = 0.0) -> dict:
    """The row of ``w``: each comparison in at least ``repeat`` rounds, more while they fit
    in ``seconds`` (``round_robin``)."""
    ax.set_options(tiered=True)
    # Until the steady state the numpy tier answers every call and no compile starts
    # (``tiers.ANSWER_ALL``, as ``pytest --tiered``): the first call is the tier's, as by
    # default, and the tier's own steady state is measured beside numpy's, values checked.
    tiers.ANSWER_ALL = True
    try:
        _evict_caches()
        t0 = time.perf_counter()
        w.run_ax()
        first_ax = time.perf_counter() - t0
        _evict_caches()  # numpy's first call reads its inputs from memory too
        t0 = time.perf_counter()
        w.numpy()
        first_np = time.perf_counter() - t0
        w.check()
        # the tier's steady state: with what it loads in the background (the math
        # library's loops) loaded
        done = tiers.background_done()
        if done is not None:
            done.result()
        tier = _interleaved({"tier": w.run_ax, "numpy": w.numpy}, max(5, repeat), seconds)
    finally:
        tiers.ANSWER_ALL = False
    ax.set_options(tiered=False)
    w.check()
    times = _interleaved({"axesarray": w.run_ax, "numpy": w.numpy}, repeat, seconds)
    if w.torch_fn is not None:
        # torch in a round of its own, beside numpy (as bench_layouts' peers): a call right
        # after torch's ran slower whoever made it (~1e5 elements: the masked mean 97 ->
        # 116 us after torch against after numpy, numpy's own 136 -> 169), which is no
        # property of the program measured. Inference, as the numpy twin: no autograd
        # records (and no global switch, which would break the autograd benchmark when
        # benchmarks/run.py runs both).
        peer = torch.no_grad()(w.torch_fn)
        times["torch"] = _interleaved({"torch": peer, "numpy": w.numpy}, repeat, seconds)["torch"]
    kernels, temps, est = _plan_numbers(w)
    return dict(
        w=w,
        times=times,
        first_ax=first_ax,
        first_np=first_np,
        tier=tier["numpy"] / tier["tier"],
        kernels=kernels,
        temps=temps,
        est=est,
    )


def run(
    quick: bool, repeat: int, only: str = "", mid: bool = False, seconds: float = 0.0
) -> list[dict]:
    """Measure the workloads (names containing one of the comma-separated ``only``)."""
    keys = [k.strip().lower() for k in only.split(",") if k.strip()]
    tiered = ax.get_option("tiered")
    rows = []
    try:
        for w in workloads(quick, mid):
            if not keys or any(k in w.name.lower() for k in keys):
                rows.append(measure(w, repeat, seconds))
    finally:
        ax.set_options(tiered=tiered)
    return rows


def copy_bandwidth(repeat: int, nbytes: int = 64 << 20) -> float:
    """Bytes per second of a plain copy (read + write), the faster of ``np.copyto`` and the
    library's own copy (``out[...] = x`` of a plain tensor: the threaded repack), measured
    in this run: the memory roof the rows are compared with."""
    src = np.ones(nbytes // 4, F32)
    dst = np.empty_like(src)
    x, out = ax.tensor(src, "N"), ax.tensor(dst, "N")
    times = _interleaved(
        {"numpy": lambda: np.copyto(dst, src), "axesarray": lambda: ax.assign(out, x)},
        max(repeat, 5),
    )
    return 2 * nbytes / min(times.values())


def report(rows: list[dict], bandwidth: float | None = None) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nworkloads (load average {load:.2f})")
    if bandwidth:
        print(f"plain copy: {bandwidth / 1e9:.1f} GB/s (read + write), the roof of 'x roof'")
    head = (
        f"{'program':<34} {'elements':>9} {'axesarray':>11} {'numpy':>11} {'x numpy':>7}"
        f" {'torch':>11} {'x torch':>7} {'1st call':>11} {'1st x np':>8} {'tier x np':>9}"
        f" {'kern':>4}"
        f" {'bytes/min':>9} {'est/min':>7} {'x roof':>6}  note"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        w, t = r["w"], r["times"]
        ratio = t["numpy"] / t["axesarray"]
        tt = t.get("torch")
        minb = w.min_bytes()
        moved = minb + 2 * r["temps"]  # every temporary written once and read once
        est = f"{r['est'] / minb:6.2f}" if r["est"] is not None else "     -"
        notes = []
        target = 1.5 if w.transcendental_reduction else 1.0
        if w.elements() >= 1e5 and ratio < target:
            notes.append(f"below {target}x numpy")
        # the minimum bytes at copy speed / axesarray's time: 1.0 is the memory roof
        roof = minb / bandwidth / t["axesarray"] if bandwidth else float("nan")
        if roof >= 0.8:
            notes.append("at the memory roof")
        print(
            f"{w.name:<34} {w.elements():9.2g} {_fmt_s(t['axesarray']):>11}"
            f" {_fmt_s(t['numpy']):>11} {ratio:7.2f}"
            f" {_fmt_s(tt) if tt else '-':>11} {(tt / t['axesarray']) if tt else float('nan'):7.2f}"
            f" {_fmt_s(r['first_ax']):>11} {r['first_np'] / r['first_ax']:8.2f} {r['tier']:9.2f}"
            f" {r['kernels']:4d} {moved / minb:9.2f} {est:>7} {roof:6.2f}  {'; '.join(notes)}"
        )
    print(
        "x numpy / x torch: their time / axesarray's (> 1: axesarray faster; torch timed in a"
        " round of its own, beside numpy); 1st call: a"
        " never-seen program, default options; tier x np: the numpy tier's steady state (it"
        " answers while kernels compile), numpy's time / its; bytes/min: (minimum + each"
        " temporary written"
        " and read once) / minimum; est/min: the planner's est_bytes (each kernel's reads) /"
        " minimum; x roof: (minimum bytes at plain-copy speed) / axesarray's time (1.0: at the"
        " memory roof; low: compute-bound or moving more than the minimum)"
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--mid", action="store_true", help="the programs at ~1e5 elements")
    p.add_argument("--warm-cache", action="store_true", help="keep the usual kernel cache")
    p.add_argument("--only", default="", help="comma-separated name fragments")
    p.add_argument("--repeat", type=int, default=0)
    args = p.parse_args(argv)
    if not args.warm_cache:
        # A never-seen program: nothing compiled on disk either (the cache directory is read
        # at the first compile).
        os.environ["AXESARRAY_CACHE_DIR"] = tempfile.mkdtemp(prefix="axesarray-workloads-")
    repeat = args.repeat or (3 if args.quick else 9)
    seconds = 0.0 if args.quick else ROUND_SECONDS
    rows = run(args.quick, repeat, args.only, args.mid, seconds)
    report(rows, copy_bandwidth(repeat))


if __name__ == "__main__":
    main()
