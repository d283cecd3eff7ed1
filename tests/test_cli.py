"""The ``axesarray`` command (convert, info) and ``ax.save``/``ax.load``."""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import axesarray as ax
from axesarray import LayoutError
from axesarray.io import cli
from axesarray.io.npy import sidecar_path
from tests.test_layouts import STANDARD, expected_physical, values


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def files(d) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Chunks of a few bytes, below the CLI's floor, to cut small files into many."""
    monkeypatch.setattr(cli, "MIN_CHUNK", 1)


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
def test_files_larger_than_the_chunk_size(capsys, tmp_path, to, tiny_chunks):
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


@settings(max_examples=25)
@given(
    shape=st.tuples(*[st.integers(0, 5)] * 2, *[st.integers(1, 4)] * 2),
    src=st.sampled_from(STANDARD + ["NCHW3"]),
    dst=st.sampled_from(STANDARD + ["NCHW3"]),
    chunk=st.integers(1, 600),
    dtype=st.sampled_from(["int8", "float32"]),
)
def test_any_layout_to_any_layout_in_any_chunks(tmp_path_factory, shape, src, dst, chunk, dtype):
    """Written box by box: the file equals numpy's physical array, padding zero."""
    d = tmp_path_factory.mktemp("conv")
    logical = values(shape, dtype)
    np.save(d / "a.npy", np.ascontiguousarray(expected_physical(logical, src)))
    c = shape[1]
    convert = ["convert", d / "a.npy", d / "b.npy", "--axes", f"N C={c} H W", "--from", src]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli, "MIN_CHUNK", 1)  # chunks of a few bytes: many boxes per file
        assert cli.main([str(a) for a in [*convert, "--to", dst, "--chunk-size", chunk]]) == 0
    np.testing.assert_array_equal(
        np.load(d / "b.npy"), expected_physical(logical, dst), strict=True
    )
    assert cli.main([str(a) for a in ["convert", d / "b.npy", d / "c.npy"]]) == 0
    np.testing.assert_array_equal(np.load(d / "c.npy"), logical, strict=True)


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
    (["--axes", "N C H W", "--to", "NCHWQ"], r"convert: unknown layout 'NCHWQ'"),
    (
        ["--axes", "N C H W", "--to", "NCHW4", "--roles", "oops"],
        r"convert: bad role 'oops'\. Write them as --roles 'N=batch C=feat'\.",
    ),
    (
        ["--axes", "N C H W", "--from", "NCHW4"],
        r"convert: a NCHW4 array has 5 dimensions but x.npy has 4",
    ),
    ([], r"convert: .*x.npy has no sidecar, so its axes are unknown .* Give them: --axes"),
    (
        ["--axes", "N C H X", "--to", "NCHW4"],
        r"convert: --to NCHW4 places 'W', the axes are N C H X \(layout NCHW4\)\. "
        r"Map its letters to your axis names \(axes in N C H W order\): --roles 'W=X'\.",
    ),
    (
        ["--axes", "N C=3 H W"],
        r"convert: --axes gives C=3 but dimension 1 of x.npy has 5 \(--axes N C=3 H W; "
        r"shape \(3, 5, 4, 6\)\)\. Write C alone to take the length from the file",
    ),
    (
        ["--axes", "N C=x H W"],
        r"convert: --axes: the length of 'C' must be a non-negative integer \(got 'C=x'\)\. "
        r"Write C alone",
    ),
    (["--axes", "N C=-2 H W"], r"convert: --axes: the length of 'C' must be a non-negative"),
    (["--axes", "N N H W"], r"convert: axis name 'N' appears twice"),
    (["--axes", "N 1 H W"], r"convert: .*axis name must be a .*identifier"),
]


@pytest.mark.parametrize("args, match", BAD)
def test_bad_input_is_refused_and_leaves_nothing(capsys, plain, tmp_path, args, match):
    src, _ = plain
    rc, _, err = run(capsys, "convert", src, tmp_path / "out.npy", *args)
    assert rc == 1
    assert err.startswith("axesarray: error: convert: ") and err.count("\n") == 1, err
    assert re.search(match, err), err
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
        assert rc == 1 and re.search(match, err), err
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


