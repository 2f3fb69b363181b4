"""Where verify's time goes: CPU seconds of reading and of each registered check.

    python tools/verify_split.py BUNDLE [--repeat N]

Runs `verify_path` in this process N times (reading limits raised for large bundles) and
prints, for each step, its least CPU time over the runs. The checks verify would run in a
forked child for a large bundle run here too, so that every step is counted.
Classification and the rest is what `verify_path` spends outside the reader and the
checks. The README's Benchmarks section quotes it for the 10,024-record bundle that
`make bench` builds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import verifier.checks as checks
import verifier.forked as forked
import verifier.verify as verify
from verifier.bundle.reader import Limits

_spent: dict[str, float] = {}


def _timed(name: str, step: Callable[..., Any], *, materialize: bool) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            result = step(*args, **kwargs)
            return list(result) if materialize else result
        finally:
            _spent[name] = _spent.get(name, 0.0) + time.process_time() - start

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    forked.can_fork = lambda: False  # one process: the child's steps are timed here
    checks.CHECKS = tuple((n, _timed(n, c, materialize=True)) for n, c in checks.CHECKS)
    verify.read_bundle = _timed("read", verify.read_bundle, materialize=False)  # type: ignore[assignment]
    limits = Limits(max_members=10**6, max_total_bytes=1 << 40, max_json_values=10**10)
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        _spent.clear()
        start = time.process_time()
        verify.verify_path(args.bundle, verify.VerifyOptions(limits=limits))
        total = time.process_time() - start
        _spent["classification and the rest"] = total - sum(_spent.values())
        _spent["verify_path in all"] = total
        for name, seconds in _spent.items():
            best[name] = min(best.get(name, float("inf")), seconds)
    for name, seconds in best.items():
        print(f"{name:30s} {seconds:7.3f} s")


if __name__ == "__main__":
    main()
