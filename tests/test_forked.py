"""Verify's second process changes nothing.

For a large bundle verify runs the checks of `verifier.checks.BESIDE` in a forked child
(`verifier.forked`, which export uses too) while it runs the others. Every sample bundle
gets the same result that way as in one process, and whatever goes wrong with the child,
the checks run in the parent instead. The module's own behaviour is tested here too.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
from children import no_children_left
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_paths import BUNDLES, KEY, SAMPLES

from verifier import forked, verify
from verifier.bundle.reader import Limits, LoadedBundle
from verifier.checks import BESIDE, CHECKS
from verifier.checks import context as context_module
from verifier.checks.context import BundleContext, EachAlone, VerifyOptions
from verifier.errors import UnreadableInput, UnsafeInput
from verifier.forked import Channel, ChildFailed, Forked, can_fork

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
    """Fork for every bundle, however small; `work` replaces what the child runs."""
    started: list[int] = []
    real = forked.Forked

    def counted(given: Any) -> Any:
        handle = real(given if work is None else work)
        started.append(1)
        return handle

    monkeypatch.setattr(verify, "BESIDE_FROM_BYTES", 0)
    monkeypatch.setattr(forked, "Forked", counted)
    return started


def verified(bundle: Path) -> tuple[Any, ...]:
    result = verify.verify_path(bundle, VerifyOptions())
    return result.verdict, result.findings


def verified_in_one_process(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    with monkeypatch.context() as patched:
        patched.setattr(forked, "can_fork", lambda: False)
        return verified(bundle)


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
        lambda _c: os._exit(3),
        lambda _c: os._exit(0),  # ends well, sends nothing
        lambda _c: os.kill(os.getpid(), signal.SIGKILL),
        lambda _c: 1 / 0,
        lambda _c: {"leaks": []},  # not every check's findings
        lambda _c: lambda: None,  # a result that cannot be pickled
    ],
    ids=["exit-3", "exit-0-silent", "killed", "raises", "partial", "unpicklable"],
)
@pytest.mark.parametrize("bundle", ["seed-mlxcel", "negative/leaked-home-path"])
def test_a_failed_child_means_the_checks_run_here(
    bundle: str, failure: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = alone(bundle, monkeypatch)
    with monkeypatch.context() as patched:
        started = forced(patched, work=failure)
        got = outcome(bundle)
    assert started == [1]
    assert got == expected
    assert any(f.check == "leaks" for f in got[2]) == (bundle == "negative/leaked-home-path")


def test_no_process_to_be_had_means_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = alone("seed-mlxcel", monkeypatch)

    def no_fork() -> int:
        raise BlockingIOError("fork: Resource temporarily unavailable")

    monkeypatch.setattr(verify, "BESIDE_FROM_BYTES", 0)
    monkeypatch.setattr(forked.os, "fork", no_fork)
    assert outcome("seed-mlxcel") == expected


def test_a_small_bundle_is_verified_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []
    monkeypatch.setattr(forked, "Forked", lambda work: started.append(1))
    outcome("seed-mlxcel")
    assert started == []


def test_forked_gives_the_childs_value_or_child_failed() -> None:
    big = bytes(range(256)) * 8192  # more than a pipe holds, even widened to 1 MiB
    assert Forked(lambda _c: {"x": [1, big]}).result() == {"x": [1, big]}

    def talks(channel: Channel) -> list[Any]:
        channel.send(["up", big])
        return [channel.receive(), "done"]

    talking = Forked(talks)
    assert talking.receive() == ["up", big]
    talking.send({"down": big})
    assert talking.result() == [{"down": big}, "done"]

    def fails(_channel: Channel) -> None:
        raise ValueError("no")

    with pytest.raises(ChildFailed):
        Forked(fails).result()
    with pytest.raises(ChildFailed):
        Forked(lambda _c: os._exit(0)).result()
    with pytest.raises(ChildFailed):
        Forked(lambda _c: threading.Lock()).result()  # a value pickle refuses: nothing is sent
    with pytest.raises(ChildFailed):
        Forked(fails).receive()  # nothing sent before it failed
    gone = Forked(lambda _c: None)
    gone.result()
    with pytest.raises(ChildFailed):
        gone.send(big)  # the child is gone, its pipe closed
    sleeper = Forked(lambda _c: time.sleep(60))
    started = time.monotonic()
    sleeper.cancel()
    assert time.monotonic() - started < 10
    sleeper.cancel()  # once ended, nothing
    assert no_children_left()


def _state(pid: int) -> str:
    """A process's state letter from /proc (Z: it has exited and waits to be reaped)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def _system_allows_pipe(size: int) -> bool:
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, size)
        return fcntl.fcntl(write, fcntl.F_GETPIPE_SZ) >= size
    except OSError:
        return False
    finally:
        os.close(read)
        os.close(write)


