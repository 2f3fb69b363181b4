"""The proof rules, one rule at a time, on hand-made records."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest

from verifier.classify import ProtocolContext, classify
from verifier.model import Arm, Verdict
from verifier.profiles.rules import CacheSignals, ProfileRules, ResetProof
from verifier.proofs import prove_all, prove_request
from verifier.records import Condition, Record, ServerDeclaration, Snapshot

OPT_OUT = {"cache_prompt": False}
RULES = ProfileRules(
    name="test",
    version="1",
    signals=CacheSignals(
        hits=("metric:hits_total",),
        lookups=("stats:lookups",),
        paths=("metric:launches_total",),
    ),
    reset_proof=ResetProof.STATS_ENTRIES,
    cache_off_args=("--no-cache",),
    cache_enabled_pointer="/enabled",
    cache_entries_pointer="/entries",
    opt_out_fields=OPT_OUT,
)


def condition(cid: str = "c") -> Condition:
    return Condition(cid, "", None, {}, (ServerDeclaration(1, False, (), {}),))


def snapshot(hits: float, lookups: int = 0, entries: int = 0, enabled: bool = True) -> Snapshot:
    return Snapshot(
        {"enabled": enabled, "entries": entries, "lookups": lookups},
        {"hits_total": hits, 'launches_total{path="gather"}': 10.0 * hits},
    )


def record(
    arm: Arm,
    *,
    sequence: int = 1,
    cached: int | None = 0,
    hits: tuple[float, float] | None = None,
    lookups: tuple[int, int] | None = None,
    entries: int | None = None,  # default: the prefix a warm request hits is in the cache
    enabled: bool = True,
    preceded_by: str = "request",
    output: str = "A",
    finish: str = "stop",
    status: int = 200,
    body: dict[str, Any] | None = None,
    condition: str = "c",
    instance: int | None = None,  # default: a server of its own, so no chain between records
) -> Record:
    base = 0 if preceded_by == "server-start" else 10 * sequence  # a fresh server starts at 0
    if entries is None:
        entries = 1 if arm is Arm.WARM else 0
    if hits is None:
        hits = (base, base)
    if lookups is None:  # a warm request consults the store
        lookups = (base, base + (1 if arm is Arm.WARM else 0))
    usage: dict[str, Any] = {"prompt_tokens": 42}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return Record(
        file=f"records/{condition}/{sequence:03d}.json",
        condition=condition,
        sequence=sequence,
        phase="cycle-1",
        server_instance=sequence if instance is None else instance,
        claimed_arm=arm,
        preceded_by=preceded_by,
        request_body=body if body is not None else {},
        http_status=status,
        response={
            "choices": [{"message": {"content": output}, "finish_reason": finish}],
            "usage": usage,
        },
        output_hash=(output * 64)[:64].lower() if status == 200 else None,
        before=snapshot(hits[0], lookups[0], entries, enabled),
        after=snapshot(hits[1], lookups[1], entries, enabled),
    )


def prove(r: Record, server_disabled: bool = False) -> tuple[bool, str]:
    proof = prove_request(r, RULES, server_disabled=server_disabled, previous=None, attached=True)
    return proof.proven, proof.reason


def test_warm_needs_partial_hit_and_counter() -> None:
    assert prove(record(Arm.WARM, cached=32, hits=(0, 2)))[0]
    assert "unknown" in prove(record(Arm.WARM, cached=None, hits=(0, 2)))[1]
    assert not prove(record(Arm.WARM, cached=42, hits=(0, 2)))[0]  # whole prompt: not < 42
    assert not prove(record(Arm.WARM, cached=0, hits=(0, 2)))[0]
    assert "disagree" in prove(record(Arm.WARM, cached=32, hits=(2, 2)))[1]
    assert (
        "lookups did not move" in prove(record(Arm.WARM, cached=32, hits=(0, 2), lookups=(1, 1)))[1]
    )


def test_cold_needs_reset_or_fresh_server_and_zero_cached() -> None:
    assert prove(record(Arm.COLD, preceded_by="cache-reset"))[0]
    # a reset is proven only by a stats read after it
    r = record(Arm.COLD, preceded_by="cache-reset")
    unread = Record(**{**r.__dict__, "before": Snapshot(None, r.before.metrics)})
    assert "not proven" in prove(unread)[1]
    assert prove(record(Arm.COLD, preceded_by="server-start"))[0]
    used = record(Arm.COLD, preceded_by="server-start", hits=(3, 3))
    assert "do not start at zero" in prove(used)[1]
    assert "no reset" in prove(record(Arm.COLD, preceded_by="request"))[1]
    assert "entries" in prove(record(Arm.COLD, preceded_by="cache-reset", entries=1))[1]
    assert not prove(record(Arm.COLD, preceded_by="cache-reset", cached=None))[0]
    assert not prove(record(Arm.COLD, preceded_by="cache-reset", cached=5))[0]
    assert not prove(record(Arm.COLD, preceded_by="cache-reset", hits=(0, 1)))[0]


def test_request_disabled_needs_opt_out_field_and_no_store_access() -> None:
    assert prove(record(Arm.REQUEST_DISABLED, body=dict(OPT_OUT)))[0]
    assert "opt-out" in prove(record(Arm.REQUEST_DISABLED, body={}))[1]
    assert (
        "lookups moved"
        in prove(record(Arm.REQUEST_DISABLED, body=dict(OPT_OUT), lookups=(3, 4)))[1]
    )
    # `0` is not `false`: the opt-out field must be the exact JSON value
    assert "opt-out" in prove(record(Arm.REQUEST_DISABLED, body={"cache_prompt": 0}))[1]


def test_server_disabled_needs_the_flag_and_the_server_to_say_so() -> None:
    off = record(Arm.SERVER_DISABLED, cached=None, enabled=False)
    assert prove(off, server_disabled=True)[0]
    assert "not declared cache-off" in prove(off)[1]
    assert not prove(record(Arm.SERVER_DISABLED, cached=None, enabled=True), True)[0]
    assert not prove(record(Arm.SERVER_DISABLED, cached=None, enabled=False, hits=(0, 1)), True)[0]
    r = record(Arm.SERVER_DISABLED, cached=None, enabled=False)
    unread = Record(**{**r.__dict__, "before": Snapshot(None, r.before.metrics)})
    assert "not read" in prove(unread, True)[1]


def test_backward_counters_make_telemetry_unusable() -> None:
    proven, reason = prove(record(Arm.WARM, cached=32, hits=(5, 2)))
    assert not proven and "backwards" in reason
    first = record(Arm.WARM, cached=32, hits=(0, 9), sequence=1, instance=1)
    second = record(Arm.WARM, cached=32, hits=(3, 5), sequence=2, instance=1)
    proofs = prove_all([first, second], RULES, {}, attached=True)
    assert proofs[0].proven and not proofs[1].proven


def test_failed_and_capped() -> None:
    failed = prove_request(
        record(Arm.COLD, status=500, preceded_by="server-start"),
        RULES,
        server_disabled=False,
        previous=None,
        attached=True,
    )
    assert failed.failed == "HTTP status 500" and not failed.comparable
    capped = prove_request(
        record(Arm.COLD, finish="length", preceded_by="server-start"),
        RULES,
        server_disabled=False,
        previous=None,
        attached=True,
    )
    assert capped.capped and capped.comparable


def _experiment(records: list[Record]) -> Verdict:
    proofs = prove_all(records, RULES, {}, attached=True)
    return classify([condition()], proofs, RULES, ProtocolContext(max_tokens=64)).verdict


def _cold(seq: int, output: str = "A") -> Record:
    return record(Arm.COLD, sequence=seq, preceded_by="server-start", output=output)


def _off(seq: int) -> Record:
    return record(Arm.REQUEST_DISABLED, sequence=seq, body=dict(OPT_OUT), output="A")


def _warm(seq: int, output: str = "B", cached: int | None = 32) -> Record:
    # counters keep growing from request to request, as on a real server
    return record(
        Arm.WARM, sequence=seq, cached=cached, hits=(10 * seq, 10 * seq + 2), output=output
    )


@pytest.mark.parametrize(
    ("records", "verdict"),
    [
        ([_cold(1), _cold(2), _warm(3), _warm(4)], Verdict.CACHE_STATE_DEPENDENT),
        ([_cold(1), _cold(2), _warm(3, "A"), _warm(4, "A")], Verdict.CACHE_STATE_INDEPENDENT),
        ([_cold(1), _cold(2, "C"), _warm(3), _warm(4)], Verdict.NONDETERMINISTIC),
        ([_cold(1), _cold(2), _warm(3), _warm(4, "C")], Verdict.NONDETERMINISTIC),
        ([_cold(1), _cold(2), _warm(3, cached=None), _warm(4, cached=None)], Verdict.INCONCLUSIVE),
        ([_cold(1), _cold(2), _warm(3)], Verdict.INCONCLUSIVE),  # too few warm
        ([_warm(3), _warm(4)], Verdict.INCONCLUSIVE),  # no baseline
        ([_warm(1), _warm(2), _off(3), _off(4)], Verdict.INCONCLUSIVE),  # controls, no cold
    ],
)
def test_verdict_table(records: list[Record], verdict: Verdict) -> None:
    assert _experiment(records) is verdict


def _counted(r: Record, tokens: int) -> Record:
    """`r` with its answer counting `tokens` completion tokens."""
    usage = {**r.response["usage"], "completion_tokens": tokens}
    return replace(r, response={**r.response, "usage": usage})


def _capped(warm_output: str) -> list[Record]:
    return [
        _counted(record(Arm.COLD, sequence=s, preceded_by="server-start", finish="length"), 64)
        for s in (1, 2)
    ] + [
        _counted(
            record(
                Arm.WARM,
                sequence=s,
                cached=32,
                hits=(10 * s, 10 * s + 2),
                finish="length",
                output=warm_output,
            ),
            64,
        )
        for s in (3, 4)
    ]


def test_all_capped_and_equal_is_inconclusive() -> None:
    proofs = prove_all(_capped("A"), RULES, {}, attached=True)
    result = classify([condition()], proofs, RULES, ProtocolContext(max_tokens=64))
    assert result.verdict is Verdict.INCONCLUSIVE
    assert any("agree in the first 64 tokens" in r for r in result.conditions[0].reasons)


def test_a_split_inside_the_cap_is_a_split() -> None:
    proofs = prove_all(_capped("B"), RULES, {}, attached=True)
    result = classify([condition()], proofs, RULES, ProtocolContext(max_tokens=64))
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert any("token cap" in r for r in result.conditions[0].reasons)


def test_signals_that_disagree_are_a_contradiction() -> None:
    # the hit counter moved, but the response says nothing came from the cache
    proof = prove_request(
        record(Arm.COLD, preceded_by="server-start", hits=(0, 1)), RULES,
        server_disabled=False, previous=None, attached=True,
    )  # fmt: skip
    assert not proof.proven and proof.contradiction is not None
    # cached tokens reported, but the hit counter stayed still
    proof = prove_request(
        record(Arm.WARM, cached=32, hits=(5, 5)), RULES, server_disabled=False, previous=None,
        attached=True,
    )  # fmt: skip
    assert proof.contradiction is not None


def test_no_rules_prove_nothing() -> None:
    proof = prove_request(
        record(Arm.WARM, cached=32, hits=(0, 2)), None, server_disabled=False, previous=None,
        no_rules_reason="unknown profile",
    )  # fmt: skip
    assert not proof.proven and proof.reason == "unknown profile"


@pytest.mark.parametrize("value", [10**400, -1, 3.0, "32", True, 2**53 + 1])
def test_token_counts_must_be_bounded_integers(value: object) -> None:
    r = record(Arm.WARM, cached=32, hits=(0, 2))
    assert r.response is not None
    usage = {"prompt_tokens": 42, "prompt_tokens_details": {"cached_tokens": value}}
    response = {**r.response, "usage": usage}
    proof = prove_request(
        Record(**{**r.__dict__, "response": response}), RULES, server_disabled=False,
        previous=None, attached=True,
    )  # fmt: skip
    assert not proof.proven and proof.bad_numbers


def test_prompt_tokens_must_be_present() -> None:
    r = record(Arm.COLD, preceded_by="server-start")
    assert r.response is not None
    response = {**r.response, "usage": {"prompt_tokens_details": {"cached_tokens": 0}}}
    proven, reason = prove(Record(**{**r.__dict__, "response": response}))
    assert not proven and "prompt_tokens is absent" in reason


def test_counters_that_move_between_requests_break_the_chain() -> None:
    first = record(Arm.WARM, cached=32, hits=(0, 2), lookups=(0, 1), sequence=1, instance=1)
    second = record(Arm.WARM, cached=32, hits=(2, 4), lookups=(5, 6), sequence=2, instance=1)
    proofs = prove_all([first, second], RULES, {}, attached=True)
    assert proofs[0].proven and not proofs[1].proven
    assert "between this request" in proofs[1].reason


def test_labels_follow_first_appearance_and_bound_is_honest() -> None:
    records = [_warm(1, "Z"), _warm(2, "Z"), _cold(3, "Y"), _cold(4, "Y")]
    proofs = prove_all(records, RULES, {}, attached=True)
    result = classify([condition()], proofs, RULES)
    assert [c.label for c in result.classes] == ["A", "B"]
    assert result.conditions[0].warm_label == "A"
    assert result.bound.requests == 4
    assert result.bound.upper_bound == pytest.approx(1 - 0.05 ** (1 / 4))
    assert "no variation" in result.bound.sentence and "deterministic" not in result.bound.sentence


def test_missing_hit_counter_proves_no_miss() -> None:
    r = record(Arm.COLD, preceded_by="cache-reset")
    blind = Record(**{**r.__dict__, "before": Snapshot(r.before.cache_stats, None),
                      "after": Snapshot(r.after.cache_stats, None)})  # fmt: skip
    proven, reason = prove(blind)
    assert not proven and "not recorded" in reason


def test_a_warm_miss_says_why_where_the_server_does() -> None:
    rules = replace(RULES, miss_reason_prefix="reject_", last_miss_reason_pointer="/last_reject")
    r = record(Arm.WARM, cached=0)
    before = Snapshot(
        {**(r.before.cache_stats or {}), "reject_prefix_too_short": 4}, r.before.metrics
    )
    stats = {"reject_prefix_too_short": 5, "last_reject": "prefix_too_short"}
    after = Snapshot({**(r.after.cache_stats or {}), **stats}, r.after.metrics)
    proof = prove_request(
        Record(**{**r.__dict__, "before": before, "after": after}), rules,
        server_disabled=False, previous=None, attached=True,
    )  # fmt: skip
    assert not proof.proven
    assert "says why it missed: reject_prefix_too_short +1" in proof.reason
    assert "'prefix_too_short'" in proof.reason


def test_the_first_request_on_a_started_server_sees_counters_at_zero() -> None:
    used = record(Arm.COLD, preceded_by="cache-reset", hits=(5, 5), sequence=1, instance=1)
    proof = prove_request(used, RULES, server_disabled=False, previous=None)
    assert not proof.proven and "do not start at zero" in proof.reason
    # a metric family is read sample by sample: one sample's rise cannot hide another's fall
    r = record(Arm.COLD, preceded_by="server-start")
    a, b = 'hits_total{slot="a"}', 'hits_total{slot="b"}'
    before = Snapshot(r.before.cache_stats, {a: 0.0, b: 5.0})
    after = Snapshot(r.after.cache_stats, {a: 1.0, b: 4.0})
    proof = prove_request(
        Record(**{**r.__dict__, "before": before, "after": after}), RULES,
        server_disabled=False, previous=None, attached=True,
    )  # fmt: skip
    assert not proof.proven and "backwards" in proof.reason


def _with_usage(r: Record, **usage: Any) -> Record:
    response = dict(r.response or {})
    response["usage"] = {**response.get("usage", {}), **usage}
    for key, value in usage.items():
        if value is _DROP:
            del response["usage"][key]
    return replace(r, response=response)


_DROP: Any = object()


@pytest.mark.parametrize(
    ("used", "capped"),
    [(21, False), (22, True), (23, True), (22.0, True), ("22", True), (_DROP, True), (None, True)],
    ids=["under", "at", "over", "float", "string", "absent", "null"],
)
def test_a_reply_that_does_not_count_its_tokens_cannot_show_it_stopped_short(
    used: object, capped: bool
) -> None:
    """finish_reason is not in the output hash: a bundle could write `stop` on a reply cut
    at the cap. Where the body sets a cap, only an integer count under it says the reply
    was not cut (a float, a string or no count at all say nothing)."""
    r = _with_usage(
        record(Arm.COLD, preceded_by="server-start", body={"max_tokens": 22}),
        completion_tokens=used,
    )
    proof = prove_request(r, RULES, server_disabled=False, previous=None, attached=True)
    assert proof.capped is capped
    uncapped = _with_usage(record(Arm.COLD, preceded_by="server-start"), completion_tokens=used)
    assert not prove_request(
        uncapped, RULES, server_disabled=False, previous=None, attached=True
    ).capped  # no cap asked: nothing to hit
    odd_cap = record(Arm.COLD, preceded_by="server-start", body={"max_tokens": 22.0})
    assert prove_request(odd_cap, RULES, server_disabled=False, previous=None, attached=True).capped


def test_a_record_that_says_it_errored_is_left_out() -> None:
    errored = replace(
        record(Arm.COLD, preceded_by="server-start"), error="server error: KV cache corrupted"
    )
    proof = prove_request(errored, RULES, server_disabled=False, previous=None, attached=True)
    assert proof.failed is not None and "errored" in proof.failed and not proof.comparable


def test_server_disabled_needs_the_server_to_say_so_after_the_request_too() -> None:
    off = record(Arm.SERVER_DISABLED, cached=None, enabled=False)
    stats = {**(off.after.cache_stats or {}), "enabled": True}
    on_after = replace(off, after=Snapshot(stats, off.after.metrics))
    proven, reason = prove(on_after, True)
    assert not proven and "after" in reason
    unread_after = replace(off, after=Snapshot(None, off.after.metrics))
    assert "not read" in prove(unread_after, True)[1]


@pytest.mark.parametrize(
    "body",
    [
        {"max_tokens": None, "max_completion_tokens": 22},
        {"max_completion_tokens": 22},
        {"n_predict": 22},
    ],
    ids=["max_tokens-null", "max_completion_tokens", "n_predict"],
)
def test_a_cap_by_any_name_a_server_reads_is_a_cap(body: dict[str, Any]) -> None:
    r = _with_usage(record(Arm.COLD, preceded_by="server-start", body=body), completion_tokens=22)
    assert prove_request(r, RULES, server_disabled=False, previous=None, attached=True).capped


def test_the_stats_are_read_against_a_request_only_where_they_count_its_use() -> None:
    # mlxcel's stats do not count a model-owned cache state (SERVERS.md): where no stats
    # counter moved, an empty or "off" stats document says nothing about the request.
    quiet = record(Arm.WARM, cached=32, hits=(10, 11), lookups=(10, 10), entries=0, enabled=False)
    proof = prove_request(quiet, RULES, server_disabled=False, previous=None, attached=True)
    assert proof.contradiction is None and not proof.proven
    # Where they do count it, they must agree with it.
    used = record(Arm.WARM, cached=32, hits=(10, 11), lookups=(10, 11), entries=0)
    proof = prove_request(used, RULES, server_disabled=False, previous=None, attached=True)
    assert proof.contradiction is not None and "held no entry" in proof.contradiction
    off = record(Arm.WARM, cached=32, hits=(10, 11), lookups=(10, 11), enabled=False)
    proof = prove_request(off, RULES, server_disabled=False, previous=None, attached=True)
    assert proof.contradiction is not None and "say its cache is on" in proof.contradiction


# --- helper-53 (2026-12-05): replies that did not finish, and one cold reply -------------


def _reply(r: Record, finish: str | None, **message: str) -> Record:
    """`r` answering `message` (content, reasoning_content), with `finish` (None: none said)."""
    choice: dict[str, Any] = {"message": message}
    if finish is not None:
        choice["finish_reason"] = finish
    digest = hashlib.sha256("".join(f"{k}={v};" for k, v in sorted(message.items())).encode())
    return replace(r, response={**r.response, "choices": [choice]}, output_hash=digest.hexdigest())


def _split(
    finish: str | None, cold: dict[str, str], warm: dict[str, str], tokens: tuple[int, int] = (6, 3)
) -> Any:
    """Two cold replies of `cold` that finished, two warm of `warm` that end with `finish`,
    each counting its `tokens` (cold, warm)."""
    records = [_counted(_reply(_cold(s), "stop", **cold), tokens[0]) for s in (1, 2)]
    records += [_counted(_reply(_warm(s), finish, **warm), tokens[1]) for s in (3, 4)]
    proofs = prove_all(records, RULES, {}, attached=True)
    return classify([condition()], proofs, RULES, ProtocolContext(max_tokens=64)).conditions[0]


@pytest.mark.parametrize("finish", ["abort", "error", "length", "content_filter", None])
def test_a_reply_that_did_not_finish_and_is_the_others_start_proves_no_split(
    finish: str | None,
) -> None:
    result = _split(finish, {"content": "The cat sat on the mat."}, {"content": "The cat sat"})
    assert result.verdict is Verdict.INCONCLUSIVE
    assert any("may have been cut short" in r for r in result.reasons), result.reasons


@pytest.mark.parametrize(
    ("warm", "verdict"),
    [
        # differs within its length (as long as the other or longer)
        ({"content": "The dog sat on the mat, all day."}, Verdict.CACHE_STATE_DEPENDENT),
        ({"content": "The dog"}, Verdict.INCONCLUSIVE),  # less text: perhaps the other, cut
        ({"content": "The cat sat\ufffd"}, Verdict.INCONCLUSIVE),  # a character cut in two
        ({"content": "The cat sat on the mat. And more"}, Verdict.CACHE_STATE_DEPENDENT),
        ({"reasoning_content": "Let me"}, Verdict.INCONCLUSIVE),  # cut in its reasoning
        (
            {"reasoning_content": "Let me", "content": "Another answer, and a longer one."},
            Verdict.CACHE_STATE_DEPENDENT,
        ),
        ({"reasoning_content": "Let me think.", "content": "The"}, Verdict.INCONCLUSIVE),
    ],
)
def test_a_capped_reply_is_judged_by_what_it_holds(warm: dict[str, str], verdict: Verdict) -> None:
    """Cut at the cap (64 tokens, the most any reply counts): a split where it is not the
    other's start."""
    cold = {"reasoning_content": "Let me think.", "content": "The cat sat on the mat."}
    if "reasoning_content" not in warm:
        cold = {"content": cold["content"]}
    assert _split("length", cold, warm, (6, 64)).verdict is verdict


