"""verify proves and classifies exactly as the plain proof rules do (`proofs_reference.py`).

The fast paths: a request's counter moves worked out in one go, the counter names of its
reasons written once, the store deltas of a condition read once for its class telemetry
and its one-cache-state rule, and a snapshot's family index and prefixed stats names
worked out once per set of keys. Every sample bundle, every case of the hostile corpus and
generated records get the same result both ways.
"""

from __future__ import annotations

import copy
import sys
from functools import cache
from pathlib import Path
from typing import Any

import proofs_reference as reference
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_paths import BUNDLES, KEY, SAMPLES

from verifier import classify, proofs
from verifier.bundle.reader import Limits, read_bundle
from verifier.checks.context import BundleContext, VerifyOptions
from verifier.jsonio import json_key
from verifier.model import Arm
from verifier.profiles import KNOWN_RULES
from verifier.profiles.rules import CacheSignals, ProfileRules, ResetProof
from verifier.records import Record, Snapshot
from verifier.verify import verify_path

REPO = Path(__file__).resolve().parents[1]
HOSTILE = Path(__file__).resolve().parent / "hostile"


def outcome(path: Path) -> tuple[Any, ...]:
    result = verify_path(path, VerifyOptions(public_key=KEY))
    return result.verdict, result.signature, result.findings, result.classification


