"""Every sample bundle gets the same verification with the fast paths as without them.

The fast paths: strict JSON through the C parser (verifier/jsonio.py) and the generated
schema validators (verifier/schemas.py). Without them every document is read by the
scanner and validated by jsonschema alone, the plain paths they stand in for.
tests/hostile/test_corpus_fast_paths.py does the same for the hostile corpus.
"""

from __future__ import annotations

from typing import Any

import pytest
from sample_paths import BUNDLES, KEY, SAMPLES

from verifier import collector, jsonio, schemas
from verifier.checks.context import VerifyOptions
from verifier.verify import verify_path


def outcome(bundle: str) -> tuple[Any, ...]:
    result = verify_path(SAMPLES / bundle, VerifyOptions(public_key=KEY))
    classification = result.classification
    return (
        result.verdict,
        result.signature,
        result.findings,
        None if classification is None else (classification.reasons, classification.classes),
        None if classification is None else [(p.proven, p.reason) for p in classification.proofs],
    )


def test_every_sample_is_found() -> None:
    assert "seed-mlxcel" in BUNDLES and "negative/duplicate-json-key" in BUNDLES
    assert "llama-cpp-real.tar.gz" in BUNDLES and len(BUNDLES) > 30


@pytest.mark.parametrize("bundle", BUNDLES)
def test_the_fast_paths_change_no_result(bundle: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = outcome(bundle)
    with monkeypatch.context() as patched:
        patched.setattr(jsonio, "_loads_fast", lambda *_args: jsonio._NOT_SURE)
        patched.setattr(schemas, "fast_validator", lambda name: None)
        plain = outcome(bundle)
    assert fast == plain


def test_the_collector_pace_is_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from verifier import verify

    before = gc.get_threshold()
    during: list[int] = []
    real = verify.read_bundle

    def reading(*args: Any) -> Any:
        during.append(gc.get_threshold()[0])
        return real(*args)

    monkeypatch.setattr(verify, "read_bundle", reading)
    verify_path(SAMPLES / "seed-mlxcel")
    with pytest.raises(Exception, match="no such file"):
        verify_path(SAMPLES / "no-such-bundle")
    assert during == [max(collector._GC_YOUNG, before[0])] * 2
    assert gc.get_threshold() == before
