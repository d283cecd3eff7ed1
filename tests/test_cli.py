"""The ``axesarray`` command (convert, info) and ``ax.save``/``ax.load``."""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import subprocess
import sys

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
        r"Map its letters to your axis names: --roles 'W=X'\.",
    ),
    (
        ["--axes", "N C=3 H W"],
        r"convert: --axes gives C=3 but dimension 1 of x.npy has 5 \(--axes N C=3 H W; "
        r"shape \(3, 5, 4, 6\)\)\. Write C alone to take the length from the file",
    ),
    (
        ["--axes", "N C=x H W"],
        r"convert: --axes: the length of 'C' must be a non-negative integer \(got 'C=x'\)\. "
        r"Write C=3, or C alone",
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


def test_a_full_disk_mid_way_is_one_line_and_leaves_no_output(capsys, plain, tmp_path, monkeypatch):
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


def test_ctrl_c_mid_way_leaves_no_output(capsys, plain, tmp_path, monkeypatch):
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
    """info suggests the form that keeps the padding out; leaving the length out warns."""
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
    assert rc == 0
    assert err == (
        "axesarray: warning: convert: --axes gives no length for the blocked axis 'C', so all 4 "
        "entries of its blocks are taken as data, padding included (C=4). If the file has "
        "padding, give the real length: --axes 'N C=<1..4> H W'.\n"
    )
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
