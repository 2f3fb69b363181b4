"""`evidence verify`: check bundles offline and print what the evidence supports.

No `from __future__ import annotations` here: typer reads the options from the
annotations of `verify`, and as strings it would evaluate every one of them (each
`typer.Option(...)` again) twice per start-up, about 1 ms.
"""

import contextlib
import io
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from verifier import layout
from verifier.bundle.reader import Limits
from verifier.cli.common import (
    Command,
    boundary,
    collector_off,
    end_at_once,
    loading,
    note,
    program,
    require_stdout,
    stderr,
    stderr_console,
)
from verifier.errors import EvidenceError, UnreadableInput, UnsafeInput, UsageError
from verifier.model import Verdict
from verifier.report.common import printable
from verifier.report.formats import OutputFormat

if TYPE_CHECKING:  # the checks, jsonschema, rich and the report builder load only when verifying
    from verifier.report.document import KeyInfo

_DEFAULTS = Limits()


def _refuse_raw_capture(path: Path) -> None:
    """A private raw capture is not a bundle: say what it is and what to run, not 150 errors."""
    if (path / layout.RAW_RUN).is_file() and not (path / layout.SHA256SUMS).exists():
        raise UnreadableInput(
            f"{path} is a raw capture (private), not a public bundle: run "
            f"`{program()} export {path} --out PUBLIC_DIR`, then verify PUBLIC_DIR"
        )


def _key_info(path: Path) -> "KeyInfo":
    """The key's file name and fingerprint: `openssl pkey -pubin -outform DER | sha256sum`."""
    import hashlib

    from cryptography.hazmat.primitives import serialization

    from verifier import signing
    from verifier.inputs import read_small_file
    from verifier.report.document import KeyInfo

    head = read_small_file(path, "--key", signing.MAX_KEY_FILE_BYTES)[:4096]
    if b"PRIVATE KEY-----" in head:
        raise UsageError(
            f"--key {path} is a private key: give the signer's public key "
            "(evidence-signing-key.pub.pem), and never share the private one"
        )
    if b"-----BEGIN PUBLIC KEY-----" not in head:
        raise UsageError(
            f"--key {path} is not a PEM public key: expected a file that starts with "
            "-----BEGIN PUBLIC KEY-----, as `evidence keygen` writes it"
        )
    der = signing.load_public_key(path).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyInfo(path.name, hashlib.sha256(der).hexdigest())