def test_every_sample_is_found() -> None:
    assert "seed-mlxcel" in BUNDLES and "negative/unproven-warm-hits" in BUNDLES
    assert "llama-cpp-real.tar.gz" in BUNDLES and len(BUNDLES) > 30


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_sample_gets_the_same_verification(
    bundle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = outcome(SAMPLES / bundle)
    with monkeypatch.context() as patched:
        reference.use_plain_paths(patched)
        plain = outcome(SAMPLES / bundle)
    assert fast == plain


def test_the_plain_paths_are_the_ones_verify_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = reference.prove_all

    def counted(*args: Any, **kwargs: Any) -> list[proofs.RequestProof]:
        calls.append("prove_all")
        return real(*args, **kwargs)

    with monkeypatch.context() as patched:
        reference.use_plain_paths(patched)
        patched.setattr("verifier.checks.context.prove_all", counted)
        result = verify_path(SAMPLES / "seed-mlxcel")
    assert calls == ["prove_all"] and result.classification is not None


def test_the_hostile_corpus_gets_the_same_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if str(HOSTILE) not in sys.path:
        sys.path.insert(0, str(HOSTILE))
    import corpus
    from test_corpus import run_case

    assert len(corpus.CASES) >= 40
    for case in corpus.CASES:
        folder = tmp_path / case.name
        folder.mkdir()
        fast = run_case(case, folder)
        with monkeypatch.context() as patched:
            reference.use_plain_paths(patched)
            plain = run_case(case, folder)
        assert fast == plain, case.name


# --- generated records ------------------------------------------------------------------


@cache
def _bundle(name: str) -> tuple[tuple[tuple[str, dict[str, Any]], ...], Any]:
    """The records (path, document) and the experiment of a sample bundle."""
    context = BundleContext(read_bundle(SAMPLES / name, Limits()), VerifyOptions())
    documents = tuple((r.file, context.documents[r.file]) for r in context.records)
    return documents, context.experiment


_ODD_RULES = ProfileRules(
    name="odd",
    version="1",
    signals=CacheSignals(
        hits=("metric:mlxcel_prompt_cache_hits_total", "stats:hits", "stats:hits"),
        reuse=("metric:llamacpp:prompt_tokens_cached_total",),
        lookups=("stats:lookups", "metric:mlxcel_prompt_cache_hits_total"),
        inserts=("stats:inserts", "metric:absent_total"),
        paths=("metric:mlxcel_paged_decode_launches_total",),
        misses=("metric:mlxcel_prompt_cache_misses_total",),
    ),
    reset_proof=ResetProof.STATS_ENTRIES,
    cache_off_args=("--no-prompt-cache",),
    cache_enabled_pointer="/enabled",
    cache_entries_pointer="/entries",
    opt_out_fields={"cache_prompt": False},
    miss_reason_prefix="",
    last_miss_reason_pointer="/hash",
    reuse_counts_cached_tokens=True,
)
# References counter() reads in the rarer ways: a family name with labels, sources that
# are neither metric nor stats, a family of several samples among the hits.
_ODDER_RULES = ProfileRules(
    name="odder",
    version="1",
    signals=CacheSignals(
        hits=('metric:mlxcel_paged_decode_launches_total{path="gather"}', "other:hits"),
        reuse=("hits", "metric:mlxcel_paged_decode_launches_total"),
        lookups=("stats:lookups", "stats:entries"),
        inserts=("stats:inserts",),
        paths=("metric:mlxcel_prompt_cache_hits_total", "stats:hits"),
    ),
    reset_proof=ResetProof.NEXT_COLD_REQUEST,
    cache_off_args=("--no-prompt-cache",),
    opt_out_fields={"cache_prompt": False, "extra": [1]},
    miss_reason_prefix="re",
)
RULES = [*KNOWN_RULES.values(), _ODD_RULES, _ODDER_RULES]

_NUMBER = st.one_of(
    st.integers(-3, 40),
    st.sampled_from([0.5, -0.0, 1e300, -1e300, 2**53, 2**53 + 2, True, False, None, "1"]),
    st.floats(-5, 100, allow_nan=False),
)
_METRIC_KEYS = st.sampled_from(
    [
        "mlxcel_prompt_cache_hits_total",
        'mlxcel_prompt_cache_hits_total{slot="1"}',
        "mlxcel_prompt_cache_prefix_tokens_reused_total",
        'mlxcel_paged_decode_launches_total{path="gather"}',
        'mlxcel_paged_decode_launches_total{path="new"}',
        "llamacpp:prompt_tokens_cached_total",
        "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
        "sglang:cached_tokens_total",
        'mlxcel_prompt_cache_hits_total {slot="2"}',  # no sample's key (Snapshot.odd_key)
        "",
    ]
)
_STATS_KEYS = st.sampled_from(
    ["hits", "lookups", "inserts", "entries", "enabled", "reject_short", "reject_other", "hash"]
)
_RESPONSE_FIELDS = st.sampled_from(
    [
        ("usage", "prompt_tokens"),
        ("usage", "completion_tokens"),
        ("usage", "prompt_tokens_details", "cached_tokens"),
        ("choices", 0, "finish_reason"),
    ]
)


def _set(document: Any, where: tuple[Any, ...], value: Any) -> None:
    node = document
    for step in where[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(step, {})
        elif isinstance(node, list) and isinstance(step, int) and step < len(node):
            node = node[step]
        else:
            return
    if isinstance(node, dict):
        node[where[-1]] = value


@st.composite
def _mutation(draw: st.DrawFn, count: int) -> tuple[int, str, Any, Any]:
    index = draw(st.integers(0, count - 1))
    kind = draw(
        st.sampled_from(
            ["metric", "drop-metric", "stats", "no-stats", "no-metrics", "response", "field"]
        )
    )
    if kind in ("metric", "drop-metric"):
        return index, kind, draw(_METRIC_KEYS), draw(_NUMBER)
    if kind == "stats":
        return index, kind, draw(_STATS_KEYS), draw(_NUMBER | st.text(max_size=3))
    if kind == "response":
        return index, kind, draw(_RESPONSE_FIELDS), draw(_NUMBER | st.just("length"))
    if kind == "field":
        field = draw(st.sampled_from(["claimed_arm", "preceded_by", "http_status", "output_hash"]))
        values = {
            "claimed_arm": st.sampled_from([str(a) for a in Arm]),
            "preceded_by": st.sampled_from(["server-start", "cache-reset", "request"]),
            "http_status": st.sampled_from([200, 500, None]),
            "output_hash": st.sampled_from([None, "0" * 64]),
        }
        return index, kind, field, draw(values[field])
    return index, kind, None, None


def _apply(documents: list[dict[str, Any]], mutation: tuple[int, str, Any, Any]) -> None:
    index, kind, key, value = mutation
    document = documents[index]
    side = document["telemetry"]["before" if index % 2 else "after"]
    if kind == "metric" and side["metrics"] is not None and isinstance(value, int | float):
        side["metrics"][key] = value
    elif kind == "drop-metric" and side["metrics"] is not None:
        side["metrics"].pop(key, None)
    elif kind == "stats":
        if side["cache_stats"] is None:
            side["cache_stats"] = {}
        side["cache_stats"][key] = value
    elif kind == "no-stats":
        side["cache_stats"] = None
    elif kind == "no-metrics":
        side["metrics"] = None
    elif kind == "response" and document["response"] is not None:
        _set(document["response"], key, value)
    elif kind == "field":
        document[key] = value


def _records(documents: list[tuple[str, dict[str, Any]]]) -> list[Record]:
    return [Record.from_json(path, copy.deepcopy(document)) for path, document in documents]


def _attempt(work: Any) -> Any:
    try:
        return work()
    except Exception as exc:  # both paths must fail alike
        return ("raised", type(exc))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["seed-mlxcel", "llama-cpp-real.tar.gz", "llama-cpp-cuda-flip.tar.gz"]),
    st.sampled_from(RULES),
    st.lists(_mutation(28), max_size=12),
    st.booleans(),
)
def test_generated_records_get_the_same_proofs_and_classes(
    bundle: str,
    rules: ProfileRules,
    mutations: list[tuple[int, str, Any, Any]],
    attached: bool,
) -> None:
    base, experiment = _bundle(bundle)
    documents = [copy.deepcopy(d) for _, d in base]
    for mutation in mutations:
        if mutation[0] < len(documents):
            _apply(documents, mutation)
    named = list(zip([p for p, _ in base], documents, strict=True))
    disabled = {c.id: c.disabled_instances for c in experiment.conditions}
    conditions = experiment.conditions

    def fast() -> Any:
        found = proofs.prove_all(_records(named), rules, disabled, attached=attached)
        return found, classify.classify(conditions, found, rules)

    def plain() -> Any:
        with pytest.MonkeyPatch.context() as patched:
            reference.use_plain_paths(patched)
            found = reference.prove_all(_records(named), rules, disabled, attached=attached)
            return found, classify.classify(conditions, found, rules)

    assert _attempt(fast) == _attempt(plain)