def test_a_full_disk_mid_way_is_one_line_and_leaves_no_output(
    capsys, plain, tmp_path, monkeypatch, tiny_chunks
):
    """A file system that cannot reserve space (no fallocate) and fills up while writing."""
    from axesarray.io import npy as npyio

    src, _ = plain
    writes = []
    original = npyio.NpyWriter._write

    def write(self, data, offset):
        writes.append(offset)
        if len(writes) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(self, data, offset)

    def no_fallocate(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(npyio.NpyWriter, "_write", write)
    monkeypatch.setattr(os, "posix_fallocate", no_fallocate, raising=False)
    argv = ["convert", src, tmp_path / "o.npy", "--axes", "N C H W", "--to", "NCHW4"]
    rc, _, err = run(capsys, *argv, "--chunk-size", "100")
    assert rc == 1 and len(writes) == 3
    assert err == (
        f"axesarray: error: convert: cannot write {tmp_path / 'o.npy'} (No space left on "
        "device). Free space on the disk or write elsewhere.\n"
    )
    assert files(tmp_path) == ["x.npy"]


def test_ctrl_c_mid_way_leaves_no_output(capsys, plain, tmp_path, monkeypatch, tiny_chunks):
    import axesarray.layout_ops as lo

    src, _ = plain
    calls = []
    original = lo.repack

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(lo, "repack", interrupted)
    argv = ["convert", src, tmp_path / "o.npy", "--axes", "N C H W", "--to", "NCHW4"]
    rc, _, err = run(capsys, *argv, "--chunk-size", "100", "--progress")
    assert rc == 130  # the message starts a line of its own, after any progress bar
    assert err.split("\n")[-2:] == ["axesarray convert: interrupted; nothing written", ""]
    assert files(tmp_path) == ["x.npy"]


def _fsize_limited(limit: int):
    def start():
        resource.setrlimit(
            resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1])
        )

    return start


@pytest.mark.parametrize("command", ["convert", "save"])
def test_a_file_too_large_for_the_disk_is_one_line_and_leaves_no_output(tmp_path, command):
    """RLIMIT_FSIZE stands in for a full disk: writes past it fail (EFBIG). The output is
    refused before any data is written, since its whole size is reserved first."""
    src = tmp_path / "in.npy"
    np.save(src, values((4, 8, 64, 64), "float32"))  # 512 KiB
    if command == "convert":
        argv = ["-m", "axesarray", "convert", src, tmp_path / "out.npy", "--axes", "N C H W"]
        argv += ["--to", "NCHW4"]
    else:
        code = "import axesarray as ax, sys; ax.save(sys.argv[2], ax.load(sys.argv[1], 'N C H W'))"
        argv = ["-c", code, src, tmp_path / "out.npy"]
    proc = subprocess.run(
        [sys.executable, *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_fsize_limited(300_000),
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode != 0 and proc.returncode > 0, proc  # an exit, not a signal
    assert files(tmp_path) == ["in.npy"]
    line = proc.stderr.strip().splitlines()[-1]
    assert re.search(
        rf"{command}: cannot write .*out.npy \(File too large\)\. The file is larger than "
        r"this file system or process allows \(ulimit -f\)\.$",
        line,
    ), proc.stderr
    if command == "convert":
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("axesarray: error: ")


@pytest.mark.parametrize(
    "output, match",
    [
        (
            "y.npz",
            r"convert: the output is always a .npy file, so its name must end in .npy "
            r"\(got y.npz\)\. Name it y.npy\.",
        ),
        ("y", r"convert: the output is always a .npy file.* \(got y\)\. Name it y.npy\."),
        ("D", r"convert: the output is a directory \(.*D\)\. Give a file: .*D/out.npy\."),
        ("E.npy", r"convert: the output is a directory \(.*E.npy.axes.json\)"),
        ("no/y.npy", r"convert: the output directory does not exist \(.*no\)\. Create it"),
    ],
)
def test_outputs_are_refused_before_any_work(capsys, plain, tmp_path, monkeypatch, output, match):
    import axesarray.layout_ops as lo

    src, _ = plain
    (tmp_path / "D").mkdir()
    (tmp_path / "E.npy.axes.json").mkdir()
    calls = []
    monkeypatch.setattr(lo, "repack", lambda *a, **k: calls.append(1))
    before = files(tmp_path)
    rc, _, err = run(capsys, "convert", src, tmp_path / output, "--axes", "N C H W")
    assert rc == 1 and re.search(match, err) and err.count("\n") == 1, err
    assert calls == [] and files(tmp_path) == before and files(tmp_path / "D") == []


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002, 0o000])
def test_output_files_follow_the_umask(plain, tmp_path, umask):
    src, _ = plain
    old = os.umask(umask)
    try:
        argv = ["convert", src, tmp_path / "y.npy", "--axes", "N C H W", "--to", "NCHW4"]
        assert cli.main([str(a) for a in argv]) == 0
    finally:
        os.umask(old)
    for name in ["y.npy", "y.npy.axes.json"]:
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


