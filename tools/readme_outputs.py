"""Regenerate the command outputs pasted into README.md, so that they cannot go stale.

Each pasted output sits between `<!-- output NAME -->` and `<!-- /output -->`. Offline ones
(verify on the committed samples) are checked by `tests/test_readme.py`; the first-capture
walk-through needs the real llama-server (`tools/build_llama_server.py`) and is redone with

    .venv/bin/python tools/readme_outputs.py            # every block, capture included
    .venv/bin/python tools/readme_outputs.py --offline  # only the blocks the test checks
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
README = REPO / "README.md"
sys.path.insert(0, str(TOOLS))

COLUMNS = "80"
KEY = "sample_bundles/keys/evidence-signing-key.pub.pem"
BLOCK = re.compile(r"(<!-- output (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /output -->)", re.S)

# The request body of the first capture: the committed flip prompt of the tiny model, with the
# sampling pinned so that no server default can change the outputs.
FIRST_REQUEST_FILE = "request.json"


def first_request() -> dict[str, object]:
    from llama_pipeline import fixture, request_body

    spec = fixture()
    return request_body(spec["flip"]["prompt"], spec["max_tokens"])


SHOWN = ".venv/bin/evidence"


def _evidence(args: list[str], cwd: Path, *, stderr: bool = True) -> str:
    """`$ .venv/bin/evidence ARGS` and what it printed (stdout, then stderr unless left out).

    Run as the reader runs it: through `.venv/bin/evidence` relative to `cwd` where that
    exists (the tool names itself so in the next step it suggests), else `python -m`."""
    env = {**os.environ, "COLUMNS": COLUMNS, "NO_COLOR": "1", "TERM": "dumb"}
    command = [SHOWN] if (cwd / SHOWN).exists() else [sys.executable, "-m", "verifier"]
    done = subprocess.run(
        [*command, *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    shown = f"$ {SHOWN} " + " ".join(shlex.quote(a) for a in args)
    text = (done.stdout + (done.stderr if stderr else "")).rstrip("\n")
    text = "\n".join(line.rstrip() for line in text.splitlines())
    return f"{shown}\n{text}\n"


def _console(body: str) -> str:
    return f"```console\n{body}```\n"


def verify_text() -> str:
    args = ["verify", "sample_bundles/llama-cpp-real.tar.gz", "--key", KEY]
    return _console(_evidence(args, REPO, stderr=False))


def verify_markdown() -> str:
    args = ["verify", "sample_bundles/seed-mlxcel", "--format", "markdown"]
    out = _evidence(args, REPO, stderr=False)
    body = out.split("\n", 1)[1].split("<details>")[0].rstrip("\n") + "\n"
    return f"````markdown\n{body}````\n"  # it holds ``` fences itself


def first_request_block() -> str:
    return f"```json\n{json.dumps(first_request(), indent=2)}\n```\n"


OFFLINE: dict[str, Callable[[], str]] = {
    "verify-text": verify_text,
    "verify-markdown": verify_markdown,
    "first-request": first_request_block,
}


def first_capture() -> dict[str, str]:
    """The README's walk-through, run for real in a scratch folder with its own names."""
    from build_llama_server import ensure_llama_server
    from make_tiny_model import write_tiny_model

    binary = ensure_llama_server()
    shown_binary = (
        "~/" + str(binary.relative_to(Path.home()))
        if binary.is_relative_to(Path.home())
        else str(binary)
    )
    with tempfile.TemporaryDirectory(prefix="first-capture-") as scratch:
        work = Path(scratch)
        installed = REPO / SHOWN
        if installed.exists():  # the README's own spelling of the command, from this folder
            (work / SHOWN).parent.mkdir(parents=True)
            (work / SHOWN).symlink_to(installed)
        write_tiny_model(work / "tiny.gguf", seed=0)
        (work / FIRST_REQUEST_FILE).write_text(json.dumps(first_request(), indent=2))
        capture = [
            "capture", "--server-profile", "llama.cpp", "--binary", str(binary),
            "--model", "tiny.gguf", "--output", "raw", "--request", FIRST_REQUEST_FILE,
            "--alias", "tiny", "--max-tokens", "128", "--port", "18457",
            "--extra-server-arg=-fa", "--extra-server-arg=on",
        ]  # fmt: skip
        blocks = {
            "first-capture": _evidence(capture, work).replace(str(binary), shown_binary),
            "first-keygen": _evidence(["keygen", "--out", "keys"], work),
            "first-export": _evidence(
                [
                    "export",
                    "raw",
                    "--out",
                    "public",
                    "--archive",
                    "public.tar.gz",
                    "--sign-key",
                    "keys/evidence-signing-key.pem",
                ],
                work,
            ),
            "first-verify": _evidence(
                ["verify", "public.tar.gz", "--key", "keys/evidence-signing-key.pub.pem"],
                work,
                stderr=False,
            ),
        }
        return {
            name: _console(text.replace(scratch, "/tmp/first-capture"))
            for name, text in blocks.items()
        }


def render(readme: str, blocks: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        body = blocks.get(name, match.group("body"))
        return match.group(1) + body + match.group(4)

    return BLOCK.sub(replace, readme)


def blocks_in(readme: str) -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in BLOCK.finditer(readme)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--offline", action="store_true", help="skip the real capture")
    args = parser.parse_args()
    blocks = {name: make() for name, make in OFFLINE.items()}
    if not args.offline:
        blocks |= first_capture()
    README.write_text(render(README.read_text("utf-8"), blocks), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