@pytest.mark.parametrize("finish", ["length", "abort", None])
@pytest.mark.parametrize(
    "warm",
    [
        {"reasoning_content": "Let me think.</thi"},  # a parser's residue of a cut tag
        {"content": 'The cat sat on the mat.\n<tool_call>\n{"name": "get_wea'},
        {"content": "The dog"},
    ],
)
def test_a_capped_reply_shorter_than_the_others_proves_no_split(
    warm: dict[str, str], finish: str | None
) -> None:
    """Counting fewer tokens than a reply of the other output, it may be that reply cut short
    whatever its text (a server's parser moves a cut reply's text between fields)."""
    cold = {"reasoning_content": "Let me think.", "content": "The cat sat on the mat."}
    result = _split(finish, cold, warm, (60, 20))
    assert result.verdict is Verdict.INCONCLUSIVE
    assert any("may have been cut short" in r for r in result.reasons), result.reasons


def test_a_cut_reply_within_one_arm_is_no_variation() -> None:
    records = [_counted(_reply(_cold(s), "stop", content="The cat sat."), 4) for s in (1, 2)]
    records += [_counted(_reply(_warm(3), "stop", content="The dog sat."), 4)]
    records += [_counted(_reply(_warm(4), "abort", content="The d"), 2)]
    proofs = prove_all(records, RULES, {}, attached=True)
    result = classify([condition()], proofs, RULES, ProtocolContext(max_tokens=64))
    assert result.verdict is Verdict.INCONCLUSIVE, result.conditions[0].reasons


