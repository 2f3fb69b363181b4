"""What every check reads: the bundle's files, parsed once, and the typed views built on them."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Self

from verifier import layout, schemas
from verifier.bundle.reader import Limits, LoadedBundle
from verifier.errors import InvalidDocument, SchemaVersionError, UnsafeInput
from verifier.jsonio import ValueBudget, ints_bounded, json_key, loads_plain, loads_strict
from verifier.model import Arm
from verifier.profiles import PROFILES, current_rules, known_rules
from verifier.profiles.base import ServerLimits, ServerProfile
from verifier.profiles.rules import ProfileRules
from verifier.proofs import RequestProof, capped_by_servers, prove_all, used_another_cache
from verifier.protocol import (
    Capabilities,
    Phase,
    PlannedRequest,
    ProtocolSpec,
    build_protocol,
    plan_requests,
)
from verifier.records import Experiment, Record
from verifier.schemas import SchemaViolation

_RECORD_NAME = re.compile(r"^records/[a-z0-9][a-z0-9._-]{0,63}/[0-9]{3,7}\.json$")


def expected_kind(path: str) -> str | None:
    """The one document kind a bundle may hold at `path`, or None for a path it has not."""
    fixed = {
        layout.EXPERIMENT: "evidence.experiment",
        layout.MODEL_MANIFEST: "evidence.model-manifest",
        layout.REDACTION_LEDGER: "evidence.redaction-ledger",
    }
    if path in fixed:
        return fixed[path]
    return "evidence.record" if _RECORD_NAME.fullmatch(path) else None


@dataclass(frozen=True)
class PlanProblem:
    """Where a condition's records depart from the protocol's plan (a finding's parts)."""

    message: str
    pointer: str
    expected: str | None = None
    actual: str | None = None


@dataclass(frozen=True)
class ExpectedPlan:
    """The protocol rebuilt from the declared parameters: what every condition must hold."""

    requests: tuple[PlannedRequest, ...]
    roles: dict[int, bool]  # server instance -> started with its cache off
    skipped: dict[str, str]  # phase -> why the capture mode skips it
    problems: tuple[PlanProblem, ...]  # declared parameters that contradict the protocol
    unbuilt: bool = False  # it plans more records than the bundle may hold: not built

    @property
    def skipped_controls(self) -> dict[Arm, str]:
        arms = {Phase.OPT_OUT: Arm.REQUEST_DISABLED, Phase.DISABLED_SERVER: Arm.SERVER_DISABLED}
        return {arms[Phase(p)]: r for p, r in self.skipped.items() if p in arms}


@dataclass(frozen=True)
class RulesChoice:
    """Which rules judge the bundle, and what the report says about that choice."""

    rules: ProfileRules | None
    note: str  # one sentence for the report
    copy_differs: bool = False


ProgressCallback = Callable[[str, int, int], None]
"""(description, done, total): how far a long step (hashing a model) has come."""


@dataclass(frozen=True)
class VerifyOptions:
    """What the reviewer asked of verify: a key, a model copy, limits, progress, rules."""

    public_key: Path | None = None
    model_dir: Path | None = None
    limits: Limits = field(default_factory=Limits)
    progress: ProgressCallback | None = None
    profile_rules: ProfileRules | None = None  # a reviewer's --profile FILE: trusted
    profile_file: str | None = None


def violations_of(path: str, document: Any) -> list[SchemaViolation]:
    """The schema violations of the document at `path` (none: it is valid there)."""
    kind = document.get("kind") if isinstance(document, dict) else None
    expected = expected_kind(path)
    if expected is None:
        return [SchemaViolation("", "no document belongs at this path in a bundle", "kind")]
    if kind != expected:
        message = f"the document at this path must be {expected!r}, not {kind!r}"
        return [SchemaViolation("/kind", message, "kind")]
    try:
        schemas.check_schema_version(document, where=path)
    except SchemaVersionError as exc:
        return [SchemaViolation("/schema_version", exc.message, "schema_version")]
    return schemas.validate(document, schemas.KIND_TO_SCHEMA[expected])


class Share:
    """Records another process validates for this one: `ready` (fetched once, when first
    asked) gives the schema violations of those it validated, by path; a record it did not
    give is validated here, and so is every one if `fetch` gives None."""

    def __init__(
        self,
        paths: frozenset[str],
        fetch: Callable[[], Mapping[str, list[SchemaViolation]] | None],
    ) -> None:
        self.paths = paths
        self._fetch = fetch
        self._ready: Mapping[str, list[SchemaViolation]] | None = None

    def ready(self) -> Mapping[str, list[SchemaViolation]]:
        if self._ready is None:
            self._ready = self._fetch() or {}
        return self._ready


class BundleContext:
    """A loaded bundle and everything derived from it, computed lazily and only once."""

    def __init__(self, bundle: LoadedBundle, options: VerifyOptions) -> None:
        self.bundle = bundle
        self.options = options
        # Documents another process validates for this one (verify's forked child), set
        # before the first document is read; and the violations known before the schema
        # check (found early, or given by that process).
        self.share: Share | None = None
        self._violations_known: dict[str, list[SchemaViolation]] = {}

    @property
    def files(self) -> Mapping[str, bytes]:
        return self.bundle.files

    @cached_property
    def _parsed(self) -> tuple[Mapping[str, Any], dict[str, str]]:
        documents: dict[str, Any] = {}
        errors: dict[str, str] = {}
        limits = self.options.limits
        # One budget for the whole bundle: its cost is bounded, not each file's.
        budget = ValueBudget(limits.max_json_values)
        spent: str | None = None
        files = self.files
        # By name: a file is looked at only to be parsed here. (In verify's parent, every
        # bytes object touched, even to be counted, is a page copied from its child.)
        for path in sorted(files):
            if not path.endswith(".json"):
                continue
            if spent is not None:  # past the limit nothing more is parsed, and each says so
                errors[path] = f"not read: {spent}"
                continue
            try:
                data = files[path]
                documents[path] = loads_strict(data, max_depth=limits.max_json_depth, budget=budget)
            except InvalidDocument as exc:
                errors[path] = exc.message
            except UnsafeInput as exc:  # the value budget: a finding, said once per document
                errors[path] = exc.message
                spent = f"the limit of {limits.max_json_values} JSON values was reached before it"
        share = self.share
        if share is not None:
            # This process's own first, while the other process validates its share; then
            # the violations it found, for each document parsed here too. (Parsing is a
            # function of the bytes: a document it read is the one read here.)
            self._validate_early({p: d for p, d in documents.items() if p not in share.paths})
            given = share.ready()
            for path in share.paths & given.keys() & documents.keys():
                self._violations_known[path] = given[path]
        return documents, errors

    def _validate_early(self, documents: Mapping[str, Any]) -> None:
        """Schema violations of documents parsed so far, found now rather than in the schema
        check; one whose validation fails unexpectedly is left to the check, which reports
        the failure as its own."""
        for path, document in documents.items():
            try:
                self._violations_known[path] = violations_of(path, document)
            except Exception:  # noqa: S112 - the schema check validates it again, and says
                continue

    @property
    def documents(self) -> Mapping[str, Any]:
        """Every JSON file that parsed under the strict rules."""
        return self._parsed[0]

    @classmethod
    def over(cls, bundle: LoadedBundle, options: VerifyOptions, documents: EachAlone) -> Self:
        """The same bundle, its documents read through `documents` (verify's forked child)."""
        view = cls(bundle, options)
        view._parsed = (documents, {})
        return view

    @property
    def parse_errors(self) -> dict[str, str]:
        return self._parsed[1]

    @cached_property
    def schema_violations(self) -> dict[str, list[SchemaViolation]]:
        """Violations per JSON file; a file absent from this map was not validated."""
        known = self._violations_known
        return {
            path: known[path] if path in known else violations_of(path, document)
            for path, document in self.documents.items()
        }

    def valid(self, path: str) -> Any | None:
        """The document at `path` if it parsed and matches its schema, else None."""
        if path in self.documents and not self.schema_violations.get(path, [None]):
            return self.documents[path]
        return None

    @cached_property
    def experiment(self) -> Experiment | None:
        document = self.valid(layout.EXPERIMENT)
        return Experiment.from_json(document) if document is not None else None

    @cached_property
    def records(self) -> list[Record]:
        """Schema-valid records whose location matches their condition and sequence."""
        found = []
        for path in sorted(self.documents):
            if not path.startswith(layout.RECORDS_DIR + "/"):
                continue
            document = self.valid(path)
            if document is None or document.get("kind") != "evidence.record":
                continue
            if layout.record_path(document["condition"], document["sequence"]) != path:
                continue
            found.append(Record.from_json(path, document))
        return found

    @cached_property
    def rules_choice(self) -> RulesChoice:
        return choose_rules(self.experiment, self.options)

    @property
    def rules(self) -> ProfileRules | None:
        return self.rules_choice.rules

    @property
    def profile(self) -> ServerProfile | None:
        """The server profile of the rules the bundle is judged by (the tool's, never the
        bundle's): the facts of the server beyond its rules."""
        rules = self.rules
        return PROFILES.get(rules.name) if rules is not None else None

    @cached_property
    def cache_off_instances(self) -> dict[str, frozenset[int]]:
        """Per condition, the instances declared cache-off whose argv shows the profile's flag."""
        experiment, rules = self.experiment, self.rules
        if experiment is None or rules is None or not rules.cache_off_args:
            return {}
        return {
            c.id: frozenset(
                s.instance
                for s in c.servers
                if s.cache_disabled and has_args(s.argv, rules.cache_off_args)
            )
            for c in experiment.conditions
        }

    @cached_property
    def zero_when_absent(self) -> dict[str, frozenset[int]]:
        """Per condition, the instances whose answers leave out a count of cached tokens
        that is zero (`ServerProfile.omits_no_cached_tokens`): those whose recorded command
        line certainly asks for the count (`_asks_for_sure`)."""
        experiment, profile = self.experiment, self.profile
        if experiment is None or profile is None or not profile.omits_no_cached_tokens:
            return {}
        switches = [f for f in profile.switches.get("cached_tokens", ()) if f.startswith("--")]
        return {
            c.id: frozenset(
                s.instance for s in c.servers if _asks_for_sure(profile, s.argv, switches)
            )
            for c in experiment.conditions
        }

    @cached_property
    def plan(self) -> ExpectedPlan | None:
        if self.experiment is None:
            return None
        return expected_plan(
            self.experiment, self.rules, most_records=self.options.limits.max_members
        )

    @cached_property
    def proofs(self) -> list[RequestProof]:
        experiment = self.experiment
        if experiment is None:
            return []
        known = {c.id for c in experiment.conditions}
        proofs = prove_all(
            [r for r in self.records if r.condition in known],
            self.rules,
            self.cache_off_instances,
            no_rules_reason=self.rules_choice.note,
            attached=experiment.attached,
            lazy=self.profile.lazy_counters if self.profile is not None else (),
            zero_when_absent=self.zero_when_absent,
        )
        proofs = capped_by_servers(proofs, self.server_limits)
        profile = self.profile
        return used_another_cache(
            proofs, profile.other_hit_counters if profile else (), attached=experiment.attached
        )

    @cached_property
    def server_limits(self) -> dict[tuple[str, int], ServerLimits]:
        """What each server's command line and environment set for every request it served
        (`ServerProfile.limits`), by condition and instance; none where the profile knows
        none (or no rules apply)."""
        experiment, profile = self.experiment, self.profile
        if experiment is None or profile is None:
            return {}
        return {
            (condition.id, server.instance): profile.limits(server.argv, server.environment)
            for condition in experiment.conditions
            for server in reversed(condition.servers)  # the first declared, as `server`
        }

    def condition_limits(self, condition: str) -> list[ServerLimits]:
        """What the servers of one condition set for its requests, each server's own."""
        return self._limits_by_condition.get(condition, [])

    @cached_property
    def _limits_by_condition(self) -> dict[str, list[ServerLimits]]:
        """`server_limits` grouped by condition, in its order (asked once per condition: a
        sweep of 700 conditions had read all of them for each)."""
        grouped: dict[str, list[ServerLimits]] = {}
        for (condition, _), limits in self.server_limits.items():
            grouped.setdefault(condition, []).append(limits)
        return grouped


class EachAlone(Mapping[str, Any]):
    """The JSON files that the standard library's parser reads, each parsed when asked for
    (the last one kept for the next question): for verify's forked child, so that it
    starts before the parent has parsed anything and holds one document at a time.

    A document the strict rules accept (`loads_strict`) is read by `json.loads`
    (`loads_plain`) as the same value, in about half its time (no hooks, no interned
    keys: one document at a time needs none); one that might hold more values than the
    budget allows, or any document where Python reads integers of any length, is read by
    the strict rules, so that time and memory stay bounded as they bound them. The
    converse does not hold: `json.loads` also takes duplicate keys, NaN, lone surrogates
    and deep nesting, and a document the bundle's shared budget would stop. `parsed` says
    which files were parsed and whether each parsed: the parent compares it with its own
    strict parse before it trusts findings made from these, so a file read here and
    refused there (or the reverse) means the checks run again in the parent.
    """

    def __init__(self, files: Mapping[str, bytes], limits: Limits) -> None:
        self._files = files
        self._limits = limits
        self._last: tuple[str, Any] | None = None
        self.parsed: dict[str, bool] = {}

    def _parse(self, path: str) -> Any:
        if self._last is not None and self._last[0] == path:
            return self._last[1]
        self._last = None  # one document at a time: not two while the next is parsed
        data = self._files.get(path) if path.endswith(".json") else None
        document: Any = _NOT_PARSED
        if data is not None:
            with contextlib.suppress(ValueError, RecursionError, InvalidDocument, UnsafeInput):
                document = self._loads(data)  # (a UnicodeDecodeError is a ValueError)
            self.parsed[path] = document is not _NOT_PARSED
        self._last = (path, document)
        return document

    def _loads(self, data: bytes) -> Any:
        limits = self._limits
        # json.loads builds no more than the strict rules would: no more values than the
        # budget allows (each but the first follows a comma or opens a container; UTF-8
        # spells these as the bytes themselves, and nowhere else), and no integer longer
        # than they read. Any other document is theirs to read.
        most = 1 + data.count(b",") + data.count(b"[") + data.count(b"{")
        if most <= limits.max_json_values and ints_bounded():
            return loads_plain(data)
        budget = ValueBudget(limits.max_json_values)
        return loads_strict(data, max_depth=limits.max_json_depth, budget=budget)

    def __getitem__(self, path: str) -> Any:
        document = self._parse(path)
        if document is _NOT_PARSED:
            raise KeyError(path)
        return document

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self._parse(path) is not _NOT_PARSED

    def __iter__(self) -> Iterator[str]:
        return (p for p in sorted(self._files) if p in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


_NOT_PARSED: Any = object()


def _asks_for_sure(profile: ServerProfile, argv: tuple[str, ...], switches: list[str]) -> bool:
    """Whether a command line certainly turns one of `switches` (long options) on: the last
    of them and their `--no-` forms (argparse's BooleanOptionalAction; in any spelling the
    server reads, `ServerProfile.option_name`) is one of them as written. Not where it is
    shortened (argparse takes a prefix of either form), nor where the command line is not
    recorded or names a config file, which may set anything."""
    if not argv or any(arg.partition("=")[0] in ("--config", "--config-file") for arg in argv):
        return False
    on = False
    for arg in argv[1:]:
        option = profile.option_name(arg)
        if not option.startswith("--") or len(option) < 5:
            continue
        for switch in switches:
            negated = "--no-" + switch[2:]
            if option == switch:
                on = True
            elif switch.startswith(option) or negated.startswith(option):
                on = False  # (the negation, or a prefix of either: not known to be on)
    return on


def has_args(argv: tuple[str, ...], wanted: tuple[str, ...]) -> bool:
    """Whether `wanted` appears in `argv` as consecutive arguments."""
    return next(occurrences(argv, wanted), None) is not None


def occurrences(items: Sequence[str], part: Sequence[str]) -> Iterator[int]:
    """Where `part` starts in `items` as consecutive items, overlaps included, ascending.

    Knuth-Morris-Pratt: linear in both lengths. (A slice compared at each place costs their
    product: a command line of 80,000 arguments took minutes.) An empty part is everywhere.
    """
    n = len(part)
    if n == 0:
        yield from range(len(items) + 1)
        return
    fallback = [0] * n  # the longest proper prefix of part[: i + 1] that is also its suffix
    k = 0
    for i in range(1, n):
        while k and part[i] != part[k]:
            k = fallback[k - 1]
        if part[i] == part[k]:
            k += 1
        fallback[i] = k
    k = 0
    for i, item in enumerate(items):
        while k and item != part[k]:
            k = fallback[k - 1]
        if item == part[k]:
            k += 1
            if k == n:
                yield i - n + 1
                k = fallback[k - 1]


def choose_rules(experiment: Experiment | None, options: VerifyOptions) -> RulesChoice:
    """The rules that judge the bundle: the reviewer's file, else the tool's own copy of the
    profile the bundle names. The bundle's own copy is never applied."""
    if options.profile_rules is not None:
        chosen = options.profile_rules
        return RulesChoice(
            chosen, f"judged by the reviewer's profile file {options.profile_file} ({chosen.key})"
        )
    if experiment is None:
        return RulesChoice(None, "no experiment.json to name a profile")
    name, version = experiment.profile, experiment.profile_version
    if version is None:
        rules = current_rules(name)
        if experiment.schema_minor >= 1:
            return RulesChoice(
                None,
                f"the bundle names profile {name!r} without a profile version: no arm is "
                "proven (pass --profile FILE to judge it by rules you choose)",
            )
        if rules is None:
            return RulesChoice(
                None,
                f"this tool has no profile {name!r}: no arm is proven "
                "(pass --profile FILE to judge it by rules you choose)",
            )
        return RulesChoice(
            rules,
            f"a schema 1.0 bundle: judged by this tool's {rules.key} rules; the telemetry map "
            "it carries is ignored",
        )
    versioned = known_rules(name, version)
    if versioned is None:
        return RulesChoice(
            None,
            f"this tool does not know profile {name!r} version {version!r}: no arm is proven "
            "(pass --profile FILE to judge it by rules you choose)",
        )
    copy = experiment.profile_rules
    # Compared as JSON, where 0 is not false and 1 is not 1.0 (Python's == says they are).
    differs = copy is not None and json_key(copy) != json_key(versioned.copied_as(copy))
    return RulesChoice(
        versioned, f"judged by this tool's {versioned.key} rules", copy_differs=differs
    )


def expected_plan(
    experiment: Experiment, rules: ProfileRules | None, *, most_records: int | None = None
) -> ExpectedPlan:
    """Rebuild the protocol from the declared parameters and the capture mode.

    What may be skipped follows from the capture mode (attached or not) and the tool's
    rules for the server (a per-request opt-out, a cache-off switch), never from what the
    bundle says it skipped. A protocol whose cycles alone plan more records than
    `most_records` (what the bundle may hold: its member limit) cannot be complete: it is
    a problem, and not built (its parameters could plan a million requests, some 360 MiB).
    """
    declared = experiment.protocol
    spec = ProtocolSpec(
        cycles=declared["cycles"],
        warm_per_cycle=declared.get("warm_per_cycle", ProtocolSpec.warm_per_cycle),
        opt_out_repeats=declared.get("opt_out_repeats", ProtocolSpec.opt_out_repeats),
        restart_warm=declared.get("restart_warm", ProtocolSpec.restart_warm),
        disabled_repeats=declared.get("disabled_repeats", ProtocolSpec.disabled_repeats),
        localize=declared.get("localize", False),
    )
    # At least this many records: each cycle's cold request and its warm ones, for each
    # condition (one with no condition still plans its own).
    least = spec.cycles * (1 + spec.warm_per_cycle) * max(1, len(experiment.conditions))
    if most_records is not None and least > most_records:
        problem = PlanProblem(
            f"the declared protocol plans at least {least:,} request records, more than a "
            f"bundle may hold ({most_records:,} files; --max-members): it cannot be complete",
            "/protocol",
        )
        return ExpectedPlan((), {}, {}, (problem,), unbuilt=True)
    said_skipped = {s["phase"]: s["reason"] for s in declared.get("skipped_phases", [])}
    if rules is not None:
        has_opt_out, can_disable = rules.opt_out_fields is not None, rules.can_disable_cache
    else:  # nothing is proven without rules; follow the bundle so the layout can be checked
        has_opt_out = Phase.OPT_OUT not in said_skipped
        can_disable = Phase.DISABLED_SERVER not in said_skipped
    caps = Capabilities(
        starts_servers=not experiment.attached,
        has_opt_out=has_opt_out,
        can_disable_cache=can_disable,
        has_logprobs=(
            rules.logprobs_top_k is not None
            if rules is not None
            else Phase.DIAGNOSTIC not in said_skipped
        ),
    )
    protocol = build_protocol(spec, caps)
    requests, roles = plan_requests(protocol)
    skipped = {s.phase: s.reason for s in protocol.skipped}
    problems: list[PlanProblem] = []
    if set(said_skipped) != set(skipped):
        problems.append(
            PlanProblem(
                "the declared skipped phases are not the ones this capture mode and server "
                "allow: a control may not be dropped by declaring it skipped",
                "/protocol/skipped_phases",
                expected=", ".join(sorted(skipped)) or "none",
                actual=", ".join(sorted(said_skipped)) or "none",
            )
        )
    for key, phase in (
        ("opt_out_repeats", Phase.OPT_OUT),
        ("disabled_repeats", Phase.DISABLED_SERVER),
    ):
        if phase not in skipped and getattr(spec, key) == 0:
            problems.append(
                PlanProblem(
                    f"{key} is 0: the {phase} control is absent without a declared reason",
                    f"/protocol/{key}",
                    expected="at least 1",
                    actual="0",
                )
            )
    return ExpectedPlan(requests, roles, skipped, tuple(problems))
