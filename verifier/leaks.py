"""Find private strings (paths, addresses, tokens, keys, e-mail) in text, never echoing them."""

from __future__ import annotations

import bisect
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

HOME_PATH = "home-path"
TEMP_PATH = "temp-path"
IP_ADDRESS = "ip-address"
MAC_ADDRESS = "mac-address"
TOKEN = "token"  # noqa: S105 - a category name, not a credential
EMAIL = "email"
PRIVATE_KEY = "private-key"
CATEGORIES = (HOME_PATH, TEMP_PATH, IP_ADDRESS, MAC_ADDRESS, TOKEN, EMAIL, PRIVATE_KEY)

ELLIPSIS = "…"


@dataclass(frozen=True)
class LeakHit:
    """One private string: where it is and a masked excerpt that is safe to print."""

    category: str  # one of CATEGORIES
    start: int  # character offsets into the scanned text
    end: int
    excerpt: str  # the match with its middle (or, for secrets, everything after a prefix) masked


# A path starts at a word boundary: not inside a longer path ("/srv/home/x") or a word.
_PATH_START = r"(?<![\w.~-])"
_PATH_REST = r"""[^\s"'<>`|;,(){}\[\]\\]*"""
_WIN_SEP = r"(?:\\\\?|/)"  # one backslash, or two as in JSON text, or a slash

_HOME = re.compile(
    rf"""
    {_PATH_START}(?:/home|/Users)/(?!Shared\b)[A-Za-z0-9_][A-Za-z0-9._-]*{_PATH_REST}
    | {_PATH_START}/root/{_PATH_REST}
    | (?<![A-Za-z0-9])[A-Za-z]:{_WIN_SEP}Users{_WIN_SEP}[A-Za-z0-9_][A-Za-z0-9._-]*
      (?:{_WIN_SEP}[^\s"'<>|]*)?
    """,
    re.VERBOSE | re.ASCII,
)
_TEMP = re.compile(
    rf"""{_PATH_START}(?:/tmp|/var/tmp|/var/folders|/private/var|/private/tmp|/dev/shm)
    /[^\s"'<>`|;,(){{}}\[\]\\]+""",
    re.VERBOSE | re.ASCII,
)
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w|\.\d)", re.ASCII)
_IPV6 = re.compile(
    r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%[\w.]+)?(?![\w:]|\.\d)",
    re.ASCII,
)
_MAC = re.compile(
    r"(?<![\w:.-])[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}(?![\w:-])",
    re.ASCII,
)
# Each token pattern names the secret part, so that an excerpt never shows it whole.
_TOKENS = re.compile(
    r"""
      (?<![\w-])hf_(?P<hf>[A-Za-z0-9]{20,})
    | (?<![\w-])sk-(?P<sk>(?=[\w-]*\d)[\w-]{20,})
    | (?<![\w-])(?:gh[pousr]_|github_pat_)(?P<gh>[A-Za-z0-9_]{20,})
    | (?<![A-Za-z0-9])(?:AKIA|ASIA)(?P<aws>[0-9A-Z]{16})(?![A-Za-z0-9])
    | (?<![\w-])xox[abposr]-(?P<slack>[A-Za-z0-9-]{10,})
    | (?<![\w-])(?i:(?:proxy-)?authorization)["']?\s*[:=]\s*["']?
      (?:(?i:basic)\s+(?P<basic>[A-Za-z0-9+/]{8,}={0,2})
        |(?:[A-Za-z][\w-]*\s+)?(?P<auth>(?=[\w.~+/-]*\d)[\w.~+/-]{12,}={0,2}))
    | (?<![\w-])(?i:bearer)\s+(?P<bearer>(?=[\w.~+/-]*\d)[\w.~+/-]{12,}={0,2})
    """,
    re.VERBOSE | re.ASCII,
)
_KEY_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", re.ASCII)
_KEY_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", re.ASCII)
_KEY_MAX_CHARS = 65536
_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![\w-])",
    re.ASCII,
)
# Documentation domains (RFC 2606, RFC 6761) belong to nobody.
_RESERVED_DOMAIN = re.compile(
    r"(?:^|\.)(?:example\.(?:com|net|org)|example|test|invalid|localhost)$", re.IGNORECASE
)
_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")


