"""`evidence manifest`: hash a model folder into the model manifest that verify reads."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer

from verifier.cli.common import Command, boundary, require_stdout, stderr, stderr_console


def manifest(
    model_dir: Annotated[
        Path,
        typer.Argument(
            metavar="MODEL_DIR",
            help="Model folder, single model file, or Hugging Face snapshot folder.",
        ),
    ],
    repo_id: Annotated[
        str | None,
        typer.Option("--repo-id", help="Model repository (default: from an HF snapshot path)."),
    ] = None,
    revision: Annotated[
        str | None,
        typer.Option("--revision", help="Pinned revision (default: from an HF snapshot path)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", metavar="FILE", help="Write here (must not exist); default stdout."
        ),
    ] = None,
) -> None:
    """Hash every file of a model into a model manifest (JSON), as verify reads it.

    Files are hashed in parallel, one thread per core. In a Hugging Face
    snapshot, links into the repository's blobs/ are followed; a link leaving
    the model's own cache folder is refused. Hidden folders (.git) are skipped.

    Example:

      evidence manifest ~/.cache/huggingface/hub/models--org--name/snapshots/REV
        -o model-manifest.json
    """
    from verifier.atomic import check_new_output, write_new_file
    from verifier.jsonio import dumps_stable
    from verifier.modelfiles import hash_model

    if output is not None:
        check_new_output(output)
    else:
        require_stdout("the manifest")
    started = time.perf_counter()
    with _progress(sys.stderr.isatty()) as on_progress:
        hashed = hash_model(model_dir, repo_id, revision, on_progress)
    elapsed = time.perf_counter() - started
    data = dumps_stable(hashed.to_public_json())
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        write_new_file(output, data)
    size = sum(f.size for f in hashed.files)
    _say(
        f"{len(hashed.files)} file(s), {size / 1e9:.2f} GB in {elapsed:.1f} s "
        f"({size / 1e9 / max(elapsed, 1e-9):.2f} GB/s); repo_id {hashed.repo_id}, "
        f"revision {hashed.revision}" + (f" -> {output}" if output is not None else "")
    )
    if hashed.repo_id is None or hashed.revision is None:
        _say(
            "note: repo_id or revision is null; give --repo-id and --revision to pin the model",
            dim=True,
        )


@contextlib.contextmanager
def _progress(shown: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A transient bar on stderr where one can be drawn; elsewhere (a pipe, a file, CI) no
    bar, and rich's progress and console are not even loaded (about 30 ms of start-up)."""
    if not shown:
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    with Progress(
        TextColumn("hashing"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=True,
    ) as bar:
        task = bar.add_task("hashing", total=None)

        def on_progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield on_progress


def _say(line: str, *, dim: bool = False) -> None:
    """One line on stderr: through rich on a terminal (dim where asked), as is elsewhere."""
    if sys.stderr.isatty():
        stderr.print(line, style="dim" if dim else None, markup=False, soft_wrap=True)
    else:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(boundary(manifest))
