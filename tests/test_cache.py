"""The kernel cache (kernels/cache.py): where it lives and how private it is, hits in this
process and in a new one, keys, damaged files, unusable and read-only directories.

Every test points AXESARRAY_CACHE_DIR at a temporary directory. Tests about other owners
run for real when the suite runs as root (chown to nobody, or dropping to nobody's uid for
a while) and otherwise fake only our own uid.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import warnings
from importlib import metadata
from pathlib import Path

import llvmlite
import numba
import numpy as np
import pytest
from conftest import assert_close

from axesarray.kernels import cache as kcache
from axesarray.kernels import cache_key

ROOT = os.geteuid() == 0
NOBODY = 65534
UNUSABLE_HINT = (
    "Kernels are compiled in memory for this process; point AXESARRAY_CACHE_DIR at a "
    "directory only you can write (see docs/kernel-cache.md)."
)


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    """A fresh cache directory (not yet created), with the module's per-process state reset."""
    path = tmp_path / "cache"
    monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(path))
    monkeypatch.setattr(kcache, "_disks", {})
    monkeypatch.setattr(kcache, "_warned", set())
    kcache.clear_memory()
    yield path
    kcache.clear_memory()


def _source(tag: str, body: str = "out[i] = x[i] * 2.0") -> str:
    """A small CPU kernel module; ``tag`` makes its key unique."""
    return textwrap.dedent(
        f"""\
        # test kernel {tag}
        from numba import njit

        @njit
        def kernel(x, out):
            for i in range(x.size):
                {body}
        """
    )


def _run(source: str) -> None:
    """Get the kernel (a new module unless in memory), call it, check the values."""
    x = np.arange(7.0)
    out = np.zeros(7)
    kcache.get_kernel(source)(x, out)
    assert_close(out, x * 2.0)


def _reload(source: str) -> None:
    """As a new process would: forget the in-memory kernel, load it again."""
    kcache.clear_memory()
    _run(source)


def _delta(before: dict) -> dict:
    return {k: kcache.STATS[k] - before[k] for k in before}


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _files(d: Path) -> list[str]:
    """Everything under ``d``, relative, sorted."""
    return sorted(str(p.relative_to(d)) for p in d.rglob("*")) if d.exists() else []


def _warn_text(fact: str, values: str, hint: str = UNUSABLE_HINT) -> str:
    return f"kernel cache: {fact} ({values}). {hint}"


