"""Fault injection: Ctrl-C (SIGINT) at random moments of ``axesarray convert``.

Whenever the interrupt arrives (while Python imports the package, while the command plans,
while it writes, while kernels compile on the background thread, while the main thread
waits for them), the process ends in exit 130 with the one-line message, or, before the
command started (Python's start-up and the imports), dies of SIGINT; it never leaves an
output, a sidecar or a temporary, never crashes (SIGSEGV, SIGABRT) and never swallows the
interrupt to finish with exit 0. An interrupt that comes once the output is complete
(after the renames, or when the process has exited already) finds the output whole.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.test_layouts import expected_physical

SHAPE = (4, 40, 64, 64)  # 2.6 MB in, 4.2 MB out in NCHW32: some 60 chunks of 64K
MESSAGE = "axesarray convert: interrupted; nothing written\n"
PACKAGE = str(Path(__file__).resolve().parent.parent / "axesarray") + os.sep


def _command(d: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "axesarray",
        "convert",
        str(d / "in.npy"),
        str(d / "out.npy"),
        "--axes",
        "N C H W",
        "--to",
        "NCHW32",
        "--chunk-size",
        "64K",
    ]


def _temporaries(d: Path) -> list[str]:
    return [p.name for p in d.iterdir() if p.name.startswith(".out.npy")]


def _before_the_package(err: str) -> bool:
    """Whether a traceback stops before the package took SIGINT: its only frames in the
    package are those importing ``_startup`` (the package's first line), which installs
    the handler."""
    frames = re.findall(r'File "([^"]+)", line \d+', err)
    ours = [f for f in frames if f.startswith(PACKAGE)]
    return all(f in (PACKAGE + "__init__.py", PACKAGE + "_startup.py") for f in ours) and (
        not ours or "from . import _startup" in err
    )


def _one_run(d: Path, env: dict, stage: str, delay: float, expected: np.ndarray) -> dict:
    """Start the command, interrupt it (after ``delay`` s, or ``delay`` s after its
    temporary output appears), and check how it ended."""
    proc = subprocess.Popen(_command(d), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    start = time.monotonic()
    if stage == "writing":
        while not _temporaries(d) and proc.poll() is None and time.monotonic() - start < 60:
            time.sleep(0.001)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    finished = (d / "out.npy").exists()  # complete before the signal could act
    out, err = proc.communicate(timeout=120)
    err = err.decode()
    left = sorted(p.name for p in d.iterdir() if p.name != "in.npy")
    rc = proc.returncode
    # Python reports a KeyboardInterrupt inside its site module as a "fatal error" (status
    # 1): start-up, not a crash. Any other fatal error, or a signal but SIGINT, is one.
    fatal = "Fatal Python error" in err and "init_import_site" not in err
    bad = fatal or "Segmentation fault" in err or rc in (-11, -6, -7, -9)
    if rc == 130:
        ok = left == [] and err.endswith(MESSAGE) and "Traceback" not in err and out == b""
    elif rc in (1, -signal.SIGINT):
        # Python's own start-up (site, runpy), before the package's first line: Python
        # ends with the KeyboardInterrupt (status 1 from site, else death by SIGINT).
        # None of the package's frames may appear: from its first line on, it handles it.
        ok = left == [] and err.endswith("KeyboardInterrupt\n") and _before_the_package(err)
    elif rc == 0:  # the signal came after the renames: the output is whole
        ok = finished and left == ["out.npy", "out.npy.axes.json"]
        ok = ok and np.array_equal(np.load(d / "out.npy"), expected)
    else:
        ok = False
    for name in left:
        (d / name).unlink()
    return {"stage": stage, "delay": round(delay, 3), "rc": rc, "ok": ok and not bad,
            "left": left, "err": err[-800:], "frames": PACKAGE in err}


@pytest.mark.slow
def test_ctrl_c_at_random_moments_never_leaves_output_or_crashes(tmp_path):
    rng = random.Random(os.environ.get("AXESARRAY_FAULT_SEED", 19))
    logical = np.random.default_rng(0).standard_normal(SHAPE).astype("float32")
    expected = expected_physical(logical, "NCHW32")
    warm = tmp_path / "warm-cache"
    base = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    base.pop("NUMBA_ENABLE_CUDASIM", None)
    # One run to fill the kernel cache, and to time a whole command.
    d0 = tmp_path / "w"
    d0.mkdir()
    np.save(d0 / "in.npy", logical)
    began = time.monotonic()
    done = subprocess.run(_command(d0), env={**base, "AXESARRAY_CACHE_DIR": str(warm)},
                          capture_output=True, text=True, timeout=600)
    whole = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(d0 / "out.npy"), expected)

    plan = []  # (stage, delay, cache): at least 50 runs over several stages
    plan += [("anytime", rng.uniform(0.0, 1.1 * whole), warm) for _ in range(36)]
    plan += [("writing", rng.uniform(0.0, 0.03), warm) for _ in range(12)]
    # A cold cache: the kernels compile (the repack kernels in the main thread, the rest on
    # the background thread while numpy answers) when the signal comes.
    plan += [("compiling", rng.uniform(0.3, 1.5) * whole, tmp_path / f"cold{k}")
             for k in range(6)]
    rng.shuffle(plan)

    def job(k_item):
        k, (stage, delay, cache) = k_item
        d = tmp_path / f"r{k}"
        d.mkdir()
        np.save(d / "in.npy", logical)
        env = {**base, "AXESARRAY_CACHE_DIR": str(cache)}
        return _one_run(d, env, stage, delay, expected)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(job, enumerate(plan)))
    failures = [r for r in results if not r["ok"]]
    assert not failures, "\n\n".join(f"{r}\n{r['err']}" for r in failures)
    assert len(results) >= 50
    codes = {r["rc"] for r in results}
    assert 130 in codes, results  # the interrupts that reached the command were handled
