"""Tiered execution: numpy answers a new cheap expression while its kernels compile.

The suite runs with ``tiered=False`` (conftest); these tests turn it on.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import Future

import numpy as np
import pytest
from conftest import assert_close, ctrl_c_outcomes

import axesarray as ax
from axesarray.engine import executor, tier_eval, tier_write, tiers

N = ax.Axis("N", 257)


@pytest.fixture
def tiered():
    with ax.set_options(tiered=True):
        yield


@pytest.fixture
def float64_way(monkeypatch):
    """The tier's float32 transcendentals the float64 way (numpy, rounded once), as before the
    math library's loops are loaded (another test of the worker may have loaded them)."""
    from axesarray.kernels import tier_math

    monkeypatch.setattr(tier_math, "LOOPS", {})
    monkeypatch.setattr(tier_math, "WANTED", set())


def _plan(e):
    return executor.schedule_for(e._node, None)[0]


def _wait(e):
    future = _plan(e).compiling
    if future is not None:
        future.result()


def test_a_new_cheap_expression_is_answered_by_numpy_then_by_kernels(tiered):
    """The first evaluation is numpy's; the kernels compile in the background, and are
    loaded into the process once the expression is asked again (a load runs here, and a
    script's exit waits for it): the second evaluation is numpy's too, the third the
    kernels'."""
    xn = np.linspace(-3, 3, N.length).astype(np.float32)
    x = ax.tensor(xn, (N,))
    e = ax.tanh(x * 1.25 + 0.375) * x  # a structure no other test builds
    assert ax.explain(e).tier.startswith("numpy reference")
    first = e.numpy()
    assert not _plan(e).ready  # the numpy tier ran
    _wait(e)
    assert not _plan(e).ready  # compiled, not loaded: asked once
    assert ax.explain(e).tier == "numpy reference (kernels on disk, loaded when it runs again)"
    second = e.numpy()  # the tier again, and the load starts
    _wait(e)
    assert ax.explain(e).tier == "kernels"
    third = e.numpy()
    expected = np.tanh(xn * np.float32(1.25) + np.float32(0.375)) * xn
    assert_close(first, expected)  # the two tiers agree within the tolerance table
    assert_close(second, expected)
    assert_close(third, expected)
    assert_close(first, third)


def test_assignments_take_the_numpy_tier_too(tiered):
    x = ax.tensor(np.arange(12.0).reshape(3, 4), "A B")
    out = ax.zeros(x.axes)
    out[...] = ax.sqrt(x + 0.125) - 1  # new structure: numpy, then kernels
    expected = np.sqrt(np.arange(12.0).reshape(3, 4) + 0.125) - 1
    assert_close(out, expected)
    out[...] = ax.sqrt(x + 0.125) - 1
    assert_close(out, expected)


def test_the_numpy_tier_is_bounded_by_memory_not_elements(tiered):
    # 2M elements (past the old 1e6 bound), 16 MB of numpy temporaries: numpy answers
    x = ax.zeros((ax.Axis("M", 2_000_000),), "float32")
    assert tiers.NUMPY_MAX_BYTES >= 64 << 20
    assert ax.explain(x * 3 - 1).tier.startswith("numpy")


def test_numpy_temporaries_past_256_mib_wait_for_the_kernels(tiered):
    # two 256 MiB temporaries: the kernel is awaited, the peak stays input + output
    x = ax.zeros((ax.Axis("M", 64 << 20),), "float32")  # calloc: no pages touched
    assert tiers.NUMPY_MAX_BYTES <= 256 << 20
    assert ax.explain(ax.sigmoid(x) * 2).tier.startswith("kernels")
    assert ax.explain(ax.sigmoid(x[{"M": slice(0, 1 << 20)}])).tier.startswith("numpy")


def test_big_expressions_wait_for_their_kernels(tiered, monkeypatch):
    monkeypatch.setattr(tiers, "NUMPY_MAX_BYTES", 4000)
    big = ax.zeros((ax.Axis("M", 1001),), "float32")
    e = big * 3 - 1  # two float32 temporaries of 1001: 8008 bytes
    assert ax.explain(e).tier.startswith("kernels")
    assert (e.numpy() == -1).all()
    assert _plan(e).ready


