"""Apply each field's treatment: replace private strings in free text, refuse them in evidence.

The private values come from two places: what the raw capture knows (its paths, user and
host names, secret values; `collect_private_values`) and the generic detectors of
`verifier.leaks`, which verify's leak scan runs too. Every document is scanned as one text
(`Detector.scan_document`); each hit is then handled by the treatment of the field it is
in (`assemble.treatment_of`):

- free text (and a path field): the hit is replaced by its placeholder;
- evidence: a hit in an identifying form stops the export, naming the file and JSON
  pointer; nothing is altered. A value declared not private (`--allow VALUE`) is kept,
  and the ledger says so, without the value: the value itself and the path below it,
  not what the hit of a home path ran on to (`?owner=al@host`, `:/home/al`), which is
  scanned again and treated as any other hit (`Redactor.allowed_end`, `_scan`).

User and host names are private only where they name an account or a machine (path
components, `~name`, `name@`, `@host`, URL hosts, `USER=name`, `HOSTNAME=host`,
`{"hostname": "host"}`, `Host: host`, `host:8080`); a name with a `-`, `.` or `_` in it
(`lab-host-07`) is distinctive enough to be found as a token of its own too, inside a
longer one (`server-alice-smith.log`) or a URL's path. An ordinary word
equal to a name (`write`, `cache`, `gather`) is never touched. Opaque environment values
are removed from free text only: the same text in evidence identifies nobody.
"""

from __future__ import annotations

import ipaddress
import itertools
import ntpath
import posixpath
import re
import urllib.parse
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from verifier import leaks
from verifier.errors import ExportError
from verifier.export.assemble import (
    SCALARS,
    Treatment,
    cut_once_redacted,
    is_toggle,
    public_kind,
    treatment_of,
)
from verifier.leaks import ALLOWED_PLACEHOLDER, Detector, DocumentHit, Known, KnownKind
from verifier.model import json_pointer
from verifier.raw import RawCapture

GENERIC_NAMES = frozenset(
    {"localhost", "root", "user", "admin", "ubuntu", "runner", "nobody", "guest", "default"}
)
SYSTEM_PREFIXES = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/System",
    "/Library",
)
# Directories everyone has: a path under them may be private, the directory itself is not.
COMMON_DIRS = frozenset({"/tmp", "/var/tmp", "/home", "/Users", "/var/home", "/private/tmp"})  # noqa: S108
MIN_OPAQUE = 8
# A secret's value as short as this is looked for where it has a token's shape (digits,
# mixed case or symbols: `Tr0ub4d`); shorter, or a word's shape (`letmein`), it is found by
# chance in ordinary text, and is not (docs/EVIDENCE.md).
MIN_SECRET = 6
# A command-line option's name alone (`--no-prompt-cache`, `-v`), without a value.
_OPTION_NAME = re.compile(r"--?[A-Za-z][A-Za-z0-9_-]*", re.ASCII)
# Ledger category of each detector category.
LEDGER_CATEGORY = {
    leaks.HOME_PATH: "private-path",
    leaks.TEMP_PATH: "private-path",
    leaks.IP_ADDRESS: "ip-address",
    leaks.MAC_ADDRESS: "mac-address",
    leaks.TOKEN: "token",
    leaks.EMAIL: "email",
    leaks.PRIVATE_KEY: "token",
    leaks.USER_NAME: "user-name",
    leaks.HOST_NAME: "host-name",
}
HOW_TO_ALLOW = (
    "Evidence is published byte for byte, so export neither publishes nor alters it. If the "
    "value is not private, export again with --allow VALUE, VALUE being exactly the "
    "characters named above (type them yourself; they are not shown here): it allows that "
    "value and any path below it, not a longer path that holds it. Otherwise capture again "
    "without it."
)


@dataclass(frozen=True)
class LedgerEntry:
    """One line of redaction-ledger.json: never the removed value."""

    category: str
    file: str
    pointer: str
    count: int
    placeholder: str

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "file": self.file,
            "pointer": self.pointer,
            "count": self.count,
            "placeholder": self.placeholder,
        }


@dataclass(frozen=True)
class Refusal:
    """A private value in an evidence field: where, and of what kind (never the value)."""

    file: str
    where: str
    category: str
    start: int
    end: int
    source: str | None

    def describe(self) -> str:
        source = f" (from the raw {self.source})" if self.source else ""
        return (
            f"{self.file}{self.where}{source}: {self.category} at characters "
            f"{self.start}-{self.end}"
        )


def ledger_category(category: str) -> str:
    return LEDGER_CATEGORY.get(category, category)


def looks_like_path(text: str) -> bool:
    return text.startswith(("/", "~", "\\")) or bool(re.match(r"[A-Za-z]:[\\/]", text))


# A component of a path below an allowed one (`allowed_end`): not `?`, `:`, `@`, `=`, `%`...
_PATH_COMPONENT = re.compile(r"[\w.+-]+")
# The path a hit holds after an allowed value: all of it up to a query, a fragment or a space
# (a component with any other character, `x~`, `a=b`, is a component all the same).
_PATH_AFTER = re.compile(r"[^?#\s]*")


def _leaves(text: str, at: int, end: int) -> bool:
    """Whether the path in `text` from `at` (right after an allowed value, at most to `end`)
    climbs above the value's directory: its `..` (`%2e%2e` too) more than the components
    before them, empty ones and `.` not counted (`//..`, `/./..`, `/x~/../..`)."""
    path = _PATH_AFTER.match(text, at, end)
    tail = path.group() if path is not None else ""
    if "." not in tail and "%" not in tail:
        return False
    depth = 0
    for part in re.split(r"[/\\]", urllib.parse.unquote(tail)):
        if part in ("", "."):
            continue
        depth += -1 if part == ".." else 1
        if depth < 0:
            return True
    return False


# How many times a document is scanned again for what allowed hits swallowed (`_scan`): a
# pass for each allowed value glued to the end of another's hit (`/home/u/a:/home/u/b`).
_MOST_ALLOWED_PASSES = 8


@dataclass(frozen=True)
class _Scan:
    """The hits of one scan of a document: to redact or refuse, and the allowed parts of
    those of allowed values (`Redactor._scan`)."""

    hits: list[DocumentHit]
    allowed: list[DocumentHit]


def _merged(
    before: list[DocumentHit],
    rescanned: list[DocumentHit],
    again: set[tuple[tuple[str | int, ...], bool]],
) -> list[DocumentHit]:
    """The hits of a scan, those of the strings in `again` taken from a scan of them again:
    in the order of the strings, as a scan gives them (the scan again gives each string's
    hits together, in its order)."""
    fresh: dict[tuple[tuple[str | int, ...], bool], list[DocumentHit]] = {}
    for hit in rescanned:
        fresh.setdefault((hit.path, hit.is_key), []).append(hit)
    merged: list[DocumentHit] = []
    for hit in before:
        where = (hit.path, hit.is_key)
        if where not in again:
            merged.append(hit)
        elif where in fresh:
            merged += fresh.pop(where)
    for hits in fresh.values():  # a string whose hits before were all allowed
        merged += hits
    return merged


