"""Snapshot's family index and the counters it works out once give what a scan of every
sample key gives (the plain path)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from verifier.records import Snapshot


def plain_samples(metrics: dict[str, float] | None, ref: str) -> dict[str, float]:
    source, _, name = ref.partition(":")
    if source != "metric" or metrics is None:
        return {}
    return {k: v for k, v in metrics.items() if k == name or k.startswith(name + "{")}


def plain_counter(snapshot: Snapshot, ref: str) -> float | None:
    source, _, name = ref.partition(":")
    if source == "metric":
        if snapshot.metrics is None:
            return None
        values = list(plain_samples(snapshot.metrics, ref).values())
        return float(sum(values)) if values else None
    if source == "stats":
        value = (snapshot.cache_stats or {}).get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)
    return None


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
