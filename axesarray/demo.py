"""A short tour of axesarray on built-in data: ``python -m axesarray.demo`` (``make demo``).

It prints axes, a view that shares memory, a broadcast by name, a lazy expression and its
plan, a reduction, and a layout conversion.
"""

from __future__ import annotations

import numpy as np

import axesarray as ax


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)))


def main() -> None:
    np.set_printoptions(precision=3, suppress=True, linewidth=100)
    # A tiny "image batch": 2 images, 3 channels, 4x5 pixels, values from -1 to 1.
    N, C, H, W = ax.Axis("N", 2), ax.Axis("C", 3), ax.Axis("H", 4), ax.Axis("W", 5)
    data = np.linspace(-1, 1, 2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)

    _section("1. Axes instead of shapes")
    x = ax.tensor(data, (N, C, H, W))
    print("x.axes    =", x.axes)
    print("x.strides =", x.strides, "(bytes, as numpy)")
    print("x is a zero-copy view of the numpy array:", np.shares_memory(x.numpy(), data))

    _section("2. Views never copy")
    v = x.transpose("N H W C")[{"C": slice(None, None, -1), "H": 0}]
    print("x.transpose('N H W C')[{'C': reversed, 'H': 0}]")
    print("  axes   :", v.axes)
    print("  strides:", v.strides)
    print("  shares memory with x:", np.shares_memory(v.numpy(), data))

    _section("3. Broadcasting by name")
    gain = ax.tensor(np.array([1.0, 0.5, 0.25], dtype=np.float32), "C")
    bias = ax.tensor(np.linspace(0, 1, 5 * 4, dtype=np.float32).reshape(5, 4), "W H")
    print("gain:", gain.axes, "  bias:", bias.axes, "(note: W before H)")
    print("ax.broadcast_axes(x, bias) ->", ax.broadcast_axes(x, bias))
    print(
        "ax.broadcast_axes(gain, bias) ->",
        ax.broadcast_axes(gain, bias),
        "(no subset: left's axes, then the right's new ones)",
    )

    _section("4. A lazy expression, fused into one kernel")
    e = ax.sigmoid(4 * x * gain + bias)  # nothing is computed yet
    print("e = ax.sigmoid(4 * x * gain + bias) is an r-tensor; its plan:")
    print(ax.explain(e))
    y = e.eval()  # one compiled kernel (the first call compiles it, later calls reuse it)
    print("e.eval()[{'N': 0, 'C': 0}] =")
    print(y[{"N": 0, "C": 0}].numpy())

    _section("5. Reductions by name")
    m = x.mean(("H", "W"))
    print("x.mean(('H', 'W')):", m.axes)
    print(m.numpy())
    z = 10 * x
    softmax = ax.exp(z - z.max("C")) / ax.exp(z - z.max("C")).sum("C")
    print("softmax of 10*x over C at N=0, H=0, W=0:", softmax[{"N": 0, "H": 0, "W": 0}].numpy())
    print(
        f"  ({len(ax.explain(softmax).kernels)} kernels: max and sum are broadcast back, so "
        "they are computed first)"
    )

    _section("6. Memory layouts")
    packed = x.to_layout("NCHW4")
    print("x.to_layout('NCHW4'): layout", packed.layout, "physical shape", packed.physical.shape)
    print(
        "pixel (0, 0) of image 0 holds C=3 channels padded to a block of 4 with a zero:",
        packed.physical[0, 0, 0, 0],
    )
    back = packed.to_layout("NCHW")
    print("round trip exact:", bool((back == x).all()))


if __name__ == "__main__":
    main()
