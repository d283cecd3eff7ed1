"""All benchmarks (``make bench``): the fused engine, latency, layout repacks, dask, autograd,
programs (a recurrent loop and its gradients),
xarray on lazy arrays, the workload suite, the numpy tier's mechanisms, the expensive ops'
costs, the sums of transcendental values and single operations against numpy.

python benchmarks/run.py            # full sizes (a few minutes)
python benchmarks/run.py --quick    # small sizes: checks that everything runs
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_autograd  # noqa: E402
import bench_fused  # noqa: E402
import bench_latency  # noqa: E402
import bench_layouts  # noqa: E402
import bench_op_work  # noqa: E402
import bench_ops  # noqa: E402
import bench_programs  # noqa: E402
import bench_reductions  # noqa: E402
import bench_tier  # noqa: E402
import bench_workloads  # noqa: E402
import bench_xarray_lazy  # noqa: E402

try:  # the dask extra (pip install 'axesarray[dask]')
    import bench_dask  # noqa: E402
except ImportError:
    bench_dask = None


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    quick = ["--quick"] if "--quick" in argv else []
    bench_fused.main(quick)
    print()
    bench_latency.main(quick)
    print()
    bench_layouts.main(quick)
    if bench_dask is not None:
        print()
        bench_dask.main(quick)
    print()
    bench_autograd.main(quick)
    print()
    bench_programs.main(quick)
    print()
    bench_xarray_lazy.main(quick)
    print()
    bench_workloads.main(quick + ["--warm-cache"])
    print()
    bench_tier.main(quick)
    print()
    bench_op_work.main(quick)
    print()
    bench_reductions.main(quick)
    print()
    bench_ops.main(quick)


if __name__ == "__main__":
    main()
