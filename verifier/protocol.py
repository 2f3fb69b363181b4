"""The capture protocol as data: the ordered steps run for each condition (EVIDENCE.md)."""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verifier.errors import UsageError
from verifier.model import Arm
from verifier.records import plain_value

_CONDITION_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StepKind(enum.StrEnum):
    START = "start"  # start a fresh server (cache on, or off when cache_disabled)
    RESET = "reset"  # clear the prefix cache and prove it
    REQUEST = "request"  # one serialized request in the claimed arm
    STOP = "stop"  # stop the server this harness started


class Phase(enum.StrEnum):
    OPT_OUT = "opt-out"
    RESTART = "restart"
    DISABLED_SERVER = "disabled-server"
    DIAGNOSTIC = "diagnostic"  # logprobs on: localizes the divergence, never judged

    @staticmethod
    def cycle(n: int) -> str:
        return f"cycle-{n}"


@dataclass(frozen=True)
class Step:
    """One step of a condition's protocol: start, reset, request or stop."""

    kind: StepKind
    phase: str
    cache_disabled: bool = False
    arm: Arm | None = None
    opt_out: bool = False
    preceded_by: str | None = None  # for requests: server-start, cache-reset or request
    logprobs: bool = False  # a diagnostic request: logprobs with top-k alternatives


@dataclass(frozen=True)
class ProtocolSpec:
    """The protocol's parameters."""

    cycles: int = 2
    warm_per_cycle: int = 2
    opt_out_repeats: int = 3
    restart_warm: int = 1
    disabled_repeats: int = 3
    localize: bool = False  # add the diagnostic phase where the server has logprobs


@dataclass(frozen=True)
class Capabilities:
    """What this run can do; the protocol adapts to these, never to a server's name."""

    starts_servers: bool
    has_opt_out: bool
    can_disable_cache: bool
    opt_out_missing_reason: str = "the server has no per-request cache opt-out"
    has_logprobs: bool = False


@dataclass(frozen=True)
class SkippedPhase:
    """A phase of the protocol this run leaves out, and why."""

    phase: str
    reason: str


@dataclass(frozen=True)
class Protocol:
    """The ordered steps of one condition, and the phases left out of it."""

    steps: tuple[Step, ...]
    skipped: tuple[SkippedPhase, ...] = field(default_factory=tuple)

    @property
    def requests(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.kind is StepKind.REQUEST)


@dataclass(frozen=True)
class PlannedRequest:
    """One request the protocol calls for, where it runs and what comes right before it."""

    sequence: int  # 1-based, within the condition
    phase: str
    arm: Arm
    preceded_by: str
    instance: int  # server instance: 1 for the first server (or the attached one)
    cache_disabled: bool
    logprobs: bool = False


def plan_requests(protocol: Protocol) -> tuple[tuple[PlannedRequest, ...], dict[int, bool]]:
    """The requests of one condition in order, and each server instance's role
    (True: started with its cache off). An attached server is instance 1."""
    requests: list[PlannedRequest] = []
    roles: dict[int, bool] = {}
    instance, disabled = 1, False
    started = 0
    for step in protocol.steps:
        if step.kind is StepKind.START:
            started += 1
            instance, disabled = started, step.cache_disabled
            roles[instance] = disabled
        elif step.kind is StepKind.REQUEST:
            assert step.arm is not None and step.preceded_by is not None
            requests.append(
                PlannedRequest(
                    len(requests) + 1,
                    step.phase,
                    step.arm,
                    step.preceded_by,
                    instance,
                    disabled,
                    step.logprobs,
                )
            )
    return tuple(requests), roles


