"""Measure verify's cost on the hostile cost cases: `python tests/hostile/measure.py`.

Builds each archive in a temporary folder (the seed sample plus one hostile JSON file),
runs `evidence verify` on it in a process of its own and prints the archive size, the
exit code, the wall time and the peak resident memory. Used for the figures in SECURITY.md.
"""

from __future__ import annotations

import functools
import gzip
import io
import random
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "sample_bundles" / "seed-mlxcel"
EVIDENCE = Path(sys.executable).parent / "evidence"


def _block(make: Callable[[random.Random], bytes], size: int) -> bytes:
    """About `size` bytes of comma-separated items: a 1 MiB random block, repeated.

    Mostly one item with a few random others, so the archive compresses about 60-120
    times: under the default ratio limit, like the archives of the issue.
    """
    rng = random.Random(7)
    block = b",".join(make(rng) for _ in range(200_000))
    while len(block) < 1024 * 1024:
        block += b"," + make(rng)
    return b"[" + b",".join([block] * max(1, size // len(block))) + b"]"


def _numbers(size: int) -> bytes:
    return _block(lambda rng: b"0" if rng.random() < 0.995 else b"%d" % rng.randrange(10**6), size)


def _short_strings(size: int) -> bytes:
    letters = b"abcdefghijklmnopqrstuvwxyz"
    return _block(
        lambda rng: (
            b'"ab"' if rng.random() < 0.99 else b'"%c%c"' % tuple(rng.choices(letters, k=2))
        ),
        size,
    )


def _one_string(size: int, first: bytes = b"") -> bytes:
    rng = random.Random(7)
    block = bytes(rng.choice(b"ab") if rng.random() < 0.01 else 97 for _ in range(1024 * 1024))
    return b'{"s": "' + first + (block * max(1, size // len(block)))[len(first) :] + b'"}'


# One character outside the Basic Multilingual Plane makes Python hold the whole string at
# four bytes a character: 15 MiB of UTF-8 becomes 60 MiB of text, in each copy of it.
_ASTRAL = "\U0001f600".encode()  # an emoji


def _digit_runs(size: int) -> bytes:
    """Strings of 4,298 digits, one short of the run that makes the strict parser's fast
    path read a document by its scanner instead: a search that tried every place of each
    run read it to its end from each (quadratic: 1 s for 170 KB)."""
    rng = random.Random(7)
    runs = [b'"%s"' % bytes(rng.choices(b"0123456789", k=4298)) for _ in range(64)]
    block = b",".join(runs)
    return b"[" + b",".join([block] * max(1, size // len(block))) + b"]"


def _empty_objects(size: int) -> bytes:
    return _block(lambda rng: b"{}" if rng.random() < 0.99 else b"[]", size)


def _repeated(fragment: bytes, size: int) -> bytes:
    """One string of `fragment` over and over: a leak-scan hit (`fe80::1%`: an address
    with a zone) or an escape (`%41`) every few characters, millions in all."""
    return b'{"s": "' + (fragment * (size // len(fragment) + 1))[:size] + b'"}'


def _many_documents(count: int, size: int) -> list[bytes]:
    return [_short_strings(size) for _ in range(count)]


# name -> (extra JSON documents, extra arguments of `evidence verify`)
CASES: dict[str, tuple[Callable[[], list[bytes]], tuple[str, ...]]] = {
    # The figures of issue 9: under the old defaults they verified slowly or not at all.
    "100 MB JSON array of numbers": (lambda: [_numbers(100 * 1024 * 1024)], ()),
    "10 MB JSON of short strings": (lambda: [_short_strings(10 * 1024 * 1024)], ()),
    "100 MB JSON of short strings": (lambda: [_short_strings(100 * 1024 * 1024)], ()),
    "one 200 MB string": (lambda: [_one_string(200 * 1024 * 1024)], ()),
    "30 MB of empty objects": (lambda: [_empty_objects(30 * 1024 * 1024)], ()),
    # The worst a bundle within the new default limits can do.
    "one 15 MiB string": (lambda: [_one_string(15 * 1024 * 1024)], ()),
    "one 15 MiB string, four bytes a character": (
        lambda: [_one_string(15 * 1024 * 1024, _ASTRAL)],
        (),
    ),
    "2 x 15 MiB strings, four bytes a character": (
        lambda: [_one_string(15 * 1024 * 1024, _ASTRAL)] * 2,
        (),
    ),
    "2 x 15 MiB strings": (lambda: [_one_string(15 * 1024 * 1024)] * 2, ()),
    "3 x 15 MiB strings (over the total)": (lambda: [_one_string(15 * 1024 * 1024)] * 3, ()),
    "15 MiB of short strings": (lambda: [_short_strings(15 * 1024 * 1024)], ()),
    "990,000 short strings": (lambda: [_short_strings(990_000 * 5)], ()),
    "15 MiB of 4,298-digit strings": (lambda: [_digit_runs(15 * 1024 * 1024)], ()),
    "990,000 numbers": (lambda: [b"[" + b"0," * 989_999 + b"0]"], ("--max-ratio", "10000")),
    # A directory bundle has no compression ratio to stop these (97 s and 1.6 GB, and 13 s
    # and 1 GB, before the leak scan stopped at its bounds: checks/leaks.py MOST_HITS); under
    # records/, the forked child scans them (12 s and 1.1 GiB before its scan was bounded).
    **{
        f"2 x 15 MiB strings of {what}{where}": (
            functools.partial(lambda f: [_repeated(f, 15 * 1024 * 1024)] * 2, fragment),
            ("--max-ratio", "1000000"),
        )
        for where in ("", ", under records/")
        for what, fragment in (("leak-scan hits", b"fe80::1%"), ("escapes", b"%41"))
    },
    "330,000 empty objects": (lambda: [_empty_objects(330_000 * 3)], ("--max-ratio", "10000")),
}


def build(folder: Path, name: str, payloads: list[bytes]) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(SEED.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(SEED).as_posix())
        # A case "under records/" puts its payloads where the records the forked child
        # parses and scans for the parent are (the last of them, by name).
        at = "records/zz/{:03d}.json" if "under records/" in name else "extra-{}.json"
        for index, payload in enumerate(payloads):
            info = tarfile.TarInfo(at.format(index))
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    archive = folder / (re.sub(r"\W+", "-", name) + ".tar.gz")
    archive.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=6))
    return archive


# A small process of its own starts verify and reports on it: a child forked straight
# from a big test process would be charged with that process's pages in its peak RSS.
_LAUNCHER = """
import os, subprocess, sys, time
started = time.monotonic()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
wall = time.monotonic() - started
cpu = usage.ru_utime + usage.ru_stime
print(os.waitstatus_to_exitcode(status), wall, cpu, usage.ru_maxrss // 1024)
"""


def measure(archive: Path, *extra: str) -> tuple[int, float, float, int]:
    """(exit code, wall seconds, CPU seconds, peak resident MiB) of `evidence verify`.

    CPU seconds are what the bound is about: on a machine shared with other work the wall
    time also counts the waiting for a core.
    """
    command = [str(EVIDENCE), "verify", str(archive), "-f", "json", *extra]
    report = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *command], capture_output=True, text=True, check=True
    )
    code, wall, cpu, peak = report.stdout.split()
    return int(code), float(wall), float(cpu), int(peak)  # ru_maxrss is in KiB, shown in MiB


def main() -> None:
    chosen = sys.argv[1:]
    with tempfile.TemporaryDirectory() as folder:
        for name, (make, extra) in CASES.items():
            if chosen and not any(c in name for c in chosen):
                continue
            archive = build(Path(folder), name, make())
            code, wall, cpu, peak = measure(archive, *extra)
            size = archive.stat().st_size
            print(
                f"{name}: archive {size / 1e6:.2f} MB, exit {code}, {cpu:.1f} s CPU "
                f"({wall:.1f} s wall), {peak} MiB"
            )
            archive.unlink()


if __name__ == "__main__":
    main()