@contextlib.contextmanager
def _one_warning(text: str):
    """Exactly one warning, with exactly this text, while the block runs."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield
    ours = [str(w.message) for w in seen if str(w.message).startswith("kernel cache:")]
    assert ours == [text]


@contextlib.contextmanager
def _no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# --- where the cache lives, created private --------------------------------------------------


def test_missing_directories_are_created_private_whatever_the_umask(tmp_path, cdir, monkeypatch):
    d = tmp_path / "a" / "b" / "kernels"
    monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(d))
    old = os.umask(0o002)
    try:
        _run(_source("private"))
    finally:
        os.umask(old)
    for made in (tmp_path / "a", tmp_path / "a" / "b", d, d / "__pycache__"):
        assert _mode(made) == 0o700, made
    (py,) = d.glob("k_*.py")
    assert _mode(py) == 0o600
    assert list((d / "__pycache__").glob(py.stem + ".*.nbi"))
    assert not list(d.rglob("*.pyc"))  # executed from the source text, never imported


def test_default_location_is_the_user_cache_dir(tmp_path, cdir, monkeypatch):
    import platformdirs

    monkeypatch.delenv("AXESARRAY_CACHE_DIR")
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda name: str(tmp_path / "uc" / name))
    assert kcache.cache_dir() == tmp_path / "uc" / "axesarray" / "kernels"
    _run(_source("default location"))
    for made in ("uc", "uc/axesarray", "uc/axesarray/kernels"):
        assert _mode(tmp_path / made) == 0o700
    assert list((tmp_path / "uc/axesarray/kernels/__pycache__").glob("*.nbi"))


def test_a_symlink_to_a_private_directory_is_followed(tmp_path, cdir, monkeypatch):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(tmp_path / "link"))
    with _no_warning():
        _run(_source("symlink"))
    assert list((real / "__pycache__").glob("*.nbi"))


# --- hits -------------------------------------------------------------------------------------


def test_a_reloaded_kernel_comes_from_disk(cdir):
    src = _source("reload")
    assert kcache.state(src) == "to compile"
    before = dict(kcache.STATS)
    _run(src)
    assert kcache.state(src) == "in memory"
    kcache.clear_memory()
    assert kcache.state(src) == "on disk"
    _run(src)
    assert _delta(before) == {"compiled": 1, "disk_hits": 1, "memory_hits": 0, "recovered": 0}


def test_a_copy_of_the_cache_directory_still_hits(tmp_path, cdir, monkeypatch):
    """numba's index stamps our key, not the file's mtime: a copy (new mtimes, new path) hits."""
    src = _source("copy")
    _run(src)
    copy = tmp_path / "copy"
    shutil.copytree(cdir, copy, copy_function=shutil.copyfile)
    for f in copy.rglob("*"):
        os.utime(f, (1e9, 1e9))
    monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(copy))
    before = dict(kcache.STATS)
    _reload(src)
    assert _delta(before) == {"compiled": 0, "disk_hits": 1, "memory_hits": 0, "recovered": 0}


@pytest.mark.parametrize(
    "target, attribute",
    [
        (numba, "__version__"),
        (llvmlite, "__version__"),
        (np, "__version__"),
        (sys.implementation, "cache_tag"),
    ],
)
def test_the_key_changes_with_what_machine_code_depends_on(monkeypatch, target, attribute):
    src = _source("key")
    key = kcache._key(src)
    monkeypatch.setattr(target, attribute, "something else")
    assert kcache._key(src) != key


def test_the_key_changes_with_the_cpu(monkeypatch):
    src = _source("key")
    key = kcache._key(src)
    monkeypatch.setattr(cache_key, "_cpu", ["another-cpu"])
    assert kcache._key(src) != key


def test_on_disk_agrees_with_the_cache_and_knows_its_limits(cdir, monkeypatch):
    """``cache_key.on_disk`` (the compile thread's question, asked without numba) says yes
    exactly for a kernel the cache holds; where no key can be made (no package metadata)
    it says no, and the kernel is still found and run."""
    src, other = _source("on disk"), _source("not on disk")
    assert not cache_key.on_disk(src)  # an empty cache directory
    _run(src)
    assert cache_key.on_disk(src) and kcache.state(src) == "in memory"
    assert not cache_key.on_disk(other) and kcache.state(other) == "to compile"
    kcache.clear_memory()
    assert kcache.state(src) == "on disk"

    def no_metadata(name):
        raise metadata.PackageNotFoundError(name)

    with monkeypatch.context() as m:
        m.setattr(cache_key, "_installed", {})
        m.setattr(cache_key.metadata, "version", no_metadata)
        m.delitem(sys.modules, "numba")  # as before numba's import: metadata asked
        assert not cache_key.on_disk(src)
    before = dict(kcache.STATS)
    _run(src)  # found on disk as before
    assert kcache.STATS["disk_hits"] == before["disk_hits"] + 1


def test_an_upgraded_numba_misses_cleanly_and_the_old_entry_stays(cdir, monkeypatch):
    src = _source("upgrade")
    _run(src)
    before = dict(kcache.STATS)
    with monkeypatch.context() as m:
        m.setattr(numba, "__version__", "99.0.0")
        _reload(src)
        assert _delta(before) == {"compiled": 1, "disk_hits": 0, "memory_hits": 0, "recovered": 0}
    assert len(list(cdir.glob("k_*.py"))) == 2  # one entry per environment
    _reload(src)  # back on the first version: its entry was not overwritten
    assert _delta(before)["disk_hits"] == 1


_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    import numpy as np, axesarray as ax
    from axesarray.kernels import cache
    from conftest import assert_close
    x = np.linspace(-3, 3, 101).astype(np.float32)
    r = ax.sigmoid(ax.tensor(x, "N") * 2 + 1).numpy()
    assert_close(r, (1 / (1 + np.exp(-(x.astype(np.float64) * 2 + 1)))).astype(np.float32))
    print(cache.STATS["compiled"], cache.STATS["disk_hits"], cache.STATS["recovered"])
    """
).format(tests=str(Path(__file__).parent))


def _run_script(cache_dir) -> tuple[int, int, int]:
    """(compiled, disk hits, recovered) of a new process evaluating a fused expression."""
    env = dict(os.environ, AXESARRAY_CACHE_DIR=str(cache_dir))
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    compiled, disk, recovered = map(int, out.stdout.split())
    return compiled, disk, recovered