def test_a_reply_that_did_not_finish_is_capped() -> None:
    for finish in ("abort", None, "content_filter"):
        r = _reply(_cold(1), finish, content="x")
        assert prove_request(r, RULES, server_disabled=False, previous=None, attached=True).capped
    r = _reply(_cold(1), "tool_calls", content="x")
    assert not prove_request(r, RULES, server_disabled=False, previous=None, attached=True).capped


def test_one_cold_reply_beside_the_controls_is_too_few() -> None:
    assert _experiment([_cold(1), _off(2), _warm(3), _warm(4)]) is Verdict.INCONCLUSIVE
    assert _experiment([_cold(1), _cold(2), _off(3), _warm(4), _warm(5)]) is (
        Verdict.CACHE_STATE_DEPENDENT
    )


def test_replies_cut_at_one_cap_that_differ_are_a_split_whatever_their_lengths() -> None:
    """helper-55: both arms at the cap (64 tokens), their texts of different lengths."""
    cold = _counted(_reply(_cold(1), "length", content="The cat sat on the mat and"), 64)
    records = [cold, replace(cold, sequence=2, file="records/c/002.json", server_instance=2)]
    records += [_counted(_reply(_warm(s), "length", content="The dog sat"), 64) for s in (3, 4)]
    proofs = prove_all(records, RULES, {}, attached=True)
    result = classify([condition()], proofs, RULES, ProtocolContext(max_tokens=64))
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT, result.conditions[0].reasons


