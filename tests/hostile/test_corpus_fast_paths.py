"""Every case of the hostile corpus gets the same report with the fast paths as without.

The fast paths: strict JSON through the C parser (verifier/jsonio.py) and the generated
schema validators (verifier/schemas.py). Without them, every document is read by the
scanner and validated by jsonschema alone: the plain paths they stand in for. And the
checks verify runs in a forked copy for a large bundle (verifier/forked.py), here forced
for every case, against the same checks run in one process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus import CASES, Case
from test_corpus import run_case

from verifier import forked, jsonio, schemas, verify


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonio, "_loads_fast", lambda *_args: jsonio._NOT_SURE)
    monkeypatch.setattr(schemas, "fast_validator", lambda name: None)


@pytest.mark.parametrize("item", CASES, ids=[c.name for c in CASES])
def test_the_fast_paths_change_no_report(
    item: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = run_case(item, tmp_path)
    with monkeypatch.context() as patched:
        _plain(patched)
        plain = run_case(item, tmp_path)
    assert fast == plain


@pytest.mark.skipif(not forked.can_fork(), reason="forking beside needs Linux and two cores")
@pytest.mark.parametrize("item", CASES, ids=[c.name for c in CASES])
def test_checks_run_beside_change_no_report(
    item: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patched:
        patched.setattr(forked, "can_fork", lambda: False)
        alone = run_case(item, tmp_path)
    with monkeypatch.context() as patched:
        patched.setattr(verify, "BESIDE_FROM_BYTES", 0)
        beside = run_case(item, tmp_path)
    assert beside == alone