def test_a_child_whose_result_fits_the_widened_pipe_exits_before_it_is_read() -> None:
    # 600 KB: past a pipe's default 64 KiB, within the 1 MiB the child's pipe is widened to.
    # The child leaves it in the pipe and exits, its memory freed, while the parent works on.
    if not _system_allows_pipe(forked._UP_PIPE_BYTES):
        pytest.skip(
            "this system refuses a 1 MiB pipe (/proc/sys/fs/pipe-max-size, or the user's "
            "pipe-user-pages-soft spent)"
        )
    value = bytes(range(256)) * 2400
    handle = Forked(lambda _c: value)
    try:
        assert fcntl.fcntl(handle._up, fcntl.F_GETPIPE_SZ) >= forked._UP_PIPE_BYTES
        pid = handle._pid
        assert pid is not None
        deadline = time.monotonic() + 20
        while _state(pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(pid) == "Z"  # exited, not blocked writing
        assert handle.result() == value
    finally:
        handle.cancel()  # a failed run leaves no child behind for the tests after it
    assert no_children_left()


def test_a_pipe_that_cannot_be_widened_carries_the_same_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(descriptor: int, command: int, *args: Any) -> int:
        if command == fcntl.F_SETPIPE_SZ:
            raise PermissionError(1, "Operation not permitted")
        return real(descriptor, command, *args)

    real = fcntl.fcntl
    monkeypatch.setattr(fcntl, "fcntl", refused)
    value = bytes(range(256)) * 2400  # past the pipe the child is left with
    handle = Forked(lambda _c: value)
    try:
        assert real(handle._up, fcntl.F_GETPIPE_SZ) < forked._UP_PIPE_BYTES
        assert handle.result() == value
    finally:
        handle.cancel()
    assert no_children_left()


def test_the_child_works_on_what_the_parent_built() -> None:
    built = {"documents": list(range(1000))}
    handle = Forked(lambda _c: sum(built["documents"]))
    built["documents"].clear()  # the parent's own copy changes; the child's does not
    assert handle.result() == sum(range(1000))


def test_the_parents_signal_handlers_do_not_run_in_the_child(tmp_path: Path) -> None:
    marker = tmp_path / "handler-ran"
    previous = signal.signal(signal.SIGTERM, lambda *_: marker.write_text("x"))
    try:
        handle = Forked(lambda _c: os.kill(os.getpid(), signal.SIGTERM))
        with pytest.raises(ChildFailed):
            handle.result()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not marker.exists()


def test_no_fork_beside_another_thread_or_on_one_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    assert can_fork() is (threading.active_count() == 1)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not can_fork()
    finally:
        stop.set()
        thread.join()
    monkeypatch.setattr(forked.os, "sched_getaffinity", lambda _pid: {0}, raising=False)
    assert not can_fork()  # one core: nothing to gain


def test_no_fork_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not forked.can_fork()


def test_a_failing_fork_is_child_failed_with_no_pipe_left_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened = len(os.listdir("/proc/self/fd"))

    def no_fork() -> int:
        raise BlockingIOError("fork: Resource temporarily unavailable")

    monkeypatch.setattr(forked.os, "fork", no_fork)
    with pytest.raises(ChildFailed):
        Forked(lambda _c: None)
    assert len(os.listdir("/proc/self/fd")) == opened


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
def test_documents_parsed_each_alone_are_the_documents_parsed_together(
    texts: list[bytes], other: bytes, values: int
) -> None:
    files = {f"records/c/{i:03d}.json": t for i, t in enumerate(texts)}
    files["notes.txt"] = other
    bundle = LoadedBundle("test", files, ())
    options = VerifyOptions(limits=Limits(max_json_values=values))
    together = BundleContext(bundle, options).documents
    alone = EachAlone(files, options.limits)
    parsed_alone = {path for path in files if path in alone}
    assert alone.parsed == {p: p in parsed_alone for p in files if p.endswith(".json")}
    # More may parse alone (duplicate keys, NaN, deep nesting, a spent budget): the
    # parent then does not trust the child's findings (the tests below). What the strict
    # rules take, json.loads takes as the same value.
    assert parsed_alone >= set(together)
    for path in together:
        assert json.dumps(alone[path]) == json.dumps(together[path])


def test_a_child_that_parses_a_document_otherwise_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A flag and its value as two array items: only the document scan sees them together
    # (the bytes scan of a document the child could not parse would miss them).
    bundle = tmp_path / "bundle"
    shutil.copytree(SAMPLES / "seed-mlxcel", bundle)
    record = sorted((bundle / "records").rglob("*.json"))[0]
    document = json.loads(record.read_text())
    document["response"]["extra"] = ["--api-key", "hunter2secretvalue"]
    record.write_text(json.dumps(document))
    target = record.relative_to(bundle).as_posix()
    expected = verified_in_one_process(bundle, monkeypatch)
    assert any(f.check == "leaks" and f.file == target for f in expected[1])
    real = EachAlone._parse

    def refuses_one(self: EachAlone, path: str) -> Any:  # as a deeper stack might
        if path == target:
            self.parsed[path] = False
            return context_module._NOT_PARSED
        return real(self, path)

    started = forced(monkeypatch)
    monkeypatch.setattr(EachAlone, "_parse", refuses_one)
    assert verified(bundle) == expected
    assert started == [1]


@pytest.mark.parametrize(
    "spelling",
    [
        b'{"hf_token": "hf_abcdefghijklmnopqrstuvwxyz01", "kind": "x", "kind": "y"}',
        b'{"path": "/home/alice/models", "n": NaN}',
        b'{"path": "/home/alice/\\ud800"}',
        b"[" * 80 + b'"/home/alice/m"' + b"]" * 80,
    ],
    ids=["duplicate-key", "nan", "lone-surrogate", "deep"],
)
def test_a_document_only_the_child_can_parse_means_the_checks_run_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: bytes
) -> None:
    # The child reads with json.loads, which takes what the strict rules refuse: its
    # findings (made from a document the parent never had) must not be the report's.
    bundle = tmp_path / "bundle"
    shutil.copytree(SAMPLES / "seed-mlxcel", bundle)
    target = sorted((bundle / "records").rglob("*.json"))[-1]
    target.write_bytes(spelling)
    path = target.relative_to(bundle).as_posix()
    assert path in EachAlone({path: spelling}, Limits())
    expected = verified_in_one_process(bundle, monkeypatch)
    assert any(f.check == "safety" and f.file == path for f in expected[1])
    started = forced(monkeypatch)
    assert verified(bundle) == expected
    assert started == [1]


