"""Chunked tensors on dask: Zarr layout conversion on a LocalCluster, and a fused
elementwise + reduction against plain dask.array and xarray+dask (same run).

python benchmarks/bench_dask.py                  # every part: 4 GB store, 2 x 256 MB arrays
python benchmarks/bench_dask.py --quick          # 64 MB store, 2 x 16 MB: checks everything runs
python benchmarks/bench_dask.py fused --mb 256 --chunks 16 --repeat 7
python benchmarks/bench_dask.py conversion --gb 4 --repeat 3 --dir /tmp
python benchmarks/bench_dask.py split             # reductions per chunk: two kernels vs one

Numbers are medians over repeats, the implementations interleaved inside each repeat (the
machine is shared: each comparison is measured in the same run, and the load average is
printed before and after). Peak RSS per worker is each worker process's ``ru_maxrss`` (a
fresh cluster per measurement). The conversion needs twice the store's size of free disk
under ``--dir`` (default: the system's temporary directory, never the repository).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr

import axesarray as ax


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


# --- conversion ---------------------------------------------------------------------------------


def _make_store(path: Path, gbytes: float) -> tuple:
    """An NCHW float32 Zarr array of about ``gbytes`` (random: it does not compress)."""
    c, h, w = 64, 128, 128
    per_n = c * h * w * 4
    n = max(8, int(gbytes * 1e9 / per_n) // 8 * 8)
    z = zarr.create_array(
        str(path), shape=(n, c, h, w), dtype="f4", chunks=(8, c, h, w),
        dimension_names=["N", "C", "H", "W"], fill_value=0,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    for i in range(0, n, 8):
        z[i : i + 8] = rng.random((8, c, h, w), "f4")
    return z.shape, z.nbytes


def _peak_rss_mb(client) -> list:
    def rss():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    return sorted(client.run(rss).values())


def _cpu_s(client) -> float:
    """CPU seconds (user + system) used so far by all worker processes: on a shared,
    loaded machine this varies less than the wall time."""

    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    return sum(client.run(cpu).values())


def _plain_copy(src: Path, dst: Path) -> None:
    arr = da.from_zarr(str(src))
    out = zarr.create_array(
        str(dst), shape=arr.shape, dtype=arr.dtype, chunks=tuple(c[0] for c in arr.chunks),
        fill_value=0,
    )  # fmt: skip
    da.store(arr, out, lock=False)


def _convert(src: Path, dst: Path) -> None:
    ax.to_zarr(ax.open_zarr(src).to_layout("NCHW32"), dst)


def conversion(tmp: Path, gbytes: float, repeat: int) -> None:
    from distributed import Client, LocalCluster

    src = tmp / "src.zarr"
    t0 = time.perf_counter()
    shape, nbytes = _make_store(src, gbytes)
    print(f"Zarr NCHW float32 {shape}: {nbytes / 1e9:.2f} GB logical, chunks of 8 images")
    print(f"(written in {time.perf_counter() - t0:.0f} s; {_load()})")
    print(
        f"{'workers':>7} {'case':<26} {'median s':>9} {'GB/s':>6} {'ratio':>6}"
        f" {'worker CPU s':>12} {'ratio':>6} {'peak RSS/worker MB':>19}  load  runs (s)"
    )
    cases = (("plain dask copy", _plain_copy), ("axesarray NCHW -> NCHW32", _convert))
    for workers in (1, 2):
        times: dict = {name: [] for name, _ in cases}
        cpus: dict = {name: [] for name, _ in cases}
        rss: dict = {name: [] for name, _ in cases}
        for _ in range(repeat):
            for name, fn in cases:
                dst = tmp / "dst.zarr"
                shutil.rmtree(dst, ignore_errors=True)
                with LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=None,
                ) as cluster, Client(cluster) as client:  # fmt: skip
                    client.run(ax.warmup)
                    cpu0 = _cpu_s(client)
                    t0 = time.perf_counter()
                    fn(src, dst)
                    times[name].append(time.perf_counter() - t0)
                    cpus[name].append(_cpu_s(client) - cpu0)
                    rss[name].append(max(_peak_rss_mb(client)))
                shutil.rmtree(dst, ignore_errors=True)
        base = statistics.median(times["plain dask copy"])
        base_cpu = statistics.median(cpus["plain dask copy"])
        for name, ts in times.items():
            t, c = statistics.median(ts), statistics.median(cpus[name])
            runs = " ".join(f"{x:.1f}" for x in ts)
            print(
                f"{workers:>7} {name:<26} {t:>9.2f} {nbytes / t / 1e9:>6.2f} {t / base:>6.2f}"
                f" {c:>12.1f} {c / base_cpu:>6.2f} {statistics.median(rss[name]):>19.0f}"
                f"  {os.getloadavg()[0]:.1f}  {runs}"
            )
    print(f"({_load()})")


# --- fused expression ---------------------------------------------------------------------------


def _fused_cases(ta, tb, xa, xb, ya, yb) -> dict:
    """(exp(a * 2 - 1) * b), then nothing or a sum: per case, one function per library."""
    out = {}
    for label, name, axis in (
        ("elementwise only", None, None),
        ("sum over C (middle)", "C", 1),
        ("sum over W (inner)", "W", 2),
        ("sum over N (chunked)", "N", 0),
        ("sum of everything", (), None),
    ):
        ax_expr = ax.exp(ta * 2 - 1) * tb
        da_expr = da.exp(xa * 2 - 1) * xb
        if name is None:
            fns = [lambda e=ax_expr: e.numpy(), lambda e=da_expr: e.compute()]
        elif name == ():
            fns = [lambda e=ax_expr: e.sum().numpy(), lambda e=da_expr: e.sum().compute()]
        else:
            fns = [
                lambda e=ax_expr, n=name: e.sum(n).numpy(),
                lambda e=da_expr, k=axis: e.sum(axis=k).compute(),
            ]
        if ya is not None:
            x_expr = np.exp(ya * 2 - 1) * yb
            if name is None:
                fns.append(lambda e=x_expr: e.values)
            elif name == ():
                fns.append(lambda e=x_expr: e.sum().values)
            else:
                fns.append(lambda e=x_expr, n=name: e.sum(n).values)
        out[label] = fns
    return out


def fused(n_mb: int, nchunks: int, repeat: int) -> None:
    """(exp(a * 2 - 1) * b) over float32 (N, 64, 256) arrays chunked along N, reduced in
    several ways, on dask's threaded scheduler: axesarray, plain dask.array, xarray+dask."""
    c, w = 64, 256
    n = max(nchunks, n_mb * (1 << 20) // (c * w * 4) // nchunks * nchunks)
    rng = np.random.default_rng(0)
    a_np = rng.random((n, c, w), "f4")
    b_np = rng.random((n, c, w), "f4")
    chunks = (n // nchunks, c, w)
    xa, xb = da.from_array(a_np, chunks=chunks), da.from_array(b_np, chunks=chunks)
    ta, tb = ax.from_dask(xa, "N C W"), ax.from_dask(xb, "N C W")
    names = ["axesarray", "dask.array"]
    try:
        import xarray as xr

        ya = xr.DataArray(xa, dims=("N", "C", "W"))
        yb = xr.DataArray(xb, dims=("N", "C", "W"))
        names.append("xarray+dask")
    except ImportError:
        ya = yb = None
        print("(xarray not installed: its column is skipped)")
    cases = _fused_cases(ta, tb, xa, xb, ya, yb)
    mb = 2 * a_np.nbytes / 1e6
    print(
        f"\n(exp(a*2-1)*b) over float32 {a_np.shape}, 2 x {a_np.nbytes / 1e6:.0f} MB in "
        f"{nchunks} chunks of {chunks}, dask threaded scheduler, median of {repeat} "
        f"({_load()})"
    )
    print(f"  {'case':<22}" + "".join(f"{k:>16}" for k in names) + "  axesarray vs dask")
    with dask.config.set(scheduler="threads"):
        for label, fns in cases.items():
            ref = fns[1]()
            for fn in fns[:1] + fns[2:]:
                np.testing.assert_allclose(fn(), ref, rtol=2e-4)
            times: list = [[] for _ in fns]
            for _ in range(repeat):
                for k, fn in enumerate(fns):
                    t0 = time.perf_counter()
                    fn()
                    times[k].append(time.perf_counter() - t0)
            med = [statistics.median(ts) for ts in times]
            cells = "".join(f"{t * 1e3:>10.1f} ms {mb / 1e3 / t:>3.1f}" for t in med)
            print(f"  {label:<22}{cells}  x{med[1] / med[0]:.2f}  (load {os.getloadavg()[0]:.1f})")
    print(f"  (columns: median ms and GB/s of input; {_load()})")


def _always_split(recipe, reduce, ndim) -> bool:
    return reduce is not None and reduce[0] != "arg" and any(e[0] == "map" for e in recipe)


def _never_split(recipe, reduce, ndim) -> bool:
    return False


def split(repeat: int) -> None:
    """Per chunk, a reduction as two kernels (region into scratch, then reduce) against one
    fused reduction kernel: CPU time of 4 chunks of float32 (128, 64, 256), sync scheduler
    (``engine.chunked.tasks.splits`` forced either way; "used" is what it picks)."""
    from axesarray.engine.chunked import tasks as chunk_run

    real = chunk_run.splits
    rng = np.random.default_rng(0)
    a_np, b_np = rng.random((512, 64, 256), "f4"), rng.random((512, 64, 256), "f4")
    ta = ax.from_dask(da.from_array(a_np, chunks=(128, 64, 256)), "N C W")
    tb = ax.from_dask(da.from_array(b_np, chunks=(128, 64, 256)), "N C W")
    print(f"\nreductions per chunk: CPU ms of 4 chunks, median of {repeat} ({_load()})")
    print(f"  {'region':<14} {'over':<5} {'two kernels':>12} {'one kernel':>11}  used")
    exprs = (("exp(a*2-1)*b", ax.exp(ta * 2 - 1) * tb), ("(a*2-1)*b", (ta * 2 - 1) * tb))
    with dask.config.set(scheduler="sync"):
        for label, e in exprs:
            for name in ("C", "W", "N"):
                arr = e.sum(name).to_dask()
                cpu = []
                for forced in (_always_split, _never_split):
                    chunk_run.splits = forced
                    chunk_run._BLOCK_SCHEDULES.clear()
                    try:
                        arr.compute()
                        ts = []
                        for _ in range(repeat):
                            t0 = time.process_time()
                            arr.compute()
                            ts.append(time.process_time() - t0)
                    finally:
                        chunk_run.splits = real
                    cpu.append(statistics.median(ts) * 1e3)
                chunk_run._BLOCK_SCHEDULES.clear()
                used = "two" if "scratch" in str(ax.explain(e.sum(name))) else "one"
                print(f"  {label:<14} {name:<5} {cpu[0]:>12.1f} {cpu[1]:>11.1f}  {used}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "part", nargs="?", choices=("all", "conversion", "fused", "split"), default="all"
    )
    p.add_argument("--quick", action="store_true", help="small sizes: checks that it runs")
    p.add_argument("--gb", type=float, help="conversion: store size (default 4)")
    p.add_argument("--mb", type=int, help="fused: MB per operand (default 256)")
    p.add_argument("--chunks", type=int, default=16, help="fused: chunks along N")
    p.add_argument("--repeat", type=int, help="repeats (default 3 conversion, 7 fused)")
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the stores go")
    args = p.parse_args(argv)
    if args.part in ("all", "conversion"):
        gb = args.gb or (0.064 if args.quick else 4.0)
        with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench_dask_") as tmp:
            conversion(Path(tmp), gb, args.repeat or (1 if args.quick else 3))
    if args.part in ("all", "fused"):
        mb = args.mb or (16 if args.quick else 256)
        fused(mb, args.chunks, args.repeat or (2 if args.quick else 7))
    if args.part in ("all", "split"):
        split(args.repeat or (2 if args.quick else 7))


if __name__ == "__main__":
    main()
