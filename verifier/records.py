"""Typed views of the public bundle's experiment and request records."""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from verifier.jsonio import resolve_pointer
from verifier.model import Arm

_NO_NAMES: frozenset[str] = frozenset()
_UNSET: Any = object()  # not worked out yet (None is a value: not recorded)
_FAMILIES: Any = object()  # the key of a snapshot's family index in its memo
_MANY: Any = object()  # the key, in its memo, of "a family read holds more than one sample"
_ODD: Any = object()  # the key, in its memo, of its first key that is no sample's (odd_key)


@dataclass(frozen=True)
class Snapshot:
    """One telemetry reading: the server's cache stats and its metrics, as the record holds them."""

    cache_stats: dict[str, Any] | None
    metrics: dict[str, float] | None

    def counter(self, ref: str) -> float | None:
        """The value of a counter reference (`metric:FAMILY` sums the family's samples)."""
        value: float | None = self._memo_.get(ref, _UNSET)
        if value is _UNSET:
            value = self._memo_[ref] = self._counter(ref)
        return value

    def counters(self, refs: tuple[str, ...]) -> list[float | None]:
        """counter() of each of `refs`, in their order (and worked out in that order).

        A snapshot nothing was asked of yet, with metrics, reads them by a plan worked
        out once for these references and its metric keys (_reading_plan): where each
        reference's samples are, without the steps counter() takes to find them."""
        memo = self._memo_
        metrics = self.metrics
        if memo or self._samples_ or metrics is None:
            values: list[float | None] = []
            for ref in refs:
                value = memo.get(ref, _UNSET)
                if value is _UNSET:
                    value = memo[ref] = self._counter(ref)
                values.append(value)
            return values
        plan = _reading_plan(refs, self._families, metrics)
        samples = self._samples_
        stats = self.cache_stats or {}
        values = []
        for ref, keys, name in plan:
            if keys is not None:  # a metric family: as samples() and _counter() read it
                if len(keys) == 1:
                    (key,) = keys
                    found = {key: metrics[key]}
                else:
                    found = {k: metrics[k] for k in keys}
                    memo[_MANY] = True
                samples[ref] = found
                value = math.fsum(found.values()) if found else None
            elif name is not None:  # a stats field
                number = stats.get(name)
                if isinstance(number, bool) or not isinstance(number, (int, float)):
                    value = None
                else:
                    value = float(number)
            else:  # neither: no counter
                value = None
            memo[ref] = value
            values.append(value)
        return values

    def deltas(self, after: Snapshot, refs: tuple[str, ...]) -> tuple[float | None, ...]:
        """For each of `refs`, after.counter(ref) - self.counter(ref), None where either is
        None (each pair worked out in that order), read straight from both memos where the
        counters are there already: a request's proof works out every counter its class
        telemetry asks for again."""
        mine, theirs = self._memo_, after._memo_
        found: list[float | None] = []
        for ref in refs:
            old = mine.get(ref, _UNSET)
            if old is _UNSET:
                old = self.counter(ref)
            new = theirs.get(ref, _UNSET)
            if new is _UNSET:
                new = after.counter(ref)
            found.append(None if old is None or new is None else new - old)
        return tuple(found)

    def _counter(self, ref: str) -> float | None:
        # ref.startswith("metric:") is ref.partition(":")[0] == "metric", and so for stats
        if ref.startswith("metric:"):
            if self.metrics is None:
                return None
            found = self.samples(ref)  # the family's samples, in the snapshot's order
            return math.fsum(found.values()) if found else None
        if ref.startswith("stats:"):
            value = (self.cache_stats or {}).get(ref[6:])
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None
            return float(value)
        return None

    def many_samples(self) -> bool:
        """Whether a family read so far (samples(), counters()) holds more than one sample."""
        return _MANY in self._memo_

    def samples(self, ref: str) -> dict[str, float]:
        """Every sample of a `metric:` family by its full key (labels included).

        The same dict for the same reference each time (a record's proof and its class
        telemetry read the same families): read it, never change it.
        """
        found: dict[str, float] | None = self._samples_.get(ref)
        if found is None:
            metrics = self.metrics
            if metrics is None or not ref.startswith("metric:"):
                found = {}
            else:
                keys = self._keys(ref[7:])
                if len(keys) == 1:  # a family of one sample (nearly every one)
                    (key,) = keys
                    found = {key: metrics[key]}
                else:
                    found = {k: metrics[k] for k in keys}
                    if len(found) > 1:
                        self._memo_[_MANY] = True
            self._samples_[ref] = found
        return found

    def odd_key(self) -> str | None:
        """The first metric key that is not a Prometheus sample's name and labels as capture
        writes them (`name`, `name{a="x",b="y"}`: _SAMPLE_KEY), or None. A counter written
        under such a key (`name {a="x"}`, ` name`, `name{a="x"`) would be read as no family
        the rules read, or with labels the server did not give it."""
        memo = self._memo_
        odd: Any = memo.get(_ODD, _UNSET)
        if odd is _UNSET:
            odd = memo[_ODD] = _first_odd(self._families, self.metrics)
        return odd  # type: ignore[no-any-return]

    def stat_names(self, prefix: str) -> frozenset[str]:
        """The cache stats fields named `prefix...` whose value is an integer."""
        memo = self._memo_
        key = ("stat_names", prefix)
        found: frozenset[str] | None = memo.get(key)
        if found is None:
            stats = self.cache_stats or {}
            named = _prefixed(prefix, tuple(stats))
            found = memo[key] = (
                frozenset(
                    name
                    for name in named
                    if isinstance(value := stats[name], int) and not isinstance(value, bool)
                )
                if named
                else _NO_NAMES
            )
        return found

    # What counter(), samples() and stat_names() worked out, once per snapshot: the proof
    # of a request, the proof of the one after it (its `since`) and the class telemetry
    # ask for the same counters. A snapshot's documents are never changed once read. (A
    # plain dict set once: cached_property's lock costs more than the lookups it saves.)
    _memo_: ClassVar[dict[Any, Any]]
    _samples_: ClassVar[dict[str, dict[str, float]]]  # samples() by reference

    def __post_init__(self) -> None:
        object.__setattr__(self, "_memo_", {})
        object.__setattr__(self, "_samples_", {})

    @classmethod
    def _of(cls, cache_stats: dict[str, Any] | None, metrics: dict[str, float] | None) -> Snapshot:
        """Snapshot(cache_stats, metrics), as __init__ and __post_init__ make it."""
        snapshot = object.__new__(cls)
        snapshot.__dict__.update(cache_stats=cache_stats, metrics=metrics, _memo_={}, _samples_={})
        return snapshot

    def _keys(self, name: str) -> tuple[str, ...]:
        """The keys `name` or `name{labels}` of the samples, in the snapshot's order."""
        if "{" in name:  # not a family name the index knows: read every key
            metrics = self.metrics or {}
            return tuple(k for k in metrics if k == name or k.startswith(name + "{"))
        return self._families.get(name, ())

    @property
    def _families(self) -> dict[str, tuple[str, ...]]:
        """The keys of every family (a key up to its first `{`), indexed once per snapshot.

        For a name without `{`, `k == name or k.startswith(name + "{")` holds exactly when
        the key's family is `name`; each family keeps the snapshot's order, so sums add the
        same numbers in the same order as a scan of every key would.
        """
        memo = self._memo_
        index: dict[str, tuple[str, ...]] | None = memo.get(_FAMILIES)
        if index is None:
            index = memo[_FAMILIES] = _family_index(tuple(self.metrics or ()))
        return index

    def stat(self, pointer: str | None) -> Any:
        if pointer is None or self.cache_stats is None:
            return None
        stats = self.cache_stats
        # A member of the stats (`/entries`), as resolve_pointer reads it, a step fewer (the
        # proofs ask for some of every request's).
        if (
            type(stats) is dict
            and pointer.count("/") == 1
            and pointer[:1] == "/"
            and ("~" not in pointer)
        ):
            return stats.get(pointer[1:])
        try:
            return resolve_pointer(self.cache_stats, pointer)
        except KeyError:
            return None


