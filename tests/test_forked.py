"""Verify's second process changes nothing.

For a large bundle verify runs the checks of `verifier.checks.BESIDE` in a forked copy
(`verifier.forked`) while it runs the others. Every sample bundle gets the same result
that way as in one process, and whatever goes wrong with the copy, the checks run in the
parent instead.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import forked, verify
from verifier.bundle.reader import Limits, LoadedBundle
from verifier.checks import BESIDE, CHECKS
from verifier.checks.context import BundleContext, VerifyOptions
from verifier.errors import UnreadableInput, UnsafeInput

SAMPLES = Path(__file__).resolve().parent.parent / "sample_bundles"
KEY = SAMPLES / "keys" / "evidence-signing-key.pub.pem"
BUNDLES = sorted(
    p.relative_to(SAMPLES).as_posix()
    for p in SAMPLES.rglob("*")
    if p.name.endswith(".tar.gz")
    or (p / "SHA256SUMS").is_file()
    or (p / "experiment.json").is_file()
)

pytestmark = pytest.mark.skipif(
    not forked.can_fork(), reason="forking beside needs Linux and two cores"
)


def outcome(bundle: str) -> tuple[Any, ...]:
    try:
        result = verify.verify_path(SAMPLES / bundle, VerifyOptions(public_key=KEY))
    except (UnreadableInput, UnsafeInput) as exc:
        return ("refused", type(exc).__name__, str(exc))
    classification = result.classification
    return (
        result.verdict,
        result.signature,
        result.findings,
        result.experiment,
        result.files,
        None if classification is None else (classification.reasons, classification.classes),
        None if classification is None else [(p.proven, p.reason) for p in classification.proofs],
    )


def forced(monkeypatch: pytest.MonkeyPatch, work: Any = None) -> list[int]:
    """Fork for every bundle, however small; `work` replaces what the copy runs."""
    started: list[int] = []
    real = forked.beside

    def counted(given: Any) -> Any:
        handle = real(given if work is None else work)
        started.append(1 if handle is not None else 0)
        return handle

    monkeypatch.setattr(verify, "BESIDE_FROM_BYTES", 0)
    monkeypatch.setattr(forked, "beside", counted)
    return started


def alone(bundle: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    with monkeypatch.context() as patched:
        patched.setattr(forked, "can_fork", lambda: False)
        return outcome(bundle)


def test_the_checks_beside_are_registered_checks() -> None:
    assert {name for name, _ in CHECKS} >= BESIDE
    assert "leaks" in BESIDE and "servers" not in BESIDE and "schema" not in BESIDE


@pytest.mark.parametrize("bundle", BUNDLES)
def test_checks_run_beside_change_no_result(bundle: str, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = alone(bundle, monkeypatch)
    with monkeypatch.context() as patched:
        started = forced(patched)
        got = outcome(bundle)
    assert got == expected
    if expected[0] != "refused":
        assert started == [1]  # the copy really ran them


@pytest.mark.parametrize(
    "failure",
    [
        lambda: os._exit(3),
        lambda: os._exit(0),  # ends well, sends nothing
        lambda: os.kill(os.getpid(), signal.SIGKILL),
        lambda: 1 / 0,
        lambda: {"leaks": []},  # not every check's findings
        lambda: lambda: None,  # a result that cannot be pickled
    ],
    ids=["exit-3", "exit-0-silent", "killed", "raises", "partial", "unpicklable"],
)
@pytest.mark.parametrize("bundle", ["seed-mlxcel", "negative/leaked-home-path"])
def test_a_failed_copy_means_the_checks_run_here(
    bundle: str, failure: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = alone(bundle, monkeypatch)
    with monkeypatch.context() as patched:
        started = forced(patched, work=failure)
        got = outcome(bundle)
    assert started == [1]
    assert got == expected
    assert any(f.check == "leaks" for f in got[2]) == (bundle == "negative/leaked-home-path")


def test_a_small_bundle_is_verified_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []
    monkeypatch.setattr(forked, "beside", lambda work: started.append(1))
    outcome("seed-mlxcel")
    assert started == []


def test_the_result_arrives_whole() -> None:
    big = os.urandom(5 << 20)  # several pipe buffers
    handle = forked.beside(lambda: (big, {"x": [1, 2.5, None]}))
    assert handle is not None
    assert handle.result() == (big, {"x": [1, 2.5, None]})
    assert handle.result() is None  # once only
    handle.cancel()  # nothing left to stop


def test_the_copy_works_on_what_the_parent_built() -> None:
    built = {"documents": list(range(1000))}
    handle = forked.beside(lambda: sum(built["documents"]))
    built["documents"].clear()  # the parent's own copy changes; the child's does not
    assert handle is not None and handle.result() == sum(range(1000))


def test_cancel_stops_a_copy_at_once() -> None:
    handle = forked.beside(lambda: time.sleep(60))
    assert handle is not None
    start = time.monotonic()
    handle.cancel()
    assert time.monotonic() - start < 10
    assert handle.result() is None


def test_the_parents_signal_handlers_do_not_run_in_the_copy(tmp_path: Path) -> None:
    marker = tmp_path / "handler-ran"
    previous = signal.signal(signal.SIGTERM, lambda *_: marker.write_text("x"))
    try:
        handle = forked.beside(lambda: os.kill(os.getpid(), signal.SIGTERM))
        assert handle is not None and handle.result() is None
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not marker.exists()


def test_no_fork_while_another_thread_runs() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not forked.can_fork()
        assert forked.beside(lambda: 1) is None
    finally:
        stop.set()
        thread.join()
    assert forked.can_fork()


def test_no_fork_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not forked.can_fork()


def test_a_failing_fork_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> int:
        raise OSError("no more processes")

    monkeypatch.setattr(os, "fork", refuse)
    assert forked.beside(lambda: 1) is None


_TEXTS = st.one_of(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    ).map(lambda v: json.dumps(v).encode()),
    st.sampled_from(
        [b'{"a": 1, "a": 2}', b"[NaN]", b"[" * 70 + b"]" * 70, b'"\\ud800"', b"\xff", b"{"]
    ),
    st.binary(max_size=20),
)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(_TEXTS, min_size=1, max_size=6),
    other=st.binary(max_size=10),
    values=st.integers(min_value=1, max_value=60),
)
def test_documents_parsed_each_alone_are_the_documents(
    texts: list[bytes], other: bytes, values: int
) -> None:
    files = {f"records/c/{i:03d}.json": t for i, t in enumerate(texts)}
    files["notes.txt"] = other
    bundle = LoadedBundle("test", files, ())
    options = VerifyOptions(limits=Limits(max_json_values=values))
    together = BundleContext(bundle, options).documents
    alone = BundleContext.each_alone(bundle, options)
    if alone is None:  # the budget might run out: only parsing them together can tell
        assert sum((len(t) + 1) // 2 for t in texts) > values
        return
    assert list(alone.documents) == list(together)
    for path in files:
        assert (path in alone.documents) == (path in together)
        if path in together:
            assert json.dumps(alone.documents[path]) == json.dumps(together[path])
