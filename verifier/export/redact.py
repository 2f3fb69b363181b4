"""Find a raw capture's private values and replace them in the public documents.

Each private value gets a stable placeholder (`/path/to/home`, `<user>`, ...). Values are
matched longest first in one pass, so a placeholder is never rewritten again. What the
leak patterns of `verifier.leaks` find (IP and MAC addresses, tokens, e-mails, other home
or temp paths) is replaced too. Fields that enter an output hash are never altered: a
private value there stops the export. The ledger says what was replaced, where and with
what, never the value.

Matching rules, by kind of value:

- paths: exact case, also as the prefix of a longer path (`/home/alice/x` becomes
  `/path/to/home/x`), never inside a longer name (`/home/al` does not match `/home/alice`);
- user and host names of 3 characters or more: whole tokens (not next to a letter or a
  digit), any case; generic account names (`root`, `localhost`, ...) are not private;
- user and host names of 1 or 2 characters: a word that short is everywhere in text, so
  it is replaced only where it names an account: a path component (`/al/`), `~al`,
  `al@`, `@al`. The final check applies the same rule;
- opaque values (environment values, secret arguments): whole tokens, exact case, from
  8 characters on; shorter environment values (`1`, `info`, `gpu`) identify nobody and
  are only removed from the environment.
"""

from __future__ import annotations

import enum
import fnmatch
import ipaddress
import posixpath
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from verifier.errors import ExportError
from verifier.leaks import scan_text
from verifier.model import json_pointer
from verifier.raw import RawCapture

HASHED_FIELDS = frozenset({"content", "reasoning_content", "reasoning", "tool_calls"})
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
MIN_OPAQUE = 8
# Ledger category and placeholder for each category of verifier.leaks.
LEAK_PLACEHOLDERS = {
    "home-path": ("private-path", "/path/to/home"),
    "temp-path": ("private-path", "/path/to/tmp"),
    "ip-address": ("ip-address", "<ip>"),
    "mac-address": ("mac-address", "<mac>"),
    "token": ("token", "<token>"),
    "email": ("email", "<email>"),
    "private-key": ("token", "<private-key>"),
}
UNKNOWN_LEAK = ("token", "<redacted>")


class Rule(enum.Enum):
    PATH = "path"
    NAME = "name"
    ACCOUNT = "account"
    OPAQUE = "opaque"


@dataclass(frozen=True)
class PrivateValue:
    value: str
    category: str
    placeholder: str
    rule: Rule


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
class Hit:
    category: str
    placeholder: str


def is_toggle(name: str, patterns: Sequence[str]) -> bool:
    """Experiment env prefixes may be given as `MLXCEL_` or as globs like `MLXCEL_*`."""
    return any(fnmatch.fnmatchcase(name, p if "*" in p or "?" in p else p + "*") for p in patterns)


def is_hashed_field(file: str, path: Sequence[str | int]) -> bool:
    """response.choices[*].message.{content,reasoning_content,reasoning,tool_calls} of a record."""
    return (
        file.startswith("records/")
        and len(path) >= 5
        and path[0] == "response"
        and path[1] == "choices"
        and isinstance(path[2], int)
        and path[3] == "message"
        and path[4] in HASHED_FIELDS
    )


def _pattern(value: PrivateValue) -> str:
    v = re.escape(value.value)
    if value.rule is Rule.PATH:
        return rf"(?<![A-Za-z0-9._~-]){v}(?![A-Za-z0-9_-])"
    if value.rule is Rule.NAME:
        return rf"(?i:(?<![A-Za-z0-9]){v}(?![A-Za-z0-9]))"
    if value.rule is Rule.ACCOUNT:
        return rf"(?i:(?<=[/~@]){v}(?![A-Za-z0-9])|(?<![A-Za-z0-9]){v}(?=@))"
    return rf"(?<![A-Za-z0-9]){v}(?![A-Za-z0-9])"


