"""Parallel CPU kernels run ranges of their outer loop on threads (kernels/threads.py)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.engine import cost, dispatch, executor
from axesarray.engine.binder import binder
from axesarray.engine.dispatch import kernel_for, source_for
from axesarray.kernels import threads
from axesarray.kernels.threads import run_parts


@pytest.mark.parametrize("count", [0, 1, 2, 7, 1000])
def test_run_parts_covers_each_index_once(count):
    seen, lock = [], threading.Lock()

    def part(lo, hi, out):
        with lock:
            out.extend(range(lo, hi))

    run_parts(part, count, (seen,))
    assert sorted(seen) == list(range(count))


def test_a_failing_part_raises_in_the_caller():
    def part(lo, hi):
        raise ZeroDivisionError("boom")

    with pytest.raises(ZeroDivisionError, match="boom"):
        run_parts(part, 100, ())


def _lse(xn):
    m = xn.max().astype(np.float64)
    return np.float32(m + np.log(np.exp(xn.astype(np.float64) - m).sum()))


def _source(e, kind):
    plan, _ = executor.schedule_for(e._node, None)
    assert len(plan.steps) == 1
    return source_for(plan.steps[0], plan.device, kind)[0]


def test_a_parallel_kernel_is_compiled_serial_over_a_range():
    a = ax.zeros((ax.Axis("R", 300), ax.Axis("K", 5)), "float32")
    src = _source(a.sum("K"), "parallel")
    assert "def part(sync, jlo, jhi, " in src and "parallel=False" in src
    assert "run_claimed(part, n0, " in src and "prange(" not in src.split("def part", 1)[1]
    assert "r_ = claim(sync)" in src  # the threads claim the ranges themselves
    # a full reduction: ranges of chunks, then a last call combining them in order
    full = _source(a.sum(), "parallel")
    assert "def part(sync, jlo, jhi, parts, " in full and "parallel=False" in full
    assert "part(PLAIN, -1, -1, *args)" in full


def test_a_parallel_full_reduction_agrees_with_numpy_and_is_deterministic(parallel_kernels):
    xn = np.random.default_rng(1).standard_normal(100_003).astype(np.float32)
    x = ax.tensor(xn, "R")
    with ax.set_options(serial_threshold=0):
        runs = [x.sum().numpy().tobytes() for _ in range(3)]
        assert runs[0] == runs[1] == runs[2]
        assert_close(x.sum(), np.float32(xn.sum(dtype=np.float64)))
        assert_close(x.argmax("R"), np.argmax(xn))
        assert_close(ax.logsumexp(x, "R"), _lse(xn))


def test_parallel_kernels_agree_with_numpy(parallel_kernels):
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((600, 257)).astype(np.float32)
    x = ax.tensor(xn, "R K")
    with ax.set_options(serial_threshold=0):  # the parallel variants, on small data
        assert_close(ax.tanh(x * 2 + 1), np.tanh(xn * 2 + 1))
        assert_close(x.sum("K"), xn.sum(1))
        assert_close(x.max("R"), xn.max(0))


# --- the launch: helpers, failures, concurrent callers ------------------------------------


@pytest.fixture
def three_threads(monkeypatch):
    """run_parts launches on 3 threads (2 helpers), however many cores this machine has
    and whatever BLAS ran just before."""
    monkeypatch.setattr(threads, "num_threads", lambda: 3)
    monkeypatch.setattr(threads, "_SPIN_UNTIL", [0.0])


def _record(lo, hi, out, lock):
    with lock:
        out.append((lo, hi, threading.get_ident()))


def test_helpers_run_ranges_with_interrupts_blocked(three_threads):
    """Helpers take ranges (each part sleeps, so they get the chance), block SIGINT, and
    are daemon threads: interpreter exit does not wait for them."""
    seen = []

    def part(lo, hi):
        time.sleep(0.02)
        masked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        seen.append((lo, hi, threading.get_ident(), masked))  # one append: atomic

    run_parts(part, 12, ())
    assert sorted((lo, hi) for lo, hi, _, _ in seen) == [(i, i + 1) for i in range(12)]
    me = threading.get_ident()
    helper = {t for _, _, t, _ in seen} - {me}
    assert helper and helper <= set(threads._HELPERS)
    assert all(masked for _, _, t, masked in seen if t != me)
    assert all(t.daemon for t in threading.enumerate() if t.ident in threads._HELPERS)


def test_a_late_helper_leaves_its_ranges_to_the_caller(three_threads):
    """With every helper busy, the caller runs all ranges and returns without waiting."""
    run_parts(lambda lo, hi: None, 10, ())  # the helpers exist
    release = threading.Event()
    stalled = queue.SimpleQueue()
    for _ in threads._HELPERS:
        threads._JOBS.put((lambda _h: release.wait(30) and 0, stalled, None))
    try:
        seen, lock = [], threading.Lock()
        done = threading.Thread(target=run_parts, args=(_record, 100, (seen, lock)))
        done.start()
        done.join(10)
        assert not done.is_alive()
        assert sorted(lo for lo, _, _ in seen) == [100 * r // 12 for r in range(12)]
        assert {t for _, _, t in seen} == {done.ident}
    finally:
        release.set()
    for _ in threads._HELPERS:
        assert stalled.get(timeout=10) == 0


def test_a_failing_part_raises_in_the_caller_whoever_ran_it(three_threads):
    ran, lock = [], threading.Lock()

    def part(lo, hi):
        time.sleep(0.005)
        _record(lo, hi, ran, lock)
        if lo == 5:
            raise ZeroDivisionError(f"range {lo}")

    with pytest.raises(ZeroDivisionError, match="range 5"):
        run_parts(part, 12, ())
    assert len(ran) <= 12  # ranges after the failure are skipped, none runs twice
    assert len({lo for lo, _, _ in ran}) == len(ran)
    seen = []
    run_parts(_record, 12, (seen, lock))  # the helpers still serve
    assert sorted(lo for lo, _, _ in seen) == list(range(12))


def _three_callers_at_once(launch) -> None:
    """``launch(count)`` 200 times on each of three user threads started together (counts
    37, 1000 and 5); fails with the first error one of them met."""
    errors, barrier = [], threading.Barrier(3)

    def caller(count):
        barrier.wait()
        try:
            for _ in range(200):
                launch(count)
        except Exception as e:  # noqa: BLE001 - reported by the test thread
            errors.append(e)

    users = [threading.Thread(target=caller, args=(n,)) for n in (37, 1000, 5)]
    for t in users:
        t.start()
    for t in users:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in users)


def test_concurrent_callers_each_get_their_own_ranges(three_threads):
    def launch(count):
        seen, lock = [], threading.Lock()
        run_parts(_record, count, (seen, lock))
        bounds = sorted((lo, hi) for lo, hi, _ in seen)
        assert [lo for lo, _ in bounds][0] == 0 and bounds[-1][1] == count
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))

    _three_callers_at_once(launch)


def test_a_part_launching_parts_runs_them_itself(three_threads):
    seen, lock = [], threading.Lock()

    def outer(lo, hi):
        for i in range(lo, hi):
            run_parts(lambda a, b, i=i: _record(i * 10 + a, i * 10 + b, seen, lock), 10, ())

    t = threading.Thread(target=run_parts, args=(outer, 6, ()))
    t.start()
    t.join(30)
    assert not t.is_alive()
    covered = sorted(i for lo, hi, _ in seen for i in range(lo, hi))
    assert covered == list(range(60))


# --- claiming launches (run_claimed): the generated kernels' --------------------------------

_CLAIMING = """
import time
from numba import njit
from axesarray.kernels.atomics import NR, PLAIN, claim, claimed_bounds, enter_claims, leave_claims


