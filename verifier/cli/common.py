"""What every command shares: the stderr console, --help, and the one exception boundary."""

from __future__ import annotations

import contextlib
import errno
import functools
import gc
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import typer
import typer.core

from verifier.cli import coerce
from verifier.errors import EvidenceError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

P = ParamSpec("P")
R = TypeVar("R")


@functools.cache
def stderr_console() -> Console:
    """rich's Console on stderr, made on first use: `--help` never pays for importing
    rich.console. Give this (not `stderr`) where rich wants a Console object."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


class _LazyConsole:
    """`stderr.print(...)` and the like, forwarded to `stderr_console()`."""

    def __getattr__(self, name: str) -> Any:
        return getattr(stderr_console(), name)


if TYPE_CHECKING:
    stderr: Console
else:
    stderr = _LazyConsole()


def note(message: str) -> None:
    """A dim line on stderr (progress, where a report went), as `stderr.print(Text(message,
    style="dim"))` prints it: written plainly where that console writes no styles (see
    report.plain), without loading rich; by rich elsewhere. A line stderr's reader is not
    there to read is dropped: the work, and its report on stdout, go on."""
    try:
        _note(message)
    except (OSError, ValueError):  # no reader, a full device, a closed stream: dropped
        to_null(sys.stderr)


def _note(message: str) -> None:
    from verifier.report import plain

    width = plain.plain_width(sys.stderr)
    if width is not None and width >= 1:
        try:
            lines = plain.wrap(message, width)
        except plain.Unfit:
            pass
        else:
            sys.stderr.write("".join(line + "\n" for line in lines))
            sys.stderr.flush()  # as rich's console does after each print
            return
    from rich.text import Text

    stderr.print(Text(message, style="dim"))


def _plain_labels(params: list[Any]) -> list[Any]:
    """One style of labels in --help, and room for the help text at 80 columns.

    A flag shows no `<bool>`; an argument shows its label (`BUNDLE`) once, not again as
    `<list[Path]>`; every option declares its own metavar; a number's range is said in its
    help text rather than as `[1<=x<=65535]` beside the label (typer still enforces it).
    """
    for param in params:
        if isinstance(param, typer.core.TyperOption):
            if param.is_flag and param.metavar is None:
                param.metavar = ""
            param._get_number_range_help_str = lambda: None  # type: ignore[method-assign]
        elif isinstance(param, typer.core.TyperArgument):
            param.display_type_rich = lambda ctx: None  # type: ignore[method-assign]
    return params


def _help_if_no_args(command: Any, ctx: Any, args: list[str]) -> None:
    """`no_args_is_help`: the help on stdout, exit 2 (typer's error panel would print
    nothing: it expects its own formatter to have printed the help already)."""
    if not args and command.no_args_is_help and not ctx.resilient_parsing:
        typer.echo(ctx.get_help())
        ctx.exit(2)


def _params(params: list[Any]) -> list[Any]:
    coerce.install(params)
    return _plain_labels(params)


class Command(typer.core.TyperCommand):
    """A command whose --help uses one style of labels (see `_plain_labels`), drawn by
    `helptext`, and whose values convert without pydantic (see `coerce`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _params(super().get_params(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from verifier.cli import helptext

        formatter.write(helptext.render(self, ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _help_if_no_args(self, ctx, args)
        return super().parse_args(ctx, args)


class Group(typer.core.TyperGroup):
    """A command group, like `Command`; its list of commands comes from `command_rows`."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _params(super().get_params(ctx))

    def command_rows(self, ctx: Any) -> list[list[str]]:
        from verifier.cli import helptext

        return helptext.command_rows(self, ctx)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from verifier.cli import helptext

        formatter.write(helptext.render(self, ctx, self.command_rows(ctx)))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _help_if_no_args(self, ctx, args)
        return super().parse_args(ctx, args)


def program() -> str:
    """How the user ran this tool (`.venv/bin/evidence`), for the next command we suggest:
    a bare `evidence` is not on the PATH of someone who has not activated the venv."""
    invoked = sys.argv[0] if sys.argv else ""
    if os.path.basename(invoked) == "evidence" and os.sep in invoked:
        return invoked
    return "evidence"


def debug_enabled() -> bool:
    return os.environ.get("EVIDENCE_DEBUG", "") not in ("", "0")


def reader_gone() -> None:
    """After a write failed for want of a reader (a broken pipe): where that was stdout's,
    one line on stderr says so, and what is left in stdout's buffer goes nowhere rather
    than fail again at exit. (A command then exits 1: its output was not delivered whole.)"""
    try:
        if not _no_reader(sys.stdout.fileno()):
            to_null(sys.stderr)  # stderr's reader is the one gone: nothing can be said
            return
    except (OSError, ValueError, AttributeError):
        return
    to_null(sys.stdout)
    try:
        sys.stderr.write(
            "error: standard output was closed before all of it was written (broken pipe)\n"
        )
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        to_null(sys.stderr)


# Errors a write to a full or failing device gives: standard output (or --output's folder)
# took no more. Not a bug in evidence: said in one line, exit 1 (the output is not whole).
_WRITE_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EIO") if hasattr(errno, name)
)


def is_write_failure(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS


def output_failed(exc: BaseException) -> None:
    """One line on stderr for an output that could not be written whole; what is left in
    stdout's buffer goes nowhere rather than fail again at exit."""
    to_null(sys.stdout)
    reason = getattr(exc, "strerror", None) or str(exc)
    try:
        sys.stderr.write(f"error: the output could not be written whole: {reason}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        to_null(sys.stderr)


def require_stdout(what: str) -> None:
    """Refuse to start work whose output would go to a closed standard output (`>&-`)."""
    if sys.stdout is None:
        raise UsageError(
            f"standard output is closed: there is nowhere to write {what} (pass --output FILE "
            "where the command has one, or redirect it)"
        )


def to_null(stream: Any) -> None:
    """What is left in the stream's buffer, and what is written to it from now on, goes
    nowhere, rather than fail again (at exit: Python's 'Exception ignored', exit 120)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)


def _no_reader(descriptor: int) -> bool:
    """Whether `descriptor` is a pipe or socket whose reading end is closed (poll says
    POLLERR or POLLHUP for it)."""
    import select

    poll = select.poll()
    poll.register(descriptor, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))


def _collect_from_here() -> None:
    """The cyclic collector on, for the objects made from now on. What exists now (the
    modules, classes and functions start-up made, alive until exit; after a verify, what
    it read) is frozen out of its walks (gc.freeze): its first collection, and the one the
    interpreter makes at exit, would walk all of it once more for no garbage (the one at
    exit: about 13 ms of an `evidence verify`). No file is open at these points."""
    gc.freeze()
    gc.enable()


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The cyclic collector off for a command's work where that work makes next to no
    garbage cycles: verify (after the 10,024-record bundle of `make bench`, 9 objects in
    cycles; after any sample or case of the hostile corpus, at most a few thousand:
    tests/hostile/test_collector.py). On, every collection would walk what verify builds for
    nothing (8 of them, 60 ms of that bundle). A `loading()` inside, or the end, freezes
    what was built (gc.freeze: never walked) and turns it on again."""
    gc.disable()
    try:
        yield
    finally:
        _collect_from_here()


_ends_at_once = False


def end_at_once() -> None:
    """Said by a command whose report is written and which has nothing left to do but
    free what it built (verify: one object at a time, some 85 ms after 10,000 records):
    `verifier.__main__` then flushes the standard streams and ends the process at once.
    Nothing else is skipped: no atexit handler, file or thread of the tool's is left at
    that point, and the process's children are waited for before the report is made."""
    global _ends_at_once
    _ends_at_once = True


def ends_at_once() -> bool:
    return _ends_at_once


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """Imports in a command's body, with the cyclic collector off as during start-up
    (see verifier/__main__.py): they make long-lived objects and no garbage."""
    gc.disable()
    try:
        yield
    finally:
        _collect_from_here()


def boundary(func: Callable[P, R]) -> Callable[P, R]:
    """Turn every EvidenceError into its message and exit code; never show a traceback.

    The command's work starts here: the cyclic collector, off during start-up
    (verifier/__main__.py), is on again. Set EVIDENCE_DEBUG=1 to re-raise instead of
    the message (for developers).
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        _collect_from_here()
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except EvidenceError as exc:
            if debug_enabled():
                raise
            from rich.markup import escape

            stderr.print(f"[bold red]error:[/] {escape(exc.message)}", markup=True, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            stderr.print("[bold red]interrupted[/]")
            raise typer.Exit(130) from None
        except BrokenPipeError:  # `evidence verify b.tar.gz | head`: the reader is gone
            reader_gone()
            raise typer.Exit(1) from None
        except Exception as exc:  # the last line of defence: no traceback reaches the user
            if debug_enabled():
                raise
            if is_write_failure(exc):  # a full disk, or a stream that takes no more
                output_failed(exc)
                raise typer.Exit(1) from None
            from rich.markup import escape

            stderr.print(
                f"[bold red]internal error:[/] {type(exc).__name__}: {escape(str(exc))}\n"
                "This is a bug in evidence; run again with EVIDENCE_DEBUG=1 for a traceback.",
                soft_wrap=True,
            )
            raise typer.Exit(1) from None

    return wrapper