# Values equal to another of another type: == holds, the JSON differs (and so may what
# the proof and the class telemetry show).
_LOOKALIKES = st.sampled_from([(0, 0.0), (0, -0.0), (0.0, -0.0), (1, 1.0), (1, True), (0, False)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["seed-mlxcel", "llama-cpp-real.tar.gz"]),
    st.sampled_from(RULES),
    st.lists(st.tuples(st.integers(0, 27), st.booleans(), _LOOKALIKES), max_size=10),
)
def test_snapshots_equal_to_the_one_before_in_other_types_get_the_same_proofs(
    bundle: str, rules: ProfileRules, changes: list[tuple[int, bool, tuple[Any, Any]]]
) -> None:
    # A request's snapshot before it, equal (==) to its server's snapshot after the request
    # before, is not read again for moves since then: planted values of another type that
    # keep the two equal, or make them differ in type only, prove alike both ways.
    base, experiment = _bundle(bundle)
    documents = [copy.deepcopy(d) for _, d in base]
    for index, stats, (one, other) in changes:
        if index + 1 >= len(documents):
            continue
        earlier = documents[index]["telemetry"]["after"]
        later = documents[index + 1]["telemetry"]["before"]
        for side, value in ((earlier, one), (later, other)):
            table = side["cache_stats"] if stats else side["metrics"]
            if isinstance(table, dict) and table:
                name = sorted(table)[index % len(table)]
                table[name] = value
    named = list(zip([p for p, _ in base], documents, strict=True))
    disabled = {c.id: c.disabled_instances for c in experiment.conditions}

    def fast() -> Any:
        found = proofs.prove_all(_records(named), rules, disabled)
        return found, classify.classify(experiment.conditions, found, rules)

    def plain() -> Any:
        with pytest.MonkeyPatch.context() as patched:
            reference.use_plain_paths(patched)
            found = reference.prove_all(_records(named), rules, disabled)
            return found, classify.classify(experiment.conditions, found, rules)

    assert repr(_attempt(fast)) == repr(_attempt(plain))