@pytest.mark.parametrize(
    "warm",
    [
        {"content": "<think>\nLet me think."},  # cut before the tag closed: never split
        {"content": "Let me th"},  # (a parser that found no tag)
        {"content": "<think> Let me think.</think>\n\nThe cat sat on the m"},
        {"content": "<think>\n"},  # cut before anything but its tag (helper-56)
        {"content": "<think>\nLet me think.</thi"},
    ],
)
def test_a_reply_cut_before_its_parser_could_split_it_is_the_others_start(
    warm: dict[str, str],
) -> None:
    """At the cap, counting as many tokens as the other (counts a bundle can edit where
    nothing binds them), its text as generated is the other's start: no split."""
    cold = {"reasoning_content": "Let me think.", "content": "The cat sat on the mat."}
    result = _split("length", cold, warm, (64, 64))
    assert result.verdict is Verdict.INCONCLUSIVE, result.reasons


def test_a_cut_text_is_read_in_linear_time() -> None:
    """helper-56: a long run of U+FFFD not at the end was read again from each of its places
    (4.45 s a call for 40,000 of them)."""
    import time

    from verifier.classify import _cut_from

    short = _reply(_warm(3), "length", content="\ufffd" * 200_000 + "x")
    full = _reply(_cold(1), "stop", content="y")
    started = time.process_time()
    assert not _cut_from(short, full)
    assert time.process_time() - started < 2.0