def _mask(text: str) -> str:
    """Keep a short head and tail, so a reader can find the string but not learn it."""
    head = min(8, len(text) // 2)
    tail = min(4, len(text) // 4)
    return text[:head] + ELLIPSIS + (text[len(text) - tail :] if tail else "")


def _mask_secret(match: re.Match[str]) -> str:
    """Show what comes before the secret and at most its first four characters."""
    group = next(name for name, value in match.groupdict().items() if value is not None)
    secret_start = match.start(group) - match.start()
    secret = match.group(group)
    return match.group()[:secret_start] + secret[: min(4, len(secret) // 5)] + ELLIPSIS


def _is_public_ipv4(text: str) -> bool:
    try:
        address = ipaddress.IPv4Address(text)
    except ValueError:  # an octet over 255 or with a leading zero: not an address
        return False
    return not (address.is_loopback or address in _THIS_NETWORK)


def _is_public_ipv6(text: str) -> bool:
    groups = [g for g in text.split("%", 1)[0].split(":") if g]
    # Conservative: times (12:34:56), C++ scopes (a::b) and "::" alone are not addresses.
    if len(groups) < 2 or not any(c.isdigit() for c in text):
        return False
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return not (address.is_loopback or address.is_unspecified)


def _is_identifying_mac(text: str) -> bool:
    digits = text.replace(":", "").replace("-", "").lower()
    return digits not in ("000000000000", "ffffffffffff")


def _is_personal_email(text: str) -> bool:
    return _RESERVED_DOMAIN.search(text.rsplit("@", 1)[1]) is None


_Rule = tuple[str, re.Pattern[str], Callable[[str], bool] | None, Callable[[re.Match[str]], str]]


def _plain(match: re.Match[str]) -> str:
    return _mask(match.group())


_RULES: tuple[_Rule, ...] = (
    (TOKEN, _TOKENS, None, _mask_secret),
    (HOME_PATH, _HOME, None, _plain),
    (TEMP_PATH, _TEMP, None, _plain),
    (EMAIL, _EMAIL, _is_personal_email, _plain),
    (MAC_ADDRESS, _MAC, _is_identifying_mac, _plain),
    (IP_ADDRESS, _IPV4, _is_public_ipv4, _plain),
    (IP_ADDRESS, _IPV6, _is_public_ipv6, _plain),
)


def _private_keys(text: str) -> list[LeakHit]:
    """Each BEGIN line, through its END line when one follows closely; linear in the text."""
    ends = [match.end() for match in _KEY_END.finditer(text)]
    hits = []
    for match in _KEY_BEGIN.finditer(text):
        end = match.end()
        following = bisect.bisect_left(ends, end + 1)
        if following < len(ends) and ends[following] - end <= _KEY_MAX_CHARS:
            end = ends[following]
        hits.append(LeakHit(PRIVATE_KEY, match.start(), end, match.group() + ELLIPSIS))
    return hits


def scan_text(text: str) -> list[LeakHit]:
    """Every private string in `text`, in order, without overlaps.

    Where two matches overlap (an address inside a home path, a token inside an
    Authorization header), the one that starts first wins, then the longer one.
    """
    found = _private_keys(text)
    for category, pattern, accept, excerpt in _RULES:
        for match in pattern.finditer(text):
            if match.end() == match.start():
                continue
            if accept is not None and not accept(match.group()):
                continue
            found.append(LeakHit(category, match.start(), match.end(), excerpt(match)))
    found.sort(key=lambda hit: (hit.start, hit.start - hit.end))
    kept: list[LeakHit] = []
    for hit in found:
        if not kept or hit.start >= kept[-1].end:
            kept.append(hit)
    return kept


def scan_bytes(data: bytes) -> list[LeakHit]:
    """scan_text over UTF-8 (invalid bytes replaced); offsets count characters, not bytes."""
    return scan_text(data.decode("utf-8", errors="replace"))