@given(
    st.lists(
        st.dictionaries(_METRIC_KEYS, st.integers(0, 5), max_size=5)
        | st.dictionaries(st.sampled_from(["a", "a{x}", "b", "a{y}"]), st.integers(0, 5)),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.dictionaries(_STATS_KEYS, _NUMBER), min_size=1, max_size=6),
)
def test_snapshots_of_other_keys_are_not_confused(
    metrics: list[dict[str, Any]], stats: list[dict[str, Any]]
) -> None:
    # the family index and the prefixed names are kept for the keys last seen: snapshots of
    # other keys, in any order, get their own
    refs = ["metric:a", "metric:mlxcel_prompt_cache_hits_total", "metric:b", "metric:vllm:x"]
    for m in metrics:
        for s in stats:
            snapshot = Snapshot(s, m)
            keys = tuple(m)
            for ref in refs:
                expected = {k: m[k] for k in reference.family_index(keys).get(ref[7:], ())}
                assert snapshot.samples(ref) == expected
            for prefix in ("reject_", "h", ""):
                plain = {
                    k
                    for k in reference.prefixed(prefix, tuple(s))
                    if isinstance(s[k], int) and not isinstance(s[k], bool)
                }
                assert snapshot.stat_names(prefix) == plain


@given(st.lists(st.sampled_from(["metric:a", "stats:b", "c", "metric:x:y"]), max_size=6))
def test_reason_names_are_those_written_each_time(refs: list[str]) -> None:
    assert proofs._names(refs) == reference._names(refs)
    assert proofs._names(iter(refs)) == reference._names(refs)


def test_the_signal_tuples_are_their_fields() -> None:
    signals = _ODD_RULES.signals
    assert signals.hit_evidence == signals.hits + signals.reuse
    assert signals.store_access == signals.hits + signals.reuse + signals.lookups + signals.inserts
    assert signals.all == signals.store_access + signals.paths + signals.misses
    assert signals == copy.deepcopy(signals) and hash(signals) == hash(copy.deepcopy(signals))


_SAMPLE_KEYS = st.sampled_from(["f", 'f{a="1"}', 'f{a="2"}', 'f{b="1"}', "g", "f_x"])
_SAMPLE_VALUES = st.sampled_from([0, 1, -1, 0.0, -0.0, 2.5, -2.5, True, 2**53, -(2**53)])


