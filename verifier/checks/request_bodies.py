"""Each record must have sent the experiment's request body (plus its arm's opt-out fields)."""

from __future__ import annotations

import json
import marshal
from collections.abc import Iterator
from typing import Any

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.jsonio import json_key
from verifier.model import Arm, Finding, Severity
from verifier.protocol import Phase

CHECK = "request-body"

# json_key's text, by one encoder made once: json.dumps with these options makes a new
# JSONEncoder for every call, and this check keys every record's body
# (tests/test_request_bodies_fast.py checks the two agree).
_body_key: Any = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode


def opt_out_clash(body: dict[str, Any], opt_out: dict[str, Any]) -> Iterator[Finding]:
    """The experiment's body must not set a field of the opt-out: capture refuses such a
    body, and with it the arms would not differ as claimed."""
    clash = sorted(set(opt_out) & set(body))
    if clash:
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"the experiment's request body sets {', '.join(clash)}, which only the opt-out "
            "requests may set: every request would then ask what the opt-out one asks",
            file=layout.EXPERIMENT,
            pointer="/request_body",
        )


def cap_disagrees(declared: Any, body: dict[str, Any]) -> Iterator[Finding]:
    """The protocol's token cap is the one the body sent: capture writes it into the body
    (`prepare_request_body`), and the report reads it to say how far replies agree."""
    sent = body.get("max_tokens")
    if declared is not None and (type(sent) is not int or sent != declared):
        yield Finding(
            CHECK,
            Severity.ERROR,
            "the protocol's max_tokens is not the cap the request body sent",
            file=layout.EXPERIMENT,
            pointer="/protocol/max_tokens",
            expected=json.dumps(sent),
            actual=json.dumps(declared),
        )


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
    yield from opt_out_clash(body, opt_out)
    yield from cap_disagrees(experiment.protocol.get("max_tokens"), body)
    # one expected body, and its key, per kind of request (opt-out, diagnostic)
    expected_bodies: dict[tuple[bool, bool], tuple[dict[str, Any], str]] = {}
    matched: dict[tuple[bool, bool], bytes] = {}  # per kind, the last body found to match
    for record in ctx.records:
        kind = (record.claimed_arm is Arm.REQUEST_DISABLED, record.phase == Phase.DIAGNOSTIC)
        found = expected_bodies.get(kind)
        if found is None:
            expected = dict(body)
            if kind[0]:
                expected.update(opt_out)
            if kind[1]:
                expected.update(diagnostic)
            found = expected_bodies[kind] = (expected, json_key(expected))
        expected, expected_key = found
        if not _same_body(record.request_body, kind, expected_key, matched):
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


def _same_body(
    body: Any, kind: tuple[bool, bool], expected_key: str, matched: dict[tuple[bool, bool], bytes]
) -> bool:
    """_body_key(body) == expected_key, told first by the `marshal` bytes of the last body
    of this kind that matched: equal marshal bytes are one value, with the same types all
    through (True, 1 and 1.0 are written apart, and so are 0.0 and -0.0), so its JSON text
    is the same. Bytes that differ (another key order, an interned key) say nothing: the
    text is written and compared, as without them."""
    try:
        blob: bytes | None = marshal.dumps(body, 2)
    except ValueError:  # nested too deep for marshal (or not marshal's): the text decides
        blob = None
    if blob is not None and matched.get(kind) == blob:
        return True
    if _body_key(body) != expected_key:
        return False
    if blob is not None:
        matched[kind] = blob
    return True