@pytest.mark.parametrize(
    "text",
    [
        "if a[i] < best: return i",  # a `<` that starts no tag, before the divergence
        'call <tool_call>\n{"name": "f", "arguments": {"x": 1}}',  # raw, no parser
    ],
)
def test_a_capped_reply_that_differs_after_a_less_than_sign_is_a_split(text: str) -> None:
    cold = {"content": text + " and so on, the cold way."}
    warm = {"content": text + " and so on, the warm way."}
    assert _split("length", cold, warm, (64, 64)).verdict is Verdict.CACHE_STATE_DEPENDENT


# --- helper-57 (2026-12-05, session 11): markers the tool does not know by name ----------

_REASONING = "The user asks for the capital of France, which is a well-known fact: Paris."


@pytest.mark.parametrize(
    ("opening", "closing"),
    [
        ("[THINK]", "[/THINK]"),  # Mistral's
        ("<seed:think>", "</seed:think>"),  # Seed-OSS's
        ("Here is my thought process:", "Here is my response:"),  # Granite's
    ],
)
@pytest.mark.parametrize("cut_in", ["reasoning", "closing", "content"])
def test_a_reply_cut_before_a_parser_of_another_syntax_split_it_is_the_others_start(
    opening: str, closing: str, cut_in: str
) -> None:
    """A reply cut short leaves its reasoning, markers and all, in its content (the parser
    finds no end): read with markers only `<think>` names, it had been another output."""
    cold = {"reasoning_content": _REASONING, "content": "The capital of France is Paris."}
    raw = {
        "reasoning": f"{opening}\n{_REASONING[:40]}",
        "closing": f"{opening}\n{_REASONING}\n{closing[:9]}",
        "content": f"{opening}\n{_REASONING}\n{closing}\nThe capital of Fr",
    }[cut_in]
    for cold_finish in ("stop", "length"):  # (capped, its length says nothing)
        result = _capped_split(cold_finish, cold, {"content": raw})
        assert result.verdict is Verdict.INCONCLUSIVE, result.reasons


