"""Snapshot's family index, the counters it works out once and its reading plans give what
a scan of every sample key gives (the plain path, `proofs_reference.plain_counter`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from proofs_reference import plain_counter, plain_samples
from sample_paths import BUNDLES, SAMPLES

from verifier.bundle.reader import Limits, read_bundle
from verifier.checks.context import BundleContext, VerifyOptions
from verifier.model import Arm
from verifier.records import Record, Snapshot

_NAMES = st.sampled_from(["a", "ab", "a_b", "a{", "a{x", "b", "", "{", "a}"])
_KEYS = st.builds(
    lambda name, labels: name + labels,
    _NAMES,
    st.sampled_from(["", "{}", '{x="1"}', "{y}", "{", "{{", "}", "x"]),
)
_NUMBERS = st.floats(allow_nan=False, allow_infinity=False, width=32) | st.integers(-50, 50)
_REFS = st.builds(lambda s, n: f"{s}:{n}", st.sampled_from(["metric", "stats", "other"]), _NAMES)


@given(
    st.none() | st.dictionaries(_KEYS, _NUMBERS, max_size=12),
    st.none() | st.dictionaries(_NAMES, _NUMBERS | st.booleans() | st.text(max_size=2)),
    st.lists(_REFS, max_size=8),
)
def test_counters_and_samples_are_those_of_a_full_scan(
    metrics: dict[str, Any] | None, stats: dict[str, Any] | None, refs: list[str]
) -> None:
    snapshot = Snapshot(stats, metrics)
    for ref in [*refs, *refs]:  # twice: the index is built on the first use
        assert snapshot.samples(ref) == plain_samples(metrics, ref)
        assert list(snapshot.samples(ref)) == list(plain_samples(metrics, ref))  # same order
        got, expected = snapshot.counter(ref), plain_counter(snapshot, ref)
        assert (got, type(got)) == (expected, type(expected)), ref


def test_sums_add_in_the_snapshot_order() -> None:
    # floating-point addition is not associative: the order is part of the result
    metrics = {"f{a}": 1e16, "g": 5.0, "f{b}": 1.0, "f": -1e16, "f{c}": 1.0}
    snapshot = Snapshot(None, metrics)
    assert snapshot.counter("metric:f") == plain_counter(snapshot, "metric:f")


@given(
    st.none() | st.dictionaries(_NAMES, _NUMBERS | st.booleans() | st.text(max_size=2)),
    st.sampled_from(["a", "", "a_", "b", "{"]),
)
def test_stat_names_are_those_of_a_full_scan(stats: dict[str, Any] | None, prefix: str) -> None:
    snapshot = Snapshot(stats, None)
    plain = {
        key
        for key, value in (stats or {}).items()
        if key.startswith(prefix) and isinstance(value, int) and not isinstance(value, bool)
    }
    assert snapshot.stat_names(prefix) == plain
    assert snapshot.stat_names(prefix) == plain  # the second time, from what was worked out


def _same(got: list[float | None], expected: list[float | None]) -> bool:
    """Equal values of equal types (0.0 and -0.0, or 1 and 1.0, are not the same here)."""
    return [(v, type(v), repr(v)) for v in got] == [(v, type(v), repr(v)) for v in expected]


@given(
    st.lists(
        st.tuples(
            st.none() | st.dictionaries(_KEYS, _NUMBERS, max_size=12),
            st.none() | st.dictionaries(_NAMES, _NUMBERS | st.booleans() | st.text(max_size=2)),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    ),
    st.lists(_REFS, max_size=8),
    st.lists(_REFS, max_size=3),
)
def test_counters_read_by_a_plan_are_those_of_a_full_scan(
    snapshots: list[tuple[dict[str, Any] | None, dict[str, Any] | None, bool]],
    refs: list[str],
    first: list[str],
) -> None:
    # Snapshots of the same keys, or of others, one after the other (the plan is kept for
    # the keys last seen); some asked for other counters first (no plan for those).
    wanted = tuple(refs)
    for metrics, stats, asked in [*snapshots, *snapshots]:
        for copy in (metrics, dict(metrics) if metrics is not None else None):
            snapshot = Snapshot(stats, copy)
            if asked:
                for ref in first:
                    snapshot.counter(ref)
            assert _same(snapshot.counters(wanted), [plain_counter(snapshot, r) for r in wanted])
            for ref in wanted:  # what the plan left behind is what counter() gives
                assert _same([snapshot.counter(ref)], [plain_counter(snapshot, ref)])
                assert snapshot.samples(ref) == plain_samples(copy, ref)
                assert list(snapshot.samples(ref)) == list(plain_samples(copy, ref))
                assert snapshot.samples(ref) is snapshot.samples(ref)


def test_a_plan_reads_labelled_names_and_other_sources_as_counter_does() -> None:
    metrics = {"a{x}": 1.0, "a": 2, "a{y}": -0.0, "b": 3.5, "ab": 4}
    stats = {"hits": 2, "rate": 0.5, "on": True, "name": "x", "neg": -0.0}
    refs = ("metric:a{x}", "metric:a", "metric:ab", "metric:c", "stats:hits", "stats:on")
    refs += ("stats:name", "stats:neg", "stats:absent", "other:a", "a", "metric:a")
    for _ in range(2):  # the second snapshot of the same keys reads by the first one's plan
        snapshot = Snapshot(stats, dict(metrics))
        assert _same(snapshot.counters(refs), [plain_counter(snapshot, r) for r in refs])


@given(
    st.none() | st.dictionaries(_KEYS, _NUMBERS, max_size=8),
    st.none() | st.dictionaries(_KEYS, _NUMBERS, max_size=8),
    st.none() | st.dictionaries(_NAMES, _NUMBERS | st.booleans() | st.text(max_size=2)),
    st.none() | st.dictionaries(_NAMES, _NUMBERS | st.booleans() | st.text(max_size=2)),
    st.lists(_REFS, max_size=6),
    st.lists(_REFS, max_size=3),
)
def test_deltas_are_those_of_the_counters(
    old_metrics: dict[str, Any] | None,
    new_metrics: dict[str, Any] | None,
    old_stats: dict[str, Any] | None,
    new_stats: dict[str, Any] | None,
    refs: list[str],
    asked: list[str],
) -> None:
    before, after = Snapshot(old_stats, old_metrics), Snapshot(new_stats, new_metrics)
    for ref in asked:  # some worked out beforehand, on one side or both
        before.counter(ref)
        if len(ref) % 2:
            after.counter(ref)
    expected = []
    for ref in refs:
        old, new = plain_counter(before, ref), plain_counter(after, ref)
        expected.append(None if old is None or new is None else new - old)
    assert _same(list(before.deltas(after, tuple(refs))), expected)


def _constructed(file: str, data: dict[str, Any]) -> Record:
    """Record.from_json as the dataclass's own constructor builds it."""
    telemetry = data["telemetry"]
    return Record(
        file=file,
        condition=data["condition"],
        sequence=data["sequence"],
        phase=data["phase"],
        server_instance=data["server_instance"],
        claimed_arm=Arm(data["claimed_arm"]),
        preceded_by=data["preceded_by"],
        request_body=data["request_body"],
        http_status=data["http_status"],
        response=data["response"],
        output_hash=data["output_hash"],
        before=Snapshot(telemetry["before"]["cache_stats"], telemetry["before"]["metrics"]),
        after=Snapshot(telemetry["after"]["cache_stats"], telemetry["after"]["metrics"]),
        started_at=data.get("started_at"),
        error=data.get("error"),
        elapsed_s=data.get("elapsed_s"),
    )


