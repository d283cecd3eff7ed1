"""File I/O: ``ax.save``/``ax.load``, the box writer, the input map, atomic outputs."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import axesarray as ax
from axesarray import AxesError, LayoutError
from axesarray.io.npy import NpyWriter, atomic_outputs, map_npy, renamed_errors, sidecar_path
from axesarray.storage.memory import AllocationError
from tests.test_layouts import values


def files(d) -> list[str]:
    return sorted(p.name for p in d.iterdir())


# --- save / load ------------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o027, 0o000])
def test_saved_files_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        ax.save(tmp_path / "t.npy", ax.tensor(np.zeros((2, 3)), "N C"))
    finally:
        os.umask(old)
    for name in ["t.npy", "t.npy.axes.json"]:
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


@pytest.mark.parametrize("shape", [(), (0,), (1,), (3, 0, 2), (5, 7)])
def test_save_load_any_size(tmp_path, shape):
    names = " ".join("ABC"[: len(shape)])
    logical = values(shape, "float32")
    ax.save(tmp_path / "t.npy", ax.tensor(logical, names))
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), logical, strict=True)
    np.testing.assert_array_equal(ax.load(tmp_path / "t.npy").numpy(), logical, strict=True)


def test_save_writes_strided_views_a_slab_at_a_time(tmp_path):
    logical = values((40, 6, 5), "int16")
    t = ax.tensor(logical, "A B C").isel(A=slice(None, None, -3), C=slice(1, 4))
    path = tmp_path / "t.npy"
    ax.save(path, t)
    np.testing.assert_array_equal(np.load(path), logical[::-3, :, 1:4], strict=True)
    out = NpyWriter(tmp_path / "w.npy", "int16", (40, 6, 5))
    out.write_all(logical[:, :, :], piece=60)  # one row of A per slab
    out.close()
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), logical, strict=True)


@pytest.mark.parametrize("name", ["t.npz", "t", "t.NPY"])
def test_save_refuses_a_name_that_is_not_npy(tmp_path, name):
    stem = name.split(".")[0]
    with pytest.raises(
        LayoutError,
        match=rf"^save: the output is always a .npy file, so its name must end in .npy "
        rf"\(got {name}\)\. Name it {stem}.npy\.$",
    ):
        ax.save(tmp_path / name, ax.tensor(np.zeros(2), "N"))
    assert files(tmp_path) == []


def test_save_refuses_a_directory_and_a_missing_directory(tmp_path):
    (tmp_path / "d.npy").mkdir()
    t = ax.tensor(np.zeros(2), "N")
    with pytest.raises(IsADirectoryError, match=r"^save: the output is a directory \(.*d.npy\)"):
        ax.save(tmp_path / "d.npy", t)
    with pytest.raises(
        FileNotFoundError, match=r"^save: the output directory does not exist \(.*no\)\."
    ):
        ax.save(tmp_path / "no" / "t.npy", t)
    assert files(tmp_path) == ["d.npy"]


def test_loading_python_objects_is_a_type_error(tmp_path):
    path = tmp_path / "o.npy"
    np.save(path, np.array([1, "a"], dtype=object), allow_pickle=True)
    for mmap_mode in [None, "r"]:
        with pytest.raises(
            TypeError,
            match=r"^load: .*o.npy holds Python objects \(object\)\. Only numeric arrays can "
            r"be read",
        ):
            ax.load(path, axes="N", mmap_mode=mmap_mode)


def test_reading_more_than_memory_is_refused_with_our_message(tmp_path, monkeypatch):
    path = tmp_path / "big.npy"
    np.save(path, np.zeros((4, 2), "float32"))

    def no_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate 32 B for an array with shape (4, 2)")

    monkeypatch.setattr(np, "load", no_memory)
    with pytest.raises(
        AllocationError,
        match=r"^load: cannot allocate 32 bytes to read .*big.npy \(shape \(4, 2\); float32\)\. "
        r"Map it instead of reading it: mmap_mode='r'\.$",
    ):
        ax.load(path, axes="A B")


def test_errors_while_loading_name_load(tmp_path):
    path = tmp_path / "p.npy"
    np.save(path, np.zeros((2, 3)))
    with pytest.raises(
        AxesError,
        match=r"^load: the data has 2 dimensions but 3 axes were given \(data shape \(2, 3\); "
        r"axes N C D\)\. Give one axis per dimension of the data\.$",
    ):
        ax.load(path, axes="N C D")
    with pytest.raises(
        AxesError,
        match=r"^load: axis 'N' has length 3 but the data has 2 \(data shape \(2, 3\); "
        r"axes N=3, C\)\.",
    ):
        ax.load(path, axes=[ax.Axis("N", 3), "C"])
    with pytest.raises(AxesError, match=r"^load: axis name 'N' appears twice"):
        ax.load(path, axes="N N")
    blocked = tmp_path / "b.npy"
    ax.save(blocked, ax.tensor(np.zeros((1, 3, 2, 2), "int8"), "N C H W").to_layout("NCHW4"))
    np.save(blocked, np.zeros((1, 3, 2, 2), "int8"))  # the logical array, not the physical
    with pytest.raises(
        LayoutError,
        match=r"^load: a NCHW4 buffer has 5 dimensions but the array has 4 ",
    ):
        ax.load(blocked)


def test_renamed_errors_keep_the_type_and_leave_foreign_text():
    with pytest.raises(AxesError, match=r"^load: bad \(x\)\.$"), renamed_errors("load"):
        raise AxesError("tensor: bad (x).")
    with pytest.raises(TypeError, match=r"^load: already named\.$"), renamed_errors("load"):
        raise TypeError("load: already named.")
    with pytest.raises(TypeError, match=r"^unsupported operand$"), renamed_errors("load"):
        raise TypeError("unsupported operand")


# --- the box writer ---------------------------------------------------------------------------


@st.composite
def tilings(draw):
    """A shape and a cut of each of its dims into pieces (the boxes tile the array)."""
    shape = draw(st.lists(st.integers(0, 5), min_size=1, max_size=4))
    cuts = []
    for n in shape:
        inner = draw(st.lists(st.integers(1, max(1, n - 1)), max_size=3)) if n > 1 else []
        edges = sorted({0, n, *inner})
        cuts.append(list(zip(edges[:-1], edges[1:], strict=True)))
    return tuple(shape), cuts


@settings(max_examples=60)
@given(tiling=tilings(), dtype=st.sampled_from(["int8", "float16", "float64"]))
def test_writer_boxes_in_any_order_give_the_array(tmp_path_factory, tiling, dtype):
    shape, cuts = tiling
    full = values(shape, dtype)
    path = tmp_path_factory.mktemp("w") / "w.npy"
    path.touch()
    out = NpyWriter(path, dtype, shape)
    boxes = list(np.ndindex(*[len(c) for c in cuts]))
    for pick in reversed(boxes):  # any order: every box lands at its own offsets
        spans = [c[k] for c, k in zip(cuts, pick, strict=True)]
        index = tuple(slice(a, b) for a, b in spans)
        out.write(full[index], tuple(a for a, _ in spans))
    out.close()
    assert os.path.getsize(path) == out.header + full.nbytes
    np.testing.assert_array_equal(np.load(path), full, strict=True)


def test_writer_reserves_the_whole_file_first(tmp_path):
    path = tmp_path / "r.npy"
    path.touch()
    out = NpyWriter(path, "float32", (1000, 100))
    assert os.path.getsize(path) == out.header + 400_000
    if hasattr(os, "posix_fallocate"):  # the space is allocated, not a hole
        assert os.stat(path).st_blocks * 512 >= 400_000
    out.close()


# --- the input map ----------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape", [(0, 3), (1,), (4, 5, 6)])
def test_map_npy_reads_the_array_and_drops_its_pages(tmp_path, order, shape):
    logical = np.asarray(values(shape, "float32"), order=order)
    path = tmp_path / "m.npy"
    np.save(path, logical)
    arr, drop = map_npy(path)
    np.testing.assert_array_equal(arr, logical, strict=True)
    drop()
    np.testing.assert_array_equal(arr, logical, strict=True)  # read again from the page cache
    assert not arr.flags.writeable


# --- atomic outputs ---------------------------------------------------------------------------


def test_a_failure_keeps_the_old_output_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "t.npy"
    ax.save(path, ax.tensor(np.arange(3.0), "N"))
    with (
        pytest.raises(
            OSError,
            match=r"^save: cannot write .*t.npy \(No space left on device\)\. Free space on the "
            r"disk or write elsewhere\.$",
        ) as exc,
        atomic_outputs(path, sidecar_path(path), op="save") as (tmp, _),
    ):
        tmp.write_bytes(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert exc.value.errno == errno.ENOSPC
    assert files(tmp_path) == ["t.npy", "t.npy.axes.json"]
    np.testing.assert_array_equal(ax.load(path).numpy(), np.arange(3.0))
    with pytest.raises(KeyboardInterrupt), atomic_outputs(path, op="save"):
        raise KeyboardInterrupt
    assert files(tmp_path) == ["t.npy", "t.npy.axes.json"]
