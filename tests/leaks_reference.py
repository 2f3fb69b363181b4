"""The plain leak scan, as `verifier.leaks` was before its fast paths: the tests' reference.

`test_leaks_fast.py` checks that `verifier.leaks` finds exactly what this module finds. Only
the parts the fast paths changed are kept here (the scans, the document walk, the known-value
search); every definition `verifier.leaks` still has word for word, and that uses nothing
changed, is imported from it. What follows is `verifier.leaks`'s own description.

Find private strings (paths, names, addresses, tokens, keys) in every form, never echoing them.

One set of detectors, used by `export` (to redact free text and to refuse evidence that holds
a private value) and by `verify` (its leak scan). Export adds what only it knows: the
capture's own paths, user and host names and secret values (`Known`); verify runs the
generic detectors alone. Both scan the same views of a text:

- the text as it is;
- the text decoded once and twice (JSON escapes `\\/` and `\\u002f`, percent-encoding
  in either case), so `%2Fhome%2Fal%2F` and `\\/home\\/al` are found as `/home/al/`;

and a JSON document is scanned as one text (`scan_document`): its strings joined with
separators that keep a key next to its value and an argument next to the one before, so
`{"api_token": "..."}` and `["--api-key", "..."]` are found too. The cost is one regular
expression pass per detector over the whole text, whatever the number of strings.

What is private, by kind:

- a home directory of any user: `/home/u`, `/home//u`, `/var/home/u`, `/Users/u`, `/root/...`,
  `~u/...`, `C:\\Users\\u` (a user of two letters too);
- temporary directories (`/tmp/x`, `/var/folders/...`);
- IP addresses other than loopback: IPv6 in every notation (compressed, zone ids, IPv4-mapped,
  letters only); IPv4 in a private range, or in a public one where the text says it is an
  address (`http://`, `@`, `:port`, `host`, `ip`...). A dotted number after a version word
  (`version`, `runtime`, `cuda`...) or inside a name (`v1.0.0.1`, `lora-1.0.0.2.safetensors`,
  `libcublas.so.13.0.2.14`) is a version, and so is a public one without such context;
- MAC addresses, e-mail addresses outside the documentation domains, `user@host`, URLs
  whose host is a local machine name (one label, or `.local`, `.lan`, `.internal`...);
- tokens: the known prefixes (`hf_`, `sk-`, `ghp_`, `AKIA`...), AWS secret access keys, and
  any value after a key-like name (`*_KEY`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`,
  `Authorization:`, `Bearer`), whatever its alphabet; the value of a secret flag, as
  `--flag=value`, `--flag value` or the next argument of a command line;
- private key blocks.

The known values are looked for in their other spellings too (`leaks.spellings`: NFC, NFD,
a host's IDNA form, an address's numbers), in the text with its fullwidth forms read as ASCII,
and in base64 of their UTF-8 and UTF-16LE bytes, in base32, in hex of any case, and in
base85 (the three alphabets, of 2 groups or more, computed here digit by digit).
"""

from __future__ import annotations

import base64
import bisect
import bz2
import dataclasses
import enum
import functools
import itertools
import lzma
import re
import unicodedata
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from verifier import leaks
from verifier.leaks import (  # noqa: F401 - the reference shares what did not change
    _ACCOUNT,
    _ADDRESS_AFTER,
    _ADDRESS_BEFORE,
    _AUTH_TOKENS,
    _AWS_SECRET,
    _DASHED_IPV4,
    _EMAIL,
    _HOME,
    _IPV4,
    _IPV6,
    _KEY_BEGIN,
    _KEY_END,
    _KEY_MAX_CHARS,
    _LOCAL_DOMAIN,
    _MAC,
    _NAME_CHARS,
    _NOT_HOSTS,
    _NOT_SECRET_NAME,
    _NUMBER,
    _PATH_REST,
    _PREFIXED_TOKENS,
    _RESERVED_DOMAIN,
    _SECRET_FLAG,
    _SECRET_MEMBER,
    _SECRET_NAME,
    _SECRET_WORD,
    _SEP_TO_SPACE,
    _SEPS,
    _SHARED,
    _SLASH,
    _TEMP,
    _THIS_NETWORK,
    _TOKEN_PATTERNS,
    _TOKEN_STOP,
    _TOKEN_VALUE,
    _URL_CREDENTIALS,
    _URL_HOST,
    _VERSION_BEFORE,
    _WIN_SEP,
    _WINDOWS_HOME,
    _WSL_HOME,
    ALLOWED_PLACEHOLDER,
    CATEGORIES,
    ELLIPSIS,
    EMAIL,
    HOME_PATH,
    HOST_NAME,
    IP_ADDRESS,
    ITEM_SEP,
    KEY_SEP,
    MAC_ADDRESS,
    PLACEHOLDERS,
    PRIVATE_KEY,
    SEP,
    TEMP_PATH,
    TOKEN,
    USER_NAME,
    DocumentHit,
    LeakHit,
    _accept_mac,
    _accept_token,
    _after_boundary,
    _Found,
    _found,
    _is_dashed_address,
    _is_machine_name,
    _is_public_ipv4,
    _is_public_ipv6,
    _is_secret_name,
    _mask,
    _mask_secret,
    _matches,
    _name_before,
    _secret_group,
    _tokenish,
    is_secret_name,
)


def _names_an_account(text: str, start: int) -> bool:
    """(No longer in verifier.leaks: _AccountNames reads every place of a text at once.)

    A name after a slash is an account only as a component of an absolute file path
    (`/srv/shared/al/x`, `~/al`, `C:\\x\\al`), below its first component, and not in
    `org/model` (a repository) or a URL path."""
    if start == 0 or text[start - 1] not in "/\\":
        return True  # ~name, name@, or a distinctive name: the pattern decided
    if text[max(0, start - 3) : start] == "://":
        return True  # a URL's user: scheme://name@host
    if re.search(
        r"(?ai)(?:documents and settings|docume~1)[/\\]{1,2}\Z", text[max(0, start - 24) : start]
    ):
        return True  # a home before Vista, its spaces before the name
    begin = start
    while begin > max(0, start - 4096) and text[begin - 1] not in _TOKEN_STOP:
        begin -= 1
    if text.startswith("/path/to/", begin):
        return False  # a placeholder export wrote
    word = text[begin:start].removeprefix("file://")
    if word.startswith("~") or re.match(r"[A-Za-z]:[\\/]", word):
        return True
    # A home relative to `/` or to a directory below it (`home/al/x`, `../Users/al`,
    # `rootfs/home/al`).
    if re.fullmatch(r"[./\\]*(?:(?:var|usr)[/\\])?(?:home|Users|users)[/\\]", word):
        return True
    if re.search(r"[/\\](?:home|Users|users)[/\\]\Z", word):
        return True
    # Not the first component: `/usage/prompt_tokens` is a JSON pointer as often as a path.
    return word.startswith(("/", "\\")) and bool(re.search(r"[^/\\][/\\]", word))


