"""The protocol as data: steps, phases, arms, skipped phases; conditions and the request body."""

from __future__ import annotations

import pytest

from verifier.errors import UsageError
from verifier.profiles import PROFILES
from verifier.protocol import (
    Capabilities,
    ProtocolSpec,
    StepKind,
    build_protocol,
    default_request_body,
    parse_condition,
    parse_conditions,
    prepare_request_body,
)

FULL = Capabilities(starts_servers=True, has_opt_out=True, can_disable_cache=True)


def test_two_cycles_give_the_seed_reports_fourteen_requests() -> None:
    protocol = build_protocol(ProtocolSpec(cycles=2), FULL)
    got = [(s.phase, str(s.arm), s.preceded_by) for s in protocol.requests]
    assert got == [
        ("cycle-1", "cold", "cache-reset"),
        ("cycle-1", "warm", "request"),
        ("cycle-1", "warm", "request"),
        ("cycle-2", "cold", "cache-reset"),
        ("cycle-2", "warm", "request"),
        ("cycle-2", "warm", "request"),
        ("opt-out", "request-disabled", "request"),
        ("opt-out", "request-disabled", "request"),
        ("opt-out", "request-disabled", "request"),
        ("restart", "cold", "server-start"),
        ("restart", "warm", "request"),
        ("disabled-server", "server-disabled", "server-start"),
        ("disabled-server", "server-disabled", "request"),
        ("disabled-server", "server-disabled", "request"),
    ]
    assert protocol.skipped == ()
    assert all(s.opt_out == (s.phase == "opt-out") for s in protocol.requests)


def test_servers_start_and_stop_in_pairs_and_only_the_last_is_cache_off() -> None:
    steps = build_protocol(ProtocolSpec(cycles=2), FULL).steps
    starts = [s for s in steps if s.kind is StepKind.START]
    stops = [s for s in steps if s.kind is StepKind.STOP]
    assert [s.cache_disabled for s in starts] == [False, False, True]
    assert len(stops) == 3
    assert steps[0].kind is StepKind.START and steps[-1].kind is StepKind.STOP
    assert [s.phase for s in steps if s.kind is StepKind.RESET] == ["cycle-1", "cycle-2"]


@pytest.mark.parametrize(("cycles", "expected"), [(1, 11), (2, 14), (3, 17)])
def test_cycles_add_three_requests_each(cycles: int, expected: int) -> None:
    assert len(build_protocol(ProtocolSpec(cycles=cycles), FULL).requests) == expected


def test_attached_run_skips_restart_and_disabled_server_with_reasons() -> None:
    caps = Capabilities(starts_servers=False, has_opt_out=True, can_disable_cache=True)
    protocol = build_protocol(ProtocolSpec(cycles=2), caps)
    assert len(protocol.requests) == 9
    assert not [s for s in protocol.steps if s.kind in (StepKind.START, StepKind.STOP)]
    assert {s.phase for s in protocol.skipped} == {"restart", "disabled-server"}
    assert all("--url" in s.reason for s in protocol.skipped)


def test_a_server_without_opt_out_skips_that_phase() -> None:
    caps = Capabilities(True, has_opt_out=False, can_disable_cache=True, opt_out_missing_reason="x")
    protocol = build_protocol(ProtocolSpec(cycles=2), caps)
    assert len(protocol.requests) == 11
    assert [(s.phase, s.reason) for s in protocol.skipped] == [("opt-out", "x")]


def test_zero_cycles_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        build_protocol(ProtocolSpec(cycles=0), FULL)


def test_condition_parsing() -> None:
    c = parse_condition("det0:MLXCEL_SDPA_DETERMINISTIC=0,MLXCEL_APC_TRACE=1")
    assert c.id == "det0"
    assert c.settings == {"MLXCEL_SDPA_DETERMINISTIC": "0", "MLXCEL_APC_TRACE": "1"}
    assert parse_condition("plain").settings == {}
    assert parse_condition("x:A=a=b").settings == {"A": "a=b"}
    assert [c.id for c in parse_conditions([])] == ["default"]


@pytest.mark.parametrize(
    "text", ["Det0:A=1", "det0:A", "det0:1A=1", "det0:A=1,A=2", ":A=1", "a b:A=1"]
)
def test_bad_conditions_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_condition(text)


def test_duplicate_condition_names_are_refused() -> None:
    with pytest.raises(UsageError):
        parse_conditions(["a:X=1", "a:X=2"])


def test_default_body_is_the_seed_reports_body() -> None:
    body = prepare_request_body(
        None, alias="cache-repro", max_tokens=800, pinned={}, opt_out={"cache_prompt": False}
    )
    assert body == default_request_body("cache-repro", 800)
    assert body["messages"][0]["content"].endswith("plain language. /no_think")
    assert body["user"] == "mlxcel-2128-cache-repro"
    assert body["temperature"] == 0 and body["seed"] == 0 and body["stream"] is False


def test_llama_cpp_pins_its_sampling_fields_without_overriding_the_body() -> None:
    profile = PROFILES["llama.cpp"]
    given = {"messages": [{"role": "user", "content": "hi"}], "top_k": 5}
    body = prepare_request_body(
        given, alias="a", max_tokens=7, pinned=profile.pinned_request_fields, opt_out=None
    )
    assert body["top_k"] == 5 and body["repeat_penalty"] == 1.0 and body["min_p"] == 0.0
    assert body["model"] == "a" and body["max_tokens"] == 7


def test_request_file_cap_is_kept_unless_the_flag_is_given() -> None:
    given = {"messages": [], "max_tokens": 33}
    body = prepare_request_body(given, alias="a", max_tokens=None, pinned={}, opt_out=None)
    assert body["max_tokens"] == 33


@pytest.mark.parametrize(
    "given",
    [
        {"messages": [], "stream": True},
        {"prompt": "hi"},
        {"messages": [], "cache_prompt": True},
        {"messages": [], "max_tokens": "many"},
    ],
)
def test_bad_request_bodies_are_refused(given: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        prepare_request_body(
            given, alias="a", max_tokens=None, pinned={}, opt_out={"cache_prompt": False}
        )


def test_a_condition_may_carry_server_arguments() -> None:
    condition = parse_condition("chunk1:MLXCEL_APC_TRACE=1,--prefill-chunk-size 1")
    assert condition.settings == {"MLXCEL_APC_TRACE": "1"}
    assert condition.server_args == ("--prefill-chunk-size", "1")
    assert parse_condition("ub8:-ub 8").server_args == ("-ub", "8")
    with pytest.raises(UsageError):
        parse_condition("bad:--flag 'unclosed")