def _capped_split(cold_finish: str, cold: dict[str, str], warm: dict[str, str]) -> Any:
    """`_split` of warm replies at the cap, 64 tokens each side, the cold ending with
    `cold_finish`."""
    records = [_counted(_reply(_cold(s), cold_finish, **cold), 64) for s in (1, 2)]
    records += [_counted(_reply(_warm(s), "length", **warm), 64) for s in (3, 4)]
    proofs = prove_all(records, RULES, {}, attached=True)
    return classify([condition()], proofs, RULES, ProtocolContext(max_tokens=64)).conditions[0]


def test_a_reply_whose_reasoning_differs_after_an_unknown_marker_is_a_split() -> None:
    cold = {"reasoning_content": _REASONING, "content": "The capital of France is Paris."}
    warm = {"content": "[THINK]\n" + _REASONING[:40] + " Lyon, since the question says so."}
    result = _capped_split("length", cold, warm)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT, result.reasons


def _called(
    r: Record, finish: str, content: str, calls: list[str], reasoning: str | None = None
) -> Record:
    """`r` answering `content` (after `reasoning`) and a call of `search` for each of `calls`
    (its query)."""
    message: dict[str, Any] = {"content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [
            {"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": q}}
            for i, q in enumerate(calls)
        ]
    digest = hashlib.sha256(json.dumps(message, sort_keys=True).encode()).hexdigest()
    choice = {"message": message, "finish_reason": finish}
    return _counted(
        replace(r, response={**r.response, "choices": [choice]}, output_hash=digest), 64
    )