class _Builder:
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.last = "server-start"

    def add(self, kind: StepKind, phase: str, *, cache_disabled: bool = False) -> None:
        self.steps.append(Step(kind, phase, cache_disabled=cache_disabled))
        if kind is StepKind.START:
            self.last = "server-start"
        elif kind is StepKind.RESET:
            self.last = "cache-reset"

    def request(
        self, phase: str, arm: Arm, count: int = 1, *, opt_out: bool = False, logprobs: bool = False
    ) -> None:
        for _ in range(count):
            self.steps.append(
                Step(
                    StepKind.REQUEST, phase, arm=arm, opt_out=opt_out, preceded_by=self.last,
                    logprobs=logprobs,
                )
            )  # fmt: skip
            self.last = "request"


def build_protocol(spec: ProtocolSpec, caps: Capabilities) -> Protocol:
    """The steps of one condition, in order; phases the run cannot do are listed as skipped."""
    if spec.cycles < 1:
        raise UsageError("--cycles must be at least 1")
    b = _Builder()
    skipped: list[SkippedPhase] = []
    first = Phase.cycle(1)
    if caps.starts_servers:
        b.add(StepKind.START, first)
    for n in range(1, spec.cycles + 1):
        b.add(StepKind.RESET, Phase.cycle(n))
        b.request(Phase.cycle(n), Arm.COLD)
        b.request(Phase.cycle(n), Arm.WARM, spec.warm_per_cycle)
    if not caps.has_opt_out:
        skipped.append(SkippedPhase(Phase.OPT_OUT, caps.opt_out_missing_reason))
    elif spec.opt_out_repeats > 0:
        b.request(Phase.OPT_OUT, Arm.REQUEST_DISABLED, spec.opt_out_repeats, opt_out=True)
    if not caps.starts_servers:
        reason = "attached to a running server (--url): the harness never restarts it"
        skipped.append(SkippedPhase(Phase.RESTART, reason))
        reason = (
            "attached to a running server (--url): the harness cannot start one with its cache off"
        )
        skipped.append(SkippedPhase(Phase.DISABLED_SERVER, reason))
        if spec.localize:
            reason = "attached to a running server (--url): the diagnostic needs a fresh server"
            skipped.append(SkippedPhase(Phase.DIAGNOSTIC, reason))
        return Protocol(tuple(b.steps), tuple(skipped))
    b.add(StepKind.STOP, Phase.RESTART)
    b.add(StepKind.START, Phase.RESTART)
    b.request(Phase.RESTART, Arm.COLD)
    b.request(Phase.RESTART, Arm.WARM, spec.restart_warm)
    b.add(StepKind.STOP, Phase.RESTART)
    if not caps.can_disable_cache:
        skipped.append(SkippedPhase(Phase.DISABLED_SERVER, "the server cannot turn its cache off"))
    elif spec.disabled_repeats > 0:
        b.add(StepKind.START, Phase.DISABLED_SERVER, cache_disabled=True)
        b.request(Phase.DISABLED_SERVER, Arm.SERVER_DISABLED, spec.disabled_repeats)
        b.add(StepKind.STOP, Phase.DISABLED_SERVER, cache_disabled=True)
    if spec.localize:
        if not caps.has_logprobs:
            reason = "the server profile has no logprobs: the divergence is not localized"
            skipped.append(SkippedPhase(Phase.DIAGNOSTIC, reason))
        else:
            b.add(StepKind.START, Phase.DIAGNOSTIC)
            b.add(StepKind.RESET, Phase.DIAGNOSTIC)
            b.request(Phase.DIAGNOSTIC, Arm.COLD, logprobs=True)
            b.request(Phase.DIAGNOSTIC, Arm.WARM, logprobs=True)
            b.add(StepKind.STOP, Phase.DIAGNOSTIC)
    return Protocol(tuple(b.steps), tuple(skipped))


@dataclass(frozen=True)
class Condition:
    """One server configuration varied on purpose: an id, its environment settings and the
    extra arguments its servers get (e.g. `--prefill-chunk-size 1`)."""

    id: str
    settings: dict[str, str] = field(default_factory=dict)
    server_args: tuple[str, ...] = ()


