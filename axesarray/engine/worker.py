"""A compile process: background compiles of the numpy tier run outside this interpreter.

numba's typing and lowering are Python and hold the GIL for most of a compile (0.1-0.5 s
a kernel); on a thread of the user's process they slow the numpy tier's answers meanwhile
(every ufunc call waits up to the switch interval to get the GIL back: a layer norm's
calls 2-3x slower than with no compile under way). The compile thread (``tiers``) hands
each schedule's kernels to this process instead: it compiles them into the disk cache,
and the thread then loads the machine code (milliseconds a kernel, and numba's start-up
once) and checks nothing else. The cache is never half-written: numba writes each index
and data file to a temporary name and renames it, and the kernel cache keeps that rule
(``kernels/cache.py``).

The process is spawned once, on the first compile, in its own session (Ctrl-C in the
terminal reaches the user's process only) with the same kernel cache directory and
``sys.path``. The process exits when its pipe closes: a user's script exits without
waiting for it (the compile under way finishes on its own, its result kept on disk for
the next run). Where it cannot run (no ``posix_spawn``, no usable disk cache, it died),
the compile thread compiles in the process as before. ``AXESARRAY_COMPILE_PROCESS=0``
turns it off.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading

import numpy as np

__all__ = ["remote_compile", "spec", "dummy", "main", "forget_process"]

# At a lower priority (nice 10): compiles are background work; on a busy machine the
# user's process, answering with the numpy tier meanwhile (or exiting), comes first.
_ENTRY = "import os; os.nice(10); from axesarray.engine.worker import main; main()"


def spec(arg):
    """What the compile process needs of a kernel argument: an array's dtype, rank,
    layout and writeability (numba's type of it), or a scalar itself.

    >>> spec(np.zeros(3, np.float32))
    ('array', dtype('float32'), 1, 'C', True)
    >>> spec(2)
    ('value', 2)
    """
    if isinstance(arg, np.ndarray):
        flags = arg.flags
        layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
        return ("array", arg.dtype, arg.ndim, layout, bool(flags.writeable))
    return ("value", arg)


def dummy(s):
    """A small argument numba types like the one ``s`` describes (``spec``).

    >>> a = dummy(("array", np.dtype("int8"), 2, "A", False))
    >>> a.dtype, a.ndim, a.flags.c_contiguous or a.flags.f_contiguous, a.flags.writeable
    (dtype('int8'), 2, False, False)
    """
    if s[0] == "value":
        return s[1]
    _, dtype, ndim, layout, writeable = s
    if layout == "C":
        a = np.empty((1,) * ndim, dtype)
    elif layout == "F":
        a = np.empty((2,) * ndim, dtype, order="F")
    else:
        a = np.empty((3,) * ndim, dtype)[(Ellipsis, slice(None, None, 2))]
    if not writeable:
        a.flags.writeable = False
    return a


class _Process:
    """The compile process and its two pipes (one request at a time: the compile thread
    is the only caller)."""

    def __init__(self) -> None:
        self.pid = 0
        self.send = None
        self.recv = None
        self.broken = not hasattr(os, "posix_spawn") or os.environ.get(
            "AXESARRAY_COMPILE_PROCESS", "1"
        ) in ("0", "")
        self.lock = threading.Lock()

    def start(self) -> None:
        # The same package (wherever it is imported from) and, through the environment,
        # the same cache directory (``AXESARRAY_CACHE_DIR`` or the user's default).
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        actions = [
            (os.POSIX_SPAWN_DUP2, to_child, 0),
            (os.POSIX_SPAWN_DUP2, from_child, 1),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        try:
            self.pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-c", _ENTRY],
                env,
                file_actions=actions,
                setsid=True,
            )
        finally:
            os.close(to_child)
            os.close(from_child)
        # Unbuffered: a buffered file holds a lock while its reader waits, and a forked
        # child (or the interpreter's teardown, after a second) cannot close it then.
        self.send = os.fdopen(from_parent, "wb", buffering=0)
        self.recv = os.fdopen(to_parent, "rb", buffering=0)

    def request(self, jobs: list) -> bool:
        """Compile ``jobs`` there; True when every kernel is on disk."""
        with self.lock:
            if self.broken:
                return False
            try:
                if self.send is None:
                    self.start()
                # the cache directory of this request: the option is read per compile
                where = os.environ.get("AXESARRAY_CACHE_DIR")
                _put(self.send, (where, jobs))
                reply = _get(self.recv)
            except (OSError, EOFError, ValueError, pickle.PickleError, AttributeError, ImportError):
                self._lost()
                return False
            if reply == "no disk":  # kernels could not be shared: compiled here from now on
                self._lost()
            return reply == "ok"

    def _lost(self) -> None:
        self.broken = True
        for f in (self.send, self.recv):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        if self.pid:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, os.WNOHANG)  # reaped if it has exited

    def close(self) -> None:
        """Close the pipe (the process exits after the compile under way, if any); never
        waits."""
        f = self.send
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()


PROCESS = _Process()


def _put(f, obj) -> None:
    """One message: its pickle's length (8 bytes), then the pickle, on an unbuffered pipe."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        view = view[f.write(view) :]


def _get(f):
    """The message ``_put`` wrote; EOFError when the pipe closed first."""
    return pickle.loads(_exactly(f, int.from_bytes(_exactly(f, 8), "little")))


def _exactly(f, n: int) -> bytes:
    parts = []
    while n:
        part = f.read(n)
        if not part:
            raise EOFError("the compile pipe closed")
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def forget_process() -> None:
    """In a forked child: the parent's compile process and pipes are not this process's
    (its requests would interleave with the parent's); one is spawned when needed. The
    child's copies of the pipes are closed, so the parent's process still ends when the
    parent closes its own."""
    global PROCESS
    old, PROCESS = PROCESS, _Process()
    for f in (old.send, old.recv):
        if f is not None:
            with contextlib.suppress(OSError, ValueError):
                f.close()


def remote_compile(jobs: list) -> bool:
    """Compile ``[(source, entry, specs), ...]`` in the compile process (each kernel's
    module source, entry point and ``spec`` of each argument); True when the machine code
    of all of them is in the disk cache, False when the caller must compile them itself
    (an error is then raised there, where it is reported)."""
    return bool(jobs) and PROCESS.request(jobs)


def main() -> None:
    """The compile process: read job lists from stdin, compile them into the disk cache,
    answer "ok" (or why not) on the original stdout, until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    recv = os.fdopen(os.dup(0), "rb", buffering=0)
    send = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # a stray print goes where stderr goes, never into the replies
    from ..kernels.cache import _disk, get_kernel

    while True:
        try:
            where, jobs = _get(recv)
        except (EOFError, OSError):
            return
        if where is None:
            os.environ.pop("AXESARRAY_CACHE_DIR", None)
        else:
            os.environ["AXESARRAY_CACHE_DIR"] = where
        if _disk() is None or not _disk().writable:
            reply = "no disk"
        else:
            try:
                for source, entry, specs in jobs:
                    get_kernel(source, entry).warm(tuple(dummy(s) for s in specs))
                reply = "ok"
            except Exception as exc:  # noqa: BLE001 - compiled again by the caller, who reports it
                reply = f"{type(exc).__name__}: {exc}"
        try:
            _put(send, reply)
        except OSError:
            return