def _tool_split(
    warm_content: str,
    warm_calls: list[str],
    cold_calls: list[str],
    cold_finish: str = "length",
    cold_content: str = "Let me look.",
    cold_reasoning: str | None = None,
) -> Any:
    cold = [
        _called(_cold(s), cold_finish, cold_content, cold_calls, cold_reasoning) for s in (1, 2)
    ]
    warm = [_called(_warm(s), "length", warm_content, warm_calls) for s in (3, 4)]
    proofs = prove_all([*cold, *warm], RULES, {}, attached=True)
    return classify([condition()], proofs, RULES, ProtocolContext(max_tokens=64)).conditions[0]


@pytest.mark.parametrize(
    ("content", "calls"),
    [
        ('Let me look.[TOOL_CALLS][{"name": "search", "arguments": {"q": "cap', []),  # Mistral's
        ("Let me look.[TOOL_CALLS]", []),  # cut in its marker
        ('Let me look.<function=search>{"q": "capital of', []),  # Llama's
        ('Let me look.\n<tool_call>\n{"name": "search", "arguments": {"q": "ma', ['{"q":"x"}']),
    ],
)
def test_a_reply_cut_in_a_raw_call_of_another_syntax_is_the_others_start(
    content: str, calls: list[str]
) -> None:
    """The other's parser took its calls out; this one's, cut, left the call it began in its
    content (or its second, beside a first it parsed): no call is known to differ."""
    for cold_finish in ("tool_calls", "length"):
        others = ['{"q":"x"}', '{"q":"y"}'][: len(calls) + 1]
        result = _tool_split(content, calls, others, cold_finish)
        assert result.verdict is Verdict.INCONCLUSIVE, result.reasons


