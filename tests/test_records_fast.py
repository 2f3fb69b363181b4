"""Snapshot's family index, the counters it works out once and its reading plans give what
a scan of every sample key gives (the plain path, `proofs_reference.plain_counter`)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from proofs_reference import plain_counter, plain_samples

from verifier.records import Snapshot

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