@pytest.mark.slow
def test_second_process_compiles_nothing(tmp_path):
    assert _run_script(tmp_path)[0] == 1
    assert _run_script(tmp_path) == (0, 1, 0)


@pytest.mark.slow
def test_a_damaged_cache_recovers_in_a_new_process(tmp_path):
    _run_script(tmp_path)
    for f in (tmp_path / "__pycache__").iterdir():
        f.write_bytes(f.read_bytes()[:7])  # truncate numba's index and data files
    for f in tmp_path.glob("k_*.py"):
        f.write_text("this is not python (")
    compiled, disk, recovered = _run_script(tmp_path)
    assert (compiled, disk) == (1, 0) and recovered == 2  # the index, and the .py copy
    assert _run_script(tmp_path) == (0, 1, 0)  # repaired


# --- damaged files --------------------------------------------------------------------------


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:7])


def _garbage(path: Path) -> None:
    path.write_bytes(np.random.default_rng(1).bytes(path.stat().st_size))


def _flip_a_bit(path: Path) -> None:
    """One flipped bit in the middle of the machine code: without a checksum LLVM's object
    loader may abort the process (measured), or the damaged code runs."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "pattern, damage",
    [
        ("*.nbi", _truncate),
        ("*.nbi", _garbage),
        ("*.nbc", _truncate),
        ("*.nbc", _garbage),
        ("*.nbc", _flip_a_bit),
    ],
)
def test_a_damaged_file_is_recompiled_and_replaced(cdir, pattern, damage):
    src = _source(f"damage {pattern} {damage.__name__}")
    _run(src)
    (victim,) = (cdir / "__pycache__").glob(pattern)
    damage(victim)
    before = dict(kcache.STATS)
    _reload(src)
    assert _delta(before) == {"compiled": 1, "disk_hits": 0, "memory_hits": 0, "recovered": 1}
    _reload(src)
    assert _delta(before)["disk_hits"] == 1  # the replacement loads


def test_a_damaged_source_copy_is_rewritten(cdir):
    src = _source("py copy")
    _run(src)
    (py,) = cdir.glob("k_*.py")
    py.write_text("this is not python (")
    before = dict(kcache.STATS)
    _reload(src)  # executed from the source text: the machine code still loads
    assert _delta(before) == {"compiled": 0, "disk_hits": 1, "memory_hits": 0, "recovered": 1}
    assert py.read_text() == src


def test_a_missing_data_file_is_a_plain_miss(cdir):
    src = _source("missing nbc")
    _run(src)
    for f in (cdir / "__pycache__").glob("*.nbc"):
        f.unlink()
    before = dict(kcache.STATS)
    _reload(src)
    assert _delta(before) == {"compiled": 1, "disk_hits": 0, "memory_hits": 0, "recovered": 0}


@pytest.mark.parametrize(
    "body, call, exc_type, text",
    [
        # too few arguments: numba's dispatcher raises TypeError
        ("out[i] = x[i] * 2.0", lambda k: k(np.arange(3.0)), TypeError, "not enough arguments"),
        # the kernel itself raises
        (
            "raise ValueError('negative input')",
            lambda k: k(np.arange(3.0), np.zeros(3)),
            ValueError,
            "negative input",
        ),
    ],
)
def test_a_genuine_error_of_a_kernel_call_surfaces_at_once(cdir, body, call, exc_type, text):
    """No purge, no recompile, nothing counted as recovered: the error is the kernel's."""
    src = _source(f"genuine {text}", body)
    if exc_type is ValueError:  # compiled and saved by a first, successful load
        kcache.get_kernel(src).fn.compile("(float64[::1], float64[::1])")
    nbi = list((cdir / "__pycache__").glob("*.nbi"))
    kcache.clear_memory()
    before = dict(kcache.STATS)
    kernel = kcache.get_kernel(src)
    with pytest.raises(exc_type, match=re.escape(text)):
        call(kernel)
    assert _delta(before)["recovered"] == 0
    assert not kernel.ready
    assert list((cdir / "__pycache__").glob("*.nbi")) == nbi  # nothing purged


