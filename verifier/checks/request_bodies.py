"""Each record must have sent the experiment's request body (plus its arm's opt-out fields)."""

from __future__ import annotations

from collections.abc import Iterator

from verifier.checks.context import BundleContext
from verifier.jsonio import json_key
from verifier.model import Arm, Finding, Severity
from verifier.protocol import Phase

CHECK = "request-body"


def check_request_bodies(ctx: BundleContext) -> Iterator[Finding]:
    experiment = ctx.experiment
    if experiment is None:
        return
    body = experiment.document["request_body"]
    if ctx.rules is not None:
        opt_out = dict(ctx.rules.opt_out_fields or {})
    else:  # no rules to judge by: the bundle's own account of its layout, for this check only
        copy = experiment.profile_rules or {}
        opt_out = dict(
            copy.get("opt_out_fields") or experiment.document.get("opt_out_fields") or {}
        )
    diagnostic = ctx.rules.diagnostic_fields if ctx.rules is not None else {}
    expected_keys: dict[tuple[bool, bool], str] = {}  # one key per kind of request
    for record in ctx.records:
        expected = dict(body)
        kind = (record.claimed_arm is Arm.REQUEST_DISABLED, record.phase == Phase.DIAGNOSTIC)
        if kind[0]:
            expected.update(opt_out)
        if kind[1]:
            expected.update(diagnostic)
        if kind not in expected_keys:
            expected_keys[kind] = json_key(expected)
        if json_key(record.request_body) != expected_keys[kind]:
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