class Redactor:
    """Replaces a fixed set of private values, then what the leak patterns find."""

    def __init__(self, values: Sequence[PrivateValue]) -> None:
        self.values = tuple(sorted(values, key=lambda p: (-len(p.value), p.value)))
        joined = "|".join(f"(?P<v{i}>{_pattern(p)})" for i, p in enumerate(self.values))
        self._regex = re.compile(joined) if joined else None
        placeholders = {p.placeholder for p in self.values}
        placeholders |= {ph for _, ph in LEAK_PLACEHOLDERS.values()} | {UNKNOWN_LEAK[1]}
        self._placeholders = sorted(placeholders, key=len, reverse=True)

    def _private_matches(self, text: str) -> Iterator[tuple[re.Match[str], PrivateValue]]:
        if self._regex is None:
            return
        for match in self._regex.finditer(text):
            assert match.lastgroup is not None
            yield match, self.values[int(match.lastgroup[1:])]

    def redact_text(self, text: str) -> tuple[str, list[Hit]]:
        pieces: list[str] = []
        spans: list[tuple[int, int]] = []
        hits: list[Hit] = []
        position = length = 0
        for match, value in self._private_matches(text):
            pieces.append(text[position : match.start()])
            length += match.start() - position
            pieces.append(value.placeholder)
            spans.append((length, length + len(value.placeholder)))
            length += len(value.placeholder)
            hits.append(Hit(value.category, value.placeholder))
            position = match.end()
        pieces.append(text[position:])
        result = "".join(pieces)
        chosen: list[tuple[int, int, str, str]] = []
        for leak in sorted(scan_text(result), key=lambda h: (h.start, -h.end)):
            if any(leak.start < end and start < leak.end for start, end in spans):
                continue  # inside a placeholder
            if chosen and leak.start < chosen[-1][1]:
                continue  # overlaps the previous hit
            category, placeholder = LEAK_PLACEHOLDERS.get(leak.category, UNKNOWN_LEAK)
            chosen.append((leak.start, leak.end, category, placeholder))
        for start, end, category, placeholder in reversed(chosen):
            result = result[:start] + placeholder + result[end:]
            hits.append(Hit(category, placeholder))
        return result, hits

    def find(self, text: str) -> list[Hit]:
        """What would be replaced in `text`; placeholders already there do not count."""
        masked = text
        for placeholder in self._placeholders:
            masked = masked.replace(placeholder, "\x00")
        found = [Hit(v.category, v.placeholder) for _, v in self._private_matches(masked)]
        for leak in scan_text(text):
            found.append(Hit(*LEAK_PLACEHOLDERS.get(leak.category, UNKNOWN_LEAK)))
        return found

    def redact_documents(
        self, documents: Mapping[str, Any]
    ) -> tuple[dict[str, Any], list[LedgerEntry]]:
        """Redacted copies of the documents and the ledger of what was replaced."""
        counts: Counter[tuple[str, str, str, str]] = Counter()
        result = {file: self._walk(doc, file, (), counts) for file, doc in documents.items()}
        ledger = [
            LedgerEntry(category, file, pointer, count, placeholder)
            for (file, pointer, category, placeholder), count in sorted(counts.items())
        ]
        return result, ledger

    def _walk(
        self,
        node: Any,
        file: str,
        path: tuple[str | int, ...],
        counts: Counter[tuple[str, str, str, str]],
    ) -> Any:
        if isinstance(node, str):
            if is_hashed_field(file, path):
                self._refuse_if_private(node, file, path)
                return node
            text, hits = self.redact_text(node)
            for hit in hits:
                counts[(file, json_pointer(*path), hit.category, hit.placeholder)] += 1
            return text
        if isinstance(node, list):
            return [self._walk(item, file, (*path, i), counts) for i, item in enumerate(node)]
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for key, value in node.items():
                new_key = key
                if is_hashed_field(file, (*path, key)):
                    self._refuse_if_private(key, file, (*path, key))
                else:
                    new_key, hits = self.redact_text(key)
                    for hit in hits:
                        counts[
                            (file, json_pointer(*path, new_key), hit.category, hit.placeholder)
                        ] += 1
                if new_key in out:
                    raise ExportError(
                        f"{file}{json_pointer(*path)}: two keys become {new_key!r} once "
                        "redacted; rename them in the raw capture"
                    )
                out[new_key] = self._walk(value, file, (*path, new_key), counts)
            return out
        return node

    def _refuse_if_private(self, text: str, file: str, path: tuple[str | int, ...]) -> None:
        hits = self.find(text)
        if hits:
            kinds = ", ".join(sorted({f"{h.category} (would be {h.placeholder})" for h in hits}))
            raise ExportError(
                f"{file}{json_pointer(*path)}: the model output contains private data: {kinds}. "
                "This field enters the output hash, so export will neither publish it nor "
                "alter it. Capture again with a prompt, paths and names that keep private "
                "values out of the reply."
            )


def _is_path(value: str) -> bool:
    return value.startswith(("/", "~/"))


def _is_system(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in SYSTEM_PREFIXES)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.<>]+", "-", text.lower()).strip("-") or "value"


def _url_host(url: str | None) -> str | None:
    if not url:
        return None
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    if not host or host == "localhost":
        return None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host
    return None  # an IP address: the leak patterns handle those that are not loopback


