"""`python -m verifier` and the `evidence` script: the command line, started quickly.

Start-up makes tens of thousands of objects that live until exit (typer's, rich's, this
tool's modules) and no garbage: the cyclic collector would walk them some 60 times for
nothing (about 10 ms of an `evidence verify`). It is off until the command starts its
work (`cli.common.boundary` turns it back on; `cli.common.loading` keeps it off while a
command imports the core it drives). When it is turned on, what exists is first frozen
out of its walks (gc.freeze): neither its first collection nor the one at exit walks
start-up's objects again (the one at exit took about 13 ms of an `evidence verify`).
"""

import gc


def main() -> None:
    gc.disable()
    from verifier.cli import main as run

    run()


if __name__ == "__main__":
    main()
