"""Chunked tensors on dask: Zarr layout conversion on a LocalCluster, and a fused
elementwise + reduction against plain dask.array and xarray+dask (same run).

python benchmarks/bench_dask.py            # 4 GB Zarr array (needs ~8 GB of free disk)
python benchmarks/bench_dask.py --quick    # 64 MB: checks that everything runs

Numbers are medians over repeats; the machine is shared, so each comparison is measured
in the same run. Peak RSS per worker is each worker process's ``ru_maxrss`` (a fresh
cluster per measurement).
"""

from __future__ import annotations

import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr

import axesarray as ax


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
    shape, nbytes = _make_store(src, gbytes)
    print(f"Zarr NCHW float32 {shape}: {nbytes / 1e9:.2f} GB logical")
    print(
        f"{'workers':>7} {'case':<26} {'median s':>9} {'GB/s':>6} {'ratio':>6}"
        f" {'peak RSS/worker MB':>20}"
    )
    for workers in (1, 2):
        times: dict = {"plain dask copy": [], "axesarray NCHW -> NCHW32": []}
        rss: dict = {k: [] for k in times}
        for _ in range(repeat):
            for name, fn in (
                ("plain dask copy", _plain_copy),
                ("axesarray NCHW -> NCHW32", _convert),
            ):
                dst = tmp / "dst.zarr"
                shutil.rmtree(dst, ignore_errors=True)
                with LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=None,
                ) as cluster, Client(cluster) as client:  # fmt: skip
                    client.run(ax.warmup)
                    t0 = time.perf_counter()
                    fn(src, dst)
                    times[name].append(time.perf_counter() - t0)
                    rss[name].append(max(_peak_rss_mb(client)))
                shutil.rmtree(dst, ignore_errors=True)
        base = statistics.median(times["plain dask copy"])
        for name, ts in times.items():
            t = statistics.median(ts)
            print(
                f"{workers:>7} {name:<26} {t:>9.2f} {nbytes / t / 1e9:>6.2f} {t / base:>6.2f}"
                f" {statistics.median(rss[name]):>20.0f}"
            )


def fused(n_mb: int, repeat: int) -> None:
    """4 ops then a sum: (exp(a * 2 - 1) * b).sum over C, chunked, threaded scheduler."""
    c = 64
    n = max(8, n_mb * (1 << 20) // (c * 256 * 4) // 8 * 8)
    rng = np.random.default_rng(0)
    a_np = rng.random((n, c, 256), "f4")
    b_np = rng.random((n, c, 256), "f4")
    chunks = (max(1, n // 16), c, 256)
    xa, xb = da.from_array(a_np, chunks=chunks), da.from_array(b_np, chunks=chunks)
    ta, tb = ax.from_dask(xa, "N C W"), ax.from_dask(xb, "N C W")
    cases = {
        "axesarray (fused per chunk)": lambda: (ax.exp(ta * 2 - 1) * tb).sum("C").numpy(),
        "plain dask.array": lambda: (da.exp(xa * 2 - 1) * xb).sum(axis=1).compute(),
    }
    try:
        import xarray as xr

        ya = xr.DataArray(xa, dims=("N", "C", "W"))
        yb = xr.DataArray(xb, dims=("N", "C", "W"))
        cases["xarray + dask"] = lambda: (np.exp(ya * 2 - 1) * yb).sum("C").values
    except ImportError:
        print("(xarray not installed: its row is skipped)")
    ref = cases["plain dask.array"]()
    np.testing.assert_allclose(cases["axesarray (fused per chunk)"](), ref, rtol=1e-4)
    times: dict = {k: [] for k in cases}
    with dask.config.set(scheduler="threads"):
        for _ in range(repeat):
            for name, fn in cases.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    mb = 2 * a_np.nbytes / 1e6
    print(f"\n(exp(a*2-1)*b).sum(C), float32, 2 x {a_np.nbytes / 1e6:.0f} MB, 16 chunks, threads")
    base = statistics.median(times["plain dask.array"])
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"  {name:<28} {t * 1e3:>8.1f} ms {mb / 1e3 / t:>6.2f} GB/s  x{base / t:.2f} vs dask")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        conversion(Path(tmp), 0.064 if quick else 4.0, 1 if quick else 3)
    fused(16 if quick else 512, 2 if quick else 5)


if __name__ == "__main__":
    main()
