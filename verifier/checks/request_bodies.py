"""Each record must have sent the experiment's request body (plus its arm's opt-out fields)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from verifier.checks.context import BundleContext
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
    for record in ctx.records:
        expected = dict(body)
        if record.claimed_arm is Arm.REQUEST_DISABLED:
            expected.update(opt_out)
        if record.phase == Phase.DIAGNOSTIC:
            expected.update(diagnostic)
        if _exact(record.request_body) != _exact(expected):
            differing = sorted(
                k
                for k in expected.keys() | record.request_body.keys()
                if _exact(expected.get(k)) != _exact(record.request_body.get(k))
            )
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the request body differs from the experiment's: fields " + ", ".join(differing),
                file=record.file,
                pointer="/request_body",
            )


def _exact(value: Any) -> str:
    """A comparison key that tells `false` from `0` and `1` from `1.0`, as JSON does."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
