"""A small multi-layer perceptron with named axes, trained on a synthetic dataset.

    python examples/mlp.py                         # default sizes
    python examples/mlp.py --steps 50 --hidden 16  # smaller

Axes: ``N`` (batch), ``F`` (feature), ``H`` (hidden), ``K`` (class). The data are points
around ``K`` random centres in ``F`` dimensions, labelled by their centre (one-hot over
``K``). One training step is an ``ax.function`` of two placeholders (a batch and its
labels) returning the loss and the gradients, planned once and fused by the engine; the
optimizer then updates the variables in place.
"""

from __future__ import annotations

import argparse

import numpy as np

import axesarray as ax


def make_data(n: int, features: int, classes: int, seed: int):
    """``n`` points around ``classes`` centres; returns (points, one-hot labels)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 2.0, (classes, features))
    label = rng.integers(0, classes, n)
    points = centres[label] + rng.normal(0.0, 1.0, (n, features))
    return points.astype(np.float32), np.eye(classes, dtype=np.float32)[label]


def main(
    steps: int = 200,
    batch: int = 128,
    features: int = 8,
    hidden: int = 32,
    classes: int = 4,
    lr: float = 0.05,
    seed: int = 0,
    quiet: bool = False,
) -> list[float]:
    """Train and return the loss of every step."""
    N, F = ax.Axis("N", batch), ax.Axis("F", features)
    H, K = ax.Axis("H", hidden), ax.Axis("K", classes)
    rng = np.random.default_rng(seed + 1)

    def init(*shape):
        return rng.normal(0.0, 1.0 / np.sqrt(shape[0]), shape).astype(np.float32)

    w1 = ax.variable(init(features, hidden), (F, H), name="w1")
    b1 = ax.variable(np.zeros(hidden, np.float32), (H,), name="b1")
    w2 = ax.variable(init(hidden, classes), (H, K), name="w2")
    b2 = ax.variable(np.zeros(classes, np.float32), (K,), name="b2")
    params = [w1, b1, w2, b2]

    x = ax.placeholder((N, F), "float32", name="x")
    y = ax.placeholder((N, K), "float32", name="y")
    hid = ax.relu(ax.dot(x, w1, over="F") + b1)
    logits = ax.dot(hid, w2, over="H") + b2
    loss = ax.softmax_cross_entropy(logits, y, axis="K").mean()
    train_step = ax.function([loss, *ax.grad(loss, params)], inputs=[x, y])
    opt = ax.optim.SGD(params, lr=lr, momentum=0.9)

    points, labels = make_data(batch * 16, features, classes, seed)
    losses = []
    for step in range(steps):
        pick = rng.integers(0, len(points), batch)
        value, *grads = train_step(points[pick], labels[pick])
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        opt.step()
        losses.append(float(value))
        if not quiet and (step % max(1, steps // 10) == 0 or step == steps - 1):
            print(f"step {step:4d}  loss {losses[-1]:.4f}")
    predict = ax.function(logits.argmax("K"), inputs=[x])
    pick = rng.integers(0, len(points), batch)
    accuracy = float((predict(points[pick]).numpy() == labels[pick].argmax(1)).mean())
    if not quiet:
        print(f"accuracy on a batch: {accuracy:.2%}")
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()
    main(steps=args.steps, batch=args.batch, hidden=args.hidden, lr=args.lr)
