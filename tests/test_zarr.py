"""Zarr v3 storage: names, dtype, layout and logical lengths survive a round trip; stores
from other writers open read-only with their names; writes are atomic; the CLI converts a
store larger than the memory it is given."""

from __future__ import annotations

import os
import re
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


def _store(path, shape, attribute, dtype="f4", names=None):
    z = zarr.create_array(
        str(path), shape=shape, dtype=dtype, chunks=shape, dimension_names=names,
        attributes={"axesarray": attribute},
    )
    z[...] = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    return z


LYING_ATTRIBUTES = [
    # (physical shape, attribute, the reason in the message)
    ((4, 3), {"version": 1, "axes": [["A", 5], ["B", 3]], "layout": None},
     r"the array's shape \(4, 3\) is not A=5, B=3's"),
    ((4, 3), {"version": 1, "axes": [["A", 4], ["B", 3]], "layout": None, "dtype": "<i2"},
     r"the array's dtype float32 is not the attribute's int16"),
    ((4, 3), {"version": 1, "axes": [["A", 4], ["B", 3]],
              "layout": {"order": ["A", "B"], "blocks": [["B", 4]], "roles": []}},
     r"the array's shape \(4, 3\) is not A=4, B=3's in layout AB4b \(4, 1, 4\)"),
    ((4, 3), "A B", r"it holds a string, not an object"),
    ((4, 3), ["A", "B"], r"it holds a list, not an object"),
    ((4, 3), {"version": 2, "axes": [["A", 4], ["B", 3]], "layout": None},
     r"version 2 is not one this axesarray reads \(1\)"),
    ((4, 3), {"axes": [["A", 4], ["B", 3]], "layout": None}, r"version None is not one"),
    ((4, 3), {"version": 1, "axes": "A B", "layout": None}, r"'axes' must be a list of"),
    ((4, 3), {"version": 1, "axes": [["A", 4], ["B", 3.5]], "layout": None},
     r"the length of axis 'B' must be a non-negative integer \(got 3.5\)"),
    ((4, 3), {"version": 1, "axes": [["A", 4], ["B", 3]],
              "layout": {"order": ["N", "C", "H", "W"], "blocks": [["C", 4]], "roles": []}},
     r"the tensor has no 'N', 'C', 'H', 'W'"),
    ((4, 3), {"version": 1, "axes": [["A", 4], ["B", 3]], "layout": "NCHW4"},
     r"'layout' must be an object or null"),
]


@pytest.mark.parametrize("shape, attribute, reason", LYING_ATTRIBUTES)
def test_a_store_whose_attribute_lies_is_an_open_zarr_error(tmp_path, shape, attribute, reason):
    """The attribute is checked against the array as a sidecar is (shape, dtype, layout,
    version); the hint, followed, opens the array under the axes given."""
    p = tmp_path / "w.zarr"
    _store(p, shape, attribute)
    with pytest.raises(ax.LayoutError) as err:
        ax.open_zarr(p)
    text = str(err.value)
    assert text.startswith(f"open_zarr: the axesarray attribute of {p} does not describe its "
                           "array (") and "\n" not in text, text
    assert re.search(reason, text), text
    hint = text.split(". Delete it if the array is right: ", 1)[1]
    code, _, rest = hint.partition(", then ")
    assert rest == "ax.open_zarr(store, axes='...')."
    exec(code, {"zarr": zarr})
    t = ax.open_zarr(p, axes="P Q")
    np.testing.assert_array_equal(t.numpy(), np.arange(12).reshape(4, 3).astype("f4"))


def test_open_zarr_with_axis_objects_and_non_stores(tmp_path):
    t = ax.tensor(_x((2, 3)), "N C")
    ax.to_zarr(t, tmp_path / "t.zarr")
    back = ax.open_zarr(tmp_path / "t.zarr", axes=(ax.Axis("N", 2), ax.Axis("C", 3)))
    assert back.axes == t.axes
    assert ax.open_zarr(tmp_path / "t.zarr", axes=["N", ax.Axis("C", 3)]).axes == t.axes
    with pytest.raises(ax.AxesError, match=r"^open_zarr: axes= differs from the store's axes "
                       r"\(axes=N=2, C=4; store N=2, C=3\)\. Leave axes= out"):
        ax.open_zarr(tmp_path / "t.zarr", axes=(ax.Axis("N", 2), ax.Axis("C", 4)))
    with pytest.raises(TypeError, match=r"^open_zarr: axes given as a set have no order"):
        ax.open_zarr(tmp_path / "t.zarr", axes={"N", "C"})
    (tmp_path / "f.zarr").write_text("not a store")
    with pytest.raises(NotADirectoryError, match=r"^open_zarr: .*f.zarr is a file, not a Zarr "
                       r"store \(a directory\)\. Give the store's directory\.$"):
        ax.open_zarr(tmp_path / "f.zarr")
    (tmp_path / "d.zarr").mkdir()
    with pytest.raises(FileNotFoundError, match=r"^open_zarr: no Zarr array at .*d.zarr \(No "
                       r"array found"):
        ax.open_zarr(tmp_path / "d.zarr")
    zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    with pytest.raises(FileNotFoundError, match=r"^open_zarr: no Zarr array at .*g.zarr"):
        ax.open_zarr(tmp_path / "g.zarr")


