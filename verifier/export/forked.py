"""Work done in a forked second process, whose result only counts when it succeeded.

Export's records are built, redacted and serialized each from its own exchange: on a large
capture a forked child does a share of them on the second core while the parent does the
rest. The child inherits the parent's memory (the loaded capture, the detectors), sends back
one pickled value through a pipe and exits without running anything of the parent's
(`os._exit`). Any failure in the child (an error, an interrupt, a crash, a value that does
not arrive whole) is only `ChildFailed`: the caller then takes the plain path in one
process, whose errors are the ones reported; a child's own error text is never shown.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class ChildFailed(Exception):
    """The forked work did not give a value: do the work the plain way."""


def can_fork() -> bool:
    """Whether a second process helps and is safe to fork: POSIX, more than one core for
    this process, and no other thread (a child of a threaded process inherits locks that
    nobody will release)."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores > 1


class Forked(Generic[T]):
    """`work()` running in a forked child; `result()` is its value or ChildFailed."""

    def __init__(self, work: Callable[[], T]) -> None:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the parent's code
            status = 1
            try:
                os.close(read)
                try:
                    payload = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException:  # the parent redoes the work
                    payload = b""
                with open(write, "wb") as stream:
                    stream.write(payload)
                status = 0 if payload else 1
            finally:
                os._exit(status)
        os.close(write)
        self._pid: int | None = pid
        self._read = read

    def result(self) -> T:
        """The child's value, once it has exited; ChildFailed if it has none. On any other
        exception (an interrupt), call `cancel`."""
        stream = open(self._read, "rb")  # noqa: SIM115 - owns the descriptor from here
        self._read = -1
        with stream:
            payload = stream.read()
        status = self._reap()
        if status != 0 or not payload:
            raise ChildFailed
        try:
            value: T = pickle.loads(payload)  # noqa: S301 - our own child's bytes
        except Exception:  # a truncated value
            raise ChildFailed from None
        return value

    def cancel(self) -> None:
        """Stop the child (if still running) and reap it."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
        if self._read >= 0:
            os.close(self._read)
            self._read = -1
        self._reap()

    def _reap(self) -> int:
        if self._pid is None:
            return -1
        _, status = os.waitpid(self._pid, 0)
        self._pid = None
        return os.waitstatus_to_exitcode(status)