def replace_hits(text: str, hits: Sequence[tuple[int, int, str]]) -> str:
    for start, end, placeholder in sorted(hits, reverse=True):
        text = text[:start] + placeholder + text[end:]
    return text


class Redactor:
    """The treatments applied to the public documents, with one detector set."""

    def __init__(self, known: Sequence[Known], allowed: Sequence[str] = ()) -> None:
        self.known = tuple(known)
        self.detector = Detector(known)
        self.allowed = tuple(a for a in allowed if a)
        self._known_folded = tuple({k.value.casefold() for k in self.known if k.value})

    def allowed_end(self, text: str, start: int, end: int) -> int | None:
        """Where the allowed part of the hit `text[start:end]` ends; None where the hit is
        not an allowed value's.

        A hit is an allowed value's where it is the value, or starts with it and then a
        path separator, and the path after it stays below it (`_leaves`: not
        `/tmp/cache/../../home/al`, `/tmp/cache//../al`, `/tmp/cache/%2e%2e/al`, which the
        hit then takes whole, as without the value). Only the value and the path below it
        are allowed (`_walk`): its
        components up to the first character that cannot be in one (`?`, `:`, `@`, `=`...),
        a `..` or a component that holds a private
        value (`/home/user/al-notes`, `/home/user/<token>/x`), and another allowed value
        after a list's separator (`PATH=/home/user/a:/home/user/b`). A hit runs on past
        them (a home path's run takes `?owner=al@host&t=hf_...`, `:/home/al/...`): what
        follows is not allowed, and is scanned again (`_scan`).
        """
        found = text[start:end]
        best: int | None = None
        for value in self.allowed:
            if found == value:
                return end
            if not found.startswith(value) or found[len(value)] not in "/\\":
                continue
            if _leaves(text, start + len(value), end):
                continue
            at = self._walk(text, start + len(value), end)
            best = at if best is None else max(best, at)
        return best

    def _walk(self, text: str, at: int, end: int) -> int:
        """From the end of an allowed value in `text`, where its allowed path ends (at most
        `end`): see `allowed_end`. Linear in the length walked."""
        while True:
            while at < end and text[at] in "/\\":
                component = _PATH_COMPONENT.match(text, at + 1, end)
                if (
                    component is None
                    or component.group() == ".."
                    or self._holds_private(component.group())
                ):
                    break
                at = component.end()
            if at < end and text[at] in ":;,":
                after = at + 1
                following = next(
                    (
                        value
                        for value in self.allowed
                        if text.startswith(value, after)
                        and (after + len(value) >= end or text[after + len(value)] in "/\\:;,")
                    ),
                    None,
                )
                if following is not None:
                    at = min(after + len(following), end)
                    continue
            return at

    def _holds_private(self, component: str) -> bool:
        """Whether one path component holds a known value (a name of 3 characters or more
        anywhere in it, a shorter one as the whole component, in any case) or anything the
        generic detectors find (a token, an address)."""
        folded = component.casefold()
        for value in self._known_folded:
            if (value in folded) if len(value) >= 3 else value == folded:
                return True
        return bool(leaks.GENERIC.scan_text(component, 1))

    def _scan(self, document: Any) -> _Scan:
        """The hits of a document, and the allowed parts of those of allowed values.

        A hit that starts with an allowed value is allowed up to `allowed_end`; its allowed
        part is hidden and the document scanned again, so that what the hit swallowed past
        it (a token, a host, an address, another home) is found as a hit of its own, and
        treated as any other. Again until no new hit is an allowed value's: each pass hides
        more, and costs a scan of the document only where an allowed value was hit. Past
        `_MOST_ALLOWED_PASSES` (allowed values glued one after another, `/home/u/a:/home/
        u/b:...`), what is left is not allowed: redacted, or refused in evidence, as if no
        --allow named it (never published unread, and never a scan per value of the chain).
        """
        found = self.detector.scan_document(document)
        allowed: list[DocumentHit] = []
        hidden: dict[tuple[tuple[str | int, ...], bool], list[tuple[int, int]]] = {}
        for _ in range(_MOST_ALLOWED_PASSES):
            kept: list[DocumentHit] = []
            swallowed = False  # whether an allowed hit ran on past its allowed part
            for hit in found:
                end = self.allowed_end(_string_at(document, hit), hit.start, hit.end)
                if end is None:
                    kept.append(hit)
                    continue
                allowed.append(hit if end == hit.end else replace(hit, end=end))
                hidden.setdefault((hit.path, hit.is_key), []).append((hit.start, end))
                swallowed = swallowed or end < hit.end
            if not swallowed:  # (the usual case: no hit ran on, none to scan again)
                return _Scan(kept, allowed)
            # Only the strings with an allowed hit are scanned again: the others' hits are
            # those of the scan before (a hidden span changes what is read there alone).
            again = set(hidden)
            rescanned = self.detector.scan_document_hiding(document, hidden, again)
            found = _merged(found, rescanned, again)
        return _Scan(found, allowed)

    def redact_documents(
        self, documents: Mapping[str, Any], sources: Mapping[str, str] | None = None
    ) -> tuple[dict[str, Any], list[LedgerEntry]]:
        """Redacted documents and the ledger; ExportError naming every refused evidence field."""
        result, ledger, _ = self._redact_all(documents, sources)
        return result, ledger

    def redact_and_check(
        self, documents: Mapping[str, Any], sources: Mapping[str, str] | None = None
    ) -> tuple[dict[str, Any], list[LedgerEntry], list[LedgerEntry]]:
        """`redact_documents` then `final_check`, without scanning a document again: the
        documents, the ledger of replacements, the ledger of allowed values.

        A scan is a function of the document alone; redaction ends each document with a scan
        of it as it is published (after its last edit), so the final check judges those hits
        instead of scanning the same text again.
        """
        result, ledger, scanned = self._redact_all(documents, sources)
        return result, ledger, self._final_check(result, scanned)

    def _redact_all(
        self, documents: Mapping[str, Any], sources: Mapping[str, str] | None
    ) -> tuple[dict[str, Any], list[LedgerEntry], dict[str, _Scan]]:
        counts: Counter[tuple[str, str, str, str]] = Counter()
        refusals: dict[tuple[str, str, str], Refusal] = {}
        result: dict[str, Any] = {}
        scanned: dict[str, _Scan] = {}
        for file, document in documents.items():
            kind = public_kind(file)
            _check_treatments(file, kind, document)
            source = (sources or {}).get(file)
            # Keys first, every depth in one pass: a pointer never holds a value. A pass
            # renames them all (`_redact`), so the second scan finds none left to rename;
            # the bound is a safety net (renaming a level a pass, 55 nested keys beside a
            # costly string took 56 scans of it: 81 s).
            for _ in range(80):
                found = self._scan(document)
                if not self._redact(
                    file, kind, document, found.hits, source, counts, refusals, keys=True
                ):
                    break
            else:
                raise ExportError(f"{file}: object keys keep changing under redaction (a bug)")
            # No key changed since `found` was scanned: its value hits are this document's.
            # A replacement can bring to light a hit that one it overlapped hid (a user name
            # in a URL's credentials, the host after them): the values are scanned and
            # redacted again until a scan finds nothing more to change. That last scan is
            # the document as published: the final check judges its hits.
            for _ in range(80):
                changed = self._redact(
                    file, kind, document, found.hits, source, counts, refusals, keys=False
                )
                if not cut_once_redacted(kind, document) and not changed:
                    break
                found = self._scan(document)
            else:
                raise ExportError(
                    f"{file}: redaction did not settle: after 80 passes a scan still finds "
                    "private values to replace (a file with tens of thousands of them, or a "
                    "private value that its own replacement brings back); nothing was "
                    "published. Please report it as a bug in evidence, without the raw "
                    "capture's private values"
                )
            scanned[file] = found
            result[file] = document
        if refusals:
            listed = sorted(refusals.values(), key=lambda r: (r.file, r.where))
            lines = "\n".join(f"  {r.describe()}" for r in listed[:20])
            more = f"\n  ... and {len(listed) - 20} more" if len(listed) > 20 else ""
            raise ExportError(
                f"private data in evidence; nothing was published:\n{lines}{more}\n{HOW_TO_ALLOW}"
            )
        ledger = [
            LedgerEntry(category, file, pointer, count, placeholder)
            for (file, pointer, category, placeholder), count in sorted(counts.items())
        ]
        return result, ledger, scanned

    def _redact(
        self,
        file: str,
        kind: str,
        document: Any,
        scanned: list[DocumentHit],
        source: str | None,
        counts: Counter[tuple[str, str, str, str]],
        refusals: dict[tuple[str, str, str], Refusal],
        *,
        keys: bool,
    ) -> bool:
        """One pass over the values (or the keys, of every depth) with the hits of a scan of
        `document` as it is now, those of allowed values left out (the final check records
        them in the ledger); whether it changed any."""
        found = [h for h in scanned if h.is_key == keys]
        edits: dict[tuple[str | int, ...], list[tuple[int, int, str, DocumentHit]]] = {}
        for hit in found:
            text = _string_at(document, hit)
            treatment = treatment_of(kind, hit.path)
            if treatment is Treatment.PATH and not looks_like_path(text):
                treatment = Treatment.EVIDENCE
            if treatment is Treatment.EVIDENCE:
                if hit.hit.identifying:
                    origin = _server_file(document, hit.path) if kind == "experiment" else None
                    refusal = Refusal(
                        file, hit.where, hit.hit.category, hit.start, hit.end, origin or source
                    )
                    refusals.setdefault((file, hit.where, hit.hit.category), refusal)
                continue
            if treatment not in (Treatment.FREE_TEXT, Treatment.PATH):
                raise ExportError(f"{file}{hit.where}: no treatment to apply (a bug in evidence)")
            edits.setdefault(hit.path, []).append((hit.start, hit.end, hit.hit.placeholder, hit))
        # Keys deepest first: each path names the keys above it as they were scanned, and
        # those are renamed after it. Its ledger pointer names them as they are published.
        renamed: dict[tuple[str | int, ...], str] = {}
        if keys:
            edits = dict(sorted(edits.items(), key=lambda item: -len(item[0])))
            for path, changes in edits.items():
                old = _string_at(document, changes[0][3])
                renamed[path] = replace_hits(old, [(s, e, ph) for s, e, ph, _ in changes])
        for path, changes in edits.items():
            if keys:
                new = renamed[path]
                _rename_key(document, path, new, file)
                above = [renamed.get(path[: i + 1], part) for i, part in enumerate(path[:-1])]
                pointer = json_pointer(*above, new)
            else:
                old = _string_at(document, changes[0][3])
                new = replace_hits(old, [(s, e, ph) for s, e, ph, _ in changes])
                _set_string(document, path, new)
                pointer = json_pointer(*path)
            for _, _, placeholder, hit in changes:
                category = ledger_category(hit.hit.category)
                counts[(file, pointer, category, placeholder)] += 1
        return bool(edits)

    def final_check(self, documents: Mapping[str, Any]) -> list[LedgerEntry]:
        """Nothing private is left: every remaining hit is an allowed value (in the ledger)."""
        return self._final_check(documents, {})

    def _final_check(
        self, documents: Mapping[str, Any], scanned: Mapping[str, _Scan]
    ) -> list[LedgerEntry]:
        """`final_check`, with the hits of the documents in `scanned` already known."""
        counts: Counter[tuple[str, str, str, str]] = Counter()
        for file, document in sorted(documents.items()):
            found = scanned.get(file)
            if found is None:
                found = self._scan(document)
            for hit in found.allowed:
                category = ledger_category(hit.hit.category)
                counts[(file, hit.pointer, category, ALLOWED_PLACEHOLDER)] += 1
            for hit in found.hits:
                category = ledger_category(hit.hit.category)
                if not hit.hit.identifying and treatment_of(public_kind(file), hit.path) in (
                    Treatment.EVIDENCE,
                    Treatment.PATH,
                ):
                    continue  # an opaque value in evidence identifies nobody
                raise ExportError(
                    f"{file}{hit.where}: {category} still present after redaction; nothing "
                    "was published (this is a bug in evidence: please report it without the "
                    "raw data)"
                )
        return [
            LedgerEntry(category, file, pointer, count, placeholder)
            for (file, pointer, category, placeholder), count in sorted(counts.items())
        ]