@pytest.mark.parametrize(
    ("data", "int_digits"),
    [
        (b"[" + b"7" * 5000 + b"]", 0),  # PYTHONINTMAXSTRDIGITS=0: int() reads any length
        (b'["\xf0\x9f\x98\x80"' + b",0" * 20 + b"]", None),  # more values than the budget
    ],
    ids=["integer-of-any-length", "past-the-value-budget"],
)
def test_a_document_json_loads_would_build_unbounded_is_read_by_the_strict_rules(
    monkeypatch: pytest.MonkeyPatch, data: bytes, int_digits: int | None
) -> None:
    def unbounded(data: bytes) -> Any:
        raise AssertionError("json.loads given a document the strict rules must bound")

    monkeypatch.setattr(context_module, "loads_plain", unbounded)
    old = sys.get_int_max_str_digits()
    try:
        if int_digits is not None:
            sys.set_int_max_str_digits(int_digits)
        documents = EachAlone({"records/c/001.json": data}, Limits(max_json_values=10))
        assert "records/c/001.json" not in documents  # refused by the strict rules
    finally:
        sys.set_int_max_str_digits(old)
    assert documents.parsed == {"records/c/001.json": False}


class _Watched(dict[str, Any]):
    """A parsed document that a weak reference can watch."""


def test_the_child_holds_one_document_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Not two while the next is parsed: two 15 MiB strings of four-byte characters are
    # 120 MiB of text.
    files = {f"records/c/00{i}.json": b'{"s": "%d"}' % i for i in range(3)}
    real = context_module.loads_plain
    parsed: list[weakref.ref[_Watched]] = []
    alive: list[bool] = []

    def loads(data: bytes) -> Any:
        alive.append(any(ref() is not None for ref in parsed))
        document = _Watched(real(data))
        parsed.append(weakref.ref(document))
        return document

    monkeypatch.setattr(context_module, "loads_plain", loads)
    documents = EachAlone(files, Limits())
    assert [documents[path]["s"] for path in sorted(files)] == ["0", "1", "2"]
    assert alive == [False, False, False]


def test_signals_are_blocked_only_while_forking() -> None:
    def mask(_channel: Channel) -> set[int]:
        return {int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])}

    assert Forked(mask).result() == mask(None)  # type: ignore[arg-type]
    assert not {signal.SIGINT, signal.SIGTERM} & signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_an_interrupt_held_while_forking_stops_and_reaps_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C that lands during the fork is raised once the mask is restored, out of
    Forked(): the child it started, whose pid the caller never gets, is not left behind."""
    fork = os.fork
    started: list[int] = []

    def interrupted_fork() -> int:
        os.kill(os.getpid(), signal.SIGINT)  # blocked here: pending until the restore
        pid = fork()
        if pid:
            started.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", interrupted_fork)
    with pytest.raises(KeyboardInterrupt):
        Forked(lambda _c: time.sleep(60))
    assert len(started) == 1
    with pytest.raises(ChildProcessError):  # reaped already
        os.waitpid(started[0], os.WNOHANG)
    assert no_children_left()


def test_a_signal_the_parent_ignores_the_child_ignores() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        handle = Forked(lambda _c: (os.kill(os.getpid(), signal.SIGINT), "still here")[1])
        assert handle.result() == "still here"
    finally:
        signal.signal(signal.SIGINT, previous)


_ORPHAN = """
import os, signal, sys, time
from pathlib import Path
from verifier.forked import Forked
child = Forked(lambda _c: time.sleep(60))
Path(sys.argv[1]).write_text(str(child._pid))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_child_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    import subprocess

    said = tmp_path / "pid"
    command = [sys.executable, "-c", _ORPHAN, str(said)]
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    orphan = int(said.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{orphan}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return  # gone
        if state == "Z":
            return  # ended, not yet reaped by whoever adopted it
        time.sleep(0.05)
    os.kill(orphan, signal.SIGKILL)
    raise AssertionError("the child outlived its parent")