def test_a_reply_that_went_on_in_text_where_the_other_called_is_a_split() -> None:
    text = "Let me look. Actually, I know this one: the capital of France is Paris, of course."
    result = _tool_split(text * 2, [], ['{"q":"x"}'], "tool_calls")  # (longer than the call)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT, result.reasons


# --- helper-59 (2026-12-05, session 11): the re-audit of _marked_start -------------------


@pytest.mark.parametrize(
    ("warm", "cold_content", "cold_reasoning"),
    [
        # reasoning and a call, both left in the content by a parser of another syntax
        (
            f"[THINK]\n{_REASONING}\n[/THINK]\nLet me look."
            '[TOOL_CALLS][{"name": "search", "arguments": {"q": "the capital city of France, in',
            "Let me look.",
            _REASONING,
        ),
        # the generation began with white space, which the other's parser kept
        (
            'Let me look.[TOOL_CALLS][{"name": "search", "arguments": {"q": "cap',
            "\nLet me look.",
            None,
        ),
        # fewer than 32 characters of the reasoning after its marker
        ("[THINK]\n" + _REASONING[:24], "Let me look.", _REASONING),
    ],
)
def test_a_cut_reply_that_keeps_more_than_one_unknown_marker_is_the_others_start(
    warm: str, cold_content: str, cold_reasoning: str | None
) -> None:
    result = _tool_split(warm, [], ['{"q":"x"}'], "length", cold_content, cold_reasoning)
    assert result.verdict is Verdict.INCONCLUSIVE, result.reasons


@pytest.mark.parametrize(
    ("warm", "cold_content"),
    [
        # the other only called its tool; this one answers with a code block, naming it
        ("No search needed:\n```python\nprint(sum(range(10)))\n```\nThat prints 45. " * 2, ""),
        # this one says what the other said, then answers itself, naming the tool
        ("Let me look. Actually no need to search: the capital is Paris, as ever. " * 2, None),
        # a bracket after what the other said, the tool's name only far past any marker
        (
            "Let me look. [1] The capital of France is Paris, and it has been so for long: " * 2
            + "no search.",
            None,
        ),
    ],
)
def test_a_reply_that_answers_in_text_where_the_other_called_is_a_split(
    warm: str, cold_content: str | None
) -> None:
    """helper-59: a tool's name anywhere in the reply had made it the start of the call."""
    result = _tool_split(
        warm, [], ['{"q":"x"}'], "tool_calls", "Let me look." if cold_content is None else ""
    )
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT, result.reasons


# --- helper-61 (2026-12-05, session 11): the re-audit of 179f505 --------------------------


@pytest.mark.parametrize("cold_finish", ["length", "stop"])
def test_replies_cut_in_reasonings_that_differ_are_a_split(cold_finish: str) -> None:
    """Each reply parsed, the warm one cut in its own reasoning, which differs from the
    cold one's: 179f505 read a reply with reasoning by its content alone (empty: the start
    of anything)."""
    cold = {"reasoning_content": _REASONING, "content": "The capital of France is Paris."}
    warm = {"reasoning_content": "The user wants the capital of Spain, not France. " * 3}
    result = _capped_split(cold_finish, cold, warm)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT, result.reasons


@pytest.mark.parametrize(
    "raw",
    [
        'Action: ```json\n[{"tool_name": "search", "parameters": {"q": "x", "note": "',  # Command R
        'functools[{"name": "search", "arguments": {"q": "x", "note": "',  # Phi-4
    ],
)
def test_a_reply_cut_in_a_call_a_family_starts_with_a_word_is_the_others_start(raw: str) -> None:
    raw += "a long note that the other reply's call does not hold, " * 3  # (more text)
    result = _tool_split("Let me look. " + raw, [], ['{"q":"x"}'], "tool_calls")
    assert result.verdict is Verdict.INCONCLUSIVE, result.reasons