def _server_file(document: Any, path: tuple[str | int, ...]) -> str | None:
    """The raw file a server's part of experiment.json comes from (`conditions/ID/servers/
    N.json`), for a location under `/conditions/i/servers/j`; None elsewhere."""
    if len(path) < 4 or path[0] != "conditions" or path[2] != "servers":
        return None
    try:
        condition = document["conditions"][path[1]]
        server = condition["servers"][path[3]]
        return f"conditions/{condition['id']}/servers/{server['instance']}.json"
    except (KeyError, IndexError, TypeError):
        return None


def _container(document: Any, path: tuple[str | int, ...]) -> Any:
    node = document
    for part in path:
        node = node[part]
    return node


def _string_at(document: Any, hit: DocumentHit) -> str:
    if hit.is_key:
        return str(hit.path[-1])
    value = _container(document, hit.path)
    assert isinstance(value, str)
    return value


def _set_string(document: Any, path: tuple[str | int, ...], value: str) -> None:
    if not path:
        raise ExportError("a public document is a bare string (a bug in evidence)")
    _container(document, path[:-1])[path[-1]] = value


def _rename_key(document: Any, path: tuple[str | int, ...], new: str, file: str) -> None:
    parent = _container(document, path[:-1])
    assert isinstance(parent, dict)
    old = path[-1]
    if new in parent:
        raise ExportError(
            f"{file}{json_pointer(*path[:-1])}: two keys become {new!r} once redacted; "
            "rename them in the raw capture"
        )
    items = [(new if key == old else key, value) for key, value in parent.items()]
    parent.clear()
    parent.update(items)


