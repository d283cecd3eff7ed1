"""The numpy tier's mechanisms, each switched off in turn, on the workload suite's programs.

Per program, in one process, round-robin with numpy's formula (``common.round_robin``): the
tier as it is, then without the math library's loops (float32 transcendentals in float64 by
numpy, row maxima and minima by numpy), with slabs of 2**18 elements (the size before
issue 18's last change), without the kept program (``tier_eval.Program``: the rewrite
and analysis per call), and with blocked destinations copied whole, not lane by lane
(``tier_write.LANES``). Each column is numpy's time
divided by the tier's (> 1: the tier is faster). The tier answers every call
(``tiers.ANSWER_ALL``), its background loads awaited first.

python benchmarks/bench_tier.py                 # full sizes (the workload suite's)
python benchmarks/bench_tier.py --only softmax  # some programs
python benchmarks/bench_tier.py --quick         # small sizes: checks that it runs
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_workloads  # noqa: E402
from common import round_robin  # noqa: E402

import axesarray as ax  # noqa: E402
from axesarray.engine import executor, tier_eval, tier_write, tiers  # noqa: E402
from axesarray.kernels import tier_math  # noqa: E402


def _forget_programs() -> None:
    """Every schedule's kept tier evaluation dropped: the next call works it out anew
    (under the variant's settings)."""
    for plan in executor._PLANS.values():
        plan.tier_program = None


@contextlib.contextmanager
def _variant(name: str):
    """The tier with one mechanism switched off (``name``), as it was before."""
    saved = (tier_math.LOOPS, tier_math.ROW_LOOPS, tier_eval.SLAB_ELEMENTS, tier_write.LANES)
    of = tier_eval.Program.__dict__["of"]  # the classmethod itself
    try:
        if name == "no loops":
            tier_math.LOOPS, tier_math.ROW_LOOPS = {}, {}
        elif name == "2**18 slabs":
            tier_eval.SLAB_ELEMENTS = 1 << 18
        elif name == "no program":
            tier_eval.Program.of = classmethod(lambda cls, root: None)
        elif name == "blocks whole":  # NCHW4 and the like copied in one call, not by lanes
            tier_write.LANES = 0
        _forget_programs()
        yield
    finally:
        tier_math.LOOPS, tier_math.ROW_LOOPS, tier_eval.SLAB_ELEMENTS, tier_write.LANES = saved
        tier_eval.Program.of = of
        _forget_programs()


VARIANTS = ("as is", "no loops", "2**18 slabs", "no program", "blocks whole")


def _timed(w, name: str, repeat: int) -> tuple[float, float]:
    """(numpy's median time, the tier's) with the variant in force."""
    with _variant(name):
        w.run_ax()  # the variant's program, worked out once
        times = round_robin({"tier": w.run_ax, "numpy": w.numpy}, repeat)
    return times["numpy"], times["tier"]


def run(quick: bool, repeat: int, only: str = "") -> list[tuple[str, dict]]:
    keys = [k.strip().lower() for k in only.split(",") if k.strip()]
    rows = []
    with ax.set_options(tiered=True):
        tiers.ANSWER_ALL = True
        try:
            for w in bench_workloads.workloads(quick):
                if keys and not any(k in w.name.lower() for k in keys):
                    continue
                w.run_ax()
                w.check()  # a wrong fast result is no result
                done = tiers.background_done()
                if done is not None:
                    done.result()  # the math library's loops the program wants
                ratios = {}
                for name in VARIANTS:
                    numpy_s, tier_s = _timed(w, name, repeat)
                    ratios[name] = numpy_s / tier_s
                rows.append((w.name, ratios))
        finally:
            tiers.ANSWER_ALL = False
    return rows


def report(rows: list) -> None:
    print("\nthe numpy tier, x numpy (numpy's time / the tier's), each mechanism off in turn")
    print(f"{'program':<34}" + "".join(f" {v:>12}" for v in VARIANTS))
    for name, ratios in rows:
        print(f"{name:<34}" + "".join(f" {ratios[v]:12.2f}" for v in VARIANTS))


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="", help="comma-separated name fragments")
    p.add_argument("--repeat", type=int, default=0)
    args = p.parse_args(argv)
    os.environ.setdefault("AXESARRAY_CACHE_DIR", tempfile.mkdtemp(prefix="axesarray-tier-"))
    repeat = args.repeat or (3 if args.quick else 9)
    report(run(args.quick, repeat, args.only))


if __name__ == "__main__":
    main()