@njit(nogil=True)
def busy(n):
    s = 0.0
    for k in range(n):
        s += (k % 7) * 0.5
    return s


@njit(nogil=True)
def part(sync, jlo, jhi, runs, role, work, fail_at):
{body}
"""


def _claiming_part():
    """A part of the generated kernels' shape (``cpu._claimed`` over a loop of ``jlo..jhi``):
    each index counts its runs and records which thread ran it (-1: a plain call), after
    ``work`` iterations of busy work; index ``fail_at`` raises."""
    from axesarray.kernels.cpu import _claimed

    loop = [
        "    for jo in range(jlo, jhi):",
        "        if jo == fail_at:",
        "            raise ZeroDivisionError('range failed')",
        "        runs[jo] += 1 + 0 * busy(work)",
        "        role[jo] = jhi if sync[NR] else -1",
    ]
    ns: dict = {}
    exec(_CLAIMING.format(body="\n".join(_claimed(loop))), ns)  # noqa: S102 - test source
    return ns["part"]


@pytest.fixture(scope="module")
def claiming_part():
    return _claiming_part()


@pytest.mark.parametrize("count", [0, 1, 2, 7, 1000])
def test_claimed_ranges_cover_each_index_once(three_threads, claiming_part, count):
    runs, role = np.zeros(count, np.int64), np.zeros(count, np.int64)
    threads.run_claimed(claiming_part, count, (runs, role, 20000, -1))
    assert (runs == 1).all()
    if count >= 2:  # claimed: by the caller (0) or a helper (1, 2)
        assert set(role) <= {0, 1, 2}


def _roles_of_launches(part, work: int) -> set:
    """Which threads ran ranges over 20 claiming launches of 64 indices, each index
    ``work`` busy iterations; every index runs once in each."""
    roles = set()
    for _ in range(20):
        runs, role = np.zeros(64, np.int64), np.zeros(64, np.int64)
        threads.run_claimed(part, 64, (runs, role, work, -1))
        assert (runs == 1).all()
        roles |= set(role)
    return roles


def test_helpers_claim_ranges_once_awake(three_threads, claiming_part):
    """Busy ranges: the helpers wake while the caller works and take some of them."""
    roles = _roles_of_launches(claiming_part, 200000)
    assert 0 in roles and roles & {1, 2}


def test_a_claiming_launch_never_waits_for_a_helper_to_start(three_threads, claiming_part):
    """With every helper busy, the caller claims every range and returns; a helper that
    starts later finds none left and touches nothing."""
    threads.run_claimed(claiming_part, 8, (np.zeros(8, np.int64), np.zeros(8, np.int64), 1, -1))
    release = threading.Event()
    stalled = queue.SimpleQueue()
    for _ in threads._HELPERS:
        threads._JOBS.put((lambda _h: release.wait(30) and 0, stalled, None))
    runs, role = np.zeros(100, np.int64), np.zeros(100, np.int64)
    try:
        done = threading.Thread(
            target=threads.run_claimed, args=(claiming_part, 100, (runs, role, 10, -1))
        )
        done.start()
        done.join(10)
        assert not done.is_alive()
        assert (runs == 1).all() and (role == 0).all()
    finally:
        release.set()
    for _ in threads._HELPERS:
        assert stalled.get(timeout=10) == 0
    time.sleep(0.05)  # the helpers have run their (late) share of the launch: nothing
    assert (runs == 1).all()


def test_a_failing_claimed_range_raises_in_the_caller_whoever_ran_it(three_threads, claiming_part):
    for fail_at in (0, 5, 63):
        runs, role = np.zeros(64, np.int64), np.zeros(64, np.int64)
        with pytest.raises(ZeroDivisionError, match="range failed"):
            threads.run_claimed(claiming_part, 64, (runs, role, 100000, fail_at))
        assert runs.max() <= 1 and runs[fail_at] == 0  # none twice, the failed one not done
    runs, role = np.zeros(64, np.int64), np.zeros(64, np.int64)
    threads.run_claimed(claiming_part, 64, (runs, role, 1000, -1))  # the helpers still serve
    assert (runs == 1).all()


def test_concurrent_claiming_callers_each_get_their_own_ranges(three_threads, claiming_part):
    def launch(count):
        runs, role = np.zeros(count, np.int64), np.zeros(count, np.int64)
        threads.run_claimed(claiming_part, count, (runs, role, 100, -1))
        assert (runs == 1).all()

    _three_callers_at_once(launch)


def test_a_claiming_launch_from_a_helper_runs_plain(three_threads, claiming_part):
    """A launch made on a helper thread (a part launching parts) runs its ranges itself."""
    seen = []

    def outer(lo, hi):
        for _ in range(lo, hi):
            runs, role = np.zeros(10, np.int64), np.zeros(10, np.int64)
            threads.run_claimed(claiming_part, 10, (runs, role, 10, -1))
            seen.append((runs.tolist(), set(role.tolist())))

    t = threading.Thread(target=run_parts, args=(outer, 6, ()))
    t.start()
    t.join(30)
    assert not t.is_alive() and len(seen) == 6
    assert all(r == [1] * 10 for r, _ in seen)
    assert all(roles <= {0, 1, 2, -1} for _, roles in seen)


def test_launches_take_the_windows_of_one_chain_in_order(monkeypatch):
    """Each claiming launch's ``sync`` is the next window of one buffer, reaching into the
    next launch's (where its helpers wait); the last window is never taken but rung when
    a new chain starts."""
    from axesarray.kernels import atomics

    monkeypatch.setattr(threads, "_CHAIN", [])
    with threads._NEXT_LOCK:
        syncs = [threads._take_sync() for _ in range(threads._CHAIN_WINDOWS)]
    first = syncs[0].base
    last = threads._CHAIN_WINDOWS - 1
    for i, sync in enumerate(syncs[:last]):
        assert sync.base is first and sync.size == (threads._CHAIN_WINDOWS - i) * atomics.WIDTH
        assert sync[atomics.TOP] == len(threads._HELPERS)
        assert sync[atomics.SPIN] == int(threads.SPIN_SECONDS * 1e9)
    assert first[last * atomics.WIDTH + atomics.RING] == 1  # rung: its waiters look again
    assert syncs[last].base is not first and syncs[last].size == first.size  # a new chain
    assert not syncs[last][atomics.RING]


def test_a_launch_past_a_windows_helpers_rings_the_window_it_skips(monkeypatch):
    from axesarray.kernels import atomics

    monkeypatch.setattr(threads, "_CHAIN", [])
    monkeypatch.setattr(threads, "_HELPERS", [0] * atomics.WIDTH)
    with threads._NEXT_LOCK:
        window = threads._next_window()
        sync = threads._take_sync()
    assert window[atomics.RING] == 1  # the helpers waiting there come for the queue
    assert sync.base is None and sync.size == atomics.slots(atomics.WIDTH)
    assert sync[atomics.TOP] == atomics.WIDTH
    assert sync[atomics.SPIN] == 0  # its helpers do not wait for a next window


def test_await_ring_returns_once_rung_or_after_its_limit():
    from axesarray.kernels import atomics

    sync = np.zeros(atomics.WIDTH, np.int64)
    t0 = time.perf_counter()
    assert not atomics.await_ring(sync, 20_000_000)
    assert time.perf_counter() - t0 >= 0.02
    threading.Timer(0.05, sync.__setitem__, (atomics.RING, 1)).start()
    t0 = time.perf_counter()
    assert atomics.await_ring(sync, 10_000_000_000)
    assert 0.04 <= time.perf_counter() - t0 < 5


def test_a_helper_out_of_ranges_waits_in_its_part_for_the_next_ring(claiming_part):
    """A helper leaving a chained launch's ranges stays in the part, outside the GIL, up to
    ``sync[SPIN]`` for the next window's ring: rung, it returns at once; not rung, after
    its limit. The caller's side never waits for it."""
    from axesarray.kernels import atomics

    for ring, limit in ((True, 10_000_000_000), (False, 30_000_000)):
        buf = np.zeros(3 * atomics.WIDTH, np.int64)
        sync = buf[: 2 * atomics.WIDTH]
        sync[atomics.NR], sync[atomics.COUNT], sync[atomics.TOP] = 4, 4, 1
        sync[atomics.SPIN] = limit
        runs, role = np.zeros(4, np.int64), np.zeros(4, np.int64)
        helper = threading.Thread(target=claiming_part, args=(sync, 0, 1, runs, role, 10, -1))
        t0 = time.perf_counter()
        helper.start()
        while sync[atomics.RING + 1] != atomics.LEFT and time.perf_counter() - t0 < 60:
            time.sleep(0.005)  # (the part may compile first)
        assert (runs == 1).all() and (role == 1).all()  # it ran every range
        assert sync[atomics.RING + 1] == atomics.LEFT
        if ring:
            time.sleep(0.1)
            assert helper.is_alive()  # waiting for the next window's ring
            buf[atomics.WIDTH + atomics.RING] = 1
            helper.join(10)
        helper.join(10)
        assert not helper.is_alive()
        assert time.perf_counter() - t0 >= 0.03