def _check_treatments(file: str, kind: str, document: Any) -> None:
    """Every field of a public document has a declared treatment: none passes silently."""
    if not _all_treated(kind, document):
        _check_leaves(file, kind, (), document)  # the plain path decides, and names the field


def _all_treated(kind: str, document: Any) -> bool:
    """Whether `_check_leaves` passes, in one loop with the leaves looked up in place.

    True only where every node is of JSON's own types (anything else: False, and the plain
    path decides) and every leaf, a scalar or an empty container, has a treatment that is
    not DROPPED: exactly the leaves `_check_leaves` checks, at the same paths. A leaf's
    path that passed is remembered in a tree of the paths seen (`_PASSED`), so the next
    document's leaf at that path is not looked up again: `treatment_of` is a function of
    the path alone, and every record of a bundle has the same few hundred.
    """
    dropped = Treatment.DROPPED
    pending: list[tuple[tuple[str | int, ...], Any, dict[Any, Any] | None]] = [
        ((), document, _PASSED_PATHS.setdefault(kind, {}))
    ]
    while pending:
        path, node, seen = pending.pop()
        node_type = type(node)
        items: Any
        if node_type is dict and node:
            items = node.items()
        elif node_type is list and node:
            items = enumerate(node)
        elif node_type in SCALARS or node_type is dict or node_type is list:
            treatment = treatment_of(kind, path)
            if treatment is None or treatment is dropped:
                return False
            continue
        else:
            return False
        for key, value in items:
            below = seen.get(key) if seen is not None else None
            if below is None and seen is not None and _PASSED_SIZE[0] < _PASSED_MOST:
                below = seen[key] = {}
                _PASSED_SIZE[0] += 1
            value_type = type(value)
            if value_type in SCALARS or ((value_type is dict or value_type is list) and not value):
                if below is not None and _PASSED in below:
                    continue
                treatment = treatment_of(kind, (*path, key))
                if treatment is None or treatment is dropped:
                    return False
                if below is not None:
                    below[_PASSED] = True
            else:
                pending.append(((*path, key), value, below))
    return True


# Per public kind, the paths `_all_treated` has seen as a tree of dicts by key (a list's
# items by index), a leaf's that passed marked with `_PASSED` (a key no document holds).
# At most _PASSED_MOST nodes in all, as treatment_of's cache holds at most 2^16 paths:
# past that, paths are looked up as they come.
_PASSED_PATHS: dict[str, dict[Any, Any]] = {}
_PASSED: Any = object()
_PASSED_SIZE = [0]
_PASSED_MOST = 1 << 16


def _check_leaves(file: str, kind: str, path: tuple[str | int, ...], node: Any) -> None:
    # Depth first, last child first: the field named when several lack a treatment is the
    # one a stack of pending children would reach first.
    if isinstance(node, dict) and node:
        for key in reversed(node):
            _check_leaves(file, kind, (*path, key), node[key])
        return
    if isinstance(node, list) and node:
        for index in range(len(node) - 1, -1, -1):
            _check_leaves(file, kind, (*path, index), node[index])
        return
    treatment = treatment_of(kind, path)
    if treatment is None or treatment is Treatment.DROPPED:
        raise ExportError(
            f"{file}{json_pointer(*path)}: this field has no declared treatment in "
            "verifier/export/assemble.py FIELDS; nothing was published (a bug in evidence)"
        )


# ---------------------------------------------------------------------------------------------
# What the raw capture knows to be private


def _is_path(value: str) -> bool:
    return value.startswith(("/", "~/"))


def _is_system(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in SYSTEM_PREFIXES)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.<>]+", "-", text.lower()).strip("-") or "value"


def _url_address(url: str) -> str | None:
    """The IPv4 address a URL names as its host, if it is neither loopback nor unspecified:
    private wherever the generic detector would take it for an address, though that one
    reads a public address as a version number where no word says it is an address. (Every
    IPv6 address but loopback it takes for one.)"""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return _ipv4(host) if host else None


def _ipv4(text: str) -> str | None:
    """The IPv4 address `text` is, also written IPv4-mapped (`::ffff:34.12.5.6`, as sshd and
    a dual-stack socket write a client's), if it is neither loopback nor unspecified."""
    try:
        address = ipaddress.IPv4Address(text)
    except ValueError:
        try:
            address = ipaddress.IPv6Address(text).ipv4_mapped  # type: ignore[assignment]
        except ValueError:
            return None
    if address is None or address.is_loopback or address.is_unspecified:
        return None
    return str(address)


# The variables sshd sets to the addresses of a session (`client port server port` and
# `client port port`): the client's is where the user sits, the server's this machine's.
SSH_ADDRESS_VARIABLES = ("SSH_CONNECTION", "SSH_CLIENT")


def _ssh_addresses(env: Mapping[str, str]) -> list[str]:
    """The IPv4 addresses of an SSH session in an environment, neither loopback nor
    unspecified: private wherever the generic detector would take them for an address,
    which reads a public one as a version number where no word says it is an address
    (`34.99.1.2 - - [02/Nov/2026...]`, a web server's log line)."""
    return [
        address
        for name in SSH_ADDRESS_VARIABLES
        for part in env.get(name, "").split()
        if (address := _ipv4(part)) is not None
    ]


# What separates the URLs of one environment value (`a://x,b://y`, `a://x b://y`).
_URL_SPLIT = re.compile(r"[\s,;]+")


def _url_credentials(url: str) -> tuple[str | None, list[str]]:
    """The user a URL names (`http://svc:pw@host/`) and its secrets: the password, and the
    value of each query parameter of a secret's name (`?api_key=...`)."""
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return None, []
    # a password of symbols is written percent-encoded in a URL (`p%40ss`), and plainly
    # where a program that read it prints it: both are its spellings
    secrets = list(dict.fromkeys([password, unquote(password)])) if password else []
    secrets += [v for n, v in parse_qsl(parts.query) if v and leaks.is_secret_name(n)]
    return user, secrets


