"""Cost: the worst inputs within the default limits stay under 10 s and 256 MiB, end to end.

Each runs `evidence verify` in a process of its own, so that its peak memory is its own;
its time is CPU time, so that other work on a shared machine does not count against it.
"""

from __future__ import annotations

from pathlib import Path

import measure
import pytest

SECONDS = 10.0
MEBIBYTES = 256


@pytest.mark.parametrize(
    "name",
    [
        "100 MB JSON array of numbers",
        "10 MB JSON of short strings",
        "one 200 MB string",
        "15 MiB of short strings",
        "990,000 numbers",
        "330,000 empty objects",
        "one 15 MiB string",
        "one 15 MiB string, four bytes a character",
        "15 MiB of 4,298-digit strings",
        "2 x 15 MiB strings of leak-scan hits",
        "2 x 15 MiB strings of escapes",
        "2 x 15 MiB strings of leak-scan hits, under records/",
        "2 x 15 MiB strings of escapes, under records/",
    ],
)
def test_cost_is_bounded(name: str, tmp_path: Path) -> None:
    make, extra = measure.CASES[name]
    archive = measure.build(tmp_path, name, make())  # the payload is freed before verify runs
    code, wall, cpu, peak = measure.measure(archive, *extra)
    assert code == 1  # none of them is a valid bundle
    assert cpu < SECONDS, f"{name}: {cpu:.1f} s of CPU ({wall:.1f} s wall)"
    assert peak < MEBIBYTES, f"{name}: {peak} MiB"