@pytest.mark.parametrize(
    "cut, layout",
    [
        (dict(C=slice(1, 6)), "NCHW4"),
        (dict(C=slice(0, 9, 2)), "NCHW4"),
        (dict(C=slice(4, 8)), "NCHW4"),
        (dict(H=1), "NCW4"),
        (dict(C=[5, 0, 2]), None),  # a gather is a new tensor, in axis order
    ],
)
@pytest.mark.parametrize("chunked", [False, True])
def test_a_sliced_blocked_tensor_keeps_its_layout_in_zarr(tmp_path, cut, layout, chunked):
    """As ax.save does: a view through blocks is stored blocked (fresh, zero padding)."""
    x = _x((2, 9, 3, 2))
    t = ax.tensor(x, "N C H W").to_layout("NCHW4")
    if chunked:
        t = t.chunk({"N": 1})
    view = t.isel(cut)
    ax.to_zarr(view, tmp_path / "v.zarr")
    back = ax.open_zarr(tmp_path / "v.zarr")
    assert back.axes == view.axes
    assert (str(back.layout) if back.layout else None) == layout
    assert back.layout is None or not back.layout.partial
    np.testing.assert_array_equal(back.numpy(), view.numpy())
    raw = zarr.open_array(str(tmp_path / "v.zarr"), mode="r")[...]
    fresh = ax.tensor(view.numpy(), view.names)
    expected = fresh.to_layout(back.layout).physical if layout else fresh.numpy()
    np.testing.assert_array_equal(raw, expected)


def test_cli_info_reads_stores(tmp_path, capsys):
    x = _x((2, 5, 3, 2))
    ax.to_zarr(ax.tensor(x, "N C H W").to_layout("NCHW4"), tmp_path / "b.zarr", chunks={"N": 1})
    assert main(["info", str(tmp_path / "b.zarr")]) == 0
    out = capsys.readouterr().out
    assert (
        f"store     {tmp_path / 'b.zarr'} "
        "(Zarr, chunks N=(1, 1), C=(4, 1), H=(3,), W=(2,))"
    ) in out
    assert "physical  float32 (2, 2, 3, 2, 4)" in out
    assert "axes      N=2, C=5, H=3, W=2" in out
    assert "layout    NCHW4 (N=2, C//4=2, H=3, W=2, C%4=4)" in out
    assert "padding   37.5% of the elements" in out
    zarr.create_array(str(tmp_path / "raw.zarr"), shape=(2, 3), dtype="i2", chunks=(1, 3))
    assert main(["info", str(tmp_path / "raw.zarr")]) == 0
    out = capsys.readouterr().out
    assert "physical  int16 (2, 3)" in out and "axes      unknown (no dimension_names)" in out
    assert main(["info", str(tmp_path / "none.zarr")]) == 1
    assert "axesarray: error: info: no Zarr array at" in capsys.readouterr().err


def _unreadable(monkeypatch, store_cls):
    """Reading any key of a store fails as an unreadable file does (root reads anything,
    so a chmod would not do it)."""
    import errno

    async def get(self, key, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), f"{self.root}/{key}")

    monkeypatch.setattr(store_cls, "get", get)


def test_cli_unreadable_zarr_input_is_one_formatted_line(tmp_path, capsys, monkeypatch):
    ax.to_zarr(ax.tensor(_x((2, 4)), "N C"), tmp_path / "in.zarr")
    from zarr.storage import LocalStore

    _unreadable(monkeypatch, LocalStore)
    rc = main(["convert", str(tmp_path / "in.zarr"), str(tmp_path / "o.zarr"), "--to", "C N"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1, err
    assert re.fullmatch(
        rf"axesarray: error: convert: cannot read {re.escape(str(tmp_path / 'in.zarr'))} "
        r"\(Permission denied: .*\)\. Check the permissions of the file\.\n",
        err,
    ), err
    assert "[Errno" not in err
    assert sorted(os.listdir(tmp_path)) == ["in.zarr"]


def test_cli_full_disk_under_zarr_output_is_one_formatted_line(tmp_path):
    """RLIMIT_FSIZE stands in for a full disk, as for the .npy output."""
    x = _x((4, 64, 64, 8))  # 512 KiB
    ax.to_zarr(ax.tensor(x, "N C H W"), tmp_path / "in.zarr")
    code = "import sys; from axesarray.io.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, "convert", str(tmp_path / "in.zarr"),
         str(tmp_path / "o.zarr"), "--to", "NCHW32"],
        capture_output=True, text=True, timeout=300, preexec_fn=_fsize_limited(100_000),
    )
    assert proc.returncode == 1, proc
    assert re.fullmatch(
        rf"axesarray: error: convert: cannot write {re.escape(str(tmp_path / 'o.zarr'))} "
        r"\(File too large\)\. The file is larger than this file system or process allows "
        r"\(ulimit -f\)\.\n",
        proc.stderr,
    ), proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["in.zarr"]


def _fsize_limited(limit: int):
    def start():
        resource.setrlimit(
            resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1])
        )

    return start