def _state(record: Record) -> list[tuple[str, Any]]:
    """Everything a record holds, its snapshots' memos included, in the order it was set."""
    return [
        (name, list(vars(value).items()) if isinstance(value, Snapshot) else value)
        for name, value in vars(record).items()
    ]


@pytest.mark.parametrize("bundle", BUNDLES)
def test_from_json_builds_what_the_constructor_builds(bundle: str) -> None:
    # from_json sets the dataclass's fields itself (no per-field object.__setattr__): the
    # same attributes, in the same order, and nothing else, so == and repr agree
    context = BundleContext(read_bundle(SAMPLES / bundle, Limits()), VerifyOptions())
    for record in context.records:
        built = _constructed(record.file, context.documents[record.file])
        fresh = Record.from_json(record.file, context.documents[record.file])
        assert _state(fresh) == _state(built)
        assert [f.name for f in dataclasses.fields(Record)] == list(vars(fresh))
        assert fresh == built
        assert repr(fresh) == repr(built)


@given(st.sampled_from([a.value for a in Arm]) | st.text(max_size=6) | st.integers() | st.none())
def test_a_claimed_arm_is_read_as_arm_reads_it(claimed: Any) -> None:
    context = BundleContext(read_bundle(SAMPLES / "seed-mlxcel", Limits()), VerifyOptions())
    record = context.records[0]
    document = {**context.documents[record.file], "claimed_arm": claimed}
    try:
        expected: Any = _constructed(record.file, document).claimed_arm
    except ValueError as exc:
        expected = (ValueError, str(exc))
    try:
        got: Any = Record.from_json(record.file, document).claimed_arm
    except ValueError as exc:
        got = (ValueError, str(exc))
    assert got == expected
    assert type(got) is type(expected)