class KnownKind(enum.Enum):
    PATH = "path"  # a private path: also as the prefix of a longer path
    USER = "user"  # a user name: only where it names an account
    HOST = "host"  # a host name: only where it names a machine
    SECRET = "secret"
    OPAQUE = "opaque"  # like SECRET, but not identifying: removed from free text only
    ADDRESS = "address"
    STRING = "string"  # named private by the user: everywhere, in any case


@dataclass(frozen=True)
class Known:
    """A private value the exporter knows from the raw capture, with its placeholder."""

    value: str
    category: str
    placeholder: str
    kind: KnownKind


def _generic(text: str) -> Iterator[_Found]:
    """Every hit of the generic detectors in one view of a text (overlaps included)."""
    # Each detector needs a character or word; a text without it skips the detector's pass.
    has = {c: c in text for c in "/~:.@-"}
    ends = [m.end() for m in _KEY_END.finditer(text)] if "PRIVATE KEY" in text else []
    for match in _KEY_BEGIN.finditer(text) if ends or "PRIVATE KEY" in text else ():
        end = match.end()
        following = bisect.bisect_left(ends, end + 1)
        if following < len(ends) and ends[following] - end <= _KEY_MAX_CHARS:
            end = ends[following]
        else:  # no END: to the end of its string
            end = next((i for i in range(end, len(text)) if text[i] in "\x00\x01\x02"), len(text))
        yield _found(PRIVATE_KEY, match.start(), end, match.group() + ELLIPSIS)
    for pattern in _TOKEN_PATTERNS:
        if pattern is _SECRET_FLAG and not has["-"]:
            continue
        # (one _Words for the text: the same answers as a fresh one each time, its words
        # read once)
        accept = functools.partial(_accept_token, words=leaks._Words(text))
        chained = leaks.MoreKeys(text, flag=pattern is _SECRET_FLAG)
        for match in _matches(pattern, text, accept):
            group = _secret_group(match)
            # A prefixed token goes whole; after a name or a flag, only the value.
            start, end = match.span() if pattern is _PREFIXED_TOKENS else match.span(group)
            excerpt = _mask_secret(match, group)
            if pattern is _SECRET_MEMBER:
                excerpt = text[_name_before(match)[0] : match.start()] + excerpt
            yield _found(TOKEN, start, end, excerpt)
            if pattern is _SECRET_FLAG or pattern is _SECRET_MEMBER:  # K2 of `K1,K2` (shared)
                for more in chained.after(end):
                    yield _found(TOKEN, *more)
            if pattern is _URL_CREDENTIALS and (user := leaks._url_user(match)) is not None:
                yield user  # (shared)
    # (shared: every place a secret word starts is tried)
    for start, end, excerpt in leaks.secret_lists(text, None):
        yield _found(TOKEN, start, end, excerpt)
    simple: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool], bool], ...] = (
        (HOME_PATH, _HOME, lambda m: True, has["/"] or has["~"]),
        (TEMP_PATH, _TEMP, lambda m: True, has["/"]),
        (
            EMAIL,
            _EMAIL,
            lambda m: not _RESERVED_DOMAIN.search(m.group().rsplit("@", 1)[1]),
            has["@"],
        ),
        (MAC_ADDRESS, _MAC, _accept_mac, has[":"] or has["-"] or has["."]),
        (IP_ADDRESS, _DASHED_IPV4, lambda m: _is_dashed_address(m.group()), has["-"]),
        (
            IP_ADDRESS,
            _IPV4,
            lambda m: _is_public_ipv4(text, m.start(), m.end(), m.group()),
            has["."],
        ),
        (IP_ADDRESS, _IPV6, lambda m: _is_public_ipv6(m.group()), has[":"]),
    )
    for category, pattern, accept, needed in simple:
        if not needed:
            continue
        for match in _matches(pattern, text, accept):
            yield _found(category, match.start(), match.end(), _mask(match.group()))
    for match in _WINDOWS_HOME.finditer(text) if has[":"] else ():
        start = match.start() - 1
        yield _found(HOME_PATH, start, match.end(), _mask(text[start : match.end()]))
    for match in _WSL_HOME.finditer(text):
        yield _found(HOME_PATH, match.start(), match.end(), _mask(match.group()))
    if not has["@"] and "://" not in text:
        return
    for match in _matches(_ACCOUNT, text, lambda m: _is_machine_name(m.group("host"))):
        yield _found(USER_NAME, match.start(), match.end(), _mask(match.group()), "<user>@<host>")
    for match in _matches(_URL_HOST, text, lambda m: _is_machine_name(m.group("host"))):
        start, end = match.span("host")
        yield _found(HOST_NAME, start, end, _mask(match.group()))


def _distinctive(name: str) -> bool:
    name = unicodedata.normalize("NFC", name)
    return len(name) >= 4 and any(c in name for c in "-._")


def _token_pattern(known: Known) -> str:
    """A distinctive user or host name as a token of its own: no ASCII letter or digit on
    either side (`server-alice-smith.log`)."""
    v = re.escape(known.value)
    return rf"(?i:(?<!(?-i:[A-Za-z0-9])){v}(?!(?-i:[A-Za-z0-9])))"