# What a machine's name can be (`HOSTNAME=`): letters, digits, dots and dashes, neither
# first nor last a dot or a dash (an address is one too, and is left to the detectors).
_HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")


def _env_host(value: str | None) -> str | None:
    """The machine an environment variable names (`HOSTNAME=gpu-node-17`): not loopback, an
    address (the detectors handle those) or anything that is no host name."""
    value = (value or "").strip()
    if not _HOST_NAME.fullmatch(value) or re.fullmatch(r"[0-9.]+", value):
        return None
    return None if value.lower() in ("localhost", "localhost.localdomain") else value


# A user's home: its last part names the user (`/home/carol`, `/Users/carol`, `C:\Users\x`).
_HOME_USER = re.compile(
    r"(?:/(?:var|usr))?/home/([^/]+)|/Users/([^/]+)|[A-Za-z]:[\\/]Users[\\/]([^\\/]+)"
)


def _home_user(home: str | None) -> str | None:
    """The user whose home `home` is, by its last part; None where it is no user's home."""
    if not home:
        return None
    match = _HOME_USER.fullmatch(leaks.normal_path(home).rstrip("\\"))
    name = next((g for g in match.groups() if g), None) if match else None
    return None if name in (None, "Shared", "Public", "Default") else name


def _bound(argv: Sequence[str]) -> Iterator[str]:
    """The values of a command line's `--host` (`--host NAME`, `--host=NAME`): what
    llama-server, vLLM, SGLang and mlxcel bind to."""
    for index, argument in enumerate(argv):
        if argument == "--host" and index + 1 < len(argv):
            yield argv[index + 1].strip("[]")
        elif argument.startswith("--host="):
            yield argument.removeprefix("--host=").strip("[]")


def _url_host(url: str | None) -> str | None:
    if not url:
        return None
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    if not host or host == "localhost" or re.fullmatch(r"[0-9.]+|.*:.*", host):
        return None  # an IP address: the detectors handle those that are not loopback
    return host


class _Collector:
    """Private values in collection order; the first placeholder given to a value wins."""

    def __init__(
        self, public_values: set[str], allowed: Sequence[str], named: Sequence[str | None] = ()
    ) -> None:
        self.values: dict[str, Known] = {}
        self._public = public_values
        # What the bundle names besides (the model's repository, revision and files): no
        # key of a list is a part of one (`listed`).
        self._named = tuple(filter(None, named))
        self._allowed = set(allowed)
        self._numbered = 0
        self._detector: tuple[int, Detector] | None = None
        self._safe: dict[str, str] = {}
        # Values path() was given without a placeholder that it is sure to pass over if
        # given them again (a sweep's servers repeat the same paths thousands of times):
        # each test that passed one over stays true as values are added (none is ever
        # removed), and one it added is then among them. Not one it numbered but did not
        # add (an --allow value): a second call numbers again, as it always did.
        self._settled: set[str] = set()

    def _add(self, value: str, category: str, placeholder: str, kind: KnownKind) -> None:
        if value and value not in self.values and value not in self._allowed:
            self.values[value] = Known(value, category, placeholder, kind)

    def safe(self, text: str) -> str:
        """Text to embed in a placeholder, with the values collected so far removed."""
        # Values are only ever added: the detector of the first n values is built once, and
        # asked once about each text (the same variable names recur on every server).
        if self._detector is None or self._detector[0] != len(self.values):
            detector = Detector(list(self.values.values()), encoded=False)
            self._detector = (len(self.values), detector)
            self._safe.clear()
        if text not in self._safe:
            hits = self._detector[1].scan_text(text)
            self._safe[text] = replace_hits(text, [(h.start, h.end, h.placeholder) for h in hits])
        return self._safe[text]

    def numbered(self) -> str:
        self._numbered += 1
        return f"private-{self._numbered}"

    def name(self, value: str | None, category: str, placeholder: str, kind: KnownKind) -> None:
        value = (value or "").strip()
        if value and value.lower() not in GENERIC_NAMES:
            self._add(value, category, placeholder, kind)

    def secret(self, value: str, category: str, placeholder: str) -> None:
        """A value that identifies someone wherever it appears (a token); and its body
        after a vendor's prefix (`hf_`, `sk-proj-`), which is as secret without it. Also
        without the quotes or the line's end an environment file kept around it
        (`KEY="..."`, a CRLF `.env`), and, written in hex, in the other case.

        Each key of a list is one too (`--api-key K1,K2`: llama-server takes several keys
        so; `API_KEYS="K1 K2"`, `["K1", "K2"]`, `K1|K2`): a client shows one alone. Only a
        part that reads as a key (`listed`), so that a word or a date of a passphrase is no
        secret of its own (a reply that writes it is not refused), and only in a list of
        _MOST_LISTED_KEYS or fewer (each known value costs every text of the capture a
        little: the whole value is known anyway)."""
        for form in _forms(value):
            if len(form) >= MIN_OPAQUE or (len(form) >= MIN_SECRET and leaks.is_tokenish(form)):
                self._add(form, category, placeholder, KnownKind.SECRET)
                prefix = _TOKEN_PREFIX.match(form)
                if prefix is not None and len(form) - prefix.end() >= _LEAST_TOKEN_BODY:
                    self._add(form[prefix.end() :], category, placeholder, KnownKind.SECRET)
        parts = _LIST_SEPARATOR.split(value)
        if len(parts) > 1:
            self.listed(parts, category, placeholder)

    def listed(self, parts: Sequence[str], category: str, placeholder: str) -> None:
        """The keys of a list of secrets (`secret`'s parts of a value; vLLM's `--api-key K1
        K2`, the arguments after the first), each a secret of its own where it reads as a
        key (`_listed_key`) and is no part of a value the bundle publishes (a model's
        `Qwen2.5-Coder-32B-Instruct` in `LLAMA_API_KEY=Qwen2.5-Coder-32B-Instruct:KEY`, or
        its repository's name)."""
        parts = [part for part in parts if part]
        if len(parts) > _MOST_LISTED_KEYS:
            return
        for part in parts:
            keys = [part]
            head, named, _ = part.rstrip("=").rpartition("=")
            if named:  # `alice=K1,bob=K2`: the key after its name (base64 ends in `=`)
                keys.append(part[len(head) + 1 :])
            for key in keys:
                if _listed_key(key) and not any(
                    key in shown for shown in itertools.chain(self._public, self._named)
                ):
                    self.secret(key, category, placeholder)

    def string(self, value: str, placeholder: str) -> None:
        """A string the user named private (`--private-path NAME`), whatever its length:
        replaced in any case, inside longer words too (`leaks.KnownKind.STRING`)."""
        self._add(value, "private-path", placeholder, KnownKind.STRING)

    def address(self, value: str) -> None:
        """An IPv4 address the capture sent requests to."""
        placeholder = leaks.PLACEHOLDERS[leaks.IP_ADDRESS]
        self._add(value, leaks.IP_ADDRESS, placeholder, KnownKind.ADDRESS)

    def opaque(self, value: str, category: str, placeholder: str) -> None:
        """An environment value: removed from free text; never one that is public evidence.
        Also without the quotes or line end around it, and a hex one in the other case."""
        if value in self._public:
            return
        for form in _forms(value):
            short = len(form) < MIN_OPAQUE or form.strip().isdigit()
            if not short and form not in self._public:
                self._add(form, category, placeholder, KnownKind.OPAQUE)

    def path(self, value: str | None, placeholder: str | None = None) -> None:
        """A private path; without a placeholder, only an absolute one no collected path covers."""
        if not value:
            return
        if placeholder is None and value in self._settled:
            return
        given = value
        value = leaks.normal_path(value)  # as the detectors read it: `//home` is `/home`
        if len(value) < 2 or value in self.values or value in COMMON_DIRS:
            self._settled.add(given)
            return
        if placeholder is None:
            if not _is_path(value) or _is_system(value) or self._covered(value):
                self._settled.add(given)
                return
            placeholder = "/path/to/" + self.numbered()
        self._add(value, "private-path", placeholder, KnownKind.PATH)
        if value in self.values:
            self._settled.add(given)
        # A Windows path, also written the other way (`C:/Users/Bob Smith`, `C:\Users\...`).
        if "\\" in given:
            self.path(given.replace("\\", "/"), placeholder)
        elif _DRIVE_PATH.match(given):
            self.path(given.replace("/", "\\"), placeholder)

    def _covered(self, value: str) -> bool:
        return any(
            p.kind is KnownKind.PATH and (value == p.value or value.startswith(p.value + "/"))
            for p in self.values.values()
        )