def verify(
    bundles: Annotated[
        list[Path],
        typer.Argument(
            metavar="BUNDLE",
            help="Bundle directories or .tar.gz archives; each gets its own report.",
        ),
    ],
    output_format: Annotated[
        OutputFormat,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help="text (for people), json (for machines, schema: evidence schema show "
            "report) or markdown (for an issue comment).",
        ),
    ] = OutputFormat.TEXT,
    key: Annotated[
        Path | None,
        typer.Option(
            "--key",
            metavar="FILE",
            help="The signer's Ed25519 public key (PEM): the signature must verify with it.",
        ),
    ] = None,
    model_dir: Annotated[
        Path | None,
        typer.Option(
            "--model-dir",
            metavar="DIR",
            help="Your copy of the model (a folder or a Hugging Face snapshot): every file "
            "is rehashed against the bundle's manifest.",
        ),
    ] = None,
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            metavar="FILE",
            help="Judge by the server-profile rules in this JSON file instead of the tool's "
            "own (for a profile or version this tool does not know).",
        ),
    ] = None,
    expect: Annotated[
        Verdict | None,
        typer.Option(
            "--expect",
            metavar="VERDICT",
            help="Exit 3 when a verified bundle's verdict is not VERDICT: one of "
            "cache-state-dependent, cache-state-independent, nondeterministic, "
            "inconclusive, invalid (for CI gates).",
        ),
    ] = None,
    require_signature: Annotated[
        bool,
        typer.Option(
            "--require-signature",
            help="A bundle whose signature was not verified with --key (unsigned, or no "
            "key given) is not verified: exit 1.",
        ),
    ] = False,
    require_model_match: Annotated[
        bool,
        typer.Option(
            "--require-model-match",
            help="With --model-dir: a copy that differs from the manifest makes the bundle "
            "not verified (exit 1). Without it, a differing copy is reported apart and the "
            "bundle keeps its verdict.",
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="Print only each bundle's verdict and name, one line each (for scripts); "
            "no progress on stderr (why a bundle could not be read still is). The exit code "
            "is unchanged.",
        ),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the report to FILE instead of stdout (must not exist; written "
            "once the report is complete, never in part).",
        ),
    ] = None,
    max_members: Annotated[
        int,
        typer.Option(metavar="N", help="Most archive members read (1 or more).", min=1),
    ] = _DEFAULTS.max_members,
    max_member_bytes: Annotated[
        int,
        typer.Option(metavar="BYTES", help="Largest member read, in bytes (1 or more).", min=1),
    ] = _DEFAULTS.max_member_bytes,
    max_total_bytes: Annotated[
        int,
        typer.Option(metavar="BYTES", help="Most bytes read in all (1 or more).", min=1),
    ] = _DEFAULTS.max_total_bytes,
    max_ratio: Annotated[
        float,
        typer.Option(
            metavar="RATIO", help="Highest compression ratio accepted (1.0 or more).", min=1.0
        ),
    ] = _DEFAULTS.max_ratio,
    max_json_depth: Annotated[
        int,
        typer.Option(metavar="N", help="Deepest nesting of a JSON document (1 or more).", min=1),
    ] = _DEFAULTS.max_json_depth,
    max_json_values: Annotated[
        int,
        typer.Option(
            metavar="N", help="Most JSON values in all documents of a bundle (1 or more).", min=1
        ),
    ] = _DEFAULTS.max_json_values,
) -> None:
    """Verify evidence bundles offline and classify what they prove.

    Checks input safety, SHA256SUMS, the signature (with --key), every
    document's schema, the canonical output hashes, the model manifest, the
    telemetry behind each claimed cache arm, and leaks; then gives a verdict
    per condition and for the experiment. What each verdict means:
    docs/EVIDENCE.md.

    Exit codes: 0 verified (whatever the verdict), 1 not verified, 2 usage
    error or unreadable input, 3 verified but the verdict differs from
    --expect.

    Examples:

      evidence verify bundle.tar.gz --key signer.pub.pem
      evidence verify bundle.tar.gz --format markdown > comment.md
      evidence verify a.tar.gz b.tar.gz --expect cache-state-dependent
    """
    if key is not None and not key.exists():
        raise UsageError(f"--key {key}: no such file")
    if model_dir is not None and not model_dir.exists():
        raise UsageError(f"--model-dir {model_dir}: no such file or directory")
    if output is not None:  # before the work: a report never replaces a file
        from verifier.atomic import check_new_output

        check_new_output(output)
    else:
        require_stdout("the report")
    with loading():
        from verifier.report.document import BundleOutcome, build_report
        from verifier.verify import VerifyOptions, load_profile_rules, verify_path

    limits = Limits(
        max_members,
        max_member_bytes,
        max_total_bytes,
        max_ratio,
        max_json_depth=max_json_depth,
        max_json_values=max_json_values,
    )
    key_info = _key_info(key) if key is not None else None
    profile_rules = load_profile_rules(profile) if profile is not None else None
    # The collector off until the report is written (see collector_off).
    with collector_off():
        outcomes = []
        # A bar only where one can be drawn, and only for what reports progress: the rehash of
        # --model-dir.
        with _model_progress(
            model_dir is not None and not quiet and stderr.is_terminal
        ) as on_progress:
            options = VerifyOptions(
                public_key=key,
                model_dir=model_dir,
                limits=limits,
                progress=on_progress,
                profile_rules=profile_rules,
                profile_file=None if profile is None else profile.name,
            )
            for path in bundles:
                if not quiet:
                    note(f"verifying {printable(str(path))}")
                try:
                    _refuse_raw_capture(path)
                    result = verify_path(path, options)
                except (UnreadableInput, UnsafeInput) as exc:
                    # (with --quiet too: why a bundle could not be read is no progress line)
                    from rich.text import Text

                    stderr.print(
                        Text.assemble(("error: ", "bold red"), printable(exc.message)),
                        soft_wrap=True,
                    )
                    outcomes.append(
                        BundleOutcome(
                            str(path), None, error=exc.message, expected=expect,
                            unsafe=isinstance(exc, UnsafeInput),
                        )
                    )  # fmt: skip
                    continue
                except Exception as exc:  # a bug: this bundle fails closed, the others still report
                    message = f"internal error ({type(exc).__name__}): please report this input"
                    from rich.text import Text

                    stderr.print(Text.assemble(("error: ", "bold red"), message), soft_wrap=True)
                    outcomes.append(
                        BundleOutcome(str(path), None, error=message, expected=expect, unsafe=True)
                    )
                    continue
                outcomes.append(
                    BundleOutcome(
                        str(path), result, expected=expect, key=key_info,
                        model_dir=model_dir is not None, require_signature=require_signature,
                        require_model_match=require_model_match,
                    )
                )  # fmt: skip
        report = build_report(outcomes)
        _write(report, output_format, quiet=quiet, output=output)
    end_at_once()
    raise typer.Exit(report["exit_code"])


@contextlib.contextmanager
def _model_progress(shown: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """The progress callback of the model rehash, drawn as a transient bar on stderr; none
    (and rich.progress not loaded) where no bar is shown."""
    if not shown:
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=True,
    ) as progress:
        task = progress.add_task("hashing model", total=None, visible=False)

        def on_progress(description: str, done: int, total: int) -> None:
            progress.update(
                task, description=description, completed=done, total=total, visible=True
            )

        yield on_progress


def _write(
    report: dict[str, Any], output_format: OutputFormat, *, quiet: bool, output: Path | None
) -> None:
    """The report to stdout, or to --output once it is complete (never a half-written file)."""
    with loading():
        from verifier.report import plain, render

    if quiet:
        lines = "".join(f"{b['verdict']} {printable(b['source'])}\n" for b in report["bundles"])
        if output is None:
            sys.stdout.write(lines)
            return
        rendered = lines
    elif output is None:
        render(report, output_format, sys.stdout)
        return
    else:
        buffer = io.StringIO()
        width = plain.screen_width()
        if width is None:
            from rich.console import Console

            width = Console().width
        render(report, output_format, buffer, width)
        rendered = buffer.getvalue()
    from verifier.atomic import write_new_file

    try:  # beside it, then linked into place: never a partial file, never a clobber
        write_new_file(output, _encoded(rendered))
    except EvidenceError as exc:
        raise UsageError(f"--output: {exc.message}") from None
    note(f"report written to {printable(str(output))}")


def _encoded(report: str) -> bytes:
    """The report's bytes for a file, as stdout writes them: a path that is not UTF-8 (its
    bytes held as surrogates) gets its own bytes back; any other lone surrogate is `?`."""
    try:
        return report.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return report.encode("utf-8", "replace")


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(boundary(verify))
