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

import gc
import os
import sys


def main() -> None:
    gc.disable()
    from verifier.cli import main as run

    try:
        run()
    except SystemExit as exc:
        _end(exc.code)
        raise


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