def test_a_failed_write_does_not_fail_the_evaluation(cdir):
    """An index that is a directory: not loadable (damage), not replaceable (numba's save
    fails): the kernel runs from memory, with one warning, and no temporary file is left."""
    src = _source("unwritable")
    _run(src)
    (nbi,) = (cdir / "__pycache__").glob("*.nbi")
    nbi.unlink()
    nbi.mkdir()
    before = dict(kcache.STATS)
    fact = "cannot write to the cache directory (Is a directory)"
    hint = "New kernels are kept in memory for this process."
    with _one_warning(_warn_text(fact, str(cdir), hint)):
        _reload(src)
        _run(_source("unwritable 2"))  # not saved either: no second warning
    assert _delta(before) == {"compiled": 2, "disk_hits": 0, "memory_hits": 0, "recovered": 1}
    assert not [f for f in _files(cdir) if "tmp" in f]


# --- directories that are not used --------------------------------------------------------------


def _unsafe_dir_cases():
    def group_writable(d):
        d.mkdir(mode=0o700)
        d.chmod(0o770)
        return "it is writable by group or others", f"{d}, mode 770"

    def world_writable(d):
        d.mkdir(mode=0o700)
        d.chmod(0o703)
        return "it is writable by group or others", f"{d}, mode 703"

    def pycache_writable(d):
        (d / "__pycache__").mkdir(mode=0o700, parents=True)
        (d / "__pycache__").chmod(0o720)
        return "its __pycache__ is writable by group or others", f"{d}/__pycache__, mode 720"

    def parent_writable(d):
        d.parent.chmod(0o777)  # and not sticky, unlike /tmp
        return "a directory above it is writable by others", f"{d.parent}, mode 777"

    def a_file(d):
        d.write_text("not a directory")
        return "it is not a directory", str(d)

    def under_a_file(d):
        d.parent.joinpath("file").write_text("not a directory")
        under = d.parent / "file" / "cache"
        return "cannot create it (Not a directory)", str(under)

    return [group_writable, world_writable, pycache_writable, parent_writable, a_file, under_a_file]


@pytest.mark.parametrize("make", _unsafe_dir_cases(), ids=lambda f: f.__name__)
def test_an_unusable_directory_is_named_once_and_kernels_run_in_memory(cdir, monkeypatch, make):
    fact, values = make(cdir)
    if make.__name__ == "under_a_file":
        monkeypatch.setenv("AXESARRAY_CACHE_DIR", values)
    listing = _files(cdir)
    before = dict(kcache.STATS)
    with _one_warning(_warn_text(f"not using the cache directory: {fact}", values)):
        _run(_source("unsafe 1"))
        _run(_source("unsafe 2"))
    assert _delta(before)["compiled"] == 2
    assert _files(cdir) == listing  # nothing written, nothing read
    assert kcache.state(_source("unsafe 1")) == "in memory"
    assert kcache.state(_source("unsafe 3")) == "to compile"


def test_a_directory_owned_by_another_user_is_not_used(cdir, monkeypatch):
    cdir.mkdir(mode=0o700)
    if ROOT:
        os.chown(cdir, NOBODY, NOBODY)
    else:  # we cannot give a directory away: be someone else instead
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 12345)
    uid = cdir.stat().st_uid
    fact = "not using the cache directory: it is owned by another user"
    with _one_warning(_warn_text(fact, f"{cdir}, uid {uid}")):
        _run(_source("foreign owner"))
    assert _files(cdir) == []


def test_a_directory_above_owned_by_another_user_is_not_used(tmp_path, cdir, monkeypatch):
    above = tmp_path / "above"
    above.mkdir(mode=0o755)
    d = above / "cache"
    monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(d))
    if ROOT:
        os.chown(above, NOBODY, NOBODY)
    else:  # only that directory seems foreign
        trusted = kcache._trusted_owner
        inode = above.stat().st_ino
        monkeypatch.setattr(kcache, "_trusted_owner", lambda st: st.st_ino != inode and trusted(st))
    uid = NOBODY if ROOT else above.stat().st_uid
    fact = "not using the cache directory: a directory above it is owned by another user"
    with _one_warning(_warn_text(fact, f"{above}, uid {uid}")):
        _run(_source("foreign above"))
    assert not list(d.rglob("*.nbi"))


def test_a_sticky_world_writable_directory_above_is_fine(tmp_path, cdir, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: others cannot rename what is ours
    monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(shared / "cache"))
    with _no_warning():
        _run(_source("sticky"))
    assert list((shared / "cache" / "__pycache__").glob("*.nbi"))


