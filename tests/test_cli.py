"""The ``axesarray`` command (convert, info) and ``ax.save``/``ax.load``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import axesarray as ax
from axesarray import LayoutError, cli
from axesarray.npyio import sidecar_path
from tests.test_layouts import expected_physical, values


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def files(d) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.fixture
def plain(tmp_path):
    logical = values((3, 5, 4, 6), "int8")
    path = tmp_path / "x.npy"
    np.save(path, logical)
    return path, logical


# --- convert ----------------------------------------------------------------------------------


def test_round_trip(capsys, plain, tmp_path):
    src, logical = plain
    rc, _, err = run(
        capsys,
        "convert",
        src,
        tmp_path / "y.npy",
        "--axes",
        "N C H W",
        "--from",
        "NCHW",
        "--to",
        "NCHW32",
    )
    assert rc == 0, err
    phys = np.load(tmp_path / "y.npy")
    np.testing.assert_array_equal(phys, expected_physical(logical, "NCHW32"), strict=True)
    side = json.loads(sidecar_path(tmp_path / "y.npy").read_text())
    assert side["axes"] == [["N", 3], ["C", 5], ["H", 4], ["W", 6]]
    assert side["layout"]["name"] == "NCHW32"
    rc, _, err = run(capsys, "convert", tmp_path / "y.npy", tmp_path / "z.npy")  # no flags
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "z.npy"), logical, strict=True)
    rc, _, err = run(capsys, "convert", tmp_path / "y.npy", tmp_path / "w.npy", "--to", "CHWN4")
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), expected_physical(logical, "CHWN4"))
    assert files(tmp_path) == [
        "w.npy",
        "w.npy.axes.json",
        "x.npy",
        "y.npy",
        "y.npy.axes.json",
        "z.npy",
        "z.npy.axes.json",
    ]


def test_blocked_input_without_sidecar_and_roles(capsys, tmp_path):
    logical = values((2, 6, 3, 3), "float32")
    path = tmp_path / "in.npy"
    np.save(path, np.ascontiguousarray(expected_physical(logical, "NCHW4")))
    rc, _, err = run(
        capsys,
        "convert",
        path,
        tmp_path / "out.npy",
        "--axes",
        "b C=6 y x",
        "--from",
        "NCHW4",
        "--to",
        "NHWC",
        "--roles",
        "N=b H=y W=x",
    )
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), logical.transpose(0, 2, 3, 1))
    assert ax.load(tmp_path / "out.npy").names == ("b", "C", "y", "x")


@pytest.mark.parametrize("to", ["NCHW4", "CHWN4", "NHWC", "NCHW"])
def test_files_larger_than_the_chunk_size(capsys, tmp_path, to):
    logical = values((5, 9, 7, 6), "float32")
    src = tmp_path / "big.npy"
    np.save(src, logical)
    chunks = cli.plan_chunks(ax.tensor(logical, "N C H W").axes, ax.Layout.parse(to), None, 4, 1000)
    assert len(chunks) >= 10  # 6 KB of output in chunks of at most 1000 bytes
    for c in chunks:
        lengths = [
            len(range(*c.get(n, slice(0, k)).indices(k)))
            for n, k in zip("NCHW", logical.shape, strict=True)
        ]
        assert np.prod(lengths) * 4 <= 1000
    rc, _, err = run(
        capsys,
        "convert",
        src,
        tmp_path / "o.npy",
        "--axes",
        "N C H W",
        "--to",
        to,
        "--chunk-size",
        "1000",
    )
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), expected_physical(logical, to))
    rc, _, err = run(
        capsys, "convert", tmp_path / "o.npy", tmp_path / "back.npy", "--chunk-size", "1K"
    )
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "back.npy"), logical)


def test_chunks_cover_whole_blocks_of_both_layouts():
    axes = ax.tensor(np.zeros((2, 70, 3, 3), "int8"), "N C H W").axes
    chunks = cli.plan_chunks(axes, ax.Layout.parse("CHWN4"), ax.Layout.parse("NCHW32"), 1, 64)
    starts = sorted({c["C"].start for c in chunks})
    assert all(s % 32 == 0 for s in starts) and starts[-1] == 64
    covered = np.zeros((2, 70, 3, 3), int)
    for c in chunks:
        covered[tuple(c.get(n, slice(None)) for n in "NCHW")] += 1
    np.testing.assert_array_equal(covered, 1)


BAD = [
    (["--axes", "N C H"], r"convert: --axes names 3 axes but the array has 4 dimensions"),
    (["--axes", "N C H W", "--to", "NCHWQ"], r"layout: unknown layout 'NCHWQ'"),
    (["--axes", "N C H W", "--to", "NCHW4", "--roles", "oops"], r"convert: bad role 'oops'"),
    (
        ["--axes", "N C H W", "--from", "NCHW4"],
        r"convert: a NCHW4 array has 5 dimensions but x.npy has 4",
    ),
    ([], r"convert: .*x.npy has no sidecar, so its axes are unknown .* Give them: --axes"),
    (["--axes", "N C H X", "--to", "NCHW4"], r"convert: the tensor has no 'W'"),
]


@pytest.mark.parametrize("args, match", BAD)
def test_bad_input_is_refused_and_leaves_nothing(capsys, plain, tmp_path, args, match):
    src, _ = plain
    rc, _, err = run(capsys, "convert", src, tmp_path / "out.npy", *args)
    assert rc == 1
    assert err.startswith("axesarray: error: ")
    assert __import__("re").search(match, err), err
    assert files(tmp_path) == ["x.npy"]


def test_bad_files(capsys, plain, tmp_path):
    src, logical = plain
    cases = []
    trunc = tmp_path / "t.npy"
    trunc.write_bytes(src.read_bytes()[:200])
    cases.append((trunc, r"convert: .*t.npy is truncated \(200 bytes, the header needs 488\)"))
    junk = tmp_path / "j.npy"
    junk.write_bytes(b"not an array at all")
    cases.append((junk, r"convert: .*j.npy is not a .npy file"))
    cases.append((tmp_path / "missing.npy", r"convert: no such file"))
    objects = tmp_path / "o.npy"
    np.save(objects, np.array([1, "a"], dtype=object), allow_pickle=True)
    cases.append((objects, r"convert: .*o.npy holds Python objects \(object\)"))
    cases.append((src, r"convert: the output path is the input path"))
    before = files(tmp_path)
    rc, _, err = run(capsys, "convert", src, tmp_path / "no" / "out.npy", "--axes", "N C H W")
    assert rc == 1 and "convert: the output directory does not exist" in err, err
    for path, match in cases:
        out = src if path == src else tmp_path / "out.npy"
        rc, _, err = run(capsys, "convert", path, out, "--axes", "N C H W", "--to", "NCHW4")
        assert rc == 1 and __import__("re").search(match, err), err
        assert files(tmp_path) == before
    np.testing.assert_array_equal(np.load(src), logical)


def test_sidecar_conflicts(capsys, plain, tmp_path):
    src, _ = plain
    y = tmp_path / "y.npy"
    assert run(capsys, "convert", src, y, "--axes", "N C H W", "--to", "NCHW4")[0] == 0
    rc, _, err = run(capsys, "convert", y, tmp_path / "z.npy", "--from", "NHWC")
    assert rc == 1 and "convert: --from differs from the input's sidecar" in err
    rc, _, err = run(capsys, "convert", y, tmp_path / "z.npy", "--axes", "A B C D")
    assert rc == 1 and "convert: --axes differs from the input's sidecar" in err
    sidecar_path(y).write_text("{broken")
    rc, _, err = run(capsys, "convert", y, tmp_path / "z.npy")
    assert rc == 1 and "convert: the sidecar" in err and "is not readable" in err
    assert not (tmp_path / "z.npy").exists()


def test_a_failure_mid_way_leaves_no_output(plain, tmp_path, monkeypatch):
    src, _ = plain
    import axesarray.layout_ops as lo

    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full")
        return original(*args, **kwargs)

    original = lo.repack
    monkeypatch.setattr(lo, "repack", failing)
    with pytest.raises(OSError, match="disk full"):
        cli.convert(src, tmp_path / "o.npy", "N C H W", None, "NCHW4", chunk_bytes=64)
    assert files(tmp_path) == ["x.npy"]


def test_bad_chunk_size(capsys, plain, tmp_path):
    src, _ = plain
    with pytest.raises(SystemExit) as exc:
        cli.main(["convert", str(src), str(tmp_path / "o.npy"), "--chunk-size", "-3"])
    assert exc.value.code == 2
    assert "the chunk size must be positive" in capsys.readouterr().err


def test_progress_bar(capsys):
    bar = cli.Progress(4 << 20, enabled=True, delay=0.0)
    bar.update(1 << 20)
    bar.close()
    err = capsys.readouterr().err
    assert "convert [#######" in err and " 25.0% " in err and err.endswith("\n")
    quiet = cli.Progress(10, enabled=False, delay=0.0)
    quiet.update(5)
    quiet.close()
    assert capsys.readouterr().err == ""


# --- info --------------------------------------------------------------------------------------


def test_info(capsys, plain, tmp_path):
    src, _ = plain
    rc, out, _ = run(capsys, "info", src)
    assert rc == 0 and "axes      unknown (no sidecar)" in out
    run(capsys, "convert", src, tmp_path / "y.npy", "--axes", "N C H W", "--to", "NCHW4")
    rc, out, _ = run(capsys, "info", tmp_path / "y.npy")
    assert rc == 0
    assert "physical  int8 (3, 2, 4, 6, 4)" in out
    assert "axes      N=3, C=5, H=4, W=6" in out
    assert "layout    NCHW4 (N=3, C//4=2, H=4, W=6, C%4=4)" in out
    assert "padding   37.5% of the elements" in out
    rc, _, err = run(capsys, "info", tmp_path / "nope.npy")
    assert rc == 1 and "info: no such file" in err


def test_the_entry_point_runs(plain):
    src, _ = plain
    proc = subprocess.run(
        [sys.executable, "-m", "axesarray.cli", "info", str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "physical  int8 (3, 5, 4, 6)" in proc.stdout


# --- save / load --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [None, "NHWC", "NCHW4", "CHWN4"])
def test_save_load(tmp_path, name):
    logical = values((2, 5, 3, 2), "float16")
    t = ax.tensor(logical, "N C H W")
    if name:
        t = t.to_layout(name)
    path = tmp_path / "t.npy"
    ax.save(path, t)
    back = ax.load(path)
    assert back.axes == t.axes and back.layout == t.layout
    np.testing.assert_array_equal(back.numpy(), logical, strict=True)
    on_disk = np.load(path)
    expected = expected_physical(logical, name) if name else logical
    np.testing.assert_array_equal(on_disk, expected)
    mapped = ax.load(path, mmap_mode="r")
    np.testing.assert_array_equal(mapped.numpy(), logical)
    assert not mapped._node.writeable


def test_save_views_and_r_tensors(tmp_path):
    logical = values((2, 9, 3, 2), "int8")
    t = ax.tensor(logical, "N C H W").to_layout("NCHW4")
    for k, value in enumerate([t.isel(C=slice(1, 6)), t + 1, t.rename(C="K")]):
        path = tmp_path / f"v{k}.npy"
        ax.save(path, value)
        np.testing.assert_array_equal(ax.load(path).numpy(), value.numpy())
        assert str(ax.load(path).layout) == "NCHW4"


def test_load_errors(tmp_path):
    path = tmp_path / "plain.npy"
    np.save(path, np.zeros((2, 3)))
    with pytest.raises(
        LayoutError,
        match=r"load: .*plain.npy has no sidecar plain.npy.axes.json "
        r"\(shape \(2, 3\)\)\. Pass its axes",
    ):
        ax.load(path)
    assert ax.load(path, axes="N C").axes.shape == (2, 3)
    ax.save(path, ax.tensor(np.zeros((2, 3)), "N C"))
    with pytest.raises(LayoutError, match=r"load: the axes given differ from the sidecar's"):
        ax.load(path, axes="A B")
    np.save(path, np.zeros((2, 3), "float32"))
    with pytest.raises(LayoutError, match=r"load: the array's dtype differs from the sidecar's"):
        ax.load(path)
    np.save(path, np.zeros((3, 2)))
    with pytest.raises(
        LayoutError,
        match=r"load: the array's shape differs from the sidecar's "
        r"\(\(3, 2\) vs N=2, C=3\)",
    ):
        ax.load(path)
    with pytest.raises(TypeError, match="save: expected a Tensor"):
        ax.save(path, np.zeros(3))
