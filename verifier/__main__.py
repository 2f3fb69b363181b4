"""`python -m verifier` and the `evidence` script: the command line, started quickly.

Start-up makes tens of thousands of objects that live until exit (typer's, rich's, this
tool's modules) and no garbage: the cyclic collector would walk them some 60 times for
nothing (about 10 ms of an `evidence verify`). It is off until the command starts its
work (`cli.common.boundary` turns it back on; `cli.common.loading` keeps it off while a
command imports the core it drives). When it is turned on, what exists is first frozen
out of its walks (gc.freeze): neither its first collection nor the one at exit walks
start-up's objects again (the one at exit took about 13 ms of an `evidence verify`).

A command that has written its report and has nothing left to do says so
(`cli.common.end_at_once`): the process then ends as soon as its standard streams are
flushed, without the interpreter freeing every object (after a verify of 10,000 records,
about 85 ms). Where that is not so, or a stream cannot be flushed, the exit is Python's;
where what was left in stdout's buffer finds no reader (`evidence ... | head`), one line
says so and the exit code is 1, as for a write that failed during the command.
"""

import contextlib
import gc
import os
import sys


def main() -> None:
    gc.disable()
    try:
        _utf8_streams()
        from verifier.cli import main as run

        run()
    except SystemExit as exc:
        _end(exc.code)
        raise
    except KeyboardInterrupt:  # before a command's own boundary (start-up, --help)
        _say("interrupted")
        raise SystemExit(130) from None
    except OSError as exc:  # --help or --version to a full device: no traceback
        from verifier.cli import common

        if not common.is_write_failure(exc):
            raise
        common.output_failed(exc)
        raise SystemExit(1) from None


def _utf8_streams() -> None:
    """Reports hold more than ASCII (names, `×`, `≤`): a stream that cannot encode them
    (PYTHONIOENCODING=ascii, a C locale without Python's UTF-8 mode) writes UTF-8 instead
    of failing halfway through a report."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("_", "-")
        if encoding not in ("utf-8", "utf8") and hasattr(stream, "reconfigure"):
            with contextlib.suppress(OSError, ValueError, LookupError):
                stream.reconfigure(encoding="utf-8")


def _say(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def _end(code: object) -> None:
    """Before the process exits with `code`: the standard streams flushed (a stdout with
    no reader said so once, exit 1), then, where the command said so, the exit at once."""
    from verifier.cli import common

    if sys.stdout is not None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:  # what was left in its buffer found no reader (`| head`)
            common.reader_gone()
            raise SystemExit(1) from None
        except (OSError, ValueError):  # a full disk, a closed file: Python says what it says
            return
    if sys.stderr is not None:
        try:
            sys.stderr.flush()
        except BrokenPipeError:  # progress lines no one reads: the report went out
            common.to_null(sys.stderr)
        except (OSError, ValueError):
            return
    if common.ends_at_once() and type(code) is int and 0 <= code <= 255:
        os._exit(code)


if __name__ == "__main__":
    main()
