"""Repack benchmark: GB/s and ratio to ``np.copyto`` of the same bytes and to a copy with
streaming (non-temporal) stores, next to numpy's transpose-copy, torch's strided copy and
einops (each only when importable).

    python benchmarks/bench_layouts.py            # float32 (32,64,56,56), int8 (32,256,56,56)
    python benchmarks/bench_layouts.py --quick    # small shapes, a smoke test

GB/s counts bytes read + bytes written (padding counted on the side that holds it). Our
time is ``ax.repack(src, out=dst)`` into a preallocated tensor, like ``np.copyto``; each
number is the median of ``--repeat`` runs, all interleaved in the same process (the
machine is shared: the load average is printed with the results).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import round_robin  # noqa: E402

import axesarray as ax  # noqa: E402

CASES = [
    ("NCHW", "NHWC"),
    ("NHWC", "NCHW"),
    ("NCHW", "NCHW4"),
    ("NCHW4", "NCHW"),
    ("NCHW", "NCHW32"),
    ("NCHW32", "NCHW"),
    ("NCHW", "NCHW64"),
    ("NCHW64", "NCHW"),
    ("NCHW4", "CHWN4"),
    ("CHWN4", "NCHW4"),
    ("NCHW", "CHWN4"),
    ("CHWN4", "NCHW"),
]
FULL = [("float32", (32, 64, 56, 56)), ("int8", (32, 256, 56, 56))]
QUICK = [("float32", (4, 64, 28, 28)), ("int8", (4, 256, 28, 28))]


def streaming_copy(a: np.ndarray, b: np.ndarray):
    """``b[...] = a`` (same bytes) with non-temporal stores: the limit of a memory-bound
    kernel that reads and writes each byte once. None where numba is missing."""
    try:
        from numba import njit

        from axesarray.kernels.repack import simd
    except ImportError:
        return None

    @njit(nogil=True)
    def copy(src, dst, head, vectors):
        for k in range(head):
            dst[k] = src[k]
        simd.stream(src, head, dst, head, vectors)
        simd.store_fence()
        for k in range(head + 32 * vectors, src.size):
            dst[k] = src[k]

    src, dst = a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)
    head = min(src.size, (-dst.ctypes.data) % 32)
    vectors = (src.size - head) // 32
    return lambda: copy(src, dst, head, vectors)


def common_view(name: str, phys: np.ndarray, shape, x: int) -> np.ndarray:
    """``phys`` (a contiguous physical array) viewed as (N, C//x, x, H, W): no copy."""
    n, c, h, w = shape
    if name == "NCHW":
        return phys.reshape(n, c // x, x, h, w)
    if name == "NHWC":
        return phys.reshape(n, h, w, c // x, x).transpose(0, 3, 4, 1, 2)
    if name == "CHWN4":
        return phys.transpose(3, 0, 4, 1, 2)
    return phys.transpose(0, 1, 4, 2, 3)  # NCHWx


def _block(src_name: str, dst_name: str) -> int:
    blocks = [int(k[4:]) for k in (src_name, dst_name) if k.startswith("NCHW") and k[4:]]
    return 4 if "CHWN4" in (src_name, dst_name) else (blocks[0] if blocks else 1)


def numpy_repack(src_name: str, dst_name: str, src_phys: np.ndarray, dst_phys: np.ndarray, shape):
    """np.copyto(dst, src transposed): numpy's best one-call repack (C % x == 0 here)."""
    x = _block(src_name, dst_name)
    dst_view = common_view(dst_name, dst_phys, shape, x)
    src_view = common_view(src_name, src_phys, shape, x)
    assert np.shares_memory(dst_view, dst_phys) and np.shares_memory(src_view, src_phys)
    return lambda: np.copyto(dst_view, src_view)


def peers(src_name, dst_name, src_phys, dst_phys, shape):
    """Optional peers, each writing into a preallocated output like ours (a fresh 25 MB
    output per call costs page faults, and slowed the next timed run to half speed):
    torch's ``copy_`` between the same strided views as numpy's (what
    ``contiguous(memory_format=torch.channels_last)`` does after allocating), and
    einops' ``rearrange`` copied out, when importable."""
    out = {}
    # torch's OpenMP threads spin after each call, taking a core from whatever is timed
    # next; passive waiting keeps the runs apart.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        x = _block(src_name, dst_name)
        s_t = torch.from_numpy(common_view(src_name, src_phys, shape, x))
        d_t = torch.from_numpy(common_view(dst_name, dst_phys, shape, x))
        out["torch"] = lambda: d_t.copy_(s_t)
    try:
        import einops
    except ImportError:
        return out
    pattern = {
        "NCHW": "n c h w",
        "NHWC": "n h w c",
        "CHWN4": "cb h w n x",
    }

    def spec(name):
        if name in pattern:
            return pattern[name], {}
        return "n cb h w x", {"x": int(name[4:])}

    def logical(name):
        return {"NCHW": "n (cb x) h w", "NHWC": "n h w (cb x)", "CHWN4": "cb h w n x"}.get(
            name, "n cb h w x"
        )

    s_pat, s_kw = spec(src_name)
    d_pat, d_kw = spec(dst_name)
    if src_name in ("NCHW", "NHWC"):
        s_pat = logical(src_name)
    if dst_name in ("NCHW", "NHWC"):
        d_pat = logical(dst_name)
    x = s_kw.get("x") or d_kw.get("x") or (4 if "CHWN4" in (src_name, dst_name) else 1)
    try:
        einops.rearrange(src_phys, f"{s_pat} -> {d_pat}", x=x)
    except Exception:  # a pattern einops cannot express: leave the cell empty
        return out
    target = np.empty_like(dst_phys)
    out["einops"] = lambda: np.copyto(
        target, einops.rearrange(src_phys, f"{s_pat} -> {d_pat}", x=x).reshape(target.shape)
    )
    return out


def run(quick: bool, repeat: int, only: set | None = None) -> list[dict]:
    rows = []
    for dtype, shape in QUICK if quick else FULL:
        rng = np.random.default_rng(0)
        logical = (rng.random(shape) * 100).astype(dtype)
        base = ax.tensor(logical, "N C H W")
        nbytes = logical.nbytes
        a, b = np.empty_like(logical), np.empty_like(logical)
        a[...] = logical
        stream = streaming_copy(a, b)
        for src_name, dst_name in CASES:
            if (
                only
                and f"{src_name}->{dst_name}" not in only
                and f"{dtype}:{src_name}->{dst_name}" not in only
            ):
                continue
            src = base.to_layout(src_name)
            dst = base.to_layout(dst_name)
            moved = src.physical.nbytes + dst.physical.nbytes
            fns = {
                "copy": lambda: np.copyto(b, a),  # noqa: B023
                "ours": lambda: ax.repack(src, out=dst),  # noqa: B023
                "numpy": numpy_repack(src_name, dst_name, src.physical, dst.physical.copy(), shape),
            }
            if stream is not None:
                fns["stream"] = stream
            t = round_robin(fns, repeat)
            np.testing.assert_array_equal(dst.numpy(), logical)
            # Peers in a round of their own: with torch's copy interleaved, our first case
            # ran at half speed (torch's threads), which is no property of either.
            others = peers(src_name, dst_name, src.physical, dst.physical.copy(), shape)
            if others:
                t.update(round_robin(others, repeat))
                fns.update(others)
            copy_gbs = 2 * nbytes / t["copy"] / 1e9
            row = {
                "dtype": dtype,
                "shape": shape,
                "case": f"{src_name}->{dst_name}",
                "ours_gbs": moved / t["ours"] / 1e9,
                "copy_gbs": copy_gbs,
                "numpy_gbs": moved / t["numpy"] / 1e9,
            }
            row["vs_copy"] = row["ours_gbs"] / copy_gbs
            row["vs_numpy"] = t["numpy"] / t["ours"]
            if "stream" in t:
                row["vs_stream"] = t["stream"] / t["ours"] * moved / (2 * nbytes)
            for name in fns:
                if name not in ("copy", "ours", "numpy"):
                    row[f"{name}_gbs"] = (2 * nbytes if name == "stream" else moved) / t[name] / 1e9
            row["load"] = os.getloadavg()[0]
            rows.append(row)
            print(_format(row), flush=True)
    return rows


def _format(r: dict) -> str:
    extra = "".join(f"  {k[:-4]} {r[k]:5.1f}" for k in ("torch_gbs", "einops_gbs") if k in r)
    stream = f"  {r['vs_stream']:4.2f}x stream ({r['stream_gbs']:4.1f})" if "vs_stream" in r else ""
    return (
        f"{r['dtype']:8s} {r['case']:15s} ours {r['ours_gbs']:5.1f} GB/s  "
        f"{r['vs_copy']:4.2f}x copy ({r['copy_gbs']:4.1f}){stream}  numpy {r['numpy_gbs']:5.1f}  "
        f"{r['vs_numpy']:4.1f}x numpy{extra}  load {r['load']:.1f}"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes")
    parser.add_argument("--repeat", type=int, default=None, help="runs per median")
    parser.add_argument("--json", type=Path, default=None, help="also write rows as JSON")
    parser.add_argument("--threads", type=int, default=None, help="threads for our kernels")
    parser.add_argument(
        "--cases", default=None, help="comma-separated SRC->DST or DTYPE:SRC->DST (default: all)"
    )
    args = parser.parse_args(argv)
    repeat = args.repeat or (5 if args.quick else 15)
    import numba

    if args.threads:
        numba.set_num_threads(args.threads)

    print(
        f"numpy {np.__version__}, numba {numba.__version__}, threads "
        f"{numba.get_num_threads()}, median of {repeat}"
    )
    rows = run(args.quick, repeat, set(args.cases.split(",")) if args.cases else None)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