def test_a_record_reads_its_finish_reason_once_and_as_before() -> None:
    context = BundleContext(read_bundle(SAMPLES / "seed-mlxcel", Limits()), VerifyOptions())
    record = context.records[0]
    document = context.documents[record.file]
    for finish in ("stop", "length", None, 7, ["stop"]):
        changed = {**document, "response": {**document["response"], "choices": [
            {**document["response"]["choices"][0], "finish_reason": finish}
        ]}}  # fmt: skip
        fresh = Record.from_json(record.file, changed)
        expected = finish if isinstance(finish, str) else None
        assert fresh.finish_reason == expected
        assert fresh.finish_reason == expected  # the second time, as remembered
        assert fresh == _constructed(record.file, changed)  # not a field: == unchanged


_READ = ["condition", "sequence", "phase", "server_instance", "claimed_arm", "preceded_by",
         "request_body", "http_status", "response", "output_hash", "telemetry"]  # fmt: skip


@given(
    st.sets(st.sampled_from([*_READ, "telemetry.before", "telemetry.after"])),
    st.sampled_from(["cold", "hot", None, 1]),
)
def test_a_document_without_a_field_fails_as_the_constructor_fails(
    dropped: set[str], claimed: Any
) -> None:
    # (verify builds records of schema-valid documents only: from_json reads the fields
    # in the constructor's order all the same, so any failure is the same one)
    context = BundleContext(read_bundle(SAMPLES / "seed-mlxcel", Limits()), VerifyOptions())
    record = context.records[0]
    document = {**context.documents[record.file], "claimed_arm": claimed}
    document["telemetry"] = dict(document["telemetry"])
    for name in dropped:
        if name.startswith("telemetry."):
            document["telemetry"].pop(name.partition(".")[2], None)
    for name in dropped:
        if not name.startswith("telemetry."):
            document.pop(name, None)

    def outcome(build: Any) -> Any:
        try:
            return _state(build(record.file, document))
        except (KeyError, ValueError) as exc:
            return type(exc), exc.args

    assert outcome(Record.from_json) == outcome(_constructed)


@given(
    st.none()
    | st.dictionaries(_NAMES | st.sampled_from(["a~b", "a/b", "0"]), _NUMBERS | st.none())
    | st.lists(_NUMBERS, max_size=3),
    st.sampled_from(["", "/", "/a", "/ab", "/a~0b", "/a~1b", "/a/b", "a", "/0", "//", "/b"]),
)
def test_a_stat_is_what_the_pointer_resolves_to(stats: Any, pointer: str) -> None:
    # `Snapshot.stat` reads a member of the stats straight from the dict: as resolve_pointer
    from verifier.jsonio import resolve_pointer

    try:
        expected = None if stats is None else resolve_pointer(stats, pointer)
    except KeyError:
        expected = None
    assert Snapshot(stats, None).stat(pointer) == expected
