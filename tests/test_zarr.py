"""Zarr v3 storage: names, dtype, layout and logical lengths survive a round trip; stores
from other writers open read-only with their names; writes are atomic; the CLI converts a
store larger than the memory it is given."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

import axesarray as ax
from axesarray.io.cli import main
from tests.conftest import assert_close

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _threads():
    with dask.config.set(scheduler="threads"):
        yield


def _x(shape=(2, 40, 3, 5), dtype="float32"):
    return np.random.default_rng(0).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("layout", [None, "NCHW32", "NHWC", "CHWN4"])
def test_round_trip_keeps_names_layout_and_lengths(tmp_path, layout):
    x = _x()
    t = ax.tensor(x, "N C H W")
    if layout is not None:
        t = t.to_layout(layout)
    ax.to_zarr(t, tmp_path / "t.zarr", chunks={"H": 2})
    back = ax.open_zarr(tmp_path / "t.zarr")
    assert back.axes == t.axes and back.dtype == t.dtype and back.layout == t.layout
    assert back.chunks["H"] == (2, 1)
    assert_close(back, x)
    raw = zarr.open_array(str(tmp_path / "t.zarr"), mode="r")
    if layout == "NCHW32":
        assert raw.metadata.dimension_names == ("N", "C//32", "H", "W", "C%32")
        np.testing.assert_array_equal(raw[:], t.physical)  # padding stored as zeros
    elif layout is None:
        assert raw.metadata.dimension_names == ("N", "C", "H", "W")
    ax.to_zarr(back * 2, tmp_path / "u.zarr")  # a chunked expression writes too
    assert_close(ax.open_zarr(tmp_path / "u.zarr"), x * 2)


def test_foreign_store_opens_read_only_with_its_names(tmp_path):
    p = str(tmp_path / "f.zarr")
    z = zarr.create_array(p, shape=(4, 6), dtype="int16", chunks=(3, 6), dimension_names=["y", "x"])
    z[:] = np.arange(24, dtype="int16").reshape(4, 6)
    t = ax.open_zarr(p)
    assert t.names == ("y", "x") and t.chunks == {"y": (3, 1), "x": (6,)}
    assert not t.is_lvalue
    assert_close(t.sum("x"), np.arange(24, dtype="int16").reshape(4, 6).sum(1))
    with pytest.raises(TypeError, match="assign: the destination must be an l-tensor"):
        t[...] = 0
    with pytest.raises(ax.AxesError, match="open_zarr: axes= differs from the store's"):
        ax.open_zarr(p, axes="a b")


def test_store_without_names_needs_axes(tmp_path):
    p = str(tmp_path / "n.zarr")
    zarr.create_array(p, shape=(2, 3), dtype="f8", chunks=(1, 3))
    with pytest.raises(ax.AxesError, match=r"open_zarr: n.zarr has no dimension_names.*axes="):
        ax.open_zarr(p)
    assert ax.open_zarr(p, axes="N C").names == ("N", "C")
    with pytest.raises(FileNotFoundError, match="open_zarr: no Zarr array"):
        ax.open_zarr(tmp_path / "missing.zarr")


def test_failed_write_leaves_nothing(tmp_path):
    def boom(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 2:
            raise OSError("disk full (simulated)")
        return block

    arr = da.ones((8, 4), chunks=(2, 4)).map_blocks(boom, dtype=float)
    with pytest.raises(OSError, match="disk full"):
        ax.to_zarr(ax.from_dask(arr, "N C"), tmp_path / "o.zarr")
    assert os.listdir(tmp_path) == []  # no half-written store, no temporary left
    ax.to_zarr(ax.ones((ax.Axis("N", 2),)), tmp_path / "o.zarr")
    with pytest.raises(FileExistsError, match="to_zarr: the output exists"):
        ax.to_zarr(ax.ones((ax.Axis("N", 2),)), tmp_path / "o.zarr")


def test_failed_write_waits_for_chunks_under_way(tmp_path):
    # one chunk fails while another is still computing: the threaded scheduler raises at
    # once, and the slow chunk's write must not recreate the removed temporary
    import time

    import dask

    def slow_or_boom(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 0:
            time.sleep(0.5)
        elif block_info[0]["chunk-location"][0] == 1:
            raise OSError("disk full (simulated)")
        return block

    arr = da.ones((4, 4), chunks=(2, 4)).map_blocks(slow_or_boom, dtype=float)
    with (
        dask.config.set(scheduler="threads", num_workers=4),
        pytest.raises(OSError, match="disk full"),
    ):
        ax.to_zarr(ax.from_dask(arr, "N C"), tmp_path / "o.zarr")
    time.sleep(0.8)  # the slow chunk has finished by now
    assert os.listdir(tmp_path) == []


def test_cli_converts_zarr(tmp_path, capsys):
    x = _x()
    ax.to_zarr(ax.tensor(x, "N C H W"), tmp_path / "in.zarr", chunks={"N": 1})
    assert (
        main(["convert", str(tmp_path / "in.zarr"), str(tmp_path / "o.zarr"), "--to", "NCHW32"])
        == 0
    )
    out = ax.open_zarr(tmp_path / "o.zarr")
    assert str(out.layout) == "NCHW32"
    assert_close(out, x)
    assert main(["convert", str(tmp_path / "o.zarr"), str(tmp_path / "back.zarr")]) == 0
    back = ax.open_zarr(tmp_path / "back.zarr")
    assert back.layout is None and back.chunks["N"] == (1, 1)
    assert_close(back, x)
    assert main(["convert", str(tmp_path / "o.zarr"), str(tmp_path / "x.npy")]) == 1
    assert "convert: a Zarr input converts to a Zarr store" in capsys.readouterr().err
    assert (
        main(["convert", str(tmp_path / "o.zarr"), str(tmp_path / "y.zarr"), "--from", "NCHW"]) == 1
    )
    assert "convert: --from is for .npy input" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["back.zarr", "in.zarr", "o.zarr"]


# An idle ``import axesarray, dask, zarr`` maps ~250 MiB of virtual memory, and a conversion
# peaks at ~700 MiB here (numba/LLVM reserve address space, threads their stacks and malloc
# arenas, capped at 2). 1 GiB of address space is above that and below the 1.34 GB array,
# which therefore cannot be held whole. Chunks equal to the fill value are not stored, so
# the input is small on disk while dask still converts all of it through memory.
LIMIT = 1 << 30


@pytest.mark.slow
def test_cli_converts_a_store_larger_than_its_memory(tmp_path):
    src, dst = tmp_path / "big.zarr", tmp_path / "big32.zarr"
    z = zarr.create_array(
        str(src), shape=(320, 64, 128, 128), dtype="f4", chunks=(8, 64, 128, 128),
        dimension_names=["N", "C", "H", "W"], fill_value=1.5,
    )  # fmt: skip
    head = np.random.default_rng(0).random((8, 64, 128, 128), "f4")
    z[:8] = head
    assert z.nbytes > LIMIT

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    code = "import sys; from axesarray.io.cli import main; sys.exit(main(sys.argv[1:]))"
    env = dict(os.environ, MALLOC_ARENA_MAX="2")
    run = subprocess.run(
        [sys.executable, "-c", code, "convert", str(src), str(dst), "--to", "NCHW32"],
        preexec_fn=limit, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = zarr.open_array(str(dst), mode="r")
    assert out.shape == (320, 2, 128, 128, 32)
    ref = ax.tensor(head, "N C H W").to_layout("NCHW32").physical
    np.testing.assert_array_equal(out[:8], ref)
    np.testing.assert_array_equal(out[-1:], np.full((1, 2, 128, 128, 32), 1.5, "f4"))
    # and the same conversion of the whole array in one piece is refused under that limit
    code = "import numpy as np; np.ones((320, 64, 128, 128), 'f4')"
    run = subprocess.run([sys.executable, "-c", code], preexec_fn=limit, capture_output=True)
    assert run.returncode != 0 and b"MemoryError" in run.stderr
