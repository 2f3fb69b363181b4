"""Export tests: raw fixtures from the test factory and from the seed-shaped sample."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TOOLS = HERE.parent.parent / "tools"
for entry in (str(HERE), str(HERE.parent), str(TOOLS)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from rawfactory import RawFactory  # noqa: E402
from seed_sample import write_seed_raw  # noqa: E402


@pytest.fixture
def factory_raw(tmp_path: Path) -> Path:
    return RawFactory().write(tmp_path / "raw")


@pytest.fixture
def seed_raw(tmp_path: Path) -> Path:
    raw = tmp_path / "seed-raw"
    write_seed_raw(raw)
    return raw