def test_tiered_false_gives_identical_bits_run_to_run():
    ax.set_options(tiered=False)  # the default of this suite, also under --tiered
    x = ax.tensor(np.linspace(-4, 4, N.length), (N,))
    e = ax.exp(ax.sin(x) * 0.3) / (1.5 + ax.cos(x))
    runs = [e.numpy().tobytes() for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert _plan(e).ready


def test_what_numpy_refuses_gets_the_kernels_answer(tiered):
    x = ax.tensor(np.array([2, 3], np.int64), "N")
    e = x ** ax.tensor(np.array([-1, -2], np.int64), "N")  # numpy raises for this
    got = e.numpy()
    with ax.set_options(tiered=False):
        assert (got == e.numpy()).all()


def test_precompile_makes_the_first_run_use_kernels(tiered):
    x = ax.tensor(np.arange(5.0), "N")
    e = ax.log1p(x * 0.5) + 0.25
    plan = ax.precompile(e)
    assert plan.tier == "kernels"
    assert _plan(e).ready
    assert_close(e, np.log1p(np.arange(5.0) * 0.5) + 0.25)


def test_a_new_process_gets_its_first_result_without_numba(tmp_path):
    """The first result of a small expression does not wait for numba's start-up: numba is
    imported on the compile thread meanwhile (half a second of a new process otherwise)."""
    script = textwrap.dedent(
        """
        import sys, time
        import numpy as np, axesarray as ax
        x = ax.tensor(np.arange(1000, dtype=np.float32), "N")
        t = time.perf_counter()
        r = ax.sigmoid(x * 2 + 1).numpy()
        dt = time.perf_counter() - t
        print(dt, float(r[3]))
        """
    )
    env = dict(os.environ, AXESARRAY_CACHE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    dt, value = map(float, out.stdout.split())
    assert_close(np.float32(value), np.float32(1 / (1 + np.exp(-7.0))))
    assert dt < 0.25, f"first result took {dt:.3f} s"  # numba's start-up alone is ~0.5 s


def test_the_tier_rounds_a_float32_chain_once(tiered, float64_way):
    """``1/(1+exp(-x))`` for x near -100: numpy in float32 overflows exp and gives 0; the
    tier computes the chain in float64 and rounds once (a subnormal, as the kernels)."""
    xn = np.array([-100.0, -95.5, -90.25, -1.0, 0.0, 3.0, 80.0], np.float32)
    x = ax.tensor(xn, "N")
    e = 1 / (1 + ax.exp(-x)) + 0.0 * x  # a structure no other test builds
    first = e.numpy()
    assert not _plan(e).ready  # the numpy tier ran
    expected = (1 / (1 + np.exp(-xn.astype(np.float64)))).astype(np.float32)
    np.testing.assert_array_equal(first, expected)
    assert (first[:3] > 0).all()


def _exit_delay(script: str, env: dict) -> float:
    """Seconds from the script's last result to the end of its process."""
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    import time

    return time.time() - float(out.stdout.split()[-1])


def test_kernels_on_disk_are_loaded_without_the_compile_process(tmp_path):
    """A script run again finds its kernels in the disk cache: the background compile
    loads them without starting the compile process (whose start-up was most of the time
    the tier answered), and a kernel not on disk still goes to that process."""
    script = textwrap.dedent(
        """
        import numpy as np, axesarray as ax
        from axesarray.engine import tiers, worker
        x = ax.tensor(np.linspace(-3, 3, 1000).astype(np.float32), "N")
        e = ax.tanh(x * 1.25 + 0.5) / 3
        first = e.numpy()  # the tier's answer; the kernels compile in the background
        tiers.background_done().result()
        loaded = ax.explain(e).tier  # on disk, not loaded: asked once
        e.numpy()  # asked again: the load starts
        tiers.background_done().result()
        assert np.allclose(first, e.numpy(), rtol=1e-6, atol=1e-7)  # (an FMA near 0)
        print(worker.PROCESS.pid != 0, loaded.split()[0], ax.explain(e).tier)
        """
    )
    env = dict(os.environ, AXESARRAY_CACHE_DIR=str(tmp_path))
    env.pop("AXESARRAY_COMPILE_PROCESS", None)  # the compile process allowed, as by default

    def run() -> list:
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        words = out.stdout.split()
        return [words[0], " ".join(words[1:])]

    assert run() == ["True", "numpy kernels"]  # compiled by the compile process
    assert run() == ["False", "numpy kernels"]  # loaded from disk: no compile process


@pytest.mark.parametrize("tier_on", [True, False])
def test_a_script_exits_soon_after_its_last_result(tmp_path, tier_on):
    """A script exits about as soon as one that only used numpy (the issue's goal: within
    50 ms of its last result): with the tier, the compile under way is abandoned (DESIGN
    §12), not awaited (a ThreadPoolExecutor is joined at exit: seconds); with kernels run
    (numba loaded, ~200k objects), the interpreter's final garbage collection does not walk
    them (``tiers._abandon`` freezes them: 0.15-0.4 s before)."""
    body = """
        import time
        import numpy as np
        import axesarray as ax
        ax.set_options(tiered={tiered})
        x = np.linspace(-3, 3, 1000).astype(np.float32)
        {work}
        print(time.time())
        """
    work = "r = (ax.tanh(ax.tensor(x, 'N') * 1.75 + 0.5) / 3).numpy()"
    script = textwrap.dedent(body.format(tiered=tier_on, work=work))
    plain = textwrap.dedent(body.format(tiered=tier_on, work="r = np.tanh(x * 1.75 + 0.5) / 3"))
    env = dict(os.environ, AXESARRAY_CACHE_DIR=str(tmp_path))
    # the best of three: on a loaded 2-core machine one exit can wait for the core
    base = min(_exit_delay(plain, env) for _ in range(3))
    delay = min(
        _exit_delay(script, dict(env, AXESARRAY_CACHE_DIR=str(tmp_path / str(k)))) for k in range(3)
    )
    assert delay < base + 0.1, f"exit {delay:.3f} s after the last result (numpy: {base:.3f})"


def test_exit_freezes_what_is_alive(tmp_path):
    """The exit handler freezes the objects alive at exit; a handler registered before
    axesarray was imported runs after it and sees them frozen, and objects it makes are
    collected as usual."""
    script = textwrap.dedent(
        """
        import atexit, gc
        def after():
            frozen = gc.get_freeze_count()
            class Cycle:
                pass
            c = Cycle(); c.me = c; del c
            print(frozen > 0, gc.collect() >= 1)
        atexit.register(after)
        import axesarray as ax
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_exit_waits_for_the_work_inside_numba_on_the_compile_thread(tmp_path):
    """The interpreter's teardown frees what LLVM uses and kills a daemon thread inside
    LLVM's frames: a script ending mid-compile died (SIGSEGV, SIGABRT). The exit waits for
    the work under way on the compile thread (one kernel at most) and starts no more."""
    script = textwrap.dedent(
        """
        import time
        from axesarray.engine import tiers
        def slow(tag):
            time.sleep(0.3)
            print(tag, flush=True)
        tiers.in_background(slow, "first")
        tiers.in_background(slow, "second")
        while not tiers._compiler.native.locked():
            time.sleep(0.001)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.split(), out.stderr) == (0, ["first"], "")


@pytest.mark.parametrize("after", [0.0, 0.05])
def test_a_script_ending_mid_compile_exits_cleanly(tmp_path, after):
    """A real compile on the compile thread (no compile process) when the script ends."""
    script = textwrap.dedent(
        f"""
        import time
        import numpy as np, axesarray as ax
        from axesarray.engine import tiers
        x = ax.tensor(np.random.rand(2, 8, 6, 6).astype(np.float32), "N C H W")
        g = ax.tensor(np.random.rand(8).astype(np.float32), "C")
        d = x - x.mean(("N", "H", "W"))
        y = (d / ax.sqrt((d * d).mean(("N", "H", "W")) + 1e-5) * g).eval()
        z = (ax.tanh(x) - x.max("W")).eval()
        end = time.monotonic() + 30
        while not tiers._compiler.native.locked() and time.monotonic() < end:
            time.sleep(0.001)
        time.sleep({after})
        """
    )
    env = dict(os.environ, AXESARRAY_CACHE_DIR=str(tmp_path), AXESARRAY_COMPILE_PROCESS="0")
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert (out.returncode, out.stderr) == (0, "")


def test_a_first_run_compiles_on_the_compile_thread(monkeypatch):
    """The kernels of a schedule's first run compile on the compile thread (SIGINT blocked
    there) while the caller waits; later runs find them compiled."""
    seen = []
    real = tiers.compile_schedule

    def spy(plan, *args):
        seen.append(threading.current_thread().name)
        return real(plan, *args)

    monkeypatch.setattr(tiers, "compile_schedule", spy)
    xn = np.linspace(-1, 1, 999, dtype=np.float32)
    x = ax.tensor(xn, "N")
    e = ax.tanh(x * 0.8125 + 0.0625)  # a structure no other test builds
    assert not _plan(e).ready
    assert_close(e.numpy(), np.tanh(xn * np.float32(0.8125) + np.float32(0.0625)))
    assert seen == ["axesarray-compile"] and _plan(e).ready
    e.numpy()
    assert seen == ["axesarray-compile"]


def test_ctrl_c_during_a_first_compile_leaves_numba_usable(tmp_path):
    """Ctrl-C while the first kernels compile (numba's import included): the caller gets
    KeyboardInterrupt, and the next evaluation works. In the caller's thread it left a
    half-imported numba (every later evaluation failed) or half-built LLVM objects."""
    script = textwrap.dedent(
        """
        import os, signal, sys, threading, time
        import numpy as np, axesarray as ax
        ax.set_options(tiered=False)
        xn = np.linspace(0, 1, 1000, dtype=np.float32)
        x = ax.tensor(xn, "N")
        threading.Timer(float(sys.argv[1]), os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            (ax.tanh(x * 1.5 + 0.25) / 3 - ax.exp(x)).eval()
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
        got = (ax.tanh(x * 1.5 + 0.25) / 3 - ax.exp(x)).numpy()
        x64 = xn.astype(np.float64)
        print(np.allclose(got, np.tanh(x64 * 1.5 + 0.25) / 3 - np.exp(x64), rtol=1e-6))
        time.sleep(0.5)
        """
    )
    assert "interrupted" in ctrl_c_outcomes(script, (0.02, 0.3), tmp_path)


def test_a_script_ending_right_after_ctrl_c_in_a_first_compile_exits_cleanly(tmp_path):
    """Ctrl-C in a first run's compile, and the script ends there: the compile goes on on
    the compile thread, and the exit waits for its kernel (it is background work)."""
    script = textwrap.dedent(
        """
        import os, signal, threading
        import numpy as np, axesarray as ax
        ax.set_options(tiered=False)
        x = ax.tensor(np.linspace(0, 1, 1000, dtype=np.float32), "N")
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            (ax.tanh(x * 1.5 + 0.25) / 3 - ax.exp(x) + ax.log1p(x)).eval()
        except KeyboardInterrupt:
            pass
        """
    )
    env = dict(os.environ, AXESARRAY_CACHE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert (out.returncode, out.stderr) == (0, "")


def test_a_first_run_at_exit_compiles_in_the_caller(tmp_path):
    """Once the interpreter exits (``closing``) the compile thread starts nothing: a first
    run then compiles in the caller instead of waiting for it."""
    script = textwrap.dedent(
        """
        import atexit
        import numpy as np, axesarray as ax
        ax.set_options(tiered=False)
        x = ax.tensor(np.arange(5, dtype=np.float32), "N")
        want = np.exp(np.arange(5.0)) * 0.375
        atexit.register(lambda: print(np.allclose((ax.exp(x) * 0.375).numpy(), want)))
        """
    )
    env = dict(os.environ, AXESARRAY_CACHE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


@pytest.mark.parametrize("process", ["0", "1"])
@pytest.mark.parametrize("delay", [0.0, 0.1])
def test_a_forked_child_evaluates_while_the_parent_compiles(tmp_path, process, delay):
    """``multiprocessing`` with fork (Linux's default) right after a tier answer, while the
    parent's compile thread works: the child's first run compiles its own kernels. The
    child has no compile thread of its own until it needs one, and no lock the parent's
    thread held (its first run waited forever; numba's compiler lock or a module's import
    lock held by the parent's thread did the same)."""
    script = textwrap.dedent(
        f"""
        import multiprocessing as mp, time
        import numpy as np, axesarray as ax
        x = ax.tensor(np.arange(100000, dtype=np.float32), "N")
        (ax.tanh(x * 0.5) + ax.exp(x * 1e-5) * 2 - x.max()).numpy()  # the tier; a compile
        time.sleep({delay})
        def child(q):
            ax.set_options(tiered=False)
            y = ax.tensor(np.arange(1000, dtype=np.float32), "N")
            q.put(float((ax.exp(y * 0.001) * 3).numpy()[1]))
        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            q = ctx.Queue()
            p = ctx.Process(target=child, args=(q,))
            p.start()
            p.join(90)
            if p.is_alive():
                p.kill()
                print("the child hung")
            else:
                print(p.exitcode, round(q.get(), 5))
        """
    )
    env = dict(os.environ, AXESARRAY_CACHE_DIR=str(tmp_path), AXESARRAY_COMPILE_PROCESS=process)
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", str(round(3 * math.exp(0.001), 5))], out.stderr


def test_option_is_validated():
    with pytest.raises(ValueError, match=r"set_options: bad value for 'tiered' \(got 1\)"):
        ax.set_options(tiered=1)


def test_precompile_after_runs():
    """ax.precompile of an expression that already ran (its kernels kept as numba's own
    dispatchers) compiles nothing more and says the kernels run next."""
    rng = np.random.default_rng(0)
    x = ax.tensor(rng.random((8, 32, 64, 64), dtype=np.float32), "N C H W")
    b = ax.tensor(rng.random((64, 64), dtype=np.float32), "W H")  # staged: a second kernel
    e = ax.sigmoid(x * 2 + b)
    with ax.set_options(tiered=False):
        e.eval()
        e.eval()
        assert ax.precompile(e).tier == "kernels"
    assert_close(e, 1 / (1 + np.exp(-(x.numpy() * 2 + b.numpy().T))))


# --- the compile process and the lean evaluator ----------------------------------------------


def test_background_compiles_run_in_the_compile_process(tiered, tmp_path, monkeypatch):
    """The kernels of a tier-answered expression are compiled by the compile process; this
    process only loads their machine code from the disk cache (no compile here)."""
    from axesarray.engine import worker
    from axesarray.kernels import cache

    monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(worker, "PROCESS", worker._Process())
    assert not worker.PROCESS.broken  # POSIX: the compile process can run
    xn = np.linspace(-2, 2, N.length).astype(np.float32)
    x = ax.tensor(xn, (N,))
    e = ax.tanh(x * 0.625 - 0.125) * x + 0.5  # a structure no other test builds
    done = tiers.background_done()  # compiles earlier tests left queued end first
    if done is not None:
        done.result()
    before = dict(cache.STATS)
    first = e.numpy()
    _wait(e)
    assert worker.PROCESS.pid > 0 and not worker.PROCESS.broken
    assert dict(cache.STATS) == before  # compiled there, nothing loaded here: asked once
    assert not list(tmp_path.rglob("*.tmp*"))  # every file renamed into place
    second = e.numpy()  # asked again: the load starts
    _wait(e)
    assert cache.STATS["compiled"] == before["compiled"]  # nothing compiled here
    assert cache.STATS["disk_hits"] > before["disk_hits"]
    assert _plan(e).ready
    expected = np.tanh(xn * np.float32(0.625) - np.float32(0.125)) * xn + np.float32(0.5)
    assert_close(first, expected)
    assert_close(second, expected)
    worker.PROCESS.close()


def test_a_compile_that_ends_before_it_is_recorded_still_leads_to_the_load(
    tiered, tmp_path, monkeypatch
):
    """The background compile may end before the caller records its future: one that left
    the kernels on disk still counts as none, so the next answer starts the load (and the
    kernels run after it), not a load in the caller's thread."""
    from axesarray.engine import worker

    monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(worker, "PROCESS", worker._Process())
    done = tiers.background_done()  # compiles earlier tests left queued end first
    if done is not None:
        done.result()

    def at_once(fn, *args):  # the compile thread, as fast as it can be
        future = Future()
        future.pid = os.getpid()
        future.set_running_or_notify_cancel()
        future.set_result(fn(*args))
        return future

    monkeypatch.setattr(tiers._compiler, "submit", at_once)
    xn = np.linspace(-1, 1, N.length).astype(np.float32)
    x = ax.tensor(xn, (N,))
    e = ax.tanh(x * 0.875 + 0.25) - x  # a structure no other test builds
    first = e.numpy()
    assert ax.explain(e).tier == "numpy reference (kernels on disk, loaded when it runs again)"
    second = e.numpy()  # the tier again; its compile loads the kernels
    assert _plan(e).ready and ax.explain(e).tier == "kernels"
    want = np.tanh(xn * np.float32(0.875) + np.float32(0.25)) - xn
    for got in (first, second, e.numpy()):
        assert_close(got, want)
    worker.PROCESS.close()


def test_a_lost_compile_process_leaves_the_compile_here(tiered, tmp_path, monkeypatch):
    """The compile process killed: the compile thread compiles in this process instead."""
    import signal

    from axesarray.engine import worker

    monkeypatch.setenv("AXESARRAY_CACHE_DIR", str(tmp_path))
    process = worker._Process()
    monkeypatch.setattr(worker, "PROCESS", process)
    assert not process.broken
    process.start()
    os.kill(process.pid, signal.SIGKILL)
    x = ax.tensor(np.arange(6.0), "N")
    e = ax.log1p(x * 0.375) - 0.25  # a structure no other test builds
    first = e.numpy()
    _wait(e)
    assert process.broken
    assert_close(first, np.log1p(np.arange(6.0) * 0.375) - 0.25)
    assert_close(e, np.log1p(np.arange(6.0) * 0.375) - 0.25)
    assert _plan(e).ready


def test_worker_specs_type_like_the_arguments():
    """A dummy from an argument's spec has the numba type of the argument."""
    import numba

    from axesarray.engine import worker

    base = np.zeros((4, 6), np.float32)
    readonly = np.zeros(5, np.int8)
    readonly.flags.writeable = False
    for arg in (base, base.T, base[:, ::2], readonly, np.zeros(3, np.uint16), 7, 2.5, True):
        assert numba.typeof(worker.dummy(worker.spec(arg))) == numba.typeof(arg)


def test_ctrl_c_and_exit_leave_no_compile_running(tmp_path):
    """Ctrl-C right after a tier answer: the script ends at once (KeyboardInterrupt), the
    compile process, in its own session, exits once its pipe is closed."""
    script = textwrap.dedent(
        """
        import os, signal, time
        import numpy as np, axesarray as ax
        from axesarray.engine import worker
        x = ax.tensor(np.arange(1000, dtype=np.float32), "N")
        r = (ax.tanh(x * 0.875 + 1) * 3).numpy()
        while not worker.PROCESS.pid and not worker.PROCESS.broken:
            time.sleep(0.01)
        print(worker.PROCESS.pid, flush=True)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
        """
    )
    env = dict(os.environ, AXESARRAY_CACHE_DIR=str(tmp_path))
    import time

    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert time.monotonic() - start < 25
    assert "KeyboardInterrupt" in out.stderr
    pid = int(out.stdout.split()[0])
    if pid:
        for _ in range(600):  # the compile under way finishes, then the process ends
            if not _alive(pid):
                break
            time.sleep(0.1)
        assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_the_tier_reuses_buffers_and_writes_the_destination(tiered):
    """The tier evaluates shared nodes once into reused buffers: a chain of elementwise
    ops over a shared value gives numpy's result (float32 arithmetic as numpy rounds it)."""
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((5, 7)).astype(np.float32)
    x = ax.tensor(xn, "A B")
    out = ax.zeros(x.axes, "float32")
    s = x * 1.5 - 0.25  # shared by three readers
    tier_eval.tier_assign(out.node, (s * s + s / 3.0 - s.max("B")).node)
    sn = xn * np.float32(1.5) - np.float32(0.25)
    np.testing.assert_array_equal(out.numpy(), sn * sn + sn / np.float32(3.0) - sn.max(1)[:, None])


@pytest.mark.parametrize("n", [0, 1, 9])
def test_the_tier_answers_dots_in_c_order(tiered, n):
    """A contraction written as a product and a sum is one matmul in the tier, sizes 0
    and 1 included."""
    rng = np.random.default_rng(n)
    an = rng.standard_normal((n, 4)).astype(np.float32)
    bn = rng.standard_normal((3, 4)).astype(np.float32)
    a, b = ax.tensor(an, "N D"), ax.tensor(bn, "M D")
    e = (a * b).sum("D") * 0.5 + 1.0
    out = ax.zeros(e.axes, "float32")
    tier_eval.tier_assign(out.node, e.node)
    assert_close(out, (an @ bn.T) * np.float32(0.5) + np.float32(1.0))


def test_slabs_never_read_what_an_earlier_slab_wrote(tiered):
    """``x[...] = f(x reversed)`` big enough to run in slabs: the result is as if computed
    before the first write (numpy's aliasing rule), not slab by slab over x."""
    xn = np.arange(64 * 8192, dtype=np.float32).reshape(64, 8192) / 1024
    x = ax.tensor(xn.copy(), "N K")
    e = ax.exp(-x.isel({"N": slice(None, None, -1)})) * 2 + 1
    from axesarray.dag.nodes import walk
    from axesarray.engine.rewrite import CPU_REWRITES, rewrite

    root = rewrite(e.node, CPU_REWRITES)
    assert tier_eval._slabs(walk(root), root) is not None  # the slab path is the one tested
    tier_eval.tier_assign(x.node, e.node)
    expected = (np.exp(-xn[::-1].astype(np.float64)) * 2 + 1).astype(np.float32)
    assert_close(x, expected)


def test_slabs_run_on_threads_with_reductions(tiered, float64_way):
    """A reduction over the inner dim runs in slabs of rows, on the kernels' threads: the
    float64 result of each row, rounded once."""
    xn = np.random.default_rng(5).standard_normal((512, 1024)).astype(np.float32)
    x = ax.tensor(xn, "N K")
    e = ax.exp(x).sum("K")
    from axesarray.dag.nodes import walk

    root = tier_eval.rewrite(e.node, tier_eval.TIER_REWRITES)
    assert tier_eval._slabs(walk(root), root) is not None  # several slabs
    out = ax.zeros(e.axes, "float32")
    tier_eval.tier_assign(out.node, e.node)
    np.testing.assert_array_equal(
        out.numpy(), np.exp(xn.astype(np.float64)).sum(1).astype(np.float32)
    )


def test_a_softmax_written_by_hand_stays_as_written_in_the_tier(tiered, float64_way):
    """The tier keeps ``e / e.sum(K)`` as written (one exp per element, op by op), not the
    kernels' logsumexp form (two exps, one sweep), and its value is the formula rounded
    once, in float64 from the exp on."""
    xn = np.random.default_rng(6).standard_normal((4, 5, 6)).astype(np.float32) * 20
    x = ax.tensor(xn, "N C W")
    e = ax.exp(x - x.max("C"))
    s = e / e.sum("C")
    from axesarray.dag.nodes import walk

    root = tier_eval.rewrite(s.node, tier_eval.TIER_REWRITES)
    assert sorted(n.op for n in walk(root) if n.kind == "reduce") == ["max", "sum"]
    out = ax.zeros(x.axes, "float32")
    tier_eval.tier_assign(out.node, s.node)
    # the shift is float32 arithmetic (exact as numpy rounds it), widened from the exp on
    e64 = np.exp((xn - xn.max(1, keepdims=True)).astype(np.float64))
    np.testing.assert_array_equal(out.numpy(), (e64 / e64.sum(1, keepdims=True)).astype(np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_tier_overflows_where_the_kernels_do(tiered, dtype):
    """A float32 chain computed in float64 still overflows where the value leaves float32:
    ``exp(100) * 0`` is NaN in numpy and in the kernels, not 0 (float64 ``exp(100)`` is
    finite); the same for ``expm1``, ``**`` and ``hypot``, float16 at its own range."""
    big, near_max = {"float32": (100.0, 3e36), "float16": (12.0, 5000.0)}[dtype]
    xn = np.array([big, 1.0, -big, np.nan, 0.5], dtype)
    x = ax.tensor(xn, "N")
    cases = [
        (lambda v: ax.exp(v) * 0.0, lambda v: np.exp(v) * v.dtype.type(0)),
        (lambda v: ax.expm1(v) / ax.exp(v), lambda v: np.expm1(v) / np.exp(v)),
        (lambda v: (v * 2) ** 20.0 * 0.0, lambda v: (v * v.dtype.type(2)) ** 20 * 0),
        (lambda v: ax.hypot(v * near_max, v * near_max) * 0.0, None),
    ]
    for build, want in cases:
        e = build(x)
        out = ax.zeros(x.axes, dtype)
        with np.errstate(all="ignore"):
            tier_eval.tier_assign(out.node, e.node)
            with ax.set_options(tiered=False):
                kernels = e.numpy()
            if want is not None:
                assert_close(out, want(xn))
        np.testing.assert_array_equal(np.isnan(out.numpy()), np.isnan(kernels))


def test_an_op_that_returns_its_operand_keeps_its_buffer(tiered):
    """``stop_gradient(exp(x))`` is ``exp(x)``'s own buffer: the op reading ``exp(x)`` last
    does not write its result over it while the stop_gradient's value is still to be read."""
    xn = np.linspace(-2, 2, 11).astype(np.float32)
    x = ax.tensor(xn, "N")
    ex = ax.exp(x * 0.5)
    e = ax.stop_gradient(ex) + ex * 2.0
    out = ax.zeros(x.axes, "float32")
    tier_eval.tier_assign(out.node, e.node)
    assert_close(out, np.exp(xn * np.float32(0.5)) * np.float32(3.0))


@pytest.mark.parametrize("rows", [1, 3, 64])
def test_broadcast_operands_are_computed_at_their_own_shape(tiered, rows):
    """A masked mean over lengths: the mask ``pos < lens`` varies over ``B T`` only and is
    computed there (numpy broadcasts it over ``D``); leaves that are broadcast views, a
    constant, slabs (64 rows) or not (1, 3) give numpy's values."""
    rng = np.random.default_rng(rows)
    xn = rng.standard_normal((rows, 512, 64)).astype(np.float32)
    lens = rng.integers(1, 513, size=rows)
    x, ln = ax.tensor(xn, "B T D"), ax.tensor(lens, "B")
    pos = ax.arange(ax.Axis("T", 512))
    e = ax.where(pos < ln, x, 0.0).sum("T") / ln
    seen = []
    compute = tier_eval.compute

    def spy(node, kids, *rest):
        value = compute(node, kids, *rest)
        if node.kind == "map" and node.op == "lt":
            seen.append(value.shape)
        return value

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tier_eval, "compute", spy)
        out = ax.zeros(e.axes, "float32")
        tier_eval.tier_assign(out.node, e.node)
    mask = np.arange(512)[None, :] < lens[:, None]
    want = (np.where(mask[:, :, None], xn, np.float32(0)).sum(1) / lens[:, None]).astype(np.float32)
    assert_close(out, want)
    assert seen and all(s[-1] == 1 for s in seen)  # never spread over D


def test_slabs_on_threads_do_not_wait_for_numba():
    """The tier's slabs run on threads without importing numba (numba's default thread
    count is read from the environment until numba is loaded): a first answer does not
    pay numba's start-up."""
    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        import axesarray as ax
        from axesarray.dag.nodes import walk
        from axesarray.engine import tier_eval, tiers
        x = ax.tensor(np.random.default_rng(0).random((512, 1024), np.float32), "N K")
        e = ax.exp(x).sum("K")
        root = tier_eval.rewrite(e.node, tier_eval.TIER_REWRITES)
        assert tier_eval._slabs(walk(root), root) is not None
        out = ax.zeros(e.axes, "float32")
        tier_eval.tier_assign(out.node, e.node)
        want = np.exp(x.numpy().astype(np.float64)).sum(1).astype(np.float32)
        print("numba" in sys.modules, bool((out.numpy() == want).all()))
        """
    )
    env = dict(os.environ, NUMBA_NUM_THREADS="2")
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "True"]


def test_slabs_reduce_a_leaf_directly(tiered, float64_way):
    """In slabs, a reduction straight over a leaf (``x.max("K")``, a layer norm's mean)
    reads the leaf's slab: the tier answers (it does not fall back to the kernels)."""
    xn = np.random.default_rng(7).standard_normal((512, 1024)).astype(np.float32)
    x = ax.tensor(xn, "N K")
    e = ax.exp(x - x.max("K"))
    from axesarray.dag.nodes import walk

    root = tier_eval.rewrite(e.node, tier_eval.TIER_REWRITES)
    assert tier_eval._slabs(walk(root), root) is not None
    out = ax.zeros(x.axes, "float32")
    tier_eval.tier_assign(out.node, e.node)  # raised ValueError before (then the kernels ran)
    want = np.exp((xn - xn.max(1, keepdims=True)).astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(out.numpy(), want)


def test_dots_and_uncut_values_are_computed_first_then_the_slabs_read_them(tiered):
    """Attention and a cosine by names: the dot (and the norms of ``b``, which the slabs
    over ``N`` do not cut) are computed in full first; the softmax between the two dots and
    the division run in slabs, and give numpy's values."""
    from axesarray.dag.nodes import walk

    rng = np.random.default_rng(11)
    batch = 4 * tier_eval.SLAB_ELEMENTS // (4 * 128 * 128)  # 4 slabs of the softmax
    qn, kn, vn = (rng.standard_normal((batch, 4, 128, 32)).astype(np.float32) for _ in range(3))
    q, k, v = (ax.tensor(a, "B H Q D") for a in (qn, kn, vn))
    k, v = k.rename({"Q": "S"}), v.rename({"Q": "S"})
    s = ax.dot(q, k, over="D") * np.float32(0.125)
    p = ax.softmax(s, "S")
    seen = []
    evaluate = tier_eval._evaluate

    def spy(root, target, given=None, memo=None):
        order = walk(root, lambda n: () if given and id(n) in given else n.children)
        found = tier_eval._slabs(order, root, given)
        seen.append(None if found is None else [n.kind for n in found[3]])
        return evaluate(root, target, given, memo)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tier_eval, "_evaluate", spy)
        out = ax.zeros(ax.dot(p, v, over="S").axes, "float32")
        tier_eval.tier_assign(out.node, ax.dot(p, v, over="S").node)
    assert ["dot"] in seen  # the softmax's slabs read the first dot, computed first
    sn = (qn @ kn.transpose(0, 1, 3, 2)).astype(np.float64) * 0.125
    e = np.exp(sn - sn.max(-1, keepdims=True))
    want = ((e / e.sum(-1, keepdims=True)).astype(np.float32) @ vn).astype(np.float32)
    assert_close(out, want)

    an = rng.standard_normal((4 * tier_eval.SLAB_ELEMENTS // 1024, 64)).astype(np.float32)
    bn = rng.standard_normal((1024, 64)).astype(np.float32)
    a, b = ax.tensor(an, "N D"), ax.tensor(bn, "M D")
    cos = (a * b).sum("D") / ax.sqrt((a * a).sum("D") * (b * b).sum("D"))
    seen.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tier_eval, "_evaluate", spy)
        out = ax.zeros(cos.axes, "float32")
        tier_eval.tier_assign(out.node, cos.node)
    assert seen[0] is not None and "dot" in seen[0] and "reduce" in seen[0]
    na = np.sqrt((an.astype(np.float64) ** 2).sum(1))
    nb = np.sqrt((bn.astype(np.float64) ** 2).sum(1))
    assert_close(out, ((an @ bn.T) / np.outer(na, nb)).astype(np.float32))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("wide", [False, True])
def test_replayed_slabs_write_their_own_rows(tiered, threads, wide):
    """16 slabs over one or two threads: after the first full slab, the recorded steps are
    replayed (each thread with its own buffer set), and the last op writes the rows of the
    slab being run (a replay once wrote every slab into the first one's rows)."""
    from axesarray.dag.nodes import walk

    n = 16 * tier_eval.SLAB_ELEMENTS // 512  # 16 slabs: 8 ranges of 2 on two threads
    xn = np.random.default_rng(12).standard_normal((n, 512)).astype(np.float32)
    x = ax.tensor(xn, "N K")
    e = (ax.exp(x) if wide else x * np.float32(3)) * np.float32(2) + np.float32(1)
    root = tier_eval.rewrite(e.node, tier_eval.TIER_REWRITES)
    assert tier_eval._slabs(walk(root), root)[2] * 16 == n
    out = ax.zeros(e.axes, "float32")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tier_eval, "num_threads", lambda load=True: threads)
        tier_eval.tier_assign(out.node, e.node)
    x64 = xn.astype(np.float64)
    want = (np.exp(x64) * 2 + 1).astype(np.float32) if wide else xn * np.float32(3) * 2 + 1
    assert_close(out, want)


@pytest.mark.parametrize("c", [8, 6])  # whole NCHW4 blocks (split target), a partial block
@pytest.mark.parametrize("n", [1, 3, 2 * tier_eval.SLAB_ELEMENTS // (8 * 16 * 16) + 1])
def test_a_quantize_into_nchw4_writes_the_blocked_destination(tiered, c, n):
    """``clip(round(x / s), -128, 127).astype(int8)`` into NCHW4: with whole blocks each
    slab writes its rows of the destination through a view with C split in two (``_split``),
    else the value is computed first; both give numpy's bytes, and the padding stays 0."""
    xn = (np.random.default_rng(21).standard_normal((n, c, 16, 16)) * 40).astype(np.float32)
    x = ax.tensor(xn, "N C H W")
    out = ax.zeros(x.axes, "int8", layout="NCHW4")
    q = ax.clip(ax.round(x / 0.5), -128, 127).astype("int8")
    assert (tier_write.target_of(out.node, q.node) is not None) == (c % 4 == 0)
    tier_eval.tier_assign(out.node, q.node)
    want = np.clip(np.round(xn / np.float32(0.5)), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(out.numpy(), want)
    raw = out.node.data.reshape(n, -(-c // 4), 16, 16, 4)
    np.testing.assert_array_equal(raw[:, c // 4 :, :, :, c % 4 :], 0)


@pytest.mark.parametrize(
    "block, dtype, lanes",
    [(4, "int8", True), (8, "float16", True), (4, "float32", True), (16, "float32", False)],
)
@pytest.mark.parametrize("n", [0, 2])
def test_narrow_blocks_are_written_lane_by_lane(tiered, block, dtype, lanes, n):
    """Into a split target with narrow blocks (NCHW4 int8: 4 bytes) the value is copied one
    lane at a time, the long W innermost (numpy's own order runs an inner loop per block);
    wide blocks (NCHW16 float32, 64 bytes) in one copy. numpy's values either way."""
    xn = (np.random.default_rng(23).standard_normal((n, 32, 5, 12)) * 40).astype(np.float32)
    x = ax.tensor(xn, "N C H W")
    out = ax.zeros(x.axes, dtype, layout=f"NCHW{block}")
    q = ax.clip(ax.round(x / 0.5), -128, 127).astype(dtype)
    target = tier_write.target_of(out.node, q.node)
    lane = tier_write.narrow_lanes(target, q.node.shape)
    assert lane == (2 if lanes and n else None)
    tier_eval.tier_assign(out.node, q.node)
    want = np.clip(np.round(xn / np.float32(0.5)), -128, 127).astype(dtype)
    np.testing.assert_array_equal(out.numpy(), want)


def test_an_integer_power_is_computed_before_the_destination_is_written(tiered):
    """numpy refuses an integer to a negative power midway: with such a node in the
    expression the tier writes nothing into an integer destination until the end."""
    x = ax.tensor(np.arange(6, dtype=np.int64).reshape(2, 3), "A B")
    out = ax.zeros(x.axes, "int64")
    assert tier_write.target_of(out.node, (x**2 + 1).node) is None
    assert tier_write.target_of(out.node, (x * 2 + 1).node) is not None
    before = out.numpy().copy()
    with pytest.raises(ValueError):
        tier_eval.tier_assign(out.node, (x + x ** ax.tensor(np.full((2, 3), -1), "A B")).node)
    np.testing.assert_array_equal(out.numpy(), before)


def test_one_big_reduction_runs_in_one_part_per_thread(tiered):
    """``x.max("K")`` has no temporary to keep in cache: split into as many parts as
    threads (one core does not reach the memory roof), each writing its rows."""
    from axesarray.dag.nodes import walk

    n = 4 * tier_eval.SLAB_ELEMENTS // 1024 + 3
    xn = np.random.default_rng(22).standard_normal((n, 1024)).astype(np.float32)
    xn[5, 7] = np.nan
    x = ax.tensor(xn, "N K")
    e = x.max("K")
    for threads in (1, 2, 3):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(tier_eval, "num_threads", lambda load=True, t=threads: t)
            found = tier_eval._slabs(walk(e.node), e.node)
            assert (found is None) == (threads == 1)
            if found is not None:
                assert found[2] == -(-n // threads)
            out = ax.zeros(e.axes, "float32")
            tier_eval.tier_assign(out.node, e.node)
        np.testing.assert_array_equal(out.numpy(), xn.max(axis=1))


def test_the_tier_loads_the_math_librarys_loops_in_the_background_then_uses_them(
    tiered, monkeypatch
):
    """A float32 ``exp`` the tier computes in float64 with numpy is wanted as a loop of the
    math library (``tier_math``); the load is queued after the answer and the next
    answers use it, in place over a dying operand too (``exp(x * 2)``: the loop for one
    array, which vectorizes where the two-array loop would not)."""
    from axesarray.kernels import tier_math

    monkeypatch.setattr(tier_math, "LOOPS", {})
    monkeypatch.setattr(tier_math, "ROW_LOOPS", {})
    monkeypatch.setattr(tier_math, "WANTED", set())
    monkeypatch.setattr(tiers, "_loops_queued", set())
    monkeypatch.setattr(tiers, "ANSWER_ALL", True)  # the tier answers every call
    monkeypatch.setattr(tiers, "_ANSWERS", [1])  # it answered before: its loops are wanted
    calls = []
    run_loop = tier_math.run_loop

    def counted(op, x, out):
        value = run_loop(op, x, out)
        calls.append((op, value is out, out is not None and np.shares_memory(x, out)))
        return value

    monkeypatch.setattr(tier_math, "run_loop", counted)
    xn = np.random.default_rng(23).standard_normal((64, 300)).astype(np.float32)
    x = ax.tensor(xn, "N K")
    want = np.exp(xn.astype(np.float64) * 2).sum(1)
    first = (ax.exp(x * 2).sum("K") + 0).numpy()  # a structure no other test builds
    assert set(tier_math.WANTED) == {"exp", "sum"} and not calls  # (the sum: a row loop)
    tiers.background_done().result()
    assert set(tier_math.LOOPS) == {"exp"}
    assert {op for op, _ in tier_math.ROW_LOOPS} == {"sum"}
    second = (ax.exp(x * 2).sum("K") + 0).numpy()
    assert calls == [("exp", True, True)]  # in place, over the product's buffer
    assert_close(first, want.astype(np.float32))
    assert_close(second, want.astype(np.float32))


def test_a_math_library_loop_writes_a_partial_overlap_elsewhere():
    from axesarray.kernels import tier_math

    tier_math.load(["tanh"])
    buf = np.linspace(-3, 3, 101, dtype=np.float32)
    x, out = buf[:-1], buf[1:]  # overlapping, not the same: computed into a new array
    want = np.tanh(x.astype(np.float64)).astype(np.float32)
    got = tier_math.run_loop("tanh", x, out)
    assert got is not out
    np.testing.assert_array_max_ulp(got, want, 1)


def test_a_schedule_keeps_its_tier_program_and_binds_each_calls_values(tiered, monkeypatch):
    """The tier's evaluation of a schedule is worked out once (``tier_eval.Program``): a
    later call of the same structure with other arrays and other constants (a clip's bound,
    which picks numpy's ufunc, and a scale) rewrites nothing and gives its own values; the
    program keeps no array of the first call alive."""
    import gc
    import weakref

    monkeypatch.setattr(tiers, "ANSWER_ALL", True)
    rewrites = []
    rewrite = tier_eval.rewrite
    monkeypatch.setattr(tier_eval, "rewrite", lambda *a: rewrites.append(1) or rewrite(*a))
    rng = np.random.default_rng(24)
    small, big = (3, 7), (4 * tier_eval.SLAB_ELEMENTS // 256, 256)  # in full; in slabs
    for shape in (small, big):
        rewrites.clear()
        refs = []
        for lo, scale in ((-0.5, 3.0), (0.25, -2.0), (-0.5, 3.0)):
            xn = rng.standard_normal(shape).astype(np.float32)
            x = ax.tensor(xn, "N K")
            e = ax.exp(ax.clip(x * scale, lo, 1.5)) + x.max("K")
            got = e.numpy()
            x64 = np.clip(xn.astype(np.float64) * scale, lo, 1.5)
            want = np.exp(x64) + xn.max(1, keepdims=True)
            assert_close(got, want.astype(np.float32))
            refs.append(weakref.ref(x.node.data))
            program = _plan(e).tier_program
            del x, e, xn
        assert isinstance(program, tier_eval.Program)
        assert len(rewrites) == 1  # the first call's: the next two reuse the program
        gc.collect()
        assert refs[0]() is None  # the first call's input is not kept


def test_a_program_is_kept_only_where_each_param_is_bound_per_call():
    """Leaves and constants are bound per call; a param of another kind (a pad's value)
    keeps the evaluation per call, and so does an expression with nothing to compute."""
    x = ax.tensor(np.arange(6.0).reshape(2, 3), "A B")
    assert tier_eval.Program.of((ax.exp(x) * 2).node) is not None
    padded = ax.pad(x, {"B": (1, 1)}, value=5.0) * 2
    assert any(p.kind == "pad" for p in padded.node.params)
    assert tier_eval.Program.of(padded.node) is None
    assert tier_eval.Program.of((x + 0).node) is not None
    assert tier_eval.Program.of(x.isel({"A": 0}).node) is None  # a view: nothing computed


def test_the_op_after_a_dot_writes_over_the_dots_result(tiered, monkeypatch):
    """A dot's result is a new array only it holds: the bias add and the relu after it run
    in place over it (as numpy's own temporary elision of ``x @ w + b``), in the call that
    works the steps out and in the kept program's replays, each call with its own values;
    the product an operand is read through twice is not written over."""
    monkeypatch.setattr(tiers, "ANSWER_ALL", True)
    writes = []
    compute = tier_eval.compute

    def counted(node, kids, is_wide, wide, out, shape):
        if node.kind == "map" and out is not None:
            writes.append((node.op, any(out is k for k in kids)))
        return compute(node, kids, is_wide, wide, out, shape)

    monkeypatch.setattr(tier_eval, "compute", counted)
    rng = np.random.default_rng(31)
    for _ in range(3):
        xn, wn = rng.standard_normal((16, 8)), rng.standard_normal((8, 12))
        bn = rng.standard_normal(12)
        x, w, b = ax.tensor(xn, "B I"), ax.tensor(wn, "I H"), ax.tensor(bn, "H")
        writes.clear()
        h = ax.maximum(ax.dot(x, w, over="I") + b, 0) * 3
        assert_close(h.numpy(), np.maximum(xn @ wn + bn, 0) * 3)
        # (the last op writes the result's own storage)
        assert writes == [("add", True), ("maximum", True), ("mul", False)]
    d = ax.dot(x, w, over="I")
    writes.clear()
    assert_close((d * 2 + d).numpy(), 3 * (xn @ wn))  # d read twice: the product not in place
    assert writes[0] == ("mul", False)


def test_the_tier_writes_a_row_reduction_into_the_destination(tiered, monkeypatch):
    """``out[...] = x.max(K)`` on the tier: the row loop writes ``out`` itself (no result
    array copied in); into a destination that overlaps ``x`` it writes a new array first
    (numpy's values, as if the max were computed before the write)."""
    from axesarray.kernels import tier_math

    monkeypatch.setattr(tiers, "ANSWER_ALL", True)
    tier_math.load(["max"])
    seen = []
    run_rows = tier_math.run_rows

    def spied(op, v, k, out=None):
        value = run_rows(op, v, k, out)
        seen.append(value is out)
        return value

    monkeypatch.setattr(tier_math, "run_rows", spied)
    xn = np.random.default_rng(42).standard_normal((6, 9)).astype(np.float32)
    x = ax.tensor(xn.copy(), "N K")
    out = ax.tensor(np.zeros(6, np.float32), "N")
    for _ in range(2):  # (the second call replays the kept program's steps)
        out[...] = x.max("K")
        np.testing.assert_array_equal(out.numpy(), xn.max(1))
    assert seen[-1] is True
    for _ in range(2):
        seen.clear()
        x = ax.tensor(xn.copy(), "N K")
        first = x.isel(K=0)  # a view of x: the loop reads what it would write
        first[...] = x.max("K")
        np.testing.assert_array_equal(x.numpy()[:, 0], xn.max(1))
        np.testing.assert_array_equal(x.numpy()[:, 1:], xn[:, 1:])
        assert seen == [False]


def test_the_tier_takes_row_maxima_and_minima_by_the_math_librarys_loops(tiered, monkeypatch):
    """A max or min over an array's last dims is the row loop of ``tier_math`` once loaded
    (numpy's reduction pays ~100 ns a row), for float32 and float64 (a float32 chain the
    tier computes in float64 too), with numpy's values: NaN wins, infinities, a row of
    one, over one dim and over two; a reduction over other dims, or of an array not in C
    order, is numpy's. The load is asked for as the math functions' are."""
    from axesarray.kernels import tier_math

    monkeypatch.setattr(tier_math, "WANTED", set())
    monkeypatch.setattr(tiers, "ANSWER_ALL", True)
    monkeypatch.setattr(tier_math, "ROW_LOOPS", {})
    xn = np.random.default_rng(41).standard_normal((6, 5, 7)).astype(np.float32)
    x = ax.tensor(xn, "I J K")
    np.testing.assert_array_equal(x.max("K").numpy(), xn.max(2))
    assert set(tier_math.WANTED) == {"max"}
    tier_math.load(["max", "min"])
    calls = []
    run_rows = tier_math.run_rows

    def counted(op, v, k, out=None):
        value = run_rows(op, v, k, out)
        calls.append((op, v.dtype.name, k, value is not None))
        return value

    monkeypatch.setattr(tier_math, "run_rows", counted)
    xn[1, 2, 3], xn[2, 4] = np.nan, np.nan  # one NaN in a row, a whole row of NaN
    xn[3, 0, 1], xn[4, 1, :] = np.inf, -np.inf
    for dtype in (np.float32, np.float64):
        vn = xn.astype(dtype)
        v = ax.tensor(vn, "I J K")
        calls.clear()
        np.testing.assert_array_equal(v.max("K").numpy(), vn.max(2))
        np.testing.assert_array_equal(v.min(("J", "K")).numpy(), vn.min((1, 2)))
        np.testing.assert_array_equal((v + 0).max("K").numpy(), vn.max(2))
        assert calls == [
            ("max", np.dtype(dtype).name, 1, True),
            ("min", np.dtype(dtype).name, 2, True),
            ("max", np.dtype(dtype).name, 1, True),
        ]
    calls.clear()
    one = ax.tensor(xn[:, :, :1].copy(), "I J K")
    np.testing.assert_array_equal(one.max("K").numpy(), xn[:, :, 0])
    np.testing.assert_array_equal(x.max("J").numpy(), xn.max(1))  # not the last dim
    t = ax.tensor(np.ascontiguousarray(xn.transpose(0, 2, 1)), "I K J").transpose("I", "J", "K")
    np.testing.assert_array_equal(t.max("K").numpy(), xn.max(2))  # K is not contiguous
    assert calls == [("max", "float32", 1, True), ("max", "float32", 1, False)]
    # in float64 from the exp on (the tier's float32 chain), the max of that value
    ex = np.exp(xn[:, :, :3].astype(np.float64) / 50)
    got = ax.exp(ax.tensor(xn[:, :, :3].copy(), "I J K") / 50).max("K").numpy()
    np.testing.assert_array_equal(got, ex.max(2).astype(np.float32))


def test_a_math_library_loop_is_never_compiled_on_the_calling_thread():
    """A read-only or unaligned input is another argument type for numba: the loops are
    compiled for read-only inputs at load, and an unaligned input is copied first, so a
    call never compiles (which would stall the tier's answer)."""
    from axesarray.kernels import tier_math

    tier_math.load(["tanh", "max"])
    loop = tier_math.LOOPS["tanh"][0]
    rows = tier_math.ROW_LOOPS[("max", np.dtype(np.float32))]
    before = (len(loop.signatures), len(rows.signatures))
    xn = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)
    ro = xn.copy()
    ro.flags.writeable = False
    raw = np.zeros(xn.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(8, 8)  # unaligned
    raw[...] = xn
    assert not raw.flags.aligned
    for v in (ro, raw):
        np.testing.assert_array_max_ulp(
            tier_math.run_loop("tanh", v, None), np.tanh(xn.astype(np.float64)).astype(np.float32)
        )
        got = tier_math.run_rows("max", v, 1)
        assert got is None or np.array_equal(got, xn.max(1))
    assert (len(loop.signatures), len(rows.signatures)) == before


def test_a_kept_program_binds_each_leaf_view_as_its_own(tiered, monkeypatch):
    """A kept program makes each param's numpy view from a recipe (shape, byte strides,
    offset; the plan key fixes them): an offset view, a transposed one, a broadcast leaf
    (a stride-0 dim, kept compact) and a read-only one, each call over its own storage,
    give numpy's values; a read-only input stays read-only."""
    monkeypatch.setattr(tiers, "ANSWER_ALL", True)
    rng = np.random.default_rng(43)
    for _ in range(3):
        base = rng.standard_normal((5, 9))
        row = rng.standard_normal(6)
        ro = rng.standard_normal((6, 4))
        ro.flags.writeable = False
        x = ax.tensor(base, "I J").isel({"I": slice(1, 5), "J": slice(2, 8)})  # offset
        t = ax.tensor(base.T.copy(), "J I").transpose("I", "J")
        t = t.isel({"I": slice(1, 5), "J": slice(2, 8)})  # transposed
        wide = ax.tensor(np.broadcast_to(row, (4, 6)), "I J")  # stride 0 along I
        r = ax.tensor(ro, "J K")
        e = (x * 2 + t - wide).sum("J") + ax.dot(x, r, over="J").sum("K")
        want = (base[1:5, 2:8] * 3 - row).sum(1) + (base[1:5, 2:8] @ ro).sum(1)
        assert_close(e.numpy(), want)
    program = _plan(e).tier_program
    assert isinstance(program, tier_eval.Program)
    bound = list(program.bind(e.node.params).values())
    by_shape = {v.shape: v for v in bound}
    assert (1, 6) in by_shape and by_shape[(1, 6)].strides[0] == 0  # compact
    assert not by_shape[(6, 4)].flags.writeable  # the read-only operands
    assert not by_shape[(1, 6)].flags.writeable  # (numpy's broadcast_to is read-only)
    assert by_shape[(4, 6)].flags.writeable


def test_slabs_write_a_destination_that_is_an_operand_cut_as_it_is(tiered, monkeypatch):
    """``m[...] = b * m + g`` in slabs writes ``m`` in place: each slab reads its rows of
    ``m`` before its last op writes them. An operand that reads the destination otherwise
    (a row broadcast, reversed, shifted) makes a fresh result first: numpy's values, as
    if the right side were computed before the write."""
    monkeypatch.setattr(tiers, "ANSWER_ALL", True)
    seen = []
    same_view = tier_write.same_view
    monkeypatch.setattr(
        tier_eval, "same_view", lambda a, b: seen.append(same_view(a, b)) or seen[-1]
    )
    n, k = 4 * tier_eval.SLAB_ELEMENTS // 256, 256
    rng = np.random.default_rng(47)
    mn, gn = rng.standard_normal((n, k)), rng.standard_normal((n, k))
    m, g = ax.tensor(mn, "I K"), ax.tensor(gn, "I K")
    want = 0.9 * mn + 0.1 * gn
    m[...] = 0.9 * m + 0.1 * g
    assert_close(m.numpy(), want)
    assert seen == [True]
    for other in (
        lambda t: t.isel({"I": 0}),  # row 0, read by every slab
        lambda t: t.isel({"I": slice(None, None, -1)}),  # reversed
    ):
        seen.clear()
        before = m.numpy().copy()
        m[...] = m * 2 + other(m)
        o = before[0] if other(m).ndim == 1 else before[::-1]
        assert_close(m.numpy(), before * 2 + o)
        assert False in seen or not seen
    base = ax.tensor(rng.standard_normal((n + 1, k)), "I K")
    lo, hi = base.isel({"I": slice(0, n)}), base.isel({"I": slice(1, n + 1)})
    b = base.numpy().copy()
    lo[...] = hi * 3  # shifted by a row: a slab would read rows the one before it wrote
    assert_close(base.numpy()[:n], b[1:] * 3)


def test_the_tier_sums_float32_rows_in_float64_as_the_kernels_do(tiered, monkeypatch):
    """A float32 sum over the last dims is the row loop once loaded: a float64 accumulator,
    as the kernels sum (numpy adds pairwise in float32: a row of 1e8, 298 ones and -1e8
    sums to 288 there, 298 here and in the kernels); a mean is a sum too."""
    from axesarray.kernels import tier_math

    monkeypatch.setattr(tiers, "ANSWER_ALL", True)
    tier_math.load(["sum"])
    xn = np.ones((3, 300), np.float32)
    xn[:, 0], xn[:, -1] = 1e8, -1e8
    assert xn.sum(1)[0] != 298  # numpy's float32 pairwise sum loses ones
    x = ax.tensor(xn, "N K")
    np.testing.assert_array_equal(x.sum("K").numpy(), np.full(3, 298, np.float32))
    np.testing.assert_array_equal(x.mean("K").numpy(), np.full(3, 298 / 300, np.float32))
    with ax.set_options(tiered=False):
        np.testing.assert_array_equal(x.sum("K").numpy(), np.full(3, 298, np.float32))
    yn = np.random.default_rng(53).standard_normal((5, 4, 6))
    y = ax.tensor(yn, "A B C")
    assert_close(y.sum(("B", "C")).numpy(), yn.sum((1, 2)))  # float64, two dims


def test_the_loops_load_one_compile_a_job(monkeypatch):
    """The compile thread loads the tier's loops one signature a job (a read-only input is
    another signature), the last job publishing them, so an exit waits for one compile at
    most (a row op's four took 0.4-0.9 s without numba's cache)."""
    from axesarray.kernels import tier_math

    monkeypatch.setattr(tier_math, "LOOPS", {})
    monkeypatch.setattr(tier_math, "ROW_LOOPS", {})
    monkeypatch.setattr(tier_math, "WANTED", {"exp", "min", "cos"})
    monkeypatch.setattr(tiers, "_loops_queued", set())
    jobs = []
    monkeypatch.setattr(tiers, "in_background", lambda fn, *args: jobs.append((fn, args)))
    tiers.load_tier_loops()
    assert len(jobs) == (3 + 1) + (4 + 1)  # exp: two-array (+ read-only) and in place; min
    for fn, args in jobs[:-1]:
        fn(*args)
        assert "min" not in {op for op, _ in tier_math.ROW_LOOPS}  # published last
    jobs[-1][0](*jobs[-1][1])
    assert set(tier_math.LOOPS) == {"exp"}
    assert set(tier_math.ROW_LOOPS) == {("min", np.dtype("float32")), ("min", np.dtype("float64"))}
    assert tier_math.load_steps("exp") == tier_math.load_steps("min") == []
    jobs.clear()
    tiers.load_tier_loops()  # queued once
    assert jobs == []
