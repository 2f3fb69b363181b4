"""What every command shares: the stderr console and the one exception boundary."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from verifier.errors import EvidenceError

P = ParamSpec("P")
R = TypeVar("R")

stderr = Console(stderr=True, highlight=False)


def debug_enabled() -> bool:
    return os.environ.get("EVIDENCE_DEBUG", "") not in ("", "0")


def boundary(func: Callable[P, R]) -> Callable[P, R]:
    """Turn every EvidenceError into its message and exit code; never show a traceback.

    Set EVIDENCE_DEBUG=1 to re-raise instead (for developers).
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except EvidenceError as exc:
            if debug_enabled():
                raise
            stderr.print(f"[bold red]error:[/] {escape(exc.message)}", markup=True, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            stderr.print("[bold red]interrupted[/]")
            raise typer.Exit(130) from None
        except Exception as exc:  # the last line of defence: no traceback reaches the user
            if debug_enabled():
                raise
            stderr.print(
                f"[bold red]internal error:[/] {type(exc).__name__}: {escape(str(exc))}\n"
                "This is a bug in evidence; run again with EVIDENCE_DEBUG=1 for a traceback.",
                soft_wrap=True,
            )
            raise typer.Exit(1) from None

    return wrapper