def _known_pattern(known: Known) -> str:
    v = re.escape(known.value)
    distinctive = _distinctive(known.value)
    token = "|" + _token_pattern(known) if distinctive else ""
    if known.kind is KnownKind.PATH:
        return leaks._known_path(known.value)  # (not a fast path: shared)
    if known.kind is KnownKind.ADDRESS:
        return leaks._known_address(known.value)
    if known.kind is KnownKind.USER:
        return (
            rf"(?i:(?<=[/\\]){leaks._SYSTEM_PARENTS}{v}{leaks._PATH_NAME_END}"
            rf"|{leaks._HOME_PARENT}{v}(?=[._-])|(?<=~){v}(?![\w.-])"
            rf"|(?<![\w.+-]){v}(?=@|:[^/@\s]*@)"
            rf"|(?<=['\"`]){v}(?=['\"`]@)"
            rf"|(?:{leaks._user_assigned()}){v}(?![\w-]|\.\w)"
            rf"|{leaks._user_logged(v)}"
            rf"|(?:{leaks._ID_NAMED}){v}(?=\)){token})"
        )
    if known.kind is KnownKind.HOST:
        labels = (
            rf"|(?<!(?-i:[A-Za-z0-9])){v}(?:\.[A-Za-z0-9-]+)*(?!(?-i:[A-Za-z0-9]))"
            if distinctive
            else rf"|(?<![\w./:-]){v}(?:\.[A-Za-z0-9-]+)*"
            rf"(?:\.(?:lan|local|localdomain|internal|intranet|corp|home|private)"
            rf"|\.[A-Za-z0-9-]+\.[A-Za-z]{{2,}})(?![\w-]|\.\w)"
        )
        return (
            rf"(?i:(?<=@){v}(?![\w-])|(?<=://){v}(?=\.?(?:[:/?#\]\s\"'\x00-\x02]|\Z))"
            rf"|(?:{leaks._host_assigned()}){v}(?![\w-])"
            rf"|(?:{leaks._host_line()}){v}(?=[ \t]{{0,16}}(?:[\r\n\x00-\x02]|\Z))"
            rf"|(?:{leaks._LOG_TIME}){v}{leaks._LOG_SOURCE}|(?:{leaks._RFC5424_TIME}){v}(?= \S)"
            rf"|(?<![\w./:-]){v}(?=:\d{{1,5}}(?!\w|\.\d)|:/)"
            rf"|(?<=\[){v}(?=\]:\d{{1,5}}(?!\w|\.\d))|(?<=\\\\){v}(?=\\[^\\\s\x00-\x02])"
            rf"|(?<=//)(?<![\w.:/~-]//){v}(?=/[^/\s\x00-\x02])|{leaks._hosts_alias(v)}"
            rf"|{leaks._host_shown(v)}{labels})"
        )
    if known.kind is KnownKind.STRING:  # everywhere, its inner white space any gap
        words = known.value.strip().split()
        if len(words) > 1 and known.value == known.value.strip():
            gap = r"(?:[^\S\x00-\x02]|[_+./\\:\u2010-\u2015\u2212-]|%20)+"
            v = gap.join(map(re.escape, words))
        return rf"(?i:{v})"
    if known.kind is KnownKind.SECRET and len(known.value) >= 12:
        return v  # inside a longer token too
    if known.kind is KnownKind.SECRET:  # or glued to a short option (`-pSECRET`)
        return rf"(?:(?<![A-Za-z0-9])|(?<=[\s\x00-\x02]-[A-Za-z])){v}(?![A-Za-z0-9])"
    return rf"(?<![A-Za-z0-9]){v}(?![A-Za-z0-9])"


def _cores(value: bytes) -> set[str]:
    """Every base64 character that depends on `value`'s bytes alone, after 0, 1 or 2 bytes:
    of each encoding, the characters whose 6 bits lie inside the value's bits."""
    found = set()
    for k in range(3):
        encoded = base64.b64encode(b"\x00" * k + value).decode()
        bits = range(8 * k, 8 * (k + len(value)))
        core = "".join(c for i, c in enumerate(encoded) if 6 * i in bits and 6 * i + 5 in bits)
        found |= {core, core.replace("+", "-").replace("/", "_")}
    return found


def _b32_cores(value: bytes, encode: Callable[[bytes], bytes] = base64.b32encode) -> set[str]:
    """Every base32 character (of `encode`'s alphabet) that depends on `value`'s bytes alone,
    after 0 to 4 bytes."""
    found = set()
    for k in range(5):
        encoded = encode(b"\x00" * k + value).decode()
        bits = range(8 * k, 8 * (k + len(value)))
        core = "".join(c for i, c in enumerate(encoded) if 5 * i in bits and 5 * i + 4 in bits)
        found |= {core, core.lower()}
    return found


_RFC1924 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


