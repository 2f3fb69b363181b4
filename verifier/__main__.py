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
about 85 ms). Where that is not so, or a stream cannot be flushed, the exit is Python's.
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
        _end_at_once(exc.code)
        raise


def _end_at_once(code: object) -> None:
    from verifier.cli import common

    if not common.ends_at_once() or type(code) is not int or not 0 <= code <= 255:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a closed pipe, a closed file: Python says what it says
        return
    os._exit(code)


if __name__ == "__main__":
    main()