_DRIVE_PATH = re.compile(r"[A-Za-z]:[\\/]")  # a Windows path: `C:\Users`, `c:/data`
_HEX = re.compile(r"[0-9A-Fa-f]+")
# The quotes an environment file may keep around a value (`docker --env-file` keeps them).
_QUOTES = ('"', "'")


def _base_name(path: str) -> str:
    """The last part of a path, a Windows one's too (`C:\\tools\\x.exe`: `x.exe`)."""
    return ntpath.basename(path) if _is_windows(path) else posixpath.basename(path)


def _dir_name(path: str) -> str:
    return ntpath.dirname(path) if _is_windows(path) else posixpath.dirname(path)


def _is_windows(path: str) -> bool:
    return "\\" in path or _DRIVE_PATH.match(path) is not None


def _forms(value: str) -> list[str]:
    """A private value as the environment held it, and as other texts write it: without the
    white space (a CRLF file's `\r`) and quotes around it, and, all hex digits, in the other
    letter case (`9f86d0...` and `9F86D0...` are one secret)."""
    forms = [value]
    bare = value.strip()
    if len(bare) >= 2 and bare[0] == bare[-1] and bare[0] in _QUOTES:
        bare = bare[1:-1].strip()
    if bare != value:
        forms.append(bare)
    if _HEX.fullmatch(bare) and bare.lower() != bare.upper():
        forms += [case for case in (bare.lower(), bare.upper()) if case != bare]
    return [form for form in forms if form]


# A token's vendor prefix (`hf_`, `ghp_`, `sk-proj-`, `xoxb-`), and the shortest body after
# one that is looked for alone (shorter, it could be an ordinary word).
_TOKEN_PREFIX = re.compile(r"(?:[A-Za-z]{2,8}[-_]){1,2}(?=[A-Za-z0-9])")
# What separates the keys of a list of secrets (`K1,K2`, `K1; K2`, `"K1" "K2"`, `['K1']`,
# `K1|K2`, `K1:K2`): any character no key is written with (keys hold letters, digits and
# `_.~+/=-`: a vendor's prefix, base64, a JWT's dots). The fewest characters a key of one
# is looked for alone with, and the most parts a value is split into (a longer list is
# not split: the whole value is known all the same).
_LIST_SEPARATOR = re.compile(r"[^A-Za-z0-9_.~+/=-]+")
_LISTED_KEY_CHARS = 12
_MOST_LISTED_KEYS = 64


def _listed_key(part: str) -> bool:
    """Whether a part of a list of secrets reads as a key of its own: random characters
    (`leaks.is_random_key`: digits spread through it, and both cases, or hex; a UUID, hex
    between dashes), or, 16 characters or more, letters and digits of one case, dashes
    between them (`k3j5h2g8f9d7s6a4q1w2`, `abcd-efgh-1234-5678`), with 3 digits or more."""
    if len(part) < _LISTED_KEY_CHARS:
        return False
    if leaks.is_random_key(part) or leaks.is_random_key(part.replace("-", "")):
        return True
    plain = part.replace("-", "")  # (`abcd-efgh-1234-5678`)
    if len(part) < 16 or not plain.isascii() or not plain.isalnum():
        return False
    digits = sum(c.isdigit() for c in plain)
    return digits >= 3 and len(plain) - digits >= 3 and (plain.islower() or plain.isupper())


_LEAST_TOKEN_BODY = 16

# The environment variables that name the person behind a run where the harness ran as
# another user (root, under sudo or su; a notebook's or a batch job's shared account:
# JupyterHub's, Slurm's, PBS's); `USER` and `LOGNAME` name the one it ran as.
_USER_VARIABLES = (
    "SUDO_USER", "LOGNAME", "USER", "USERNAME", "DOAS_USER", "JUPYTERHUB_USER",
    "SLURM_JOB_USER", "PBS_O_LOGNAME",
)  # fmt: skip
# And those that name the machine, or a machine of its cluster (bash's, zsh's and
# Windows' own; Slurm's and PBS's node and submitting host; torch.distributed's master, which
# multi-node launches pass on as a flag; a Kubernetes node as its downward API is written).
# Not a bare NODE_NAME: Jenkins names its agents so (`built-in`, a word of many replies).
_HOST_VARIABLES = (
    "HOSTNAME", "HOST", "COMPUTERNAME", "SLURMD_NODENAME", "SLURM_SUBMIT_HOST", "PBS_O_HOST",
    "MASTER_ADDR", "K8S_NODE_NAME", "KUBERNETES_NODE_NAME",
)  # fmt: skip