def parse_condition(text: str) -> Condition:
    """`NAME:ITEM[,ITEM...]` (or just `NAME`) into a Condition. An item is `VAR=VALUE`
    (an environment toggle) or starts with `-` (server arguments, split like a shell:
    `--prefill-chunk-size 1`)."""
    name, _, rest = text.partition(":")
    if not _CONDITION_ID.match(name):
        raise UsageError(
            f"condition name {name!r} must be lowercase letters, digits, '.', '_' or '-' "
            "(e.g. --condition det0:MLXCEL_SDPA_DETERMINISTIC=0)"
        )
    settings: dict[str, str] = {}
    server_args: list[str] = []
    for item in filter(None, rest.split(",")):
        if item.startswith("-"):
            try:
                server_args += shlex.split(item)
            except ValueError as exc:
                raise UsageError(f"condition {name!r}: server arguments {item!r}: {exc}") from None
            continue
        var, eq, value = item.partition("=")
        if not eq or not _ENV_NAME.match(var):
            raise UsageError(f"condition {name!r}: {item!r} is not VAR=VALUE")
        if var in settings:
            raise UsageError(f"condition {name!r} sets {var} twice")
        settings[var] = value
    # As verify reads a condition (checks/servers.py): a value that is not printable ASCII
    # with nothing around it is not what it shows, and a run with it would not verify.
    shown = [*((f"{k}={v}", v) for k, v in settings.items()), *((a, a) for a in server_args)]
    for item, value in shown:
        if not plain_value(value):
            raise UsageError(
                f"condition {name!r}: {item!a} has characters other than printable "
                "ASCII (or a space around its value): what the server reads of it is not "
                "what it shows, and verify refuses such a condition"
            )
    return Condition(name, settings, tuple(server_args))


def parse_conditions(texts: list[str]) -> list[Condition]:
    """Every --condition, or one condition named `default` with no settings."""
    conditions = [parse_condition(t) for t in texts] or [Condition("default")]
    ids = [c.id for c in conditions]
    if len(set(ids)) != len(ids):
        raise UsageError("two conditions have the same name")
    return conditions


# The seed report's exact prompt (a chat-template-encoded request, serialized, greedy).
SEED_PROMPT = (
    "Write a short story of about 600 words about a lighthouse keeper who finds a message "
    "in a bottle. Use vivid but plain language. /no_think"
)
DEFAULT_MAX_TOKENS = 800


def default_request_body(alias: str, max_tokens: int) -> dict[str, Any]:
    """The seed report's /v1/chat/completions body, for this alias and token cap."""
    return {
        "model": alias,
        "messages": [{"role": "user", "content": SEED_PROMPT}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "seed": 0,
        "stream": False,
        "user": "mlxcel-2128-cache-repro",
    }


def prepare_request_body(
    given: dict[str, Any] | None,
    *,
    alias: str,
    max_tokens: int | None,
    pinned: Mapping[str, Any],
    opt_out: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The final body: the given one (or the seed's), the cap, then the profile's pinned
    sampling fields where the body does not set them. The result is what run.json records."""
    if given is None:
        body = default_request_body(alias, max_tokens or DEFAULT_MAX_TOKENS)
    else:
        body = dict(given)
        body.setdefault("model", alias)
        cap = max_tokens or body.get("max_tokens") or DEFAULT_MAX_TOKENS
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            raise UsageError("max_tokens must be a positive integer")
        body["max_tokens"] = cap
    if body.get("stream"):
        raise UsageError('the request must not stream: set "stream": false')
    if not isinstance(body.get("messages"), list):
        raise UsageError('the request has no "messages" list (a chat-completions body)')
    clash = sorted(set(opt_out or {}) & set(body))
    if clash:
        raise UsageError(
            f"the request sets {', '.join(clash)}, which the opt-out arm alone may set"
        )
    for name, value in pinned.items():
        body.setdefault(name, value)
    return body