def test_version_and_examples(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out == f"axesarray {ax.__version__}\n"
    for argv in (["--help"], ["convert", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        out = capsys.readouterr().out
        assert "examples:" in out and 'axesarray convert x.npy y.npy --axes "N C H W"' in out
        assert '--axes "N C=3 H W" --from NCHW4' in out


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


MEASURE = """
import json, sys, threading, time
from axesarray.io import cli

def status():
    with open("/proc/self/status") as f:
        rows = (line.split(":") for line in f)
        return {k: int(v.split()[0]) << 10 for k, v in rows if k in ("VmRSS", "VmHWM", "RssAnon")}

argv = sys.argv[1:]
assert cli.main(argv[:2] + ["warm.npy"] + argv[3:]) == 0  # compile and cache every kernel
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # VmHWM := VmRSS: the kernel tracks the peak from here on
base = status()
peak = dict(base)
done = False

def sample():  # RssAnon has no peak of its own: sample it
    while not done:
        peak["RssAnon"] = max(peak["RssAnon"], status()["RssAnon"])
        time.sleep(0.002)

thread = threading.Thread(target=sample)
thread.start()
rc = cli.main(argv)
done = True
thread.join()
end = status()
print(json.dumps({"rc": rc, "rss": end["VmHWM"] - base["VmRSS"],
                  "anon": peak["RssAnon"] - base["RssAnon"]}))
"""


@pytest.mark.parametrize("to", ["NHWC", "NCHW4"])
def test_memory_stays_within_a_few_chunks(tmp_path, to):
    """A 96 MiB conversion in 2 MiB chunks: the anonymous memory grows by a chunk, the
    peak RSS (input pages included, the output is never mapped) by a few, not by twice
    the file size as when the output was mapped and the input kept."""
    chunk = 2 << 20
    big = np.lib.format.open_memmap(tmp_path / "big.npy", "w+", "float32", (24, 64, 128, 128))
    big[...] = 1.5
    del big
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, "convert", "big.npy", "out.npy", "--axes", "N C H W"]
        + ["--to", to, "--chunk-size", str(chunk)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    grown = json.loads(proc.stdout)
    assert grown["rc"] == 0
    slack = 8 << 20  # allocator arenas, numpy temporaries of the chunk plan, the progress bar
    assert grown["anon"] <= 2 * chunk + slack, grown
    # Plus the input pages read since they were last released.
    assert grown["rss"] <= 2 * chunk + cli.RELEASE_EVERY + slack, grown
    out = ax.load(tmp_path / "out.npy", mmap_mode="r")
    assert out.axes.shape == (24, 64, 128, 128) and str(out.layout) == to


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


def test_a_blocked_file_without_its_sidecar(capsys, tmp_path):
    """info suggests the form that keeps the padding out; leaving the length out is refused
    (C=4 says there is no padding)."""
    logical = values((2, 3, 2, 2), "int8")
    path = tmp_path / "b.npy"
    np.save(path, np.ascontiguousarray(expected_physical(logical, "NCHW4")))
    rc, out, _ = run(capsys, "info", path)
    assert rc == 0 and "axes      unknown (no sidecar)" in out
    suggested = "--axes 'N C=<channels> H W' --from NCHW4 (C=<channels>, at most 4, keeps"
    assert suggested in out, out
    rc, _, err = run(
        capsys, "convert", path, tmp_path / "ok.npy", "--axes", "N C=3 H W", "--from", "NCHW4"
    )
    assert rc == 0 and err == ""
    np.testing.assert_array_equal(np.load(tmp_path / "ok.npy"), logical, strict=True)
    rc, _, err = run(
        capsys, "convert", path, tmp_path / "all.npy", "--axes", "N C H W", "--from", "NCHW4"
    )
    assert rc == 1  # the padding would become channel 4: refused, not warned about
    assert err == (
        "axesarray: error: convert: --axes gives no length for the blocked axis 'C', and its 4 "
        "entries in the file may end in padding (--axes N C H W; NCHW4 blocks of 4). Give its "
        "real length (C=4 if there is no padding): --axes 'N C=<1..4> H W'.\n"
    )
    assert files(tmp_path) == ["b.npy", "ok.npy", "ok.npy.axes.json"]
    rc, _, err = run(
        capsys, "convert", path, tmp_path / "all.npy", "--axes", "N C=4 H W", "--from", "NCHW4"
    )
    assert rc == 0 and err == ""
    assert np.load(tmp_path / "all.npy").shape == (2, 4, 2, 2)
    np.save(tmp_path / "three.npy", np.zeros((2, 3, 4), "int8"))
    rc, out, _ = run(capsys, "info", tmp_path / "three.npy")
    assert "convert   with --axes 'd0 d1 d2'\n" in out + "\n"


def test_errors_name_the_command_and_fit_one_line(capsys, tmp_path, monkeypatch):
    """An error from below (numpy's, the OS's) still names the command, on one line."""
    import axesarray.layout_ops as lo

    np.save(tmp_path / "x.npy", np.zeros((2, 2)))

    def fail(*args, **kwargs):
        raise MemoryError("Unable to allocate\n2 GiB")

    monkeypatch.setattr(lo, "repack", fail)
    rc, _, err = run(capsys, "convert", tmp_path / "x.npy", tmp_path / "y.npy", "--axes", "A B")
    assert rc == 1 and err == "axesarray: error: convert: Unable to allocate 2 GiB\n"
    assert files(tmp_path) == ["x.npy"]


@pytest.mark.parametrize("module", ["axesarray", "axesarray.io.cli"])
def test_the_entry_point_runs(plain, module):
    src, _ = plain
    proc = subprocess.run(
        [sys.executable, "-m", module, "info", str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "physical  int8 (3, 5, 4, 6)" in proc.stdout
    version = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=120
    )
    assert version.returncode == 0 and version.stdout == f"axesarray {ax.__version__}\n"


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


HOSTILE_SIDECARS = [
    ("[1, 2]", r"load: the sidecar .* is not readable \(it holds a list, not an object\)"),
    ("null", r"load: the sidecar .* is not readable \(it holds null, not an object\)"),
    ("3", r"load: the sidecar .* is not readable \(it holds a number, not an object\)"),
    ('"text"', r"load: the sidecar .* is not readable \(it holds a string, not an object\)"),
    ("[" * 100_000 + "]" * 100_000, r"load: the sidecar .* is not readable \(nested too deeply"),
    ("{broken", r"load: the sidecar .* is not readable \(Expecting property name"),
    ("{}", r"load: the sidecar .* is not readable \(format is None, not 'axesarray'\)"),
]


def _sidecar(axes, layout=None, dtype="<f8", **extra) -> str:
    return json.dumps(
        {"format": "axesarray", "version": 1, "axes": axes, "layout": layout, "dtype": dtype}
        | extra
    )


# The document of each case, as JSON text: valid JSON, hostile or inconsistent values.
HOSTILE_FIELDS = [
    (_sidecar([["N", 2], ["C", 3]], version=2), r"version 2 is not one this axesarray reads \(1\)"),
    (_sidecar([["N", 2], ["C", 3]], version="1"), r"version '1' is not one this axesarray reads"),
    (_sidecar("N C"), r"'axes' must be a list of \[name, length\] pairs \(got 'N C'\)"),
    (_sidecar({"N": 2}), r"'axes' must be a list of \[name, length\] pairs"),
    (_sidecar([["N", 2, 5], ["C", 3]]), r"'axes' must be a list of \[name, length\] pairs"),
    (_sidecar([["N", 2], ["C", 3.7]]),
     r"the length of axis 'C' must be a non-negative integer \(got 3.7\)"),
    (_sidecar([["N", 2], ["C", 3.0]]),
     r"the length of axis 'C' must be a non-negative integer \(got 3.0\)"),
    (_sidecar([["N", 2], ["C", True]]),
     r"the length of axis 'C' must be a non-negative integer \(got True\)"),
    ('{"format": "axesarray", "version": 1, "axes": [["N", 2], ["C", Infinity]], "dtype": "<f8"}',
     r"the length of axis 'C' must be a non-negative integer \(got inf\)"),
    ('{"format": "axesarray", "version": 1, "axes": [["N", 2], ["C", NaN]], "dtype": "<f8"}',
     r"the length of axis 'C' must be a non-negative integer \(got nan\)"),
    (_sidecar([["N", 2], ["C", -3]]), r"the length of axis 'C' must be a non-negative integer"),
    (_sidecar([["N", 2], [3, 3]]), r"an axis name must be a Python identifier \(got 3\)"),
    (_sidecar([["N", 2], ["C", 3]], dtype=7), r"'dtype' must be a numpy dtype string \(got 7\)"),
    (_sidecar([["N", 2], ["C", 3]], dtype="nonsense"), r"'dtype' must be a numpy dtype string"),
    (_sidecar([["N", 2], ["C", 3]], layout="NCHW4"), r"'layout' must be an object or null"),
    (_sidecar([["N", 2], ["C", 3]], layout={"order": "N C"}), r"'layout' .*order"),
    (_sidecar([["N", 2], ["C", 3]], layout={"order": ["N", "C"], "blocks": [["C", 2.5]]}),
     r"block size of 'C' must be an integer >= 2"),
    (_sidecar([["N", 2], ["C", 3]], layout={"order": ["N", "C", "H"], "blocks": []}),
     r"the tensor has no 'H'"),
]


@pytest.mark.parametrize("text, match", HOSTILE_SIDECARS + HOSTILE_FIELDS)
def test_hostile_sidecars_are_load_errors(tmp_path, text, match):
    """Valid JSON of the wrong shape, deep nesting, non-finite or fractional lengths: each
    is one ``load:`` error (and ``info:``/``convert:`` from the CLI), never a crash."""
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((2, 3)))
    sidecar_path(path).write_text(text)
    with pytest.raises(LayoutError, match=match) as err:
        ax.load(path)
    assert str(err.value).startswith("load: the sidecar ") and "\n" not in str(err.value)
    assert str(err.value).endswith("Delete it and pass the axes explicitly.")
    with pytest.raises(LayoutError, match=match.replace("load:", "info:")):
        cli.info(path)


def test_a_npy_with_a_negative_dimension_is_a_load_error(tmp_path):
    path = tmp_path / "neg.npy"
    np.save(path, np.zeros((2, 3), "int8"))
    raw = path.read_bytes().replace(b"(2, 3)", b"(2,-3)")
    path.write_bytes(raw)
    with pytest.raises(LayoutError, match=r"load: .*neg.npy is not a valid .npy file \(shape "
                       r"\(2, -3\) has a negative dimension\)\. Write it with np.save\.$"):
        ax.load(path, axes="A B")
    with pytest.raises(LayoutError, match=r"info: .*neg.npy is not a valid .npy file"):
        cli.info(path)


def test_axes_specs_that_lose_order_or_lengths_are_refused(tmp_path):
    """A set has no order (its names would land on dims at random): refused. A dict's
    values are lengths: checked against the data, as Axis objects are."""
    path = tmp_path / "p.npy"
    np.save(path, np.zeros((2, 3)))
    for call in (lambda a: ax.load(path, axes=a), lambda a: ax.tensor(np.zeros((2, 3)), a)):
        assert call(["N", "C"]).names == ("N", "C")
        with pytest.raises(TypeError, match=r": axes given as a set have no order"):
            call({"N", "C"})
        with pytest.raises(TypeError, match=r": axes given as a set have no order"):
            call(frozenset({"N", "C"}))
        assert call({"N": 2, "C": 3}).axes == ax.Axes([ax.Axis("N", 2), ax.Axis("C", 3)])
        with pytest.raises(ax.AxesError, match=r": axis 'C' has length 4 but the .* has 3"):
            call({"N": 2, "C": 4})
        with pytest.raises(ax.AxesError, match=r": the length of axis 'C' must be a non-negative"):
            call({"N": 2, "C": 3.7})
    ax.save(path, ax.tensor(np.zeros((2, 3)), "N C"))  # with a sidecar: the same checks
    with pytest.raises(TypeError, match=r"^load: axes given as a set have no order"):
        ax.load(path, axes={"N", "C"})
    with pytest.raises(LayoutError, match=r"^load: the axes given differ from the sidecar's"):
        ax.load(path, axes={"N": 2, "C": 4})
    assert ax.load(path, axes={"N": 2, "C": 3}).names == ("N", "C")


def test_unreadable_npy_input_is_one_formatted_line(capsys, plain, tmp_path, monkeypatch):
    """As for a Zarr input: no raw ``[Errno ...]`` text (root reads anything, so the
    refusal is simulated where the file is opened)."""
    from axesarray.io import npy as npyio

    src, _ = plain
    real_open = open

    def refusing(path, *args, **kwargs):
        if str(path) == str(src):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(npyio, "open", refusing, raising=False)
    for argv in (["convert", src, tmp_path / "o.npy", "--axes", "N C H W"], ["info", src]):
        rc, _, err = run(capsys, *argv)
        assert rc == 1 and err == (
            f"axesarray: error: {argv[0]}: cannot read {src} (Permission denied). "
            "Check the permissions of the file.\n"
        ), err
    assert files(tmp_path) == ["x.npy"]


def test_info_into_a_closed_pipe_exits_quietly(plain):
    """``axesarray info FILE | head -1``: the reader has gone; no traceback, no error
    line, and the status of a process ended by SIGPIPE (as cat's)."""
    src, _ = plain
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first write
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "axesarray", "info", str(src)],
            stdout=w, stderr=subprocess.PIPE, text=True, timeout=120,
        )
    finally:
        os.close(w)
    assert proc.stderr == "" and proc.returncode in (-13, 141), proc


def test_the_chunk_size_has_a_floor(capsys, plain, tmp_path):
    """--chunk-size 1 would cut a file into one-element chunks (minutes for a few MB)."""
    src, _ = plain
    for size in ("1", "100", "63K"):
        with pytest.raises(SystemExit) as exc:
            cli.main(["convert", str(src), str(tmp_path / "o.npy"), "--chunk-size", size])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"the chunk size must be at least 64K, got {size!r} (e.g. 64M)" in err, err
    rc, _, err = run(capsys, "convert", src, tmp_path / "o.npy", "--axes", "N C H W",
                     "--chunk-size", "64K")
    assert rc == 0, err


# --- every hint, followed literally, does what the user meant -----------------------------------

LOGICAL = values((2, 3, 4, 5), "int8")  # (batch, channels, y, x): C=3 pads in blocks of 4


def _hint(err: str) -> str:
    """The hint of a one-line error: the text after the fact and its values."""
    line = err.strip().splitlines()[-1]
    assert line.startswith("axesarray: error: "), err
    body = line.split(": error: ", 1)[1]
    start = body.find(" (")
    if start < 0:
        return body.partition(". ")[2]
    depth = 0
    for k in range(start + 1, len(body)):  # the values' closing parenthesis
        depth += {"(": 1, ")": -1}.get(body[k], 0)
        if depth == 0:
            return body[k + 1 :].lstrip(". ")
    raise AssertionError(err)


def _set(argv: list, flag: str, value: str | None) -> list:
    out = list(argv)
    if flag in out:
        k = out.index(flag)
        del out[k : k + 2]
    return out if value is None else [*out, flag, value]


def _follow(argv: list, hint: str, lengths: dict) -> list:
    """``argv`` with ``hint`` applied literally: a flag and value it gives replace the
    flag's; a placeholder ``<1..n>`` (a length the tool cannot know) becomes the length
    the user meant (``lengths``); "Leave --x out" removes it; "Name it"/"Give a file"
    replace the output; "Write C alone" drops a length. An unknown hint fails the test."""
    def fill(text):
        return re.sub(r"(\w+)=<[^>]*>", lambda m: f"{m[1]}={lengths[m[1]]}", text)

    if m := re.match(r"Leave (--\w+) out", hint):
        return _set(argv, m[1], None)
    flags = re.findall(r"(--axes|--roles|--from|--to) '([^']*)'", hint)
    flags += [(f, v) for f, v in re.findall(r"(--from|--to) (\w+)\b", hint) if f not in dict(flags)]
    if flags:
        for flag, value in flags:
            argv = _set(argv, flag, fill(value))
        return argv
    if m := re.match(r"(?:Name it|Give a file:) (\S+?)\.$", hint):
        return [argv[0], argv[1], str(Path(argv[2]).parent / Path(m[1]).name), *argv[3:]]
    if m := re.match(r"Write (\w+) alone", hint):
        k = argv.index("--axes") + 1
        return [*argv[:k], re.sub(rf"\b{m[1]}=\S+", m[1], argv[k]), *argv[k + 1 :]]
    raise AssertionError(f"a hint the test cannot follow: {hint!r}")


def _physical(name: str | None, logical=LOGICAL) -> np.ndarray:
    return logical if name is None else expected_physical(logical, name)


# (file on disk: its layout or None, its sidecar's axes or None), the argv (after
# "convert IN OUT") with a mistake, the output meant (physical layout or None, names).
HINTED = [
    ((None, None), ["--axes", "b f y x", "--to", "CHWN4"], ("CHWN4", "b f y x")),
    ((None, None), ["--axes", "b f y x", "--to", "NHWC"], ("NHWC", "b f y x")),
    ((None, None), ["--axes", "b f y x", "--to", "NCHW32"], ("NCHW32", "b f y x")),
    ((None, None), ["--axes", "N C y x", "--to", "NHWC"], ("NHWC", "N C y x")),
    ((None, None), ["--axes", "b f y x", "--to", "NHWC", "--roles", "N=b"], ("NHWC", "b f y x")),
    ((None, None), ["--axes", "b f y x", "--to", "C H W N"], ("C H W N", "b f y x")),
    ((None, None), ["--to", "NCHW4"], ("NCHW4", "N C H W")),
    ((None, None), ["--axes", "N C=4 H W", "--to", "NHWC"], ("NHWC", "N C H W")),
    ((None, "N C H W"), ["--axes", "a b c d", "--to", "NHWC"], ("NHWC", "N C H W")),
    (("NCHW4", "N C H W"), ["--from", "NHWC"], (None, "N C H W")),
    (("NCHW4", None), ["--axes", "N C H W", "--from", "NCHW4"], (None, "N C H W")),
    (("NCHW4", None), ["--axes", "b f y x", "--from", "NCHW4", "--to", "NHWC"],
     ("NHWC", "b f y x")),
    (("CHWN4", None), ["--axes", "N C H W", "--from", "CHWN4", "--to", "NCHW32"],
     ("NCHW32", "N C H W")),
    (("NCHW4", None), ["--to", "NHWC"], ("NHWC", "N C H W")),
    ((None, None), ["--axes", "N C=x H W", "--to", "NHWC"], ("NHWC", "N C H W")),
    ((None, None), ["--axes", "N C H", "--to", "NHWC"], ("NHWC", "N C H W")),
    ((None, None), ["--axes", "N C H W", "--from", "NCHW4", "--to", "NHWC"], ("NHWC", "N C H W")),
]


@pytest.mark.parametrize("stored, argv, meant", HINTED)
def test_every_hint_followed_literally_does_what_the_user_meant(
    capsys, tmp_path, stored, argv, meant
):
    """Each refused command prints a hint; the command the hint gives (placeholders filled
    with the length the user knows) succeeds and writes the output the user meant,
    checked against numpy; hints may chain (roles first, then a length)."""
    layout, side_axes = stored
    src = tmp_path / "in.npy"
    if side_axes is None:
        np.save(src, np.ascontiguousarray(_physical(layout)))
    else:
        t = ax.tensor(LOGICAL, side_axes)
        ax.save(src, t.to_layout(layout) if layout else t)
    out_layout, names = meant
    lengths = dict(zip(names.split(), LOGICAL.shape, strict=True))
    cmd = ["convert", str(src), str(tmp_path / "out.npy"), *argv]
    hints = []
    for _ in range(4):
        rc, _, err = run(capsys, *cmd)
        if rc == 0:
            break
        assert rc == 1 and err.count("\n") == 1, err
        hints.append(_hint(err))
        cmd = _follow(cmd, hints[-1], lengths)
    assert rc == 0 and hints, (hints, err)
    assert not (tmp_path / "out.npy").exists() or rc == 0
    back = ax.load(tmp_path / cmd[2])
    assert back.names == tuple(names.split()), hints
    np.testing.assert_array_equal(back.numpy(), LOGICAL, strict=True)
    on_disk = np.load(tmp_path / cmd[2])
    if out_layout == "C H W N":
        np.testing.assert_array_equal(on_disk, LOGICAL.transpose(1, 2, 3, 0))
    else:
        np.testing.assert_array_equal(on_disk, _physical(out_layout), strict=True), hints


OUTPUT_HINTS = [
    ("out.npz", "out.npy"),
    ("D", "out.npy"),
    ("in.npy", "in_out.npy"),  # the input itself
]


@pytest.mark.parametrize("output, meant", OUTPUT_HINTS)
def test_output_hints_followed_literally(capsys, tmp_path, output, meant):
    src = tmp_path / "in.npy"
    np.save(src, LOGICAL)
    (tmp_path / "D").mkdir()
    cmd = ["convert", str(src), str(tmp_path / output), "--axes", "N C H W", "--to", "NHWC"]
    rc, _, err = run(capsys, *cmd)
    assert rc == 1
    cmd = _follow(cmd, _hint(err), {})
    rc, _, err = run(capsys, *cmd)
    assert rc == 0, err
    assert Path(cmd[2]).name == meant
    np.testing.assert_array_equal(np.load(cmd[2]), LOGICAL.transpose(0, 2, 3, 1))


def test_zarr_hints_followed_literally(capsys, tmp_path):
    ax.to_zarr(ax.tensor(LOGICAL, "b f y x"), tmp_path / "in.zarr")
    for argv in (
        [tmp_path / "out.npy", "--to", "NHWC", "--roles", "N=b C=f H=y W=x"],
        [tmp_path / "out.zarr", "--from", "NCHW", "--to", "NHWC", "--roles", "N=b C=f H=y W=x"],
        [tmp_path / "out.zarr", "--to", "NHWC"],
    ):
        cmd = ["convert", str(tmp_path / "in.zarr"), *map(str, argv)]
        for _ in range(3):
            rc, _, err = run(capsys, *cmd)
            if rc == 0:
                break
            cmd = _follow(cmd, _hint(err), {})
        assert rc == 0, err
        out = ax.open_zarr(cmd[2])
        assert out.names == ("b", "f", "y", "x") and str(out.layout) == "NHWC"
        np.testing.assert_array_equal(out.numpy(), LOGICAL)
        shutil.rmtree(cmd[2])