def _strings(value: Any) -> Iterator[str]:
    """Every string of a JSON value (keys and values), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _argument_path(arg: str) -> str | None:
    """The path in a command-line argument (`/x`, `--flag=/x`, `-f/x`, `file:///x`), if any."""
    if arg.startswith("-") and not arg.startswith("--") and arg[2:3] == "/":
        value = arg[2:]  # a short option and its value in one (`-l/var/log/x`)
    else:
        value = arg.partition("=")[2] if arg.startswith("-") else arg
    value = value.removeprefix("file://")
    return value if _is_path(value) else None


def secret_arguments(argv: Sequence[str]) -> list[str]:
    """The values of secret flags (`--api-key x`, `--hf_token=x`), found by the flag's name."""
    found = []
    for index, arg in enumerate(argv):
        if not arg.startswith("-"):
            continue
        flag, eq, value = arg.lstrip("-").partition("=")
        if not leaks.is_secret_name(flag, flag=True):
            continue
        if eq:
            found.append(value)
        elif index + 1 < len(argv) and not argv[index + 1].startswith("--"):
            found.append(argv[index + 1])
    return found


def further_arguments(argv: Sequence[str]) -> list[str]:
    """The arguments after an API key flag's first value, up to the next option: vLLM's
    `--api-key K1 K2` takes them all (its keys are a list). Each is a secret only where it
    reads as a key (`_Collector.listed`): elsewhere one may be a positional argument."""
    found: list[str] = []
    for index, arg in enumerate(argv[:-1]):
        if not arg.startswith("-") or "=" in arg or argv[index + 1].startswith("--"):
            continue
        if _API_KEYS_FLAG.fullmatch(arg):
            found += itertools.takewhile(lambda a: not a.startswith("-"), argv[index + 2 :])
    return found


# The flags whose values are a list of keys (vLLM's `--api-key`); another secret flag's
# name is matched loosely (`--long-prefill-token-threshold`) and may be followed by a
# positional argument (a model).
_API_KEYS_FLAG = re.compile(r"--?api[-_]?keys?", re.IGNORECASE)


def collect_private_values(
    raw: RawCapture,
    *,
    private_paths: Sequence[str] = (),
    public_env: Sequence[str] = (),
    allowed: Sequence[str] = (),
    other_urls: Sequence[str] = (),
) -> tuple[Known, ...]:
    """Every private value the raw capture knows, each with its placeholder.

    `public_env` lists the environment names (or globs) kept in the bundle besides the
    experiment's prefixes and each condition's settings; `allowed` values are not private.
    `other_urls`: the request URLs of exchanges of the capture that `raw` does not hold
    (loaded by another process).
    """
    run, host = raw.run, raw.run.host
    servers = [s for ss in raw.servers.values() for s in ss]
    conditions = {cond.id: cond for cond in run.conditions}
    keep = [*run.experiment_env_prefixes, *public_env]
    # Asked once per name and once per (name, value): a sweep's servers repeat the same
    # environment, and each answer is a pure function of what it is asked.
    toggle_names: dict[str, bool] = {}

    def kept(name: str) -> bool:
        if name not in toggle_names:
            toggle_names[name] = is_toggle(name, keep)
        return toggle_names[name]

    toggles = {
        (server.instance, server.condition, name): value
        for server in servers
        for name, value in server.env.items()
        if name in conditions[server.condition].settings or kept(name)
    }
    public_values = set(toggles.values())
    public_values.update(v for cond in run.conditions for v in cond.settings.values())
    # Evidence is published byte for byte: an environment value that is also one of its
    # strings (the served model's alias, a condition's server argument, a field of the
    # request body) is public, and removing it from free text would make the bundle
    # contradict itself (`response.model` against `request_body.model`).
    server = run.document.get("server")
    public_values.update(_strings(run.document.get("request_body")))
    public_values.update(_strings(server.get("alias") if isinstance(server, Mapping) else None))
    public_values.update(a for cond in run.conditions for a in cond.server_args)
    # A command line's option names are published as they are, and an environment value
    # that spells one (a wrapper's SERVER_EXTRA_ARGS=--no-prompt-cache) identifies nobody:
    # removed as an opaque value, it would take the flag out of the published argv (the
    # cache-off server's --no-prompt-cache) and the bundle would not verify. Not the value
    # of a secret flag that happens to look like one (`--api-key -Xyz...`).
    argv = [*(a for s in servers for a in s.argv), *run.argv]
    secrets = secret_arguments(argv)
    flags = {a for a in argv if _OPTION_NAME.fullmatch(a)}
    public_values.update(flags.difference(secrets))
    manifest = raw.manifest
    model_names = [manifest.repo_id, manifest.revision, run.model_path]
    model_names += [entry.path for entry in manifest.files]
    c = _Collector(public_values, allowed, model_names)

    # Names first: the placeholders of paths embed file names, which must not carry them.
    # The person behind the run: the user the harness ran as, and where it ran as another
    # (root, under sudo), the one the environment names (`SUDO_USER`, `LOGNAME`...).
    # The user whose home the run had (`HOME=/home/carol`) is one too.
    c.name(host.user, "user-name", "<user>", KnownKind.USER)
    c.name(_home_user(host.home), "user-name", "<user>", KnownKind.USER)
    urls = [run.server_url, *other_urls]
    urls += [e.request_url for ex in raw.exchanges.values() for e in ex]
    credentials = [_url_credentials(url) for url in dict.fromkeys(filter(None, urls))]
    # An environment value that holds a URL (`DATABASE_URL=postgres://svc:PASSWORD@db/x`):
    # its user and secrets as a request URL's, each found alone too (a log line that retries
    # with the password); a secret only where it has a token's shape (`postgres:postgres@`
    # is a default, which evidence may well say).
    env_urls = (
        part
        for server in servers
        for value in server.env.values()
        if "://" in value
        for part in _URL_SPLIT.split(value)
        if "://" in part
    )
    credentials += [
        (user, [secret for secret in secrets if leaks.is_tokenish(secret)])
        for user, secrets in map(_url_credentials, dict.fromkeys(env_urls))
    ]
    for server in servers:
        for variable in _USER_VARIABLES:
            c.name(server.env.get(variable), "user-name", "<user>", KnownKind.USER)
        c.name(_home_user(server.env.get("HOME")), "user-name", "<user>", KnownKind.USER)
    for user, _ in credentials:
        c.name(user, "user-name", "<user>", KnownKind.USER)
    hostnames = {host.hostname, host.hostname.split(".", 1)[0]}
    hostnames |= {h for h in map(_url_host, urls) if h}
    for server in servers:
        for variable in _HOST_VARIABLES:
            if name := _env_host(server.env.get(variable)):
                hostnames |= {name, name.split(".", 1)[0]}
    # The name or address a server was bound to (`--host gpu-node-3.cluster.acme.internal`):
    # the machine, not its loopback or every interface (`0.0.0.0`).
    bound = [
        value for command in (*(s.argv for s in servers), run.argv) for value in _bound(command)
    ]
    for name in filter(None, map(_env_host, bound)):
        hostnames |= {name, name.split(".", 1)[0]}
    for hostname in sorted(hostnames, key=lambda h: (-len(h), h)):
        c.name(hostname, "host-name", "<host>", KnownKind.HOST)
    addresses = {a for a in map(_url_address, filter(None, urls)) if a}
    addresses.update(a for s in servers for a in _ssh_addresses(s.env))
    addresses.update(a for a in map(_ipv4, bound) if a)
    for address in sorted(addresses):
        c.address(address)
    for secret in secrets:
        c.secret(secret, "token", "<token>")
    for command in (*(s.argv for s in servers), run.argv):  # (each its own: not joined)
        c.listed(further_arguments(command), "token", "<token>")
    for _, url_secrets in credentials:
        for secret in url_secrets:
            c.secret(secret, "token", "<token>")
    environment = dict.fromkeys((n, v) for s in servers for n, v in s.env.items())
    for name, value in environment:  # c.secret is idempotent: each pair once, in order
        if leaks.is_secret_name(name) and not _is_path(value):
            c.secret(value, "token", "<token>")
        else:  # a token whatever the variable's name (`GH_PAT=ghp_...`): found as one
            for hit in leaks.scan_text(value):
                if hit.category == leaks.TOKEN:
                    c.secret(value[hit.start : hit.end], "token", "<token>")
    for private in private_paths:
        if "/" in private:
            c.path(private, "/path/to/" + c.numbered())
        else:  # a named string: removed wherever it is, in any case, whatever its length
            placeholder = f"<{c.numbered()}>"
            c.string(private, placeholder)
            if "\\" in private:  # a Windows path (`C:\Data\m`), also with slashes
                c.string(private.replace("\\", "/"), placeholder)

    # The paths the run names, each with its own placeholder.
    if run.binary_path:
        c.path(run.binary_path, f"/path/to/{c.safe(_base_name(run.binary_path))}")
    only = raw.manifest.files[0].path if len(raw.manifest.files) == 1 else None
    model_dirs = []
    for model in (run.model_path, raw.manifest.root):
        name = _base_name(model.rstrip("/\\"))
        if name == only or name.endswith(".gguf"):  # a single-file model
            c.path(model, f"/path/to/model/{c.safe(name)}")
            model_dirs.append(_dir_name(model.rstrip("/\\")))
        else:
            c.path(model, "/path/to/model")
    c.path(str(raw.root.absolute()), "/path/to/raw")
    c.path(str(raw.root.resolve()), "/path/to/raw")
    c.path(host.home, "/path/to/home")
    c.path(host.tmpdir, "/path/to/tmp")
    workdirs = dict.fromkeys([host.cwd] + [s.cwd for s in servers])
    for index, cwd in enumerate(workdirs):
        c.path(cwd, "/path/to/workdir" + (f"-{index + 1}" if index else ""))
    for server in servers:
        if server.log_path:
            c.path(server.log_path, f"/path/to/logs/{c.safe(_base_name(server.log_path))}")
            c.path(_dir_name(server.log_path), "/path/to/logs")
    for model_dir in model_dirs:
        c.path(model_dir, "/path/to/model")

    # The environment: a toggle's path gets a placeholder named after it; every value
    # that is not a toggle is private.
    for (_, _, name), value in sorted(toggles.items()):
        if _is_path(value):
            c.path(value, f"/path/to/{_slug(c.safe(name))}")
    opaque_asked: set[tuple[str, str]] = set()
    for server in servers:
        for name, value in sorted(server.env.items()):
            for part in value.split(":"):
                c.path(part)
            # A path is private as a path (c.path); one under the system's directories is
            # not, but as a variable's value it is one still (`/etc/acme-zeta/conf.yaml`).
            opaque = not _is_path(value) or (
                _is_system(leaks.normal_path(value)) and value not in SYSTEM_PREFIXES
            )
            if opaque and (name, value) not in opaque_asked:
                opaque_asked.add((name, value))  # c.opaque is idempotent: asked once
                c.opaque(value, "environment-value", f"<env:{c.safe(name)}>")

    # Anonymous paths: wherever else a private path may hide.
    for value in host.extra.values():
        if isinstance(value, str):
            c.path(value)
    for server in servers:
        for lib in server.libraries:
            c.path(posixpath.dirname(lib.path))
    for arg in argv:
        c.path(_argument_path(arg))
    named = [p for p in private_paths if "/" not in p]
    _refuse_in_placeholders(tuple(c.values.values()), named)
    values = _placeholders_cleared(tuple(c.values.values()))
    _refuse_in_placeholders(values, named)
    return values