def test_an_awake_helper_takes_part_in_the_next_launch(three_threads, claiming_part, monkeypatch):
    """Launches back to back: a helper out of one launch's ranges takes the next launch's
    job while it waits outside the GIL (``_awake_next``), not from its sleep on the queue."""
    awake_jobs = []
    next_job = threads._awake_next

    def counted(h, last):
        job = next_job(h, last)
        if job is not None:
            awake_jobs.append(h)
        return job

    monkeypatch.setattr(threads, "_awake_next", counted)
    monkeypatch.setattr(threads, "SPIN_SECONDS", 0.2)  # a loaded machine's gaps, covered
    threads.run_claimed(claiming_part, 8, (np.zeros(8, np.int64), np.zeros(8, np.int64), 1, -1))
    roles = _roles_of_launches(claiming_part, 20000)
    assert roles & {1, 2}
    assert awake_jobs


def test_helpers_waiting_for_a_claiming_launch_take_a_run_parts_job(
    three_threads, claiming_part, monkeypatch
):
    """Helpers waiting in their parts for the next window's ring (here for up to 30 s)
    are rung by ``run_parts`` too, and take its ranges at once."""
    monkeypatch.setattr(threads, "SPIN_SECONDS", 30.0)
    runs, role = np.zeros(64, np.int64), np.zeros(64, np.int64)
    threads.run_claimed(claiming_part, 64, (runs, role, 20000, -1))
    seen, lock = [], threading.Lock()

    def part(lo, hi):
        time.sleep(0.02)
        _record(lo, hi, seen, lock)

    t0 = time.perf_counter()
    run_parts(part, 12, ())
    assert time.perf_counter() - t0 < 10
    assert {ident for _, _, ident in seen} & set(threads._HELPERS)
    monkeypatch.setattr(threads, "SPIN_SECONDS", 1e-3)
    threads.run_claimed(claiming_part, 64, (runs, role, 1, -1))  # the helpers wait 1 ms again


