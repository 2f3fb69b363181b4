"""Work done in a forked second process, on the machine's other core.

Verify parses a share of its records and runs its leak scan and checksums beside its other
checks, and export builds a share of its records and its archive, each in a forked child:
the child inherits everything the parent has built (its pages shared until written),
exchanges pickled values with the parent through two pipes, and exits without running
anything of the parent's (`os._exit`: no atexit handler, no flush of the parent's buffers;
the parent's signal handlers are reset, so Ctrl-C or SIGTERM simply ends it).

Forking is only ever a shortcut, never a different answer. Where it is not safe or not
worth it (`can_fork`: not Linux, one core, another thread running) the caller does not
fork; when the fork itself fails, or anything goes wrong in the child (an error, an
interrupt, a crash, a value that does not arrive whole), the caller gets `ChildFailed` and
does the work the plain way, in one process, whose errors are the ones reported; a child's
own error text is never shown.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, Generic, NoReturn, TypeVar

T = TypeVar("T")

_LENGTH = 8
_ENDING = {signal.SIGINT, signal.SIGTERM}
# The pipe the child writes to holds this much where Linux lets it (its default is 64 KiB
# with 4 KiB pages; 1 MiB is the most an unprivileged process may ask for by default,
# /proc/sys/fs/pipe-max-size): a result that fits in what is left of it is left in the
# pipe and the child exits at once, its memory freed, rather than waiting, blocked in its
# write, until the parent reads it.
# (Verify's child sends some 360 KB, its findings and the list of what it parsed, for the
# 10,024-record bundle of `make bench`; the two processes' peak, their summed PSS, went
# from 277-278 MiB to 254-272 MiB.) Where the size is refused, the pipe keeps its own:
# the same bytes, later.
_UP_PIPE_BYTES = 1 << 20


class ChildFailed(Exception):
    """The forked work did not give a value: do the work the plain way."""


def can_fork() -> bool:
    """Whether a second process is safe and worth forking: Linux (macOS system libraries
    are not fork-safe; Windows cannot fork), more than one core for this process, and no
    other thread (a child of a threaded process inherits locks that nobody will release)."""
    if sys.platform != "linux" or not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores > 1


def write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def _send(descriptor: int, value: Any) -> None:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    write_all(descriptor, len(payload).to_bytes(_LENGTH, "big") + payload)


def _read_exactly(descriptor: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = os.read(descriptor, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(descriptor: int) -> Any:
    """The next value on the pipe; ChildFailed if the other side ended before sending it."""
    header = _read_exactly(descriptor, _LENGTH)
    payload = None if header is None else _read_exactly(descriptor, int.from_bytes(header, "big"))
    if payload is None:
        raise ChildFailed
    try:
        return pickle.loads(payload)  # noqa: S301 - our own process's bytes
    except Exception:  # a value that cannot be rebuilt here
        raise ChildFailed from None


class Channel:
    """The child's side of the pipes: `send` a value to the parent before the result,
    `receive` one the parent sent."""

    def __init__(self, up: int, down: int) -> None:
        self._up, self._down = up, down

    def send(self, value: Any) -> None:
        _send(self._up, value)

    def receive(self) -> Any:
        return _receive(self._down)


class Forked(Generic[T]):
    """`work(channel)` running in a forked child; `result()` is its value or ChildFailed
    (also raised here, at once, when no child can be forked).

    Between the start and the result, the parent may `receive` what the child sends and
    `send` values the child receives, in the order the work expects them.
    """

    def __init__(self, work: Callable[[Channel], T]) -> None:
        pipes: list[int] = []
        parent = os.getpid()
        # Objects that exist now are never walked by the child's collector, so the pages
        # that hold them stay shared instead of being copied (gc.freeze's purpose).
        gc.freeze()
        # A Ctrl-C or SIGTERM that lands while forking waits until the child has its own
        # handlers (it would otherwise run the parent's, in the child); here, until after.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING)
        try:
            pipes += os.pipe()
            _widen(pipes[1])
            pipes += os.pipe()
            pid = os.fork()
        except OSError:  # no process to be had (EAGAIN, ENOMEM): the plain way
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            gc.unfreeze()
            for descriptor in pipes:
                os.close(descriptor)
            raise ChildFailed from None
        up_read, up_write, down_read, down_write = pipes
        if pid == 0:  # the child: never returns into the parent's code
            _child(work, parent, blocked, (up_read, up_write, down_read, down_write))
        gc.unfreeze()
        os.close(up_write)
        os.close(down_read)
        self._pid: int | None = pid
        self._up = up_read
        self._down = down_write
        # A Ctrl-C or SIGTERM held while forking is raised as the mask is restored: the
        # child, known by now, is stopped and reaped before it goes on.
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        except BaseException:
            self.cancel()
            raise

    def receive(self) -> Any:
        """The next value the child sends; ChildFailed if none comes. On any other exception
        (an interrupt), call `cancel`."""
        if self._up < 0:
            raise ChildFailed
        try:
            return _receive(self._up)
        except ChildFailed:
            self.cancel()
            raise

    def send(self, value: Any) -> None:
        """A value for the child's `receive`; ChildFailed if the child is gone."""
        if self._down < 0:
            raise ChildFailed
        try:
            _send(self._down, value)
        except BrokenPipeError:
            self.cancel()
            raise ChildFailed from None

    def result(self) -> T:
        """The child's value, once it has exited; ChildFailed (the child stopped and reaped)
        if it has none. On any other exception (an interrupt), call `cancel`."""
        if self._up < 0:
            raise ChildFailed
        try:
            value: T = _receive(self._up)
        except ChildFailed:
            self.cancel()
            raise
        self._close()
        if self._reap() != 0:
            raise ChildFailed
        return value

    def cancel(self) -> None:
        """Stop the child (if still running) and reap it; nothing once it has ended."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
        self._close()
        self._reap()

    def _close(self) -> None:
        for descriptor in (self._up, self._down):
            if descriptor >= 0:
                os.close(descriptor)
        self._up = self._down = -1

    def _reap(self) -> int:
        if self._pid is None:
            return -1
        pid, self._pid = self._pid, None
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped by someone else: its result cannot be trusted
            return -1
        return os.waitstatus_to_exitcode(status)


def _child(
    work: Callable[[Channel], object],
    parent: int,
    blocked: set[int | signal.Signals],
    pipes: tuple[int, int, int, int],
) -> NoReturn:
    up_read, up_write, down_read, down_write = pipes
    status = 1
    try:
        # The parent's handlers are not the child's: Ctrl-C or a SIGTERM simply ends it
        # (export's handler, for one, removes the partial output); one the parent ignores
        # (nohup, a background job), the child ignores too.
        for ending in _ENDING:
            if signal.getsignal(ending) is not signal.SIG_IGN:
                signal.signal(ending, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        _end_with(parent)
        os.close(up_read)
        os.close(down_write)
        value = work(Channel(up_write, down_read))
        _send(up_write, value)
        status = 0
    except BaseException:  # the parent redoes the work
        status = 1
    finally:
        os._exit(status)


def _widen(descriptor: int) -> None:
    """The pipe of `descriptor` made to hold _UP_PIPE_BYTES, where Linux allows it."""
    with contextlib.suppress(ImportError, OSError):
        import fcntl

        setting = getattr(fcntl, "F_SETPIPE_SZ", None)
        if setting is not None:
            fcntl.fcntl(descriptor, setting, _UP_PIPE_BYTES)


def _end_with(parent: int) -> None:
    """Have the kernel end this child when its parent dies (Linux's PR_SET_PDEATHSIG), so
    that a parent killed outright leaves no child working for nobody."""
    import ctypes  # (only in a child)

    set_parent_death_signal = 1  # PR_SET_PDEATHSIG, <linux/prctl.h>
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(set_parent_death_signal, signal.SIGKILL)
    if os.getppid() != parent:  # it died before that took effect
        os._exit(1)