def _placeholders_cleared(values: tuple[Known, ...]) -> tuple[Known, ...]:
    """The values with every placeholder clear of them all. A placeholder embeds a name
    (`/path/to/mlxcel-server-RUN`, `<env:NAME>`) cleared of the values collected before it
    (`_Collector.safe`); one collected after it (an environment value in the binary's
    name) is cleared here, as the ledger publishes the placeholders."""
    for _ in range(_MOST_CLEARINGS):
        detector = Detector(list(values), encoded=False)
        cleared = {
            k.placeholder: replace_hits(
                k.placeholder, [(h.start, h.end, h.placeholder) for h in hits]
            )
            for k in values
            if (hits := detector.scan_text(k.placeholder))
        }
        if not cleared:
            return values
        values = tuple(
            replace(k, placeholder=cleared.get(k.placeholder, k.placeholder)) for k in values
        )
    raise ExportError(
        "the placeholders export writes in place of private values still hold private values "
        f"after {_MOST_CLEARINGS} rounds of removing them; nothing was published. Please "
        "report it as a bug"
    )


# A placeholder put into another was cleared before (a named string found in one is refused
# before this: `_refuse_in_placeholders`), so one round or two clear them all; a placeholder
# still found after this many would be found in its own replacement for ever.
_MOST_CLEARINGS = 8


def _refuse_in_placeholders(values: Sequence[Known], named: Sequence[str]) -> None:
    """A string named private (`--private-path NAME`) is replaced wherever it is, inside
    words too: one that is part of a placeholder (`ate` in `<private-1>`) would be found
    again in its own replacement, and redaction would never end."""
    placeholders = sorted({k.placeholder for k in values if k.placeholder})
    for private in named:
        inside = [p for p in placeholders if private.lower() in p.lower()]
        if inside:
            raise ExportError(
                f"--private-path {private!r} is part of the placeholder {inside[0]!r} that export "
                "writes in place of private values: it would be found again in its own "
                "replacement. Name a longer string (one that is not part of a placeholder); "
                "nothing was published"
            )