def test_ctrl_c_during_a_claiming_launch_waits_for_the_helpers_ranges():
    """SIGINT while the caller runs its ranges: it raises KeyboardInterrupt once the
    helpers are out of theirs (none running after), and the kernel's result is never
    seen half-written by a later statement."""
    code = textwrap.dedent(
        """
        import os, signal, threading, time
        import numpy as np
        from axesarray.kernels import threads
        import test_kernel_threads as tc
        threads.num_threads = lambda: 2
        part = tc._claiming_part()
        runs, role = np.zeros(64, np.int64), np.zeros(64, np.int64)
        threads.run_claimed(part, 8, (runs[:8], role[:8], 1, -1))  # the helper exists
        runs[:] = 0
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            threads.run_claimed(part, 64, (runs, role, 10_000_000, -1))
            print("finished")
        except KeyboardInterrupt:
            after = runs.copy()
            time.sleep(0.3)
            print("raised", bool((runs == after).all()), int(runs.max()))
        """
    )
    root = Path(__file__).resolve().parent
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(root.parent), str(root)])),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    assert words[0] in ("raised", "finished"), out.stdout
    if words[0] == "raised":  # nothing ran after the caller raised; nothing twice
        assert words[1:] == ["True", "1"] or words[1:] == ["True", "0"], out.stdout