# The records of one bundle nearly all carry the same metric and stats keys: the family
# index and the names under a prefix, which follow from the keys alone (in their order),
# are worked out once for the keys last seen, not once per snapshot. A different set of
# keys is worked out afresh, as for the first.
# Each cache is one tuple, replaced whole, so that a thread reading it never pairs one
# call's keys with another's answer.
_last_families: tuple[tuple[str, ...], dict[str, tuple[str, ...]]] | None = None
_last_prefixed: tuple[str, tuple[str, ...], tuple[str, ...]] | None = None


def _family_index(keys: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Each family (a key up to its first `{`) and its keys, in the order given."""
    global _last_families
    last = _last_families
    if last is not None and last[0] == keys:
        return last[1]
    families: dict[str, list[str]] = {}
    for key in keys:
        families.setdefault(key.partition("{")[0], []).append(key)
    index = {family: tuple(members) for family, members in families.items()}
    _last_families = (keys, index)
    return index


# A sample's key as capture writes it (verifier/capture/prometheus.py, sample_key): the
# Prometheus name, then its labels in braces, if any, each `name="value"` (`\\`, `\"` and
# `\n` escaped), with a comma and nothing else between two.
_LABEL = r'[A-Za-z_][A-Za-z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
_SAMPLE_KEY = re.compile(rf"[A-Za-z_:][A-Za-z0-9_:]*(?:\{{{_LABEL}(?:,{_LABEL})*\}})?")
_last_odd: tuple[dict[str, tuple[str, ...]], str | None] | None = None


def _first_odd(
    families: dict[str, tuple[str, ...]], metrics: dict[str, float] | None
) -> str | None:
    """The first key of `metrics` that is no sample's key (_SAMPLE_KEY), or None, where
    `families` is their family index; worked out once for the index last seen
    (_family_index gives the same index for the same keys in the same order)."""
    global _last_odd
    last = _last_odd
    if last is not None and last[0] is families:
        return last[1]
    match = _SAMPLE_KEY.fullmatch
    odd = next((key for key in metrics or () if match(key) is None), None)
    _last_odd = (families, odd)
    return odd


# A reading plan (Snapshot.counters): for each reference, in order, the keys of its metric
# family (None: not a metric) and the name of its stats field (None: not one).
_Plan = tuple[tuple[str, tuple[str, ...] | None, str | None], ...]
_last_plan: tuple[tuple[str, ...], dict[str, tuple[str, ...]], _Plan] | None = None


def _reading_plan(
    refs: tuple[str, ...], families: dict[str, tuple[str, ...]], metrics: dict[str, float]
) -> _Plan:
    """Where Snapshot.counters finds each of `refs` in a snapshot whose family index is
    `families` (so whose metric keys are those the index was made from, in their order:
    _family_index gives an index for its keys alone): what samples() and _counter() work
    out for each reference, worked out once for the keys last seen."""
    global _last_plan
    last = _last_plan
    if last is not None and last[1] is families and last[0] == refs:
        return last[2]
    plan: list[tuple[str, tuple[str, ...] | None, str | None]] = []
    for ref in refs:
        if ref.startswith("metric:"):
            name = ref[7:]
            if "{" in name:  # as _keys() reads it: every key
                keys = tuple(k for k in metrics if k == name or k.startswith(name + "{"))
            else:
                keys = families.get(name, ())
            plan.append((ref, keys, None))
        elif ref.startswith("stats:"):
            plan.append((ref, None, ref[6:]))
        else:
            plan.append((ref, None, None))
    found = tuple(plan)
    _last_plan = (refs, families, found)
    return found


def _prefixed(prefix: str, keys: tuple[str, ...]) -> tuple[str, ...]:
    """The keys that start with `prefix`, in the order given."""
    global _last_prefixed
    last = _last_prefixed
    if last is not None and last[0] == prefix and last[1] == keys:
        return last[2]
    names = tuple(key for key in keys if key.startswith(prefix))
    _last_prefixed = (prefix, keys, names)
    return names


_ARMS: dict[Any, Arm] = {arm.value: arm for arm in Arm}


def _arm(value: Any) -> Arm:
    """Arm(value), by a lookup of its value (Arm() itself says why any other is not one)."""
    try:
        return _ARMS[value]
    except (KeyError, TypeError):
        return Arm(value)


@dataclass(frozen=True)
class Record:
    """One request of the public bundle, as read from records/<condition>/<seq>.json."""

    file: str
    condition: str
    sequence: int
    phase: str
    server_instance: int
    claimed_arm: Arm
    preceded_by: str
    request_body: dict[str, Any]
    http_status: int | None
    response: dict[str, Any] | None
    output_hash: str | None
    before: Snapshot
    after: Snapshot
    started_at: str | None = None
    error: str | None = None  # what the harness noted went wrong with the request
    elapsed_s: float | None = None  # from sending the request to its whole answer

    @classmethod
    def from_json(cls, file: str, data: dict[str, Any]) -> Record:
        """The record of a schema-valid document. Built as the dataclass's __init__ builds
        one (each field set, in its order, each read in that order, nothing else run)
        without its per-field object.__setattr__ calls: every record of the bundle is
        built here."""
        telemetry = data["telemetry"]
        record = object.__new__(cls)
        record.__dict__.update(
            file=file,
            condition=data["condition"],
            sequence=data["sequence"],
            phase=data["phase"],
            server_instance=data["server_instance"],
            claimed_arm=_arm(data["claimed_arm"]),
            preceded_by=data["preceded_by"],
            request_body=data["request_body"],
            http_status=data["http_status"],
            response=data["response"],
            output_hash=data["output_hash"],
            before=Snapshot._of(telemetry["before"]["cache_stats"], telemetry["before"]["metrics"]),
            after=Snapshot._of(telemetry["after"]["cache_stats"], telemetry["after"]["metrics"]),
            started_at=data.get("started_at"),
            error=data.get("error"),
            elapsed_s=data.get("elapsed_s"),
        )
        return record

    def response_value(self, pointer: str) -> Any:
        if self.response is None:
            return None
        try:
            return resolve_pointer(self.response, pointer)
        except KeyError:
            return None

    @property
    def finish_reason(self) -> str | None:
        """Read once (the proof and the report both ask; a document is never changed)."""
        found: str | None = self.__dict__.get("_finish_reason_", _UNSET)
        if found is _UNSET:
            value = self.response_value("/choices/0/finish_reason")
            found = self.__dict__["_finish_reason_"] = value if isinstance(value, str) else None
        return found

    @property
    def content(self) -> str | None:
        value = self.response_value("/choices/0/message/content")
        return value if isinstance(value, str) else None

    @property
    def reasoning(self) -> str | None:
        for pointer in ("/choices/0/message/reasoning_content", "/choices/0/message/reasoning"):
            value = self.response_value(pointer)
            if isinstance(value, str):
                return value
        return None


@dataclass(frozen=True)
class ServerDeclaration:
    """One server instance a condition declares: its role, command line and environment."""

    instance: int
    cache_disabled: bool
    argv: tuple[str, ...]
    environment: dict[str, str]
    started_at: str | None = None
    stopped_at: str | None = None


@dataclass(frozen=True)
class Condition:
    """One condition of the experiment: its settings and the servers it ran on."""

    id: str
    label: str  # derived from the settings: what the servers ran with
    declared_label: str | None  # what the bundle calls it (checked against `label`)
    settings: dict[str, str]
    servers: tuple[ServerDeclaration, ...]
    server_args: tuple[str, ...] = ()

    @property
    def disabled_instances(self) -> frozenset[int]:
        return frozenset(s.instance for s in self.servers if s.cache_disabled)

    def server(self, instance: int) -> ServerDeclaration | None:
        """The first server declared with this instance number (the checks report a second
        one), found in a table: every record of the condition asks (a scan of 40,000
        servers for each of 3,000 records took seconds)."""
        try:
            return self._servers_by_instance.get(instance)
        except TypeError:  # not hashable: no schema-valid record names one so
            return next((s for s in self.servers if s.instance == instance), None)

    @cached_property
    def _servers_by_instance(self) -> dict[int, ServerDeclaration]:
        table: dict[int, ServerDeclaration] = {}
        for server in self.servers:
            table.setdefault(server.instance, server)
        return table


def plain_value(value: str) -> bool:
    """Whether a condition's setting or server argument is what it shows: printable ASCII
    with nothing around it (`1`, `on`, `info,mlxcel=debug`, `--cache-reuse`). Verify refuses
    a condition with any other (checks/servers.py), and capture will not run one
    (protocol.parse_condition)."""
    return value.isascii() and value.isprintable() and value == value.strip()


def settings_label(settings: dict[str, str], server_args: tuple[str, ...] = ()) -> str:
    """A condition's name for people, derived from what it sets (empty when it sets nothing):
    its toggles, then its server arguments."""
    toggles = ",".join(f"{k}={v}" for k, v in settings.items())
    return " ".join(filter(None, (toggles, shlex.join(server_args))))


@dataclass(frozen=True)
class Experiment:
    """The parts of experiment.json that the checks and the classifier use."""

    document: dict[str, Any]
    conditions: tuple[Condition, ...]
    schema_minor: int
    profile: str
    profile_version: str | None  # None: a bundle of schema 1.0, which carries no version
    profile_rules: dict[str, Any] | None  # the bundle's copy of the rules, never applied
    attached: bool

    @property
    def protocol(self) -> dict[str, Any]:
        value: dict[str, Any] = self.document["protocol"]
        return value

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Experiment:
        conditions = tuple(
            Condition(
                id=c["id"],
                label=settings_label(c["settings"], tuple(c.get("server_args", ()))),
                declared_label=c.get("label"),
                settings=c["settings"],
                servers=tuple(
                    ServerDeclaration(
                        instance=s["instance"],
                        cache_disabled=s["cache_disabled"],
                        argv=tuple(s["argv"]),
                        environment=dict(s.get("environment") or {}),
                        started_at=s.get("started_at"),
                        stopped_at=s.get("stopped_at"),
                    )
                    for s in c["servers"]
                ),
                server_args=tuple(c.get("server_args", ())),
            )
            for c in data["conditions"]
        )
        _, _, minor = str(data["schema_version"]).partition(".")
        server = data["server"]
        return cls(
            document=data,
            conditions=conditions,
            schema_minor=int(minor) if minor.isdigit() else 0,
            profile=server["profile"],
            profile_version=server.get("profile_version"),
            profile_rules=data.get("profile_rules"),
            attached=bool(server["attached"]),
        )
