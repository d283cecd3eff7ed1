"""The schedule of one assignment: kernel steps, BLAS steps, temporaries (internal).

``Schedule`` is what the planner builds and the executor runs (the public description of
it is ``explain.Plan``). A ``KernelStep`` carries its ``Compiled`` record: what the
executor derives from the step once and reuses on every run (lowering, argument binder,
alias reads, the compiled kernel per variant).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs

from ..kernels.ir import KLeaf, kernel_leaves
from ..kernels.loops import LoopNest

__all__ = ["Compiled", "KernelStep", "DotStep", "CallStep", "Schedule"]


@attrs.define(eq=False)
class Compiled:
    """Per-step facts computed on first use (each None until then)."""

    lowered: object = None  # kernels.lower.Lowered: arguments and address terms
    streamable: bool | None = None  # whether the streaming-store variant may run
    seconds: tuple | None = None  # cost.step_seconds: work, bytes, private (parallel_pays)
    binder: Callable | None = None  # bind(params, temps, dst) -> kernel arguments
    reads: tuple | None = None  # alias analysis: (param, same place as output, view)
    via_temp: tuple | None = None  # (step into an alias temp, copy step) when aliased
    kernels: dict = attrs.field(factory=dict)  # (device kind, variant) -> compiled kernel
    # per ``alias`` (parameters that are the destination's storage, read in place): the
    # Lowered, the binder, and (in ``kernels``) the kernel of that in-place variant
    aliased: dict = attrs.field(factory=dict)


@attrs.define(eq=False)
class KernelStep:
    """One fused kernel: ``out`` receives ``tree`` over the loops of ``nest``."""

    out: KLeaf
    tree: object
    nest: LoopNest
    same_index: frozenset  # ids of leaves read exactly at the output's index
    why: str  # what this kernel computes, for explain
    order_from: int | None = None  # input (leaf ordinal) that set a fresh output's order
    compiled: Compiled = attrs.field(factory=Compiled)
    extra: tuple = ()  # more (output, tree) pairs: a multi-output map kernel (executor)
    size: int = attrs.field(init=False)  # elements of the loop nest (read on every run)

    def __attrs_post_init__(self) -> None:
        self.size = math.prod(self.nest.lengths)

    def leaves(self) -> list[KLeaf]:
        return kernel_leaves(self.tree)


@attrs.define(eq=False)
class DotStep:
    """``out[b, m, n] = sum_k a[b, m, k] * b[b, k, n]`` on BLAS, operands transposed by
    ``perm_a``/``perm_b`` then reshaped to 3-D (numpy copies only if it must)."""

    a: KLeaf
    b: KLeaf
    out: KLeaf  # the temp, laid out (batch, free_a, free_b), C-contiguous
    perm_a: tuple[int, ...]
    perm_b: tuple[int, ...]
    sizes: tuple[int, int, int, int]  # batch, M, K, N
    why: str = "dot (BLAS)"


@attrs.define(eq=False)
class CallStep:
    """``out[...] = fn(*args)`` run by numpy (an ``expr.Call`` node): each operand is a
    leaf (a parameter or a temp) read as an array, the result a C-order temp. Holds no
    node, so a cached plan keeps no tensor alive. A running sum or product has its
    compiled loop's plan in ``scan`` (``kernels.scans``; numpy's call until it is loaded)."""

    fn: object
    args: tuple  # KLeaf per operand
    out: KLeaf
    name: str
    why: str = "numpy call"
    scan: object = None  # kernels.scans.Scan, or None


@attrs.define(eq=False)
class Schedule:
    temps: list  # (shape, dtype, order) per temp
    steps: list
    result: KLeaf
    device: object = None  # devices.Device the plan runs on
    ready: bool = False  # every kernel of the next run is compiled in this process
    numpy_ok: bool | None = None  # cheap enough for the numpy tier (computed once)
    compiling: object = None  # the background compile (a Future), once started
    # the numpy tier's answers of it: its kernels are loaded into the process from the
    # second on (``tiers.compile_in_background``); ``on_disk``: compiled, not loaded yet
    answers: int = 0
    on_disk: bool = False
    # the numpy tier's evaluation kept between calls (``tier_eval.Program``; False: none)
    tier_program: object = None
    fast: object = None  # executor._fast_runner / _into_runner: the one-kernel straight path
    # a step before the last writes the destination (a BLAS result placed there): a run
    # whose inputs share the destination's memory goes through a scratch copy (runner)
    dst_early: bool = False