class _Collector:
    """Private values in collection order; the first placeholder given to a value wins."""

    def __init__(self, public_values: set[str]) -> None:
        self.values: dict[str, PrivateValue] = {}
        self._public = public_values
        self._numbered = 0

    def safe(self, text: str) -> str:
        """Text to embed in a placeholder, with the names collected so far removed."""
        return Redactor(list(self.values.values())).redact_text(text)[0]

    def numbered(self) -> str:
        self._numbered += 1
        return f"private-{self._numbered}"

    def name(self, value: str | None, category: str, placeholder: str) -> None:
        value = (value or "").strip()
        if not value or value.lower() in GENERIC_NAMES or value in self.values:
            return
        rule = Rule.NAME if len(value) >= 3 else Rule.ACCOUNT
        self.values[value] = PrivateValue(value, category, placeholder, rule)

    def opaque(
        self, value: str, category: str, placeholder: str, *, any_length: bool = False
    ) -> None:
        """An opaque value; never one that is public evidence (a toggle's or setting's value)."""
        short = len(value) < MIN_OPAQUE or value.strip().isdigit()
        if not value or (short and not any_length) or value in self.values:
            return
        if value not in self._public:
            self.values[value] = PrivateValue(value, category, placeholder, Rule.OPAQUE)

    def path(self, value: str | None, placeholder: str | None = None) -> None:
        """A private path; without a placeholder, only an absolute one no collected path covers."""
        if not value:
            return
        value = value.rstrip("/") if len(value) > 1 else value
        if len(value) < 2 or value in self.values:
            return
        if placeholder is None:
            if not _is_path(value) or _is_system(value) or self._covered(value):
                return
            placeholder = "/path/to/" + self.numbered()
        self.values[value] = PrivateValue(value, "private-path", placeholder, Rule.PATH)

    def _covered(self, value: str) -> bool:
        return any(
            p.rule is Rule.PATH and (value == p.value or value.startswith(p.value + "/"))
            for p in self.values.values()
        )


def _argument_path(arg: str) -> str | None:
    """The path in a command-line argument (`/x`, `--flag=/x`), if any."""
    value = arg.partition("=")[2] if arg.startswith("-") else arg
    return value if _is_path(value) else None


def collect_private_values(
    raw: RawCapture,
    *,
    private_paths: Sequence[str] = (),
    public_env: Sequence[str] = (),
    secrets: Sequence[str] = (),
) -> tuple[PrivateValue, ...]:
    """Every private value of the raw capture, each with its placeholder.

    `public_env` lists the environment names (or globs) kept in the bundle besides the
    experiment's prefixes and each condition's settings; `secrets` are values to remove
    wherever they appear (the arguments of secret flags).
    """
    run, host = raw.run, raw.run.host
    servers = [s for ss in raw.servers.values() for s in ss]
    conditions = {cond.id: cond for cond in run.conditions}
    keep = [*run.experiment_env_prefixes, *public_env]
    toggles = {
        (server.instance, server.condition, name): value
        for server in servers
        for name, value in server.env.items()
        if name in conditions[server.condition].settings or is_toggle(name, keep)
    }
    public_values = set(toggles.values())
    public_values.update(v for cond in run.conditions for v in cond.settings.values())
    c = _Collector(public_values)

    # Names first: the placeholders of paths embed file names, which must not carry them.
    c.name(host.user, "user-name", "<user>")
    hostnames = {host.hostname, host.hostname.split(".", 1)[0]}
    urls = [run.server_url] + [e.request_url for ex in raw.exchanges.values() for e in ex]
    hostnames |= {h for h in map(_url_host, urls) if h}
    for hostname in sorted(hostnames, key=lambda h: (-len(h), h)):
        c.name(hostname, "host-name", "<host>")
    for value in host.extra.values():
        if isinstance(value, str) and not _is_path(value) and len(value) >= 6:
            c.name(value, "host-name", "<host>")
    for secret in secrets:
        c.opaque(secret, "token", "<token>")
    for private in private_paths:
        if "/" in private:
            c.path(private, "/path/to/" + c.numbered())
        else:  # named explicitly: removed whatever its length
            c.opaque(private, "private-path", f"<{c.numbered()}>", any_length=True)

    # The paths the run names, each with its own placeholder.
    if run.binary_path:
        c.path(run.binary_path, f"/path/to/{c.safe(posixpath.basename(run.binary_path))}")
    only = raw.manifest.files[0].path if len(raw.manifest.files) == 1 else None
    model_dirs = []
    for model in (run.model_path, raw.manifest.root):
        name = posixpath.basename(model.rstrip("/"))
        if name == only or name.endswith(".gguf"):  # a single-file model
            c.path(model, f"/path/to/model/{c.safe(name)}")
            model_dirs.append(posixpath.dirname(model.rstrip("/")))
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
            c.path(server.log_path, f"/path/to/logs/{c.safe(posixpath.basename(server.log_path))}")
            c.path(posixpath.dirname(server.log_path), "/path/to/logs")
    for model_dir in model_dirs:
        c.path(model_dir, "/path/to/model")

    # The environment: a toggle's path gets a placeholder named after it; every value
    # that is not a toggle is private.
    for (_, _, name), value in sorted(toggles.items()):
        if _is_path(value):
            c.path(value, f"/path/to/{_slug(c.safe(name))}")
    for server in servers:
        for name, value in sorted(server.env.items()):
            for part in value.split(":"):
                c.path(part)
            if not _is_path(value):
                c.opaque(value, "environment-value", f"<env:{c.safe(name)}>")

    # Anonymous paths: wherever else a private path may hide.
    for value in host.extra.values():
        if isinstance(value, str):
            c.path(value)
    for server in servers:
        for lib in server.libraries:
            c.path(posixpath.dirname(lib.path))
    for arg in [*(a for s in servers for a in s.argv), *run.argv]:
        c.path(_argument_path(arg))
    return tuple(c.values.values())