@given(
    st.none() | st.dictionaries(_SAMPLE_KEYS, _SAMPLE_VALUES, max_size=5),
    st.none() | st.dictionaries(_SAMPLE_KEYS, _SAMPLE_VALUES, max_size=5),
    st.none() | st.dictionaries(st.sampled_from(["s", "t"]), _SAMPLE_VALUES | st.text(max_size=1)),
    st.none() | st.dictionaries(st.sampled_from(["s", "t"]), _SAMPLE_VALUES | st.text(max_size=1)),
    st.lists(st.sampled_from(["metric:f", "metric:g", 'metric:f{a="1"}', "stats:s", "x"])),
)
def test_which_way_a_counter_moved_is_what_its_moves_say(
    old_metrics: dict[str, Any] | None,
    new_metrics: dict[str, Any] | None,
    old_stats: dict[str, Any] | None,
    new_stats: dict[str, Any] | None,
    refs: list[str],
) -> None:
    before, after = Snapshot(old_stats, old_metrics), Snapshot(new_stats, new_metrics)
    fast = proofs._Moves(before, after, refs)
    plain = reference._Moves(before, after)
    for ref in [*refs, "metric:f", "stats:t"]:
        moves = plain(ref)
        assert fast(ref) == moves and repr(fast(ref)) == repr(moves)
        assert fast.fell(ref) is plain.fell(ref)
        if moves is None:
            assert fast.how(ref) is None
        else:  # the bits: rose, fell, moved at all
            assert fast.how(ref) == (
                (proofs._ROSE if any(x > 0 for x in moves) else 0)
                | (proofs._FELL if any(x < 0 for x in moves) else 0)
                | (proofs._NONZERO if any(x != 0 for x in moves) else 0)
            )
    assert fast.fell_any is any(plain.fell(ref) for ref in refs)
    assert fast.moved(refs) == [ref for ref in refs if any(plain(ref) or [])]
    assert fast.fallen(refs) == [ref for ref in refs if plain.fell(ref)]


@given(
    st.dictionaries(_SAMPLE_KEYS, _SAMPLE_VALUES, max_size=5),
    st.dictionaries(st.sampled_from(["s", "t"]), _SAMPLE_VALUES),
    st.lists(st.tuples(_SAMPLE_KEYS, _SAMPLE_VALUES), max_size=3),
)
def test_snapshots_told_unmoved_have_no_counter_that_moved(
    metrics: dict[str, Any], stats: dict[str, Any], changes: list[tuple[str, Any]]
) -> None:
    # unmoved_since stands for the moves since the request before, where the later
    # snapshot's counters are all counts: it holds only where none of them moved.
    later_metrics = dict(metrics)
    for key, value in changes:
        later_metrics[key] = value
    earlier, later = Snapshot(stats, metrics), Snapshot(dict(stats), later_metrics)
    refs = ("metric:f", "metric:g", "metric:f_x", "stats:s", "stats:t")
    if proofs.unmoved_since(earlier, later):
        since = reference._Moves(earlier, later)
        assert not any(since.fell(ref) or any(since(ref) or []) for ref in refs)


_OPT_OUT_VALUES = st.sampled_from(
    [False, True, 0, 1, 0.0, -0.0, 1.0, None, "", "false", "0", [], [False], {}, {"a": 0}]
)


@given(_OPT_OUT_VALUES, _OPT_OUT_VALUES)
def test_an_opt_out_field_is_compared_as_json_key_compares_it(a: Any, b: Any) -> None:
    assert proofs._same_json(a, b) is (json_key(a) == json_key(b))


_CAP_VALUES = st.sampled_from(
    [None, 0, 1, 7, 8, 9, 2**53, 2**53 + 1, -1, 8.0, True, False, "8", [8], {"n": 8}]
)


@given(
    st.dictionaries(st.sampled_from(proofs._CAP_FIELDS), _CAP_VALUES),
    _CAP_VALUES,
    st.booleans(),
)
def test_a_cap_is_read_as_the_plain_rule_reads_it(
    caps: dict[str, Any], used: Any, has_usage: bool
) -> None:
    # one pass over the cap fields: the least cap, and whether any is not a count
    base, _ = _bundle("seed-mlxcel")
    document = copy.deepcopy(base[0][1])
    document["request_body"] = {"messages": [], **caps}
    response = document["response"]
    if has_usage:
        response["usage"] = {"completion_tokens": used}
    else:
        response.pop("usage", None)
    record = Record.from_json(base[0][0], document)
    assert proofs._at_cap(record) is reference.at_cap(record)