def _child(code: str) -> subprocess.CompletedProcess:
    """``code`` run by a new interpreter that imports this checkout's axesarray."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )


def test_ctrl_c_while_helpers_run_waits_for_their_ranges_then_raises():
    """SIGINT reaches the caller while it waits for a helper's range: the caller raises
    KeyboardInterrupt only once the helper is out of it, and no range starts after."""
    code = textwrap.dedent(
        """
        import os, signal, threading, time
        from axesarray.kernels import threads
        threads.num_threads = lambda: 2
        threads.run_parts(lambda lo, hi: None, 4, ())  # the helper exists
        log, inside, started = [], [], threading.Event()
        def part(lo, hi):
            if threading.get_ident() in threads._HELPERS:
                inside.append(lo)
                started.set()
                time.sleep(0.6)
                log.append(("helper done", lo))
                inside.remove(lo)
            else:
                started.wait(10)  # then the caller runs the other ranges and waits
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            threads.run_parts(part, 40, ())
        except KeyboardInterrupt:
            log.append(("raised", len(inside)))
        time.sleep(0.6)
        print(log)
        """
    )
    out = _child(code)
    assert out.returncode == 0, out.stderr
    log = eval(out.stdout)  # noqa: S307 - a list of tuples printed by the child
    assert log[-1] == ("raised", 0), log  # nothing ran after the caller raised
    assert log.count(("raised", 0)) == 1 and len(log) == 2  # one helper range ran


def test_interrupts_held_raises_after_the_block():
    """SIGINT inside the block: the block ends, then KeyboardInterrupt, and Python's
    handler is back. Off the main thread, nothing changes."""
    code = textwrap.dedent(
        """
        import signal, threading
        from axesarray.kernels import threads
        done = []
        try:
            with threads.interrupts_held():
                signal.raise_signal(signal.SIGINT)
                done.append("ran to its end")
        except KeyboardInterrupt:
            done.append("raised")
        done.append(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        def other():
            with threads.interrupts_held():
                done.append(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        t = threading.Thread(target=other)
        t.start()
        t.join()
        print(done)
        """
    )
    out = _child(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['ran to its end', 'raised', True, True]"


def test_the_interpreter_exits_with_helpers_waiting():
    code = (
        "from axesarray.kernels import threads\n"
        "threads.num_threads = lambda: 4\n"
        "seen = []\n"
        "threads.run_parts(lambda lo, hi: seen.extend(range(lo, hi)), 50, ())\n"
        "print(sorted(seen) == list(range(50)))\n"
    )
    out = _child(code)
    assert (out.returncode, out.stdout.strip()) == (0, "True"), out.stderr


# --- serial and parallel variants, and the choice between them ----------------------------


def _one_step(e, out=None):
    plan, _ = executor.schedule_for(e.node, None if out is None else out.node)
    (step,) = plan.steps
    return plan, step


def test_serial_and_parallel_variants_give_the_same_bits():
    """Per output element the two variants run the same code: maps and row reductions
    agree bit for bit; a full reduction's chunks are combined in order (deterministic)."""
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((301, 77)).astype(np.float32)
    x = ax.tensor(xn, "R K")
    for e, ref in (
        (ax.tanh(x) * 2 - x, np.tanh(xn) * 2 - xn),
        (ax.exp(x).sum("K"), np.exp(xn.astype(np.float64)).sum(1).astype(np.float32)),
        (x.max("R"), xn.max(0)),
        ((x * x).sum(), np.float32((xn.astype(np.float64) ** 2).sum())),
    ):
        plan, step = _one_step(e)
        args = binder(step)(e.node.params, {0: np.empty(step.out.view.size, step.out.dtype)}, None)
        got = {}
        for kind in ("serial", "parallel"):
            kernel_for(step, plan.device, kind)(*args)
            got[kind] = args[0].copy()
        if step.out.view.size > 1:
            assert got["serial"].tobytes() == got["parallel"].tobytes()
        assert_close(got["parallel"].reshape(np.shape(ref)), ref)


def test_the_variant_follows_the_estimate(monkeypatch):
    """Parallel when the time the threads are estimated to save exceeds the launch cost;
    serial below ``serial_threshold`` whatever the estimate, and on one thread."""
    rng = np.random.default_rng(0)
    x = ax.tensor(rng.standard_normal((256, 1024)).astype(np.float32), "B H")
    plan, step = _one_step(ax.tanh(x), ax.zeros(x.axes, "float32"))
    work, data, private = cost.step_seconds(step)
    assert private == 1.0 and work > data  # bound by its work: the threads share it out
    saved = work - max(work / 4, data)
    assert cost.threads_save((work, data, private), 4) == pytest.approx(saved)
    monkeypatch.setattr(dispatch, "num_threads", lambda: 4)
    with ax.set_options(serial_threshold=0):
        monkeypatch.setattr(cost, "LAUNCH_SECONDS", saved * 0.99)
        assert dispatch.variant(step, plan.device) == "parallel"
        monkeypatch.setattr(cost, "LAUNCH_SECONDS", saved * 1.01)
        assert dispatch.variant(step, plan.device) == "serial"
        monkeypatch.setattr(cost, "LAUNCH_SECONDS", 0.0)
        monkeypatch.setattr(dispatch, "num_threads", lambda: 1)
        assert dispatch.variant(step, plan.device) == "serial"
        monkeypatch.setattr(dispatch, "num_threads", lambda: 4)
        assert dispatch.variant(step, plan.device) == "parallel"
    with ax.set_options(serial_threshold=step.size + 1):
        assert dispatch.variant(step, plan.device) == "serial"


def test_bytes_in_the_callers_cache_are_not_shared_out():
    """A kernel bound by its bytes saves nothing on threads while they fit the calling
    core's own cache (``x - y`` of 262k float32, 3 MiB: 140-160 us serial, 196-241 us on
    two threads); beyond it the threads share the rest, and all of them from memory."""
    rng = np.random.default_rng(0)
    h = ax.tensor(rng.standard_normal((256, 1024)).astype(np.float32), "B H")
    b = ax.tensor(rng.standard_normal(1024).astype(np.float32), "H")
    plan, step = _one_step(ax.maximum(h + b, 0), ax.zeros(h.axes, "float32"))
    moved, _ = cost.step_estimate(step)
    assert moved == 2 * 256 * 1024 * 4 + 1024 * 4  # h read, out written, b read once
    assert moved <= cost.PRIVATE_CACHE_BYTES + 4096
    work, data, private = cost.step_seconds(step)
    assert data > work and data == pytest.approx(moved / cost.CACHE_BYTES_PER_SECOND)
    assert cost.serial_seconds(step) == data
    assert private == pytest.approx(min(1.0, cost.PRIVATE_CACHE_BYTES / moved))
    assert cost.threads_save((work, data, private), 4) == pytest.approx(
        data * (1 - private) * (1 - 1 / 4)
    )
    with ax.set_options(serial_threshold=0):
        assert dispatch.variant(step, plan.device) == "serial"
    for rows, saved_share in ((1024, 0.25), (4096, 0.5)):  # 4 MiB in cache; 16 MiB from memory
        big = ax.tensor(rng.standard_normal((rows, 1024)).astype(np.float32), "N K")
        _, step = _one_step(big.max("K"))
        work, data, private = cost.step_seconds(step)
        assert data > work
        assert cost.threads_save((work, data, private), 2) == pytest.approx(
            data * saved_share, rel=1e-3
        )


def test_the_estimate_grows_with_the_data_and_leaves_cache():
    """Bytes beyond ``CACHE_BYTES`` move at the memory rate; tiny kernels stay serial at
    the measured launch cost, big ones go parallel when there are threads."""
    rng = np.random.default_rng(0)
    ests = []
    for rows in (16, 1024, 4096):
        x = ax.tensor(rng.standard_normal((rows, 1024)).astype(np.float32), "N K")
        plan, step = _one_step(x.max("K"))
        moved, _ = cost.step_estimate(step)
        cached = moved <= cost.CACHE_BYTES
        rate = cost.CACHE_BYTES_PER_SECOND if cached else cost.MEMORY_BYTES_PER_SECOND
        assert cost.serial_seconds(step) == pytest.approx(moved / rate)
        ests.append(cost.serial_seconds(step))
    assert ests[0] < cost.LAUNCH_SECONDS < ests[1] < ests[2]


def test_launches_after_a_threaded_blas_call_leave_its_cores(three_threads, monkeypatch):
    """For ``BLAS_SPIN_SECONDS`` after a BLAS product big enough for OpenBLAS to thread, its
    threads spin on the other cores: a launch then runs on the cores left (here the
    calling thread's: 2 cores, BLAS on both); small products and later launches do not
    change it."""
    monkeypatch.setattr(threads, "_CORES", 2)
    monkeypatch.setattr(threads, "_BLAS_SPINNERS", 1)

    def who(lo, hi, seen):
        time.sleep(0.01 * (hi - lo))
        seen.append((lo, hi, threading.get_ident()))

    def runners():
        seen = []
        run_parts(who, 12, (seen,))
        assert sorted(i for lo, hi, _ in seen for i in range(lo, hi)) == list(range(12))
        return {t for _, _, t in seen}

    me = {threading.get_ident()}
    threads.blas_ran(8, 8, 8)  # OpenBLAS runs it on one thread
    assert threads._SPIN_UNTIL == [0.0] and runners() != me
    threads.blas_ran(64, 64, 64)
    assert runners() == me
    threads._SPIN_UNTIL[0] = time.perf_counter() - 1e-3  # the window has passed
    assert runners() != me


def test_a_blas_step_notes_its_call():
    rng = np.random.default_rng(0)
    a = ax.tensor(rng.standard_normal((64, 64)), "M K")
    b = ax.tensor(rng.standard_normal((64, 64)), "K N")
    threads._SPIN_UNTIL[0] = 0.0
    before = time.perf_counter()
    got = ax.dot(a, b, over="K").eval()
    assert_close(got, a.numpy() @ b.numpy())
    if threads._BLAS_SPINNERS:  # OpenBLAS threaded: the window starts after the call
        assert before + threads.BLAS_SPIN_SECONDS < threads._SPIN_UNTIL[0]
    else:
        assert threads._SPIN_UNTIL[0] == 0.0


def test_a_helper_leaves_the_callers_cpu():
    """Linux wakes a helper on its waker's CPU and moves it only later (the first ~10 runs
    of a process shared one core): each job carries the caller's CPU, and a helper that
    takes a range runs with a CPU set without it."""
    import time

    from axesarray.kernels import threads

    if threads._GETCPU is None:
        pytest.skip("one CPU, or no sched_getcpu: nothing to move a helper to")
    getcpu = threads._GETCPU
    callers: list = []

    def recorded():
        callers.append(getcpu())
        return callers[-1]

    seen: list = []  # (the caller's CPU of this run, the helper's CPU set) per helper range

    def part(lo, hi):
        if threading.get_ident() in threads._HELPERS:
            seen.append((callers[-1], os.sched_getaffinity(0)))
        time.sleep(0.02)  # long enough for the helper to take a range

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(threads, "_GETCPU", recorded)
        mp.setattr(threads, "_SPIN_UNTIL", [0.0])  # no BLAS spin window: two threads
        for _ in range(3):
            threads.run_parts(part, 8, (), 2)
    assert seen, "no helper took a range"
    assert all(caller not in mask and mask for caller, mask in seen)


def test_the_tier_reads_a_default_thread_count_while_numba_is_being_imported(monkeypatch):
    """``num_threads(load=False)`` (the numpy tier's slab planning) never imports numba:
    while the compile thread is importing it (its spec marked ``_initializing``), importing
    it here waited on the import lock for the rest of numba's start-up (a script's third
    statement took 140-180 ms instead of ~2). It reads ``NUMBA_NUM_THREADS`` (or the
    cores) until numba is loaded, then numba's own count."""
    import numba
    from numba.np.ufunc import parallel

    monkeypatch.setattr(threads, "_COUNT", [])
    monkeypatch.setenv("NUMBA_NUM_THREADS", "3")
    for module in (numba, parallel):
        monkeypatch.setattr(module.__spec__, "_initializing", True, raising=False)
        assert threads.num_threads(load=False) == 3
        assert threads._COUNT == []
        monkeypatch.setattr(module.__spec__, "_initializing", False)
    assert threads.num_threads(load=False) == numba.get_num_threads()
    assert threads._COUNT != []
