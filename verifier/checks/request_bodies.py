"""Each record must have sent the experiment's request body (plus its arm's opt-out fields)."""

from __future__ import annotations

from collections.abc import Iterator

from verifier.checks.context import BundleContext
from verifier.model import Arm, Finding, Severity

CHECK = "request-body"


def check_request_bodies(ctx: BundleContext) -> Iterator[Finding]:
    experiment = ctx.experiment
    if experiment is None:
        return
    body = experiment.document["request_body"]
    for record in ctx.records:
        expected = dict(body)
        if record.claimed_arm is Arm.REQUEST_DISABLED:
            expected.update(experiment.opt_out_fields)
        if record.request_body != expected:
            differing = sorted(
                k
                for k in expected.keys() | record.request_body.keys()
                if expected.get(k) != record.request_body.get(k)
            )
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the request body differs from the experiment's: fields " + ", ".join(differing),
                file=record.file,
                pointer="/request_body",
            )
