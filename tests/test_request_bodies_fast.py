"""The request-body check keys bodies with one encoder made once and works out each kind's
expected body once: it finds what the plain check (json_key of a body built per record)
finds."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sample_paths import BUNDLES, SAMPLES

from verifier.bundle.reader import Limits, read_bundle
from verifier.checks import request_bodies
from verifier.checks.context import BundleContext, VerifyOptions
from verifier.jsonio import json_key
from verifier.model import Arm, Finding, Severity
from verifier.protocol import Phase

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, 0.0, -0.0, 1, 1.0, True, False, 1e16, 2**53 + 1])
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)


@given(_JSON)
def test_the_body_key_is_json_key(value: Any) -> None:
    assert request_bodies._body_key(value) == json_key(value)


def plain_check(ctx: BundleContext) -> Iterator[Finding]:
    """check_request_bodies as it was: each record's expected body built for it."""
    experiment = ctx.experiment
    if experiment is None:
        return
    body = experiment.document["request_body"]
    if ctx.rules is not None:
        opt_out = dict(ctx.rules.opt_out_fields or {})
    else:
        copy = experiment.profile_rules or {}
        opt_out = dict(
            copy.get("opt_out_fields") or experiment.document.get("opt_out_fields") or {}
        )
    diagnostic = ctx.rules.diagnostic_fields if ctx.rules is not None else {}
    yield from request_bodies.opt_out_clash(body, opt_out)  # not a fast path: shared
    for record in ctx.records:
        expected = dict(body)
        if record.claimed_arm is Arm.REQUEST_DISABLED:
            expected.update(opt_out)
        if record.phase == Phase.DIAGNOSTIC:
            expected.update(diagnostic)
        if json_key(record.request_body) != json_key(expected):
            differing = sorted(
                k
                for k in expected.keys() | record.request_body.keys()
                if json_key(expected.get(k)) != json_key(record.request_body.get(k))
            )
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the request body differs from the experiment's: fields " + ", ".join(differing),
                file=record.file,
                pointer="/request_body",
            )


CHECK = request_bodies.CHECK


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_sample_gets_the_same_findings(bundle: str) -> None:
    context = BundleContext(read_bundle(SAMPLES / bundle, Limits()), VerifyOptions())
    assert list(request_bodies.check_request_bodies(context)) == list(plain_check(context))


@given(
    st.lists(
        st.tuples(
            st.integers(0, 27),
            st.sampled_from(["seed", "max_tokens", "cache_prompt", "logprobs", "new"]),
            st.sampled_from([0, 0.0, False, True, 1, 1.0, None, "0", [0]]),
        ),
        max_size=6,
    )
)
def test_changed_bodies_get_the_same_findings(changes: list[tuple[int, str, Any]]) -> None:
    base = BundleContext(read_bundle(SAMPLES / "seed-mlxcel", Limits()), VerifyOptions())
    context = BundleContext(base.bundle, VerifyOptions())
    records = [copy.deepcopy(r) for r in base.records]
    for index, field, value in changes:
        if index < len(records):
            records[index].request_body[field] = value
    context.records = records  # type: ignore[misc]  # (a cached_property, set beforehand)
    assert list(request_bodies.check_request_bodies(context)) == list(plain_check(context))


@pytest.mark.parametrize("value", [False, True, 0, None])
def test_an_experiment_body_that_sets_an_opt_out_field_is_an_error(value: Any) -> None:
    """Capture refuses a request body that sets the profile's opt-out field (whatever its
    value): warm requests that ask the server not to use its cache prove nothing warm."""
    base = BundleContext(read_bundle(SAMPLES / "seed-mlxcel", Limits()), VerifyOptions())
    context = BundleContext(base.bundle, VerifyOptions())
    experiment = copy.deepcopy(base.experiment)
    assert experiment is not None
    experiment.document["request_body"]["cache_prompt"] = value
    records = [copy.deepcopy(r) for r in base.records]
    for r in records:  # every record sent it too: no record differs from the experiment
        r.request_body["cache_prompt"] = False if r.claimed_arm is Arm.REQUEST_DISABLED else value
    context.experiment = experiment  # type: ignore[misc]  # (cached properties, set first)
    context.records = records  # type: ignore[misc]
    found = list(request_bodies.check_request_bodies(context))
    assert found == list(plain_check(context))
    # the one finding: no record differs from the experiment's body
    assert [(f.file, f.is_error) for f in found] == [("experiment.json", True)]
    assert "cache_prompt" in found[0].message


@given(
    _JSON,
    st.lists(st.tuples(st.booleans(), _JSON | st.sampled_from(["same", "reordered"])), max_size=8),
)
def test_bodies_told_equal_by_their_bytes_are_those_json_key_tells_equal(
    expected: Any, bodies: list[tuple[bool, Any]]
) -> None:
    # The check remembers, per kind, the marshal bytes of the last body that matched and
    # takes a body with the same bytes as matching: it must answer as the text does, for
    # bodies that differ from the expected one only in type (0, 0.0, False), in key
    # order, or not at all, one kind after another.
    expected_key = json_key(expected)
    matched: dict[tuple[bool, bool], bytes] = {}
    for opt_out, drawn in bodies:
        body: Any = drawn
        if drawn == "same":
            body = copy.deepcopy(expected)
        elif drawn == "reordered":
            body = (
                dict(reversed(list(expected.items()))) if isinstance(expected, dict) else expected
            )
        kind = (opt_out, False)
        assert request_bodies._same_body(body, kind, expected_key, matched) == (
            json_key(body) == expected_key
        )