@functools.cache  # (the same few values for every text)
def _b85_cores(value: bytes) -> frozenset[str]:
    """Each group of 4 bytes wholly inside the value, after 0 to 3 bytes, as 5 digits of
    base 85 (Ascii85's from `!`, `z` for a group of zeros; RFC 1924's and Z85's alphabets):
    the characters of 2 groups or more."""
    found = set()
    for k in range(4):
        stream = b"\x00" * k + value
        groups = [stream[i : i + 4] for i in range(0, len(stream) - 3, 4) if i >= k]
        if len(groups) < 2:
            continue
        for alphabet in ("ascii85", _RFC1924, _Z85):
            encoded = ""
            for group in groups:
                number = int.from_bytes(group, "big")
                digits = [number // 85**power % 85 for power in (4, 3, 2, 1, 0)]
                if alphabet != "ascii85":
                    encoded += "".join(alphabet[d] for d in digits)
                else:
                    encoded += "z" if number == 0 else "".join(chr(33 + d) for d in digits)
            found.add(encoded)
    return frozenset(found)


def _separated_bytes(value: bytes, decimal: bool) -> set[str]:
    """The value's hex, a pair a byte, with a separator between pairs, `=` before each, or
    `0x` before each and a separator between; with `decimal`, its bytes in decimal, with a
    separator between them."""
    pairs = [f"{b:02x}" for b in value]
    prefixed = [f"0x{pair}" for pair in pairs]
    return (
        {sep.join(pairs) for sep in (" ", ":", "-", ",", ", ")}
        | {"=" + "=".join(pairs)}
        | {sep.join(prefixed) for sep in (" ", ",", ", ")}
        | {sep.join(str(b) for b in value) for sep in (", ", ",", " ") if decimal}
    )


def _ascii_lower(text: str) -> str:
    """The text with its ASCII letters in lower case, one character for one."""
    return text.encode("ascii", "replace").decode("ascii").lower()


def _occurrences(text: str, core: str, index: int) -> list[tuple[int, int, int]]:
    """(start, -length, index) of every occurrence of the core in the text."""
    found = []
    at = text.find(core)
    while at >= 0:
        found.append((at, -len(core), index))
        at = text.find(core, at + 1)
    return found


def _in_base64(value: Known) -> bool:
    """A private path, a secret, an opaque value, a named string, an address, or a
    distinctive user or host name, of 6 bytes or more: looked for encoded."""
    name = value.kind in (KnownKind.USER, KnownKind.HOST)
    return (not name or _distinctive(value.value)) and len(
        value.value.encode("utf-8", "surrogatepass")
    ) >= 6


def _base64_hits(
    known: Sequence[Known], text: str, skip: set[str] | frozenset[str] = frozenset()
) -> Iterator[tuple[int, int, int]]:
    """(start, end, known index) of each run of base64 characters, with up to two `=`, that
    holds a core (of the value's UTF-8 or UTF-16LE bytes, or of a path's JSON-escaped
    slashes) or the hex (of UTF-8 or UTF-16LE, in any case) of a
    private path, a secret, a named string, an address, or a distinctive user or host name
    (6 bytes or more), or a core of its UTF-8 bytes in base32: the known value of the core
    that starts first, the longest, the first known."""
    occurrences = []
    in_base85 = []
    eligible: list[tuple[int, set[str], set[str]]] = []
    for index, value in enumerate(known):
        if value.kind is KnownKind.USER and value.value not in skip:
            # a user name before `@`, its bytes one by one, separated: each occurrence alone
            at_sign = f"{value.value}@".encode("utf-8", "surrogatepass")
            for spelled in sorted(_separated_bytes(at_sign, True)):
                for at, _, _ in _occurrences(_ascii_lower(text), spelled, index):
                    yield at, at + len(spelled), index
        if not _in_base64(value) or value.value in skip:
            continue
        utf8 = value.value.encode("utf-8", "surrogatepass")
        utf16 = value.value.encode("utf-16-le", "surrogatepass")
        if value.kind is KnownKind.OPAQUE:  # base64 (UTF-8, UTF-16LE), base32, hex only
            cores = _cores(utf8) | _cores(utf16) | _b32_cores(utf8)
            hexes = {utf8.hex(), utf16.hex()}
            eligible.append((index, cores, hexes))
            for core in cores:
                occurrences += _occurrences(text, core, index)
            for hexed in hexes:
                occurrences += _occurrences(_ascii_lower(text), hexed, index)
            continue
        big = value.value.encode("utf-16-be", "surrogatepass")
        cores = (
            _cores(utf8) | _cores(utf16) | _cores(big) | _b32_cores(utf8)
            | _b32_cores(utf8, base64.b32hexencode)
        )  # fmt: skip
        if b"/" in utf8:  # as JSON may escape it
            cores |= _cores(utf8.replace(b"/", b"\\/"))
        # base64 of base64, in the standard alphabet at both levels (its cores hold no - or _)
        for core in {c for c in _cores(utf8) if not set(c) & set("-_")}:
            cores |= {c for c in _cores(core.encode()) if not set(c) & set("-_")}
        hexes = {utf8.hex(), utf16.hex(), big.hex()}
        for data in leaks.single_byte(value.value):  # Latin-1, Windows-1252
            cores |= _cores(data)
            hexes.add(data.hex())
        eligible.append((index, cores, hexes))
        for core in cores:
            occurrences += _occurrences(text, core, index)
        for hexed in hexes:
            occurrences += _occurrences(_ascii_lower(text), hexed, index)  # in any case
        # its bytes one by one, separated, in any case: each occurrence alone
        for spelled in sorted(_separated_bytes(utf8, leaks.spells_apart(value.value))):
            for at, _, _ in _occurrences(_ascii_lower(text), spelled, index):
                yield at, at + len(spelled), index
        for core in _b85_cores(utf8):
            in_base85 += _occurrences(text, core, index)
    # base85: the whole run of printable ASCII (no space) around a core, or of lines of it
    # whose lines joined hold one
    yield from _runs_holding(text, r"[!-~]+", in_base85)
    yield from _line_runs_holding(
        text,
        r"[!-~]+(?:\r?\n[ \t]*[!-~]+)*",
        lambda joined: [
            (joined.find(core), -len(core), index)
            for index, value in enumerate(known)
            if _in_base64(value) and value.value not in skip and value.kind is not KnownKind.OPAQUE
            for core in _b85_cores(value.value.encode("utf-8", "surrogatepass"))
            if core in joined
        ],
    )
    yield from _runs_holding(text, r"[A-Za-z0-9+/_-]+={0,6}", occurrences)
    # Base64 wrapped in lines (MIME, PEM): each run of lines, its line breaks taken out.
    yield from _line_runs_holding(
        text,
        r"[A-Za-z0-9+/_-]+(?:\r?\n[ \t]*[A-Za-z0-9+/_-]+)*={0,6}",
        lambda joined: (
            [
                (joined.find(core), -len(core), index)
                for index, cores, _ in eligible
                for core in cores
                if core in joined
            ]
            + [
                (_ascii_lower(joined).find(hexed), -len(hexed), index)
                for index, _, hexes in eligible
                for hexed in hexes
                if hexed in _ascii_lower(joined)
            ]
        ),
    )


def _runs_holding(
    text: str, pattern: str, occurrences: list[tuple[int, int, int]]
) -> Iterator[tuple[int, int, int]]:
    """Each run of `pattern` that an occurrence (start, -length, index) starts in: the run,
    with the index of the first, longest, first-known occurrence in it."""
    for run in re.finditer(pattern, text):
        inside = [o for o in occurrences if run.start() <= o[0] < run.end()]
        if inside:
            yield run.start(), run.end(), min(inside)[2]


def _line_runs_holding(
    text: str, pattern: str, found_in: Callable[[str], list[tuple[int, int, int]]]
) -> Iterator[tuple[int, int, int]]:
    """Each run of `pattern` over more than one line whose lines joined hold what `found_in`
    finds (start, -length, index): the run, with the index of the first of them."""
    for run in re.finditer(pattern, text):
        if "\n" not in run.group():
            continue
        inside = found_in(re.sub(r"\r?\n[ \t]*", "", run.group()))
        if inside:
            yield run.start(), run.end(), min(inside)[2]


def _stream(data: bytes) -> tuple[Any, int] | None:
    """A decompressor of the stream that starts `data` (gzip, zlib, bzip2, xz), and the least
    it costs to read: a bzip2 block's size."""
    if data[:3] == b"\x1f\x8b\x08":
        return zlib.decompressobj(wbits=31), 0
    if data[:1] == b"x" and len(data) > 1 and int.from_bytes(data[:2], "big") % 31 == 0:
        return zlib.decompressobj(wbits=15), 0
    if data[:3] == b"BZh":
        level = data[3:4]
        return bz2.BZ2Decompressor(), (
            int(level) * 100_000 if level in b"123456789" and level else 900_000
        )
    if data[:6] == b"\xfd7zXZ\x00":
        return lzma.LZMADecompressor(lzma.FORMAT_XZ, memlimit=1 << 28), 0
    return None


def _decompressed(raw: bytes, most: int) -> tuple[bytes, int, bool]:
    """Each stream of `raw` in turn, `most` bytes in all; of a stream that fails, what came
    out of it fed 16 bytes at a time before the step that failed; and the cost: the bytes
    out, or if more, 1 KiB a stream, or a bzip2 stream's block size; and whether all was
    read before `most`."""
    out, cost, data = b"", 0, raw
    while data:
        if max(len(out), cost) >= most:
            return out, max(len(out), cost), False
        opened = _stream(data)
        if opened is None:
            break
        decompressor, least = opened
        cost += max(least, 1 << 10)  # each stream 1 KiB at least
        try:
            out += decompressor.decompress(data, most - len(out))
        except Exception:  # any failure: what came out before it
            decompressor, _ = _stream(data) or (None, 0)
            part = b""
            try:
                for at in range(0, len(data), 16):
                    part += decompressor.decompress(data[at : at + 16], most - len(out) - len(part))
                    if len(out) + len(part) >= most or decompressor.eof:
                        break
            except Exception:  # what came out before it is all there is
                pass
            out += part
            break
        if not decompressor.eof:
            return out, max(len(out), cost), len(out) < most
        data = decompressor.unused_data
    return out, max(len(out), cost), True


def _plain_dump_runs(text: str) -> list[tuple[int, int, list[bytes]]]:
    """Each run of hex dump lines (`leaks._dump_line`, tried at every line's start), joined
    by line breaks alone, all of `xxd -p`'s lines (two or more) or none: its span, and its
    bytes in order and, where a group is wider than a byte, each group reversed."""
    runs: list[tuple[int, int, list[bytes]]] = []
    lines: list[tuple[int, int, list[str], bool]] = []

    def close() -> None:
        if lines and not (all(plain for *_, plain in lines) and len(lines) < 2):
            digits = [group for _, _, groups, _ in lines for group in groups]
            streams = [bytes.fromhex("".join(digits))]
            if any(len(group) > 2 for group in digits):
                streams.append(b"".join(bytes.fromhex(group)[::-1] for group in digits))
            runs.append((lines[0][0], lines[-1][1], streams))
        lines.clear()

    start = 0
    for index in range(len(text) + 1):
        if index < len(text) and text[index] not in "\n\x00\x01\x02":
            continue
        parsed = leaks._dump_line(text, start)
        if parsed is None:
            close()
        else:
            groups, plain, end = parsed
            if lines and lines[-1][3] is not plain:
                close()
            lines.append((start, end, groups, plain))
            if index == len(text) or text[index] != "\n":
                close()
        start = index + 1
    close()
    return runs


def _uncovered(hit: _Found, covered: set[int]) -> list[_Found]:
    """The runs of `hit`'s characters that `covered` does not hold, each a piece of it."""
    free = [i for i in range(hit.start, hit.end) if i not in covered]
    pieces = []
    for _, run in itertools.groupby(enumerate(free), lambda pair: pair[1] - pair[0]):
        places = [i for _, i in run]
        pieces.append(dataclasses.replace(hit, start=places[0], end=places[-1] + 1))
    return pieces


class Detector:
    """The generic detectors plus the values one raw capture knows to be private."""

    def __init__(self, known: Sequence[Known] = ()) -> None:
        values = {k.value: k for k in known}
        self._rot13: set[str] = set()
        # Each value's other spellings (NFC, NFD, a host's IDNA form, an address's numbers),
        # with its placeholder.
        for k in list(values.values()):
            host, address = k.kind is KnownKind.HOST, k.kind is KnownKind.ADDRESS
            scrambles = (
                not address and k.kind not in (KnownKind.STRING, KnownKind.OPAQUE) and _in_base64(k)
            )
            name = k.kind in (KnownKind.USER, KnownKind.HOST)
            spelled = leaks.spellings(
                k.value, host=host, address=address, rot13=scrambles, name=name
            )
            for value in spelled:
                values.setdefault(value, Known(value, k.category, k.placeholder, k.kind))
            # written backwards, spaced out: a secret's literal
            for value in leaks.spelled_out(k.value) if scrambles or address else ():
                values.setdefault(value, Known(value, k.category, k.placeholder, KnownKind.SECRET))
            # quoted-printable, past ASCII: a secret's literal
            literals = leaks.quoted_printable(k.value) if k.kind is not KnownKind.OPAQUE else []
            # a secret in capitals or small letters: a secret's literal
            literals += leaks.other_case(k.value) if k.kind is KnownKind.SECRET else []
            for value in literals:
                values.setdefault(value, Known(value, k.category, k.placeholder, KnownKind.SECRET))
            # mojibake, past ASCII: a secret's literal; a user name's a user name, a named
            # string's a named string, a host name's like a word a host name; not of an
            # environment value
            kind: KnownKind | None = KnownKind.SECRET
            if k.kind in (KnownKind.USER, KnownKind.STRING) or (
                k.kind is KnownKind.HOST and not leaks.is_distinctive(k.value)
            ):
                kind = k.kind
            elif k.kind is KnownKind.OPAQUE:
                kind = None
            for value in leaks.mojibake(k.value) if kind is not None else ():
                values.setdefault(value, Known(value, k.category, k.placeholder, kind))
            # shell-quoted around a `'`: a secret's literal, an environment value's its own
            quoted = KnownKind.OPAQUE if k.kind is KnownKind.OPAQUE else KnownKind.SECRET
            for value in leaks.shell_quoted(k.value):
                values.setdefault(value, Known(value, k.category, k.placeholder, quoted))
        # a value's ROT13 or reversal (what only it spells) is looked for as it is, not
        # encoded again
        plain = {k.value for k in known}
        for k in known:
            host, address = k.kind is KnownKind.HOST, k.kind is KnownKind.ADDRESS
            name = k.kind in (KnownKind.USER, KnownKind.HOST)
            plain.update(leaks.spellings(k.value, host=host, address=address, name=name))
        self._rot13 = set(values) - plain
        self.known = tuple(sorted(values.values(), key=_longest_first))
        self._inflating = False
        # Opaque values apart: a long one must not hide a private path inside it.
        self._regexes = []
        for opaque in (False, True):
            joined = "|".join(
                f"(?P<k{i}>{_known_pattern(k)})"
                for i, k in enumerate(self.known)
                if (k.kind is KnownKind.OPAQUE) is opaque
            )
            if joined:
                self._regexes.append(re.compile(joined))
        # the values read across line breaks: secrets, environment values, addresses
        wrapped = (KnownKind.SECRET, KnownKind.OPAQUE, KnownKind.ADDRESS)
        self._wrap_regexes = []
        for opaque in (False, True):
            joined = "|".join(
                f"(?P<k{i}>{_known_pattern(k)})"
                for i, k in enumerate(self.known)
                if k.kind in wrapped and (k.kind is KnownKind.OPAQUE) is opaque
            )
            if joined:
                self._wrap_regexes.append(re.compile(joined))

    def _known_hits(self, text: str) -> Iterator[_Found]:
        yield from self._known_matches(text, text)
        # Fullwidth forms of ASCII (U+FF01-U+FF5E) read as ASCII, one character for one.
        if self._regexes and re.search("[\uff01-\uff5e]", text):
            folded = "".join(chr(ord(c) - 0xFEE0) if "\uff01" <= c <= "\uff5e" else c for c in text)
            yield from self._known_matches(folded, text)
        # the opaque values apart from the others: each group's runs named by its own values
        opaque = {k.value for k in self.known if k.kind is KnownKind.OPAQUE}
        for left_out in (opaque, {k.value for k in self.known} - opaque):
            for start, end, index in _base64_hits(self.known, text, self._rot13 | left_out):
                known = self.known[index]
                excerpt = _mask(text[start:end])
                identifying = known.kind is not KnownKind.OPAQUE
                yield _Found(
                    known.category, start, end, excerpt, known.placeholder, identifying, True, True
                )
        # a run of characters with a NUL after each, read without its NULs (UTF-16LE)
        for run in re.finditer("[^\x00-\x02](?:\x00[^\x00-\x02]){3,}\x00?", text):
            joined = run.group().replace("\x00", "")
            inside = list(self._known_matches(joined, joined)) if self._regexes else []
            if inside:  # an identifying value's first
                first = min(inside, key=lambda h: (not h.identifying, h.start))
                yield dataclasses.replace(
                    first, start=run.start(), end=run.end(), excerpt=_mask(run.group())
                )
        # gzip, zlib, bzip2 or xz data in base64 (a run that starts there, on one line or wrapped in
        # lines), read as text: the whole run where what it holds has a known value; 1 MiB in
        # all for one text, in the order the runs start, each counted as 1 KiB at least; past
        # that, a run of such data goes unread, as a token
        if self._inflating or not self.known:
            return
        runs = [
            (m.start(), m.end(), m.group())
            for m in re.finditer(
                r"(?<![A-Za-z0-9+/_-])(?:H4sI|e[AFJN]|Qlpo[MNO]|[/_]Td6WFo)"
                r"[A-Za-z0-9+/_-]{12,}={0,2}",
                text,
            )
        ] + [
            (m.start(), m.end(), re.sub(r"\r?\n[ \t]*", "", m.group()))
            for m in re.finditer(r"[A-Za-z0-9+/_-]+(?:\r?\n[ \t]*[A-Za-z0-9+/_-]+)*={0,6}", text)
            if "\n" in m.group() and re.match("H4sI|e[AFJN]|Qlpo[MNO]|[/_]Td6WFo", m.group())
        ]
        left = 1 << 20
        for start, end, run in sorted(runs):
            data = run.rstrip("=").replace("-", "+").replace("_", "/")
            try:
                raw = base64.b64decode(data + "=" * (-len(data) % 4))
            except ValueError:
                continue
            zlib_header = (
                len(raw) > 2 and raw[0] == 0x78 and int.from_bytes(raw[:2], "big") % 31 == 0
            )
            if not (raw[:3] in (b"\x1f\x8b\x08", b"BZh", b"\xfd7z") or zlib_header):
                continue
            if left <= 0:
                excerpt = _mask(text[start:end])
                yield _Found(TOKEN, start, end, excerpt, "<compressed data not read>", True, True)
                continue
            data, cost, whole = _decompressed(raw, left)
            left -= max(cost, 1 << 10)
            excerpt = _mask(text[start:end])
            unread = _Found(TOKEN, start, end, excerpt, "<compressed data not read>", True, True)
            if not data:
                if not whole:
                    yield unread
                continue
            inflated = data.decode("utf-8", "replace")
            # the known values in what it holds, and in its decoded views
            found = self._inside(inflated)
            if found:
                first = min(found, key=lambda h: (not h.identifying, h.category, h.placeholder))
                yield dataclasses.replace(
                    first, start=start, end=end, excerpt=_mask(text[start:end])
                )
            elif not whole:  # past the bytes read: not read, so it goes
                yield unread
        # hex dumps: each run of dump lines, its bytes read as text (UTF-8, and Latin-1 where
        # that differs), read as compressed data is
        left = 1 << 20
        for start, end, streams in _plain_dump_runs(text) if "\n" in text else ():
            if left <= 0:
                excerpt = _mask(text[start:end])
                yield _Found(TOKEN, start, end, excerpt, "<hex dump not read>", True, True)
                continue
            left -= len(streams[0])
            found = []
            for data in streams:
                readable = leaks._dump_text(data)  # (shared: not a fast path)
                found += self._inside(readable) if readable else []
            if found:
                first = min(found, key=lambda h: (not h.identifying, h.category, h.placeholder))
                yield dataclasses.replace(
                    first, start=start, end=end, excerpt=_mask(text[start:end])
                )
        # a value cut by line breaks: the text without its breaks (and the spaces after
        # each, and a `\` before one), each hit that holds a break
        if "\n" in text:
            kept: list[int] = []  # where each character of the joined text is in `text`
            position = 0
            for cut in re.finditer(r"\\?\r?\n[ \t]*", text):
                kept += range(position, cut.start())
                position = cut.end()
            kept += range(position, len(text))
            joined = "".join(text[i] for i in kept)
            for hit in self._known_matches(joined, joined, self._wrap_regexes):
                if hit.end <= hit.start:
                    continue  # (an empty value's: no break inside)
                first, last = kept[hit.start], kept[hit.end - 1]
                if last - first != hit.end - 1 - hit.start:
                    yield dataclasses.replace(
                        hit, start=first, end=last + 1, excerpt=_mask(text[first : last + 1])
                    )

    def _inside(self, text: str) -> list[_Found]:
        """The known values' hits in a text read out of another, and in its decoded views."""
        self._inflating = True
        try:
            found = list(self._known_hits(text))
            view = _Decoded.of(text)
            depth = 0
            while view is not None and depth < 2:
                found += self._known_hits(view.text)
                view = _Decoded.of(view.text, view)
                depth += 1
        finally:
            self._inflating = False
        return found

    def _known_matches(
        self, text: str, original: str, regexes: list[re.Pattern[str]] | None = None
    ) -> Iterator[_Found]:
        every = self._regexes if regexes is None else regexes
        for match in (m for regex in every for m in regex.finditer(text)):
            assert match.lastgroup is not None
            known = self.known[int(match.lastgroup[1:])]
            # A match the distinctive-token alternative also gives is an account wherever
            # it is; one of a plain name after a slash only in a file path.
            if (
                known.kind is KnownKind.USER
                and not (
                    _distinctive(known.value)
                    and re.compile(_token_pattern(known)).match(text, match.start()) is not None
                )
                and not _names_an_account(text, match.start())
            ):
                continue
            if known.kind is KnownKind.ADDRESS and leaks.after_version_word(text, match.start()):
                continue
            # a plain name found only as a tool prints it identifies nobody (shared rule)
            shown = (
                known.kind in (KnownKind.USER, KnownKind.HOST)
                and not _distinctive(known.value)
                and leaks.only_shown(known.value, known.kind is KnownKind.USER, text, match.start())
            )
            yield _Found(
                known.category,
                match.start(),
                match.end(),
                _mask(original[match.start() : match.end()]),
                known.placeholder,
                known.kind is not KnownKind.OPAQUE and not shown,
                known.kind not in (KnownKind.USER, KnownKind.HOST),
                True,
            )

    def _view_hits(self, text: str) -> Iterator[_Found]:
        yield from self._known_hits(text)
        yield from _generic(text)
        # Compatibility forms read as ASCII, one for one (`leaks._compatible_ascii`); each
        # excerpt from the text itself.
        read = "".join(leaks._COMPATIBLE.get(ord(c), c) for c in text)
        if read != text:
            yield from self._known_matches(read, text)
            for hit in _generic(read):
                yield dataclasses.replace(hit, excerpt=_mask(text[hit.start : hit.end]))

    def scan_text(self, text: str) -> list[LeakHit]:
        """Every private string in `text`, in order, without overlaps.

        Where two matches overlap (an address inside a home path, a token inside an
        Authorization header), the one that starts first wins, a known value before a
        pattern, then the longer one; each stretch of a known value's match that the ones
        taken leave is a hit too, one known value after another.
        """
        found = list(self._view_hits(text))
        # Terminal sequences are read two ways (`_Decoded._SPACED`); a text without them
        # reads the same either way.
        readings = (False, True) if "\x1b" in text or "\x9b" in text else (False,)
        for spaced in readings:
            view = _Decoded.of(text, spaced=spaced)
            depth = 0
            while view is not None and depth < 2:
                for hit in self._view_hits(view.text):
                    start, end = view.original(hit.start, hit.end)
                    excerpt = _mask(text[start:end]) if hit.category != PRIVATE_KEY else hit.excerpt
                    found.append(
                        _Found(
                            hit.category, start, end, excerpt, hit.placeholder, hit.identifying,
                            hit.known, hit.value,
                        )
                    )  # fmt: skip
                view = _Decoded.of(view.text, view)
                depth += 1
        # Identifying hits first, so that an opaque value (removed from free text only) never
        # hides a home path or a token inside it; then each stretch of an opaque one that no
        # identifying hit covers, a character at a time (an empty one's where none is around).
        chosen: list[_Found] = []
        for wanted in (True, False):
            layer = sorted(
                (h for h in found if h.identifying is wanted),
                key=lambda h: (h.start, not h.known, h.start - h.end),
            )
            covered = {i for h in chosen for i in range(h.start, h.end)}
            taken: list[_Found] = []
            reach = 0
            for hit in layer:
                if hit.start < reach:  # (every piece taken ends by `reach`)
                    continue
                reach = hit.end
                if wanted or hit.start == hit.end:
                    if not any(h.start < hit.end and hit.start < h.end for h in chosen):
                        taken.append(hit)
                    continue
                taken += _uncovered(hit, covered)
            chosen += taken
            if wanted:  # what the ones taken leave of a known value's match, a character at a time
                for hit in layer:
                    if hit.value and hit.start < hit.end:
                        chosen += _uncovered(
                            hit, {i for h in chosen for i in range(h.start, h.end)}
                        )
        chosen.sort(key=lambda h: h.start)
        return [
            LeakHit(h.category, h.start, h.end, h.excerpt, h.placeholder, h.identifying, h.known)
            for h in chosen
        ]

    def scan_document(self, document: Any) -> list[DocumentHit]:
        """Every private string of a JSON document (object keys included), by location."""
        flat = _Flat.of(document)
        located: list[tuple[int, int, int, LeakHit]] = []
        for hit in self.scan_text(flat.text):
            index = bisect.bisect_right(flat.starts, hit.start) - 1
            if index < 0:
                continue
            offset = flat.starts[index]
            length = flat.length(index)
            start, end = hit.start - offset, min(hit.end - offset, length)
            if start >= length or end <= start:
                continue  # in a separator
            located.append((index, start, end, hit))
        paths = _Flat.paths(document, {index for index, _, _, _ in located})
        return [
            DocumentHit(paths[index], bool(flat.keys[index]), start, end, hit)
            for index, start, end, hit in located
        ]


def _longest_first(known: Known) -> tuple[int, str]:
    return (-len(known.value), known.value)


class _Decoded(leaks._Decoded):
    """`verifier.leaks._Decoded` without its fast path: every text is searched for escapes."""

    @classmethod
    def of(
        cls,
        text: str,
        parent: leaks._Decoded | None = None,
        *,
        escapes: int | None = None,
        spaced: bool = False,
    ) -> leaks._Decoded | int | None:
        regex = cls._SPACED if spaced else cls._ESCAPE
        return None if regex.search(text) is None else cls._decoded(text, parent, escapes, spaced)

    @classmethod
    def _escapes(cls, text: str, spaced: bool = False) -> Iterator[re.Match[str]]:
        # every place tried, not only those of a first character
        return (cls._SPACED if spaced else cls._ESCAPE).finditer(text)


class _Flat:
    """A JSON document's strings joined into one text, and where each string starts.

    Only the text and one offset per string are kept; the locations of the few strings with
    a hit are found by walking the document again, in the same order (`paths`).
    """

    def __init__(self) -> None:
        self.starts = array("q")  # offset of each string in the text
        self.keys = bytearray()  # 1 where the string is an object key
        self._length = 0
        self._pieces: list[str] = []
        self._chunks: list[str] = []
        self.text = ""

    @classmethod
    def of(cls, document: Any) -> _Flat:
        flat = cls()
        flat._walk(document)
        flat._chunks.append("".join(flat._pieces))
        flat.text = "".join(flat._chunks)
        flat._pieces, flat._chunks = [], []
        return flat

    def _add(self, joiner: str, text: str, is_key: bool) -> None:
        self._pieces.append(joiner)
        self._pieces.append(text)
        self._length += 1
        self.starts.append(self._length)
        self._length += len(text)
        self.keys.append(is_key)
        if len(self._pieces) >= 65536:  # join as we go: no list of millions of pieces
            self._chunks.append("".join(self._pieces))
            self._pieces = []

    def _walk(self, node: Any, first: str = SEP) -> None:
        # `first`: what joins a list's first string to what is before it: a member's list
        # goes on from the member's name as a list goes on from its string before
        # (`{"api_keys": ["K1", "K2"]}`: `api_keys` ITEM_SEP `K1` ITEM_SEP `K2`), read
        # as a list's items, not as a member's string value (KEY_SEP)
        if isinstance(node, dict):
            for key, value in node.items():
                self._add(SEP, key, True)
                if isinstance(value, str):
                    self._add(KEY_SEP, value, False)
                elif isinstance(value, dict | list):
                    self._walk(value, ITEM_SEP)
        elif isinstance(node, list):
            joiner = first
            for value in node:
                if isinstance(value, str):
                    self._add(joiner, value, False)
                    joiner = ITEM_SEP
                elif isinstance(value, dict | list):
                    joiner = SEP
                    self._walk(value)
        elif isinstance(node, str):
            self._add(SEP, node, False)

    def length(self, index: int) -> int:
        following = self.starts[index + 1] - 1 if index + 1 < len(self.starts) else len(self.text)
        return following - self.starts[index]

    @staticmethod
    def paths(document: Any, wanted: set[int]) -> dict[int, tuple[str | int, ...]]:
        """The location of each wanted string, counted in the order `_walk` adds them."""
        found: dict[int, tuple[str | int, ...]] = {}
        if isinstance(document, str):
            return {0: ()} if 0 in wanted else {}
        last = max(wanted, default=-1)
        count = 0
        path: list[str | int] = []

        def walk(node: Any) -> None:
            nonlocal count
            if isinstance(node, dict):
                for key, value in node.items():
                    if count in wanted:
                        found[count] = (*path, key)
                    count += 1
                    if isinstance(value, str):
                        if count in wanted:
                            found[count] = (*path, key)
                        count += 1
                    elif isinstance(value, dict | list) and count <= last:
                        path.append(key)
                        walk(value)
                        path.pop()
            else:
                for index, value in enumerate(node):
                    if isinstance(value, str):
                        if count in wanted:
                            found[count] = (*path, index)
                        count += 1
                    elif isinstance(value, dict | list) and count <= last:
                        path.append(index)
                        walk(value)
                        path.pop()

        if isinstance(document, dict | list) and last >= 0:
            walk(document)
        return found


GENERIC = Detector()


def scan_text(text: str) -> list[LeakHit]:
    """The generic detectors over one text."""
    return GENERIC.scan_text(text)


def scan_document(document: Any) -> list[DocumentHit]:
    """The generic detectors over every string of a JSON document."""
    return GENERIC.scan_document(document)


def scan_bytes(data: bytes) -> list[LeakHit]:
    """scan_text over UTF-8 (invalid bytes replaced); offsets count characters, not bytes."""
    return scan_text(data.decode("utf-8", errors="replace"))