def test_a_group_writable_file_in_a_shared_pycache_is_not_loaded(cdir):
    """Others may enter a 755 __pycache__: each file is checked; a rewritten one is
    saved without group/other write whatever the umask."""
    src = _source("shared file")
    _run(src)
    cdir.chmod(0o755)
    (cdir / "__pycache__").chmod(0o755)
    (nbc,) = (cdir / "__pycache__").glob("*.nbc")
    nbc.chmod(0o664)
    kcache._disks.clear()
    before = dict(kcache.STATS)
    fact = "not loading a cached kernel: a file is writable by group or others"
    old = os.umask(0o002)
    try:
        with _one_warning(_warn_text(fact, f"{nbc}, mode 664", "It is compiled again.")):
            _reload(src)
    finally:
        os.umask(old)
    assert _delta(before)["compiled"] == 1
    for f in (cdir / "__pycache__").iterdir():
        assert not _mode(f) & 0o022, f
    with _no_warning():
        _reload(src)
    assert _delta(before)["disk_hits"] == 1


# --- read-only caches ---------------------------------------------------------------------------


@contextlib.contextmanager
def _as_nobody():
    """Run the block with nobody's uid and gid (root keeps its saved uid to come back)."""
    groups = os.getgroups()
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, 0)
    os.setresuid(NOBODY, NOBODY, 0)
    try:
        yield
    finally:
        os.setresuid(0, 0, 0)
        os.setresgid(0, 0, 0)
        os.setgroups(groups)


@contextlib.contextmanager
def _read_only(d: Path):
    """``d`` read-only for the block: for root, a 755 directory root owns, seen as nobody
    (an administrator's shared cache); for anyone else, their own directory after chmod a-w."""
    if ROOT:
        with _as_nobody():
            yield
        return
    for p in [d, *d.rglob("*")]:
        p.chmod(stat.S_IMODE(p.stat().st_mode) & ~0o222)
    try:
        yield
    finally:
        for p in [d, *d.rglob("*")]:
            p.chmod(stat.S_IMODE(p.stat().st_mode) | 0o200)


def test_a_read_only_cache_is_used_for_hits(monkeypatch, cdir):
    base = Path(tempfile.mkdtemp())  # not under pytest's 700 directory: nobody must enter
    try:
        base.chmod(0o755)
        d = base / "cache"
        monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(d))
        old, new = _source("read-only old"), _source("read-only new")
        _run(old)
        _run(_source("read-only warm-up"))  # numba's lazy imports happen before we drop root
        d.chmod(0o755)
        (d / "__pycache__").chmod(0o755)
        for f in d.rglob("*"):
            if f.is_file():
                f.chmod(0o644)
        listing = _files(d)
        kcache._disks.clear()
        kcache.clear_memory()
        before = dict(kcache.STATS)
        fact, values = "the cache directory is read-only", str(d)
        hint = "Kernels found there are used; new ones are kept in memory for this process."
        with _read_only(d):
            with _one_warning(_warn_text(fact, values, hint)):
                _run(old)
                _run(new)
                _run(_source("read-only newer"))
            assert _delta(before) == {
                "compiled": 2,
                "disk_hits": 1,
                "memory_hits": 0,
                "recovered": 0,
            }
        assert _files(d) == listing
    finally:
        shutil.rmtree(base)


# --- the contract with the templates, threads -----------------------------------------------------


def test_a_template_asking_numba_for_cache_true_is_refused(cdir):
    src = _source("cache=True").replace("@njit", "@njit(cache=True)")
    key = kcache._key(src)
    with pytest.raises(ValueError) as err:
        kcache.get_kernel(src)
    assert str(err.value) == (
        f"kernel cache: the generated source asks numba for cache=True ({key}). This module "
        "attaches numba's disk cache itself, in a checked directory; drop cache=True from "
        "the kernel template."
    )


def test_a_module_whose_entry_is_not_a_cpu_dispatcher(cdir):
    """CUDA launchers are plain functions: executed and kept, no numba disk cache."""
    kernel = kcache.get_kernel("def launch(x):\n    return x + 1\n", "launch")
    assert kernel(41) == 42 and kernel.ready
    assert list(cdir.glob("k_*.py")) and not list((cdir / "__pycache__").iterdir())


def test_threads_asking_for_the_same_new_kernel_share_one_compile(cdir):
    src = _source("threads")
    errors = []
    kernels = []

    def work():
        try:
            kernels.append(kcache.get_kernel(src))
            _run(src)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    before = dict(kcache.STATS)
    threads = [threading.Thread(target=work) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert len({id(k) for k in kernels}) == 1
    assert _delta(before)["compiled"] == 1
