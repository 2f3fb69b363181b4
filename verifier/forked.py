"""Work done beside the main thread, on the machine's second core, in a forked copy.

`beside(work)` forks: the copy inherits everything this process has built (the pages are
shared until written), runs `work()` once and sends back its result, pickled, through a
pipe. The parent goes on with its own work and asks for the result when it needs it.

Forking is only ever a shortcut, never a different answer: where it is not safe or not
possible (no fork on this platform, not Linux, one core, another thread running, fork
itself failing), `beside` returns None; when anything goes wrong after the fork (the copy
raises, crashes, is killed, or sends a result that does not arrive whole), `result()`
returns None. Either way the caller does the work itself, in this process, exactly as it
would have without the fork.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable
from typing import Generic, NoReturn, TypeVar

T = TypeVar("T")

_CHUNK = 1 << 20


def can_fork() -> bool:
    """Whether a fork here is both safe and worth it."""
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return False  # macOS system libraries are not fork-safe; Windows cannot fork
    if threading.active_count() != 1:
        return False  # a lock another thread holds would stay held in the copy forever
    try:
        return len(os.sched_getaffinity(0)) > 1
    except OSError:
        return False


class Beside(Generic[T]):
    """A forked copy running one piece of work; `result()` waits for it."""

    def __init__(self, pid: int, reader: int) -> None:
        self._pid: int | None = pid
        self._reader: int | None = reader

    def result(self) -> T | None:
        """The work's result, or None when the copy did not deliver it whole."""
        data = self._read()
        exited_well = self._reap(kill=False)
        if not exited_well or not data:
            return None
        try:
            # Only the copy this process forked holds the pipe's other end.
            result: T = pickle.loads(data)  # noqa: S301
        except Exception:  # a truncated or garbled result: do the work here instead
            return None
        return result

    def cancel(self) -> None:
        """Stop the copy if it still runs (the parent is leaving early: an error, Ctrl-C)."""
        if self._reader is not None:
            reader, self._reader = self._reader, None
            os.close(reader)
        self._reap(kill=True)

    def _read(self) -> bytes:
        if self._reader is None:
            return b""
        reader, self._reader = self._reader, None
        chunks = []
        try:
            with os.fdopen(reader, "rb", buffering=0) as pipe:
                while chunk := pipe.read(_CHUNK):
                    chunks.append(chunk)
        except OSError:
            return b""
        return b"".join(chunks)

    def _reap(self, *, kill: bool) -> bool:
        """Wait for the copy to end (ending it first if `kill`): whether it exited with 0."""
        if self._pid is None:
            return False
        pid, self._pid = self._pid, None
        try:
            if kill:
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        except OSError:  # already reaped by someone else: its result cannot be trusted
            return False
        return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def beside(work: Callable[[], T]) -> Beside[T] | None:
    """Start `work` in a forked copy of this process; None where that is not possible."""
    if not can_fork():
        return None
    reader, writer = os.pipe()
    # Objects that exist now are never walked by the copy's collector, so the pages that
    # hold them stay shared instead of being copied (gc.freeze's documented purpose).
    gc.freeze()
    try:
        pid = os.fork()
    except OSError:
        gc.unfreeze()
        os.close(reader)
        os.close(writer)
        return None
    if pid == 0:  # the copy: never returns
        _run_copy(work, reader, writer)
    gc.unfreeze()
    os.close(writer)
    return Beside(pid, reader)


def _run_copy(work: Callable[[], object], reader: int, writer: int) -> NoReturn:
    code = 1
    try:
        # The parent's handlers are not the copy's: Ctrl-C or a SIGTERM simply ends it
        # (export's handler, for one, removes the output folder).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.close(reader)
        data = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(writer, view) :]
        code = 0
    except BaseException:  # the parent does the work itself on any failure
        code = 1
    finally:
        os._exit(code)  # no atexit handlers, no flushing of the parent's buffers
