"""Find private strings (paths, names, addresses, tokens, keys) in every form, never echoing them.

One set of detectors, used by `export` (to redact free text and to refuse evidence that holds
a private value) and by `verify` (its leak scan). Export adds what only it knows: the
capture's own paths, user and host names and secret values (`Known`), which it also finds
base64-encoded (`_Base64Cores`); verify runs the generic detectors alone. Both scan the
same views of a text:

- the text as it is;
- the text decoded once and twice (JSON escapes `\\/` and `\\u002f`, percent-encoding
  in either case, HTML references with or without `;`, invisible characters such as
  zero-width spaces and soft hyphens left out), so `%2Fhome%2Fal%2F`, `\\/home\\/al` and
  `&#47home&#47al/` are found as `/home/al/`;

and a JSON document is scanned as one text (`scan_document`): its strings joined with
separators that keep a key next to its value and an argument next to the one before, so
`{"api_token": "..."}` and `["--api-key", "..."]` are found too. The cost is linear in the
text, whatever the number of strings: for each detector, a fast pass (a test of one character,
or a regular expression that starts with a literal) finds where a match can start
(`_Places`), and the detector's own pattern runs only there: the same matches as a search
over the whole text, which `tests/leaks_reference.py` (the plain scan) checks. A document's
table of string offsets is built only when its text has a hit, and verify scans a bundle's
documents a batch at a time as one text (`scan_documents`), each batch without a hit
sparing the cost of scanning its texts one by one. The patterns that a hostile
text could make read one long run again at every place inside it (repeated secret words,
names with values, flags, token prefixes, known user names) decide a run once
(`_secret_members`, `_secret_flags`, `_prefixed_tokens`, `_KnownRegex`, `_AccountNames`,
`_Base64Cores`).

What is private, by kind:

- a home directory of any user, named in Latin, Greek or Cyrillic letters: `/home/u`,
  `/home//u`, `/var/home/u`, `/Users/u`, `/root/...`, `~u/...`, `C:\\Users\\u`,
  `C:\\Documents and Settings\\u`, `/home/ödön` (a user of two letters too);
- temporary directories (`/tmp/x`, `/var/folders/...`);
- IP addresses other than loopback: IPv6 in every notation (compressed, zone ids, IPv4-mapped,
  letters only); IPv4 in a private range, or in a public one where the text says it is an
  address (`http://`, `@`, `:port`, `host`, `ip`, a name that ends in one such word:
  `remote_addr=`, `clientIp:`...). A dotted number after a version word
  (`version`, `runtime`, `cuda`...) or inside a name (`v1.0.0.1`, `lora-1.0.0.2.safetensors`,
  `libcublas.so.13.0.2.14`) is a version, and so is a public one without such context;
- MAC addresses, e-mail addresses outside the documentation domains (an IDN domain's
  letters included: `al@bücher.de`), `user@host`, URLs
  whose host is a local machine name (one label, or `.local`, `.lan`, `.internal`...);
- tokens: the known prefixes (`hf_`, `sk-`, `ghp_`, `AKIA`, `sk_live_`, `npm_`,
  `pypi-AgE`, `gsk_`, `xai-`, `nvapi-`, `ya29.`...), JSON Web Tokens
  (`eyJ...`.`eyJ...`.`...`), AWS secret access keys, and any value after a key-like name
  (`*_KEY`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, Azure's `AccountKey`, `Authorization:`,
  `Bearer`, `Cookie:`),
  whatever its alphabet; the value of a secret flag, as `--flag=value`, `--flag value`
  or the next argument of a command line;
- private key blocks (one with no END line: to the end of its string).

Export also finds the values it knows in base64 (wrapped in lines or not, of their UTF-8,
UTF-16LE or UTF-16BE bytes, of a path with JSON's escaped slashes, and base64 of that
base64), in base32 (both alphabets) and in hex (of UTF-8, UTF-16LE or UTF-16BE, in any case;
a pair a byte with separators, quoted-printable, C's `0x2f, 0x68`; in hex dumps as their
tools lay them out: `_dump_hits`), cut by line breaks (`_wrapped_hits`), as decimal bytes, in base85
(`base85_cores`), in UTF-16LE read as Latin-1 (`_spread_hits`), in gzip, zlib, bzip2 or xz
data in base64 (`_compressed_hits`); in their other spellings (NFC and NFD, a host's IDNA
form, ROT13, reversed, spaced out, an address as one number or in dotted octal or hex:
`spellings`) and in fullwidth forms (`ｇｂ１０`); a user name in account forms (`user: al`,
`{"login": "al"}`, `{"user_name": ["al"]}`, `uid=1000(al)`, `'al'@'localhost'`, `USER al`)
and in a home relative to `/` (`home/al/x`, `../Users/al`); a host name where a member
or a line names the machine (`{"hostname": "h"}`, `node_name=h`, `Host: h`), a long
secret inside a longer token, a string the user named private anywhere and in any case, an
address with padded octets.
"""

from __future__ import annotations

import base64
import bisect
import codecs
import contextlib
import enum
import functools
import heapq
import ipaddress
import itertools
import json
import os
import re
import string
import sys
import unicodedata
import zlib
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, TypeVar

from verifier.model import json_pointer

HOME_PATH = "home-path"
TEMP_PATH = "temp-path"
IP_ADDRESS = "ip-address"
MAC_ADDRESS = "mac-address"
TOKEN = "token"  # noqa: S105 - a category name, not a credential
EMAIL = "email"
PRIVATE_KEY = "private-key"
USER_NAME = "user-name"
HOST_NAME = "host-name"
CATEGORIES = (
    HOME_PATH,
    TEMP_PATH,
    IP_ADDRESS,
    MAC_ADDRESS,
    TOKEN,
    EMAIL,
    PRIVATE_KEY,
    USER_NAME,
    HOST_NAME,
)
# Not a category of private string: the last hit of a scan that stopped at its `most`
# (Detector.scan_text), where it stopped. A text that holds that many hits leaks, whatever
# else it holds; what it holds past them is not read.
TOO_MANY = "too-many"
# What export writes in place of a value found by a generic detector.
PLACEHOLDERS = {
    HOME_PATH: "/path/to/home",
    TEMP_PATH: "/path/to/tmp",
    IP_ADDRESS: "<ip>",
    MAC_ADDRESS: "<mac>",
    TOKEN: "<token>",
    EMAIL: "<email>",
    PRIVATE_KEY: "<private-key>",
    USER_NAME: "<user>",
    HOST_NAME: "<host>",
}

ELLIPSIS = "…"
# The ledger's placeholder for a value the exporter was told is not private (`--allow`):
# verify reports a hit at such a place as information, not as a leak.
ALLOWED_PLACEHOLDER = "(allowed: declared not private with --allow; kept)"

# Joiners of the strings of a JSON document scanned as one text (`scan_document`).
SEP = "\x00"  # between unrelated strings
KEY_SEP = "\x01"  # between an object key and its string value
ITEM_SEP = "\x02"  # between two strings that follow each other in an array
_SEPS = SEP + KEY_SEP + ITEM_SEP


@dataclass(frozen=True)
class LeakHit:
    """One private string: where it is and a masked excerpt that is safe to print."""

    category: str  # one of CATEGORIES
    start: int  # character offsets into the scanned text: the part to replace
    end: int
    excerpt: str  # the match with its middle (or, for secrets, everything after a prefix) masked
    placeholder: str = ""
    identifying: bool = True
    """False for a value export removes from free text only (an environment value)."""
    known: bool = False
    """Found by a path or value the exporter knows, which wins over a pattern at the same
    place (`/path/to/model/x` rather than `/path/to/home`); a name found in an account
    form does not (`<user>@<host>` rather than `<user>@host`)."""


class KnownKind(enum.Enum):
    PATH = "path"  # a private path: also as the prefix of a longer path
    USER = "user"  # a user name: only where it names an account
    HOST = "host"  # a host name: only where it names a machine
    SECRET = "secret"  # noqa: S105 - a kind name: an opaque value, exact case; as a whole
    # token, or inside a longer one where it is long (`_GLUED_SECRET`)
    OPAQUE = "opaque"  # like SECRET, but not identifying: removed from free text only
    ADDRESS = "address"  # an IPv4 address: where the generic detector would take it for one
    STRING = "string"  # a string the user named private: everywhere, in any case


@dataclass(frozen=True)
class Known:
    """A private value the exporter knows from the raw capture, with its placeholder."""

    value: str
    category: str
    placeholder: str
    kind: KnownKind


class _Lazy:
    """A regular expression compiled where it is first used. Most texts need none of these
    (what checks a candidate, the rare detectors, export's own): compiling them at import
    would cost every start-up."""

    __slots__ = ("_flags", "_pattern", "_regex")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern, self._flags = pattern, flags
        self._regex: re.Pattern[str] | None = None

    @property
    def regex(self) -> re.Pattern[str]:
        if self._regex is None:
            self._regex = re.compile(self._pattern, self._flags)
        return self._regex

    @property
    def pattern(self) -> str:
        return self._pattern

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.regex.search(text, pos, endpos)

    def match(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.regex.match(text, pos, endpos)

    def fullmatch(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.regex.fullmatch(text, pos, endpos)

    def finditer(
        self, text: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[str]]:
        return self.regex.finditer(text, pos, endpos)


# ---------------------------------------------------------------------------------------------
# Generic detectors

_PATH_REST = r"""[^\s"'<>`|;,(){}\[\]\\\x00-\x02]*"""
_WIN_SEP = r"(?:\\\\?|/)"  # one backslash, or two as in JSON text, or a slash

# Each pattern starts with a literal character and checks what precedes it afterwards: the
# regular expression engine then skips quickly to the places worth trying.
# One or more slashes, not inside a longer path or a word, with `./` between them (`/./`);
# or a local file URL's path (`file://localhost/home/al`); or a path glued to a one-letter
# option (a compiler's `-I/home/al/include`, `-L...`, and its `-isystem`, `-iquote`).
_SLASH = (
    r"/(?:(?<=(?i:file://localhost)/)|(?<![\w.~/-]/)|(?<=(?<![.~/-])-/)"
    + "".join(rf"|(?<=(?<![\w./~-])-{flag}/)" for flag in ("[A-Za-z]", "isystem", "iquote"))
    + r")(?:/|\./)*+"
)
_S = r"/++(?:\./++)*+"  # a separator inside a path: `/`, `//`, `/./`...
# A user's own directory: its name may be any letters (`/home/ödön`, `/Users/Émilie`); the
# rest of the path (`_PATH_REST`) takes any character but a delimiter.
# Letters of the Latin, Greek and Cyrillic scripts past ASCII (no `×` or `÷`), and the
# combining marks of a name written decomposed: not punctuation (`…`, `“`, a no-break
# space) nor CJK, whose prose puts `~` and `/` between words (`周一~周五`).
_LETTER_RANGES = (
    (0xC0, 0xD6),
    (0xD8, 0xF6),
    (0xF8, 0x24F),
    (0x300, 0x36F),
    (0x370, 0x3FF),
    (0x400, 0x52F),
)
_LETTER = "".join(f"{chr(low)}-{chr(high)}" for low, high in _LETTER_RANGES)
_LETTER_CHARS = frozenset(chr(c) for low, high in _LETTER_RANGES for c in range(low, high + 1))
# The Latin-1 symbols that UTF-8 read as Latin-1 or Windows-1252 puts after `Ã` (mojibake
# of `ö` is `Ã¶`), taken in a name: not the quotes and marks that stand around a word, `«`,
# `»`, `¡`, `¿` (`«alice@lab-07»`).
_MOJIBAKE_RANGES = ((0xA2, 0xAA), (0xAC, 0xBA), (0xBC, 0xBE))
_MOJIBAKE_SYMBOLS = "".join(f"{chr(low)}-{chr(high)}" for low, high in _MOJIBAKE_RANGES)
_MOJIBAKE_CHARS = frozenset(chr(c) for low, high in _MOJIBAKE_RANGES for c in range(low, high + 1))
_NAME_START = rf"[A-Za-z0-9_{_LETTER}]"
_NAME_CHAR = rf"[A-Za-z0-9._{_LETTER}-]"
# A home's name in another script. One that puts spaces between its words (Armenian,
# Hebrew, Arabic, the Indic scripts, Georgian, Ethiopic; the rest of Latin and Greek) is
# read as a Latin one is: its letters start a name (`/home/राम`, `C:\Users\محمّد`), and its
# blocks, with their combining marks, go on one. One that does not, CJK, kana and Hangul,
# whose prose glues a word to a folder's name (`用户目录都在/home/下。`, `/home/에 있습니다`,
# `把/home/与/var/分开`), is a name only of two characters or more before a separator
# (`/home/李雷/x`, `C:\Users\山田 太郎\x`). Thai, Lao, Khmer, Myanmar and Tibetan, which
# write prose as CJK does, and whose words are as long as names, are no generic name's.
_SPACED_BLOCKS = (
    (0x0530, 0x07BF),  # Armenian, Hebrew, Arabic, Syriac, Thaana
    (0x0900, 0x0DFF),  # the Indic scripts, Sinhala
    (0x10A0, 0x10FF),  # Georgian
    (0x1200, 0x139F),  # Ethiopic
    (0x1E00, 0x1FFF),  # Latin Extended Additional (Vietnamese), Greek Extended
)
_SPACED = "".join(f"{chr(low)}-{chr(high)}" for low, high in _SPACED_BLOCKS)
_COMBINING = "\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"  # (the marks' own blocks)
_SPACED_START = rf"(?=(?u:\w))[{_SPACED}]"  # (a letter or a digit, not `،` or `।`)
_GLUED_BLOCKS = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3040, 0x30FF),  # kana
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),  # CJK
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),  # Hangul
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),  # halfwidth kana
)
_GLUED = "".join(f"{chr(low)}-{chr(high)}" for low, high in _GLUED_BLOCKS)
# What goes on with a Windows home's name: a letter of Latin, Greek, Cyrillic or a spaced
# script, with their marks, and of mojibake the symbols the comment on `_WINDOWS_HOME`
# names; a glued script's, or any letter (`_NAME_TAIL`: `C:\Users\li李雷\`), only in a
# run a separator or a quote ends: its prose runs on from a path (`C:\Users\bob的MAC地址是
# aa:bb:...`: a name that took it hid the address's start from its pattern, helper-127).
_WIN_NAME_CHAR = rf"[A-Za-z0-9._{_LETTER}{_SPACED}{_COMBINING}{_MOJIBAKE_SYMBOLS}-]"
# (and a name's middle dot, `ジョン・スミス`; `·` of `阿卜杜·买买提` is of `_MOJIBAKE_SYMBOLS`)
_NAME_TAIL = rf"(?u:[\w.{_LETTER}{_SPACED}{_COMBINING}{_MOJIBAKE_SYMBOLS}\u30fb-])"
_GLUED_NAME = rf"(?=(?u:\w))[{_GLUED}]{_NAME_TAIL}++"
# An apostrophe inside a name, before a letter (`o'brien`, `D’Angelo`, Hebrew's `ג'ון`; as a
# shell quotes it in a quoted word, `'"'"'` and `'\''`, and YAML and SQL, `''`): not a quote
# that closes a path (`'C:\Users\bob'`, `['/home/al', ...]`). The name's run after it goes
# whole, and only where what follows is not glued to a name as an address's next part is
# (`@`, `::`, or `:` between hex digits): `C:\Users\bob'aa:bb:cc:dd:ee:ff` is `bob` and a
# MAC address, `C:\Users\al'fe80::1` an IPv6 one, `C:\Users\al'root@host` an account;
# `C:\Users\o'brien: denied` and `/home/o'brien:1000` are `o'brien`.
_APOSTROPHE = rf"(?:'\"'\"'|'\\{{1,2}}''|''|['\u2019])(?=[A-Za-z{_LETTER}{_SPACED}])"
_AFTER_APOSTROPHE = r"(?!@|:[0-9A-Fa-f]{1,4}:|::)"
# A glued script's name of two characters or more (`_GLUED_NAME`) ends at a separator; also
# at its text's end or its string's in a document, at white space (the ideographic space
# too), at what ends a word of code or of a shell (`` ` ``, `<`, `>`, `|`, `;`, `,`, `)`,
# `]`, `}`, `!`, `?`, `*`, `: `: `C:\Users\李雷>dir`, `ls /home/李雷|head`, `cd: /home/李雷:
# No such file`), at CJK's own closing quotes and punctuation (`“/home/李雷”`, `「...」`,
# `。`, `、`, `，`), or at a quote that closes it (`"C:\Users\李雷"`, not
# `C:\Users\下的"AppData"`): prose goes on glued after a
# folder's name, not past those. Before a `:` that starts another path (`PATH=/home/李雷:
# /usr/bin`) only where the name is the script's letters alone: a name that took ASCII
# letters may have taken a URL's scheme (`/home/用户的网站http://u:pw@h`).
_NAME_ENDS = r"[\x00-\x02]|\Z"
_GLUED_END = (
    rf"{_NAME_ENDS}|[\s\u3000`<>|;,)\]}}!?*]|:\s|[\"'](?!(?u:\w))"
    "|[\u201d\u2019\u300d\u300f\u300b\uff09\u3011\u3002\u3001\uff0c\uff01\uff1f\uff1a\uff1b]"
)
_GLUED_ONLY = rf"(?=(?u:\w))[{_GLUED}][{_GLUED}\u30fb]++"
_HOME_NAME_CHAR = rf"[A-Za-z0-9._{_LETTER}{_SPACED}{_COMBINING}-]"
_HOME_DIR = (
    rf"(?:(?:{_NAME_START}|{_SPACED_START}){_HOME_NAME_CHAR}*"
    rf"(?:{_APOSTROPHE}{_HOME_NAME_CHAR}++{_AFTER_APOSTROPHE})*"
    rf"|{_GLUED_NAME}(?=/|{_GLUED_END})|{_GLUED_ONLY}(?=:[/~$]))"
)
# A Windows home's name (`_WINDOWS_HOME`, `_WSL_HOME`, `/mnt/c/Users/`), before its words
# after a space (a glued script's with its words: `C:\Users\山田 太郎\`, before a separator).
_WIN_NAME = (
    rf"(?:(?:{_NAME_START}|{_SPACED_START}){_WIN_NAME_CHAR}*"
    rf"(?:{_APOSTROPHE}{_WIN_NAME_CHAR}++{_AFTER_APOSTROPHE})*"
    rf"(?:{_NAME_TAIL}++(?={_WIN_SEP}|[\"']|{_NAME_ENDS}))?"
    rf"|{_GLUED_NAME}(?:(?:\ {_NAME_TAIL}++)+(?={_WIN_SEP}|[\"'](?!(?u:\w)))"
    rf"|(?={_WIN_SEP}|{_GLUED_END})))"
)
# A Windows home's words after its name's first (`Bob Smith`, `Mary O'Brien`), where a
# separator or a quote follows them (a path with a space is quoted: `"C:\Users\Bob Smith"`),
# or, each a capital's word as a name's are, what ends a word of code or of a shell, a line
# or a text (`USERPROFILE=C:\Users\Bob Smith` on a line of its own, PowerShell's prompt
# `PS C:\Users\Bob Smith>`; not prose's `C:\Users\bob and more`).
_WIN_WORDS = (
    rf"(?:(?:\ (?:{_NAME_TAIL}|{_APOSTROPHE})++)+(?={_WIN_SEP}|[\"'])"
    rf"|(?:\ [A-Z\u00c0-\u00d6\u00d8-\u00de](?:{_NAME_TAIL}|{_APOSTROPHE})*+)+"
    rf"(?=[`<>|)\]\r\n]|{_NAME_ENDS}))?"
)
# /home/al, /var/home/al (Silverblue), /usr/home/al (FreeBSD), /Users/al and macOS's
# /System/Volumes/Data/Users/al, /root; C:\Users\al as WSL (/mnt/c/...), Cygwin
# (/cygdrive/c/...) and MSYS2 (/c/...) name it; ~al.
_HOME = _Lazy(
    rf"""
      {_SLASH}(?:(?:var|usr){_S})?home{_S}{_HOME_DIR}{_PATH_REST}
    | {_SLASH}(?:System{_S}Volumes{_S}Data{_S})?Users{_S}(?!Shared\b)
      {_HOME_DIR}{_PATH_REST}
    | {_SLASH}root/++{_PATH_REST}
    | {_SLASH}(?:(?:mnt|cygdrive){_S})?[A-Za-z]{_S}(?i:users|documents\ and\ settings|docume~[0-9])
      {_S}
      {_WIN_NAME}{_WIN_WORDS}{_PATH_REST}  # (a name: `Bob Smith`)
    | ~(?<![\w~$]~)(?![A-Za-z]/[0-9]+(?:\.[0-9]+)?(?![\w/-]|\.\w))  # (`~n/2`: maths)
      [A-Za-z_{_LETTER}](?:{_NAME_CHAR}|{_APOSTROPHE})*(?:/{_PATH_REST}|(?=[\x00-\x02]|\Z))
    """,
    re.VERBOSE | re.ASCII,
)
# C:\Users\name, and C:\Documents and Settings\name (before Vista), in any case
# (c:\users\name): the match starts at the colon; its drive letter is added back. A
# Windows user's folder can hold spaces (`C:\Users\Bob Smith\AppData`): words after a
# space are the name's where a separator or a quote follows them (a path with a space is
# quoted: `"C:\Users\Bob Smith"`).
# ... and in a Windows home's name also the symbols of a name's mojibake (`_MOJIBAKE_SYMBOLS`:
# `C:\Users\jÃ¶rg`, mojibake of `jörg`). Not every character mojibake puts there (`¡` of
# `ZoltÃ¡n`, Windows-1252's `‘` of `ErdÅ‘s`): a name that took them would take what follows
# a name too (`C:\Users\José—aa:bb:cc:dd:ee:ff`, `Strauß\xa0root@host`: helper-124 and
# helper-125), and hide the next token's start from its own pattern. Of a known name, what
# the home's match leaves is a hit of its own (`Detector.scan_text`). What a name takes:
# `_WIN_NAME`.
_WINDOWS_HOME = _Lazy(
    rf""":(?<=[A-Za-z]:)(?<![A-Za-z0-9][A-Za-z]:){_WIN_SEP}
    (?i:users|documents\ and\ settings|docume~[0-9]){_WIN_SEP}
    {_WIN_NAME}{_WIN_WORDS}
    (?:{_WIN_SEP}[^\s"'<>|\x00-\x02]*)?""",
    re.VERBOSE | re.ASCII,
)
# A WSL home as Windows reaches it: \\wsl$\Ubuntu\home\al, \\wsl.localhost\Ubuntu\root.
_WSL_HOME = _Lazy(
    rf"""(?<![\\\w/])(?:\\\\?\\\\?|//)(?i:wsl\$|wsl\.localhost){_WIN_SEP}[A-Za-z0-9._-]+{_WIN_SEP}
    (?:home{_WIN_SEP}{_WIN_NAME}{_WIN_WORDS}|root)
    (?:{_WIN_SEP}[^\s"'<>|\x00-\x02]*)?""",
    re.VERBOSE | re.ASCII,
)
_TEMP = _Lazy(
    rf"""{_SLASH}(?:tmp|var/++tmp|var/++folders|private/++var|private/++tmp|dev/++shm)
    /++[^\s"'<>`|;,(){{}}\[\]\\\x00-\x02]+""",
    re.VERBOSE | re.ASCII,
)
# An IPv4 address is not inside a longer number or name (`10.0.0.7.1`, `lora-10.0.0.7.bin`),
# but may be glued after a word by a dash or an underscore, one or two (`worker_10.0.3.17`,
# `node1--10.0.3.17`, `hôte-192.168.3.17`), where only a private one counts, and one of 10/8
# only after a machine's word (`_is_public_ipv4`): a version is written so too
# (`libcurand-10.3.5.147`, `lora-34.12.5.6`); and it may lead a name of a DNS service that
# answers any name with the address it spells (`10.0.3.17.nip.io`, `app.34.12.5.6.sslip.io`).
_IPV4_BEFORE, _IPV4_AFTER = r"(?<![\w.-])", r"(?!\w|\.\w)"
_IPV4_GLUED = r"(?u:(?<=[^\W_][-_])|(?<=[^\W_][-_]{2}))"  # (after any letter or digit)
_WILDCARD_DNS = r"\.(?i:nip|sslip)\.(?i:io)(?![\w-]|\.\w)"
_IPV4_OCTETS = r"(?:\d{1,3}\.){3}\d{1,3}"
# Not inside a longer dotted number (`1.34.12.5.6.nip.io`), but after a label that ends in a
# digit (`node1.10.0.3.17.nip.io`).
_NOT_IN_NUMBER = "(?<![0-9])" + "".join(
    rf"(?<!(?<![A-Za-z0-9_-])[0-9]{{{n}}}\.)" for n in (1, 2, 3)
)
_IPV4 = _Lazy(
    rf"(?:{_IPV4_BEFORE}|{_IPV4_GLUED}){_IPV4_OCTETS}{_IPV4_AFTER}"
    rf"|{_NOT_IN_NUMBER}{_IPV4_OCTETS}(?={_WILDCARD_DNS})",
    re.ASCII,
)
_IPV6 = _Lazy(
    r"""(?<![\w:.])
    (?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?
    (?:%(?:25)?[A-Za-z0-9_.-]+)?
    (?![\w:]|\.\w)""",
    re.VERBOSE | re.ASCII,
)
# Six bytes by colons or dashes, or three groups of four digits by dots (Cisco's notation,
# which a hash or a version can look like: only after a word that says it is an address).
_MAC = _Lazy(
    r"(?<![\w:.-])[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}(?![\w:-])"
    r"|(?<![\w.-])(?P<cisco>[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4})(?![\w:-]|\.\w)",
    re.ASCII,
)
# The words before a MAC address in Cisco's notation: `mac`, `hwaddr`, `ether`, `lladdr`...
# then at most four characters that are not letters or digits, up to the address.
_MAC_WORD_BEFORE = _Lazy(
    r"(?i:mac|hwaddr|ether|lladdr|bssid|address|addr|hw)[^A-Za-z0-9]{0,4}\Z", re.ASCII
)
# A cloud machine's name that spells its address (`ip-10-0-3-17`, EC2's private names).
# (in any case, and as a label of a longer name: `k8s-ip-10-0-3-17`, `node_ip-...`)
_DASHED_IPV4 = _Lazy(
    r"(?<![A-Za-z0-9.])(?i:ip)-(?:[0-9]{1,3}-){3}[0-9]{1,3}(?![\w]|-[0-9])", re.ASCII
)
# Its local part and domain may hold letters past ASCII (`jöns@bücher.de`): the whole address
# goes, not the ASCII part before a letter (which `_ACCOUNT` would take for `user@host`).
_EMAIL = _Lazy(
    rf"(?<![\w.%+{_LETTER}-])[A-Za-z0-9{_LETTER}][A-Za-z0-9._%+{_LETTER}-]*"
    rf"@(?:[A-Za-z0-9{_LETTER}-]+\.)+[A-Za-z{_LETTER}]{{2,}}(?![\w{_LETTER}-])",
    re.ASCII,
)
# user@host where host is one label (ssh-style), not an e-mail address.
# (A name's characters past its first letter take the Latin-1 symbols that UTF-8 read as
# Latin-1 puts after `Ã`: `jÃ¶rg@mÃ¼ller`, mojibake of `jörg@müller`, whole. A symbol
# after a name's character is the name's, so the name starts before it; one that starts a
# run stands before the name, `§root@build-host`, as it did before names took them.)
_ACCOUNT_CHAR = rf"A-Za-z0-9{_LETTER}{_MOJIBAKE_SYMBOLS}"
_ACCOUNT = _Lazy(
    rf"(?<![\w.%+@{_LETTER}-])(?<![{_ACCOUNT_CHAR}._-][{_MOJIBAKE_SYMBOLS}])"
    rf"(?P<user>[A-Za-z_{_LETTER}][{_ACCOUNT_CHAR}._-]*)"
    rf"@(?P<host>[A-Za-z{_LETTER}][{_ACCOUNT_CHAR}-]*)(?![\w.@{_LETTER}{_MOJIBAKE_SYMBOLS}-])",
    re.ASCII,
)
# A URL's credentials: a user name, which may hold an apostrophe before a letter
# (`o'brien`), `@` (an e-mail address, `https://alice@corp.de:PW@host`), `?` and `#`, and
# does not start as an IPv6 literal does (`http://[::1]:8080`); a password, after the first
# `:`, which may hold `@` written as it is (`p@ss`: the last `@` before the host ends it,
# as URL parsers read it), `?` and `#`, and an apostrophe not before the punctuation of a
# list or of code (`'http://host:8080', 'a@b'`, `'...'+'a@b'`). After a user's name, no port
# before a query or a quote (`localhost:3000?next=a@b`, `'http://host:8080'+'a@b'`); after
# none (`redis://:PW@h`) there is no port.
_URL_USER = r"(?:[^\s/:\"'\x00-\x02]|'(?=[A-Za-z]))"
_URL_PASSWORD = r"(?:[^\s/\"'\x00-\x02]|'(?![\s,;:)\]}+.']))"  # noqa: S105 - a pattern
_NO_PORT = r"(?:(?<=//:)|(?![0-9]{1,5}[?']))"
_URL_HOST = _Lazy(
    rf"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{{0,31}}://"
    rf"(?:(?!\[){_URL_USER}*(?::{_NO_PORT}{_URL_PASSWORD}*)?@)?"
    r"(?P<host>[A-Za-z][A-Za-z0-9.-]*)(?=[:/?#\]\s\"'\x00-\x02]|\Z)",
    re.ASCII,
)
# A password in a URL's credentials (`https://user:PASSWORD@host`, `redis://:PASSWORD@h`):
# its secret part; and the user it is the password of, a name of its own. It starts where
# `_URL_HOST` does.
_URL_CREDENTIALS = _Lazy(
    rf"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{{0,31}}://(?P<urluser>(?!\[){_URL_USER}{{0,128}}):"
    rf"{_NO_PORT}(?P<urlpassword>(?![<@]){_URL_PASSWORD}{{1,256}})@",
    re.ASCII,
)
# Each token pattern names the secret part: what is replaced, and never shown in an excerpt.
_VALUE_FIRST = r"[^\s\"'<>`,;(){}\[\]\x00-\x02$*%]"
_VALUE_CHAR = r"[^\s\"'<>`,;(){}\[\]\x00-\x02]"
_TOKEN_VALUE = _VALUE_FIRST + _VALUE_CHAR
_PREFIXED_TOKENS = _Lazy(
    r"""
      hf_(?P<hf>[A-Za-z0-9]{20,})
    | sk-(?P<sk>[\w-]{20,})
    | (?:gh[pousr]_|github_pat_)(?P<gh>[A-Za-z0-9_]{20,})
    | glpat-(?P<gl>[\w-]{20,})
    | AIza(?P<google>[0-9A-Za-z_-]{35})
    | (?:AKIA|ASIA)(?P<aws>[0-9A-Z]{16})(?![A-Za-z0-9])
    | xox[abposr]-(?P<slack>[A-Za-z0-9-]{10,})
    | hooks\.slack\.com/(?:services|workflows|triggers)/(?P<slackhook>[A-Za-z0-9_/-]{20,})
    | [sr]k_(?:live|test)_(?P<stripe>[0-9A-Za-z]{16,})
    | pypi-(?P<pypi>AgE[A-Za-z0-9_-]{40,})
    | npm_(?P<npm>[A-Za-z0-9]{36})(?![A-Za-z0-9])
    | eyJ(?P<jwt>[A-Za-z0-9_-]{10,}+\.eyJ[A-Za-z0-9_-]{4,}+\.[A-Za-z0-9_-]*+)
    | (?i:discord(?:app)?\.com)/api/(?:v[0-9]{1,2}/)?webhooks/
      (?P<discordhook>[0-9]+/[A-Za-z0-9_-]{20,})
    | (?:bot)?(?P<telegram>[0-9]{8,12}:AA[A-Za-z0-9_-]{33})(?![A-Za-z0-9_-])
    | gsk_(?P<groq>[A-Za-z0-9]{40,})
    | xai-(?P<xai>[A-Za-z0-9]{40,})
    | pplx-(?P<pplx>[A-Za-z0-9]{40,})
    | nvapi-(?P<nvapi>[A-Za-z0-9_-]{40,})
    | r8_(?P<replicate>[A-Za-z0-9]{30,})
    | ya29\.(?P<googleoauth>(?=[A-Za-z0-9_.-]{30})[A-Za-z0-9_-]++
      (?:\.(?![A-Za-z0-9_-]*ya29\.)[A-Za-z0-9_-]++)*+)
    | SG\.(?P<sendgrid>[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])
    | do[opr]_v1_(?P<digitalocean>[a-f0-9]{64})
    """,
    re.VERBOSE | re.ASCII,
)
_AWS_SECRET = _Lazy(
    r"(?<![A-Za-z0-9/+=])(?P<awssecret>[A-Za-z0-9][A-Za-z0-9/+]{38}[A-Za-z0-9])(?![A-Za-z0-9+=])",
    re.ASCII,
)
# One name=value pair of a cookie header. The pairs are told apart by `;`, which neither
# side holds, so the list is read in one pass; which value is a session's is `_accept_token`'s.
_COOKIE_PAIR = r"""[A-Za-z0-9!#$%&'*+.^_`|~-]+=[^\s;"'<>{}\x00-\x02]*"""
_AUTH_TOKENS = _Lazy(
    rf"""
      (?<![\w-])(?i:(?:proxy-)?authorization)["']?[ \t]*[:=\x01][ \t]*["']?
      (?:(?i:basic)\s+(?P<basic>[A-Za-z0-9+/]{{8,}}={{0,2}})
        |(?:[A-Za-z][\w-]*[ \t]+)?(?P<auth>{_TOKEN_VALUE}{{7,}}))
    | (?<![\w-])(?i:bearer)[ \t]+(?P<bearer>{_TOKEN_VALUE}{{11,}})
    | (?<![\w-])(?i:pass(?:word|wd|phrase))[ \t]+(?P<spacedpass>{_TOKEN_VALUE}{{7,}})
    | (?<![\w-])(?i:(?:set-)?cookie)["']?[ \t]*[:\x01][ \t]*["']?
      (?P<cookie>{_COOKIE_PAIR}(?:;[ \t]*{_COOKIE_PAIR})*)
    """,
    re.VERBOSE | re.ASCII,
)
_SECRET_WORD = (  # a regular expression, not a password
    r"(?:key|token(?!s|iz)|secret|pass(?:w(?:or)?d|phrase)?|pwd|sig(?:nature)?"  # noqa: S105
    r"|credential|auth)"
)
# --name=value, --name value, or the next argument of a command line (joined by ITEM_SEP);
# the space may be a line's continuation (bash's `\` and cmd's `^`; PowerShell's `` ` ``
# after a space, as a backtick at a line's end also closes Markdown's inline code,
# `` `--api-key` ``, helper-128), and the next flag (`--use_auth_token \` and `--output_dir`
# on the next line) is none's value. A value in quotes, `--api-key "..."`, and the next item
# of a list that a program printed its arguments as, `['--api-key', '...']` (or `json.dumps`
# with an indent, each item on its own line; or a YAML block list, `- --api-key` then
# `- ...`), are one only where they have a key's random
# shape (`_flag_value_shape`): in a reply that explains a command line, or code that builds
# one, they are most often a placeholder (`"your-api-key"`, `'sk-xxxx'`, `"abc123"`), and a
# quoted value may hold spaces that a pattern cannot end it at. (A capture's own secrets
# are known values, found anyway.)
# (what leads from a flag to the next item of a list: a printed one's `', '`; a flow list's
# `, ` (`[--api-key, KEY]`); a YAML block list's next item, `- --api-key` and `- KEY` as a
# container's `args:` hold them, past a comment, blank lines and lines of comments, and a
# block scalar's `|` or `>-` before the value's own line)
# (A comment is read to 100 characters, and past 8 lines of comments or blank ones at most:
# each flag at a line's end reads on from there, and `# --api-key` on every line of a
# text would read the whole rest of it from each, helper-131.)
_YAML_REST = r"[ \t]*+(?:\#[^\r\n\x00-\x02]{0,100}+)?+"  # (spaces, a comment to the line's end)
_FLAG_ITEM_GAP = (
    r"""(?:["']?[ \t]*,[ \t]*(?:\r?\n[ \t]*)?["']?"""
    rf"""|["']?{_YAML_REST}(?:\r?\n{_YAML_REST}){{0,8}}?\r?\n[ \t]*-[ \t]+"""
    rf"""(?:[|>](?:[1-9]?[+-]?|[+-][1-9]){_YAML_REST}\r?\n[ \t]*)?["']?)"""
)
_FLAG_GAP = r"(?:[ \t]+(?:[\\`^]\r?\n[ \t]*)?|[\\^]\r?\n[ \t]*)"
_SECRET_FLAG = _Lazy(
    rf"""(?<![\w-])-{{1,2}}(?P<flagname>(?:[A-Za-z][\w-]*?)?(?i:{_SECRET_WORD})[\w-]*)
      (?:=(?P<flagvalue>[^\s\"'<>\x00-\x02][^\s\"'\x00-\x02]*)
        |\x02(?P<flagnext>[^<\x00-\x02-][^\x00-\x02]*|-(?!-)[^\x00-\x02]*)
        |{_FLAG_GAP}(?!--|\#)(?:(?P<flagword>{_TOKEN_VALUE}{{5,}})|["'](?P<flagquoted>{_TOKEN_VALUE}{{5,}}))
        |{_FLAG_ITEM_GAP}(?P<flagitem>(?!-){_TOKEN_VALUE}{{5,}}))
    """,
    re.VERBOSE | re.ASCII,
)
# NAME=value, NAME: value, or an object member {"NAME": "value"} (joined by KEY_SEP); the
# first of a list so written in a text (`_LIST_OPENER`: vLLM's start-up line `non-default
# args: {..., 'api_key': ['KEY']}`, `"api_keys": [\n  "KEY"`, a YAML block list), whose
# items `secret_lists` reads. The match starts at the secret word; the rest of the name
# before it is found by `_name_before`. (Not a tuple's `(`: `auth=(username, password)` is
# code.)
_LIST_OPENER = r"(?:\[\s*|\r?\n[ \t]*-[ \t]+)?"
_SECRET_MEMBER = _Lazy(
    rf"""(?i:{_SECRET_WORD})[\w.-]*["']?[ \t]*
      (?:[:=]|\x01)[ \t]*{_LIST_OPENER}["']?(?P<keyvalue>{_TOKEN_VALUE}{{5,}})
    """,
    re.VERBOSE | re.ASCII,
)
# What opens a list after a secret's name, to its first item (`secret_lists`): `: [`, `= [`,
# a YAML block list's `:\n- `, or a document's member whose value is a list (ITEM_SEP).
_LIST_HEAD = _Lazy(r"""["']?[ \t]*(?:[:=\x01][ \t]*(?:\[\s*|\r?\n[ \t]*-[ \t]+)|\x02)""", re.ASCII)
# An item of such a list that is one value, the whole item (a YAML item's comment may
# follow it); what stands between two items (`, 'K2'`, `,\n    "K2"`, a YAML list's `\n- K2`,
# a document's next string: ITEM_SEP); and an item of any other kind, read past (`''`,
# `null`, `'my old key'`, a short word).
_LIST_VALUE = _Lazy(
    rf"""["']?(?P<keyvalue>{_TOKEN_VALUE}{{5,}})(?=["']?[ \t]*(?:[,\]#\r\n\x00-\x02]|\Z))""",
    re.ASCII,
)
_LIST_NEXT = _Lazy(
    r"""["']?[ \t]*(?:\#[^\r\n\x00-\x02]*)?(?:,\s*|\x02|\r?\n[ \t]*-[ \t]+)""", re.ASCII
)
_LIST_BODY = _Lazy(
    r"""'[^'\r\n\x00-\x02]*'"""
    r'|"[^"\r\n\x00-\x02]*"'
    # (and an index, `os.environ['A']`: no list, which holds a `,` or a space)
    r"|(?:[^,\[\]\r\n\x00-\x02]|\[[^\]\s,\x00-\x02]*\])*",
    re.ASCII,
)

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_KEY_BEGIN = _Lazy(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", re.ASCII)
_KEY_END = _Lazy(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", re.ASCII)
_KEY_MAX_CHARS = 65536
_STRING_END = _Lazy(r"[^\x00-\x02]*")  # from a place to the end of its string in a text

# Names that are also other things (a test's `PASS:`, a compiler pass, `PWD` the working
# directory, a function's or an algorithm's `signature`): the name alone (`pass`, `pwd`,
# `sig`, `signature`, `x-amz-signature`, `x-goog-signature`, in any case) or an environment
# variable's (`DB_PASS`, `SMTP_PWD`); what they name is a secret only where it has the
# shape of one (`_secret_value`).
_WEAK_SECRET_NAMES = (  # a regular expression, not a password
    r"(?i:^(?:pass|pwd|sig|signature|x-(?:amz|goog)-signature|x-hub-signature(?:-256)?)$)"  # noqa: S105
    r"|^[A-Z0-9_]*_(?:PASS|PWD)$"
)
_WEAK_SECRET_NAME = _Lazy(_WEAK_SECRET_NAMES, re.ASCII)
# A name is key-like when it names a secret: `*_KEY`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`...
# (and Azure's `AccountKey` and `SharedAccessKey` of a connection string)
_SECRET_NAME = _Lazy(
    r"(?i:(?:^|[_.-])(?:api)?key$|^(?:api|account|sharedaccess)key$|api[_-]?keys$"
    r"|token(?!s|iz)|secret"
    r"|passw(?:or)?d|passphrase"
    r"|credential|auth(?!or)(?:[_-]?(?:key|token|header))?$)"
    rf"|{_WEAK_SECRET_NAMES}",
    re.ASCII,
)
# ... unless what it names is not the secret itself, or is a tokenizer's special token.
_NOT_SECRET_NAME = _Lazy(
    r"(?i:[_.-](?:path|file|dir|url|env|len|length|count|limit|type|id|ids|size|name|format)$"
    r"|^(?:eos|bos|pad|unk|sep|cls|mask|special|start|end|stop|prefix|suffix|middle|image|audio"
    r"|video|eot|eom|fim|think|default|max|min|num|n)[_-]tokens?)",
    re.ASCII,
)
# Documentation domains (RFC 2606, RFC 6761) belong to nobody.
_RESERVED_DOMAIN = _Lazy(
    r"(?:^|\.)(?:example\.(?:com|net|org)|example|test|invalid|localhost)$", re.IGNORECASE
)
_LOCAL_DOMAIN = _Lazy(
    r"(?i:\.(?:local|lan|internal|intranet|corp|home|localdomain|home\.arpa|private))$"
)
_NOT_HOSTS = frozenset({"localhost", "latest", "next", "stable", "beta", "canary", "head"})
_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")
# `version` may end a snake-case name (`trt_version: 10.0.1.6`); TensorRT's versions have four
# numbers (`TensorRT-10.0.1.6`, `libnvinfer 10.0.1`).
_VERSION_BEFORE = _Lazy(
    r"(?i:(?:(?:\b(?:version|ver|release|build|driver|runtime|headers|compiler|cuda|cudnn"
    r"|cublas|nccl|rocm|torch|mlx|library|tensorrt|trt|(?:lib)?nvinfer)|(?<=_)ver(?:sion)?)"
    r"[\W_]{0,4}|(?:版本号?|バージョン|버전)[\W_为是為はが은는이가]{0,4})$)"
)
# A machine's word before an address of 10/8 glued to it (`worker_10.0.3.17`, `node1-`,
# `node-01-`): a version of 10 is written so too (`libcurand-10.3.5.147`, `openjdk-10.0.2.13`).
# (Its numbers each after one separator: no two ways to read a run of digits.)
_MACHINE_BEFORE = _Lazy(
    r"(?i:(?:\b|(?<=_)|(?-i:(?<=[a-z])(?=[A-Z])))"
    r"(?:ip|ipv4|addr|address|host|hostname|peer|server|srv|remote|client|gateway|proxy"
    r"|nodes?|workers?|pods?|svc|service|vm|instance|replica|rank|gpu|machine|master|head"
    r"|leader|endpoint|box|compute|container|db|k8s|bastion)[0-9]*(?:[-_][0-9]+)*[-_]{1,2}$)"
)
_GLUED_RANGES = tuple(
    ipaddress.IPv4Network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")
)
_TEN = _GLUED_RANGES[0]
# The word may end a longer name, in snake, kebab or camel case (`remote_addr=`,
# `client-ip:`, `{"clientIp": "`).
_ADDRESS_BEFORE = _Lazy(
    r"(?i:(?:\b|(?<=_)|(?-i:(?<=[a-z])(?=[A-Z])))"
    r"(?:ip|ipv4|addr|address|inet|host|hostname|peer|server|remote|client|gateway|dns"
    r"|nameserver|proxy|bind|listen|listening on|connect|connected to|connecting to|src|dst"
    r"|forwarded-for|forwarded|origin)[\W_]{0,4}$|://$|@$|\[$)"
)
_ADDRESS_AFTER = _Lazy(r":\d{1,5}(?!\d)|/\d{1,2}(?!\d)|\]")
_WILDCARD_DNS_AT = _Lazy(_WILDCARD_DNS, re.ASCII)
# How far back `_is_public_ipv4` reads for a version or address word: the widest window any
# generic detector reads (`scan_documents`' gap must be longer).
_ADDRESS_WINDOW = 24


def _mask(text: str, start: int = 0, end: int | None = None) -> str:
    """Keep a short head and tail of `text[start:end]`, so a reader can find the string but
    not learn it (read from `text` in place: a text of many long hits, each to its end, is
    not copied once a hit)."""
    end = len(text) if end is None else end
    size = end - start
    head = min(8, size // 2)
    tail = min(4, size // 4)
    shown = text[start : start + head] + ELLIPSIS + (text[end - tail : end] if tail else "")
    return shown.translate(_SEP_TO_SPACE)


_SEP_TO_SPACE = str.maketrans({c: " " for c in _SEPS})
# (and what comes before a secret on its line, or lines: a list opened on one line)
_BEFORE_TO_SPACE = str.maketrans({c: " " for c in _SEPS + "\r\n"})


def _secret_group(match: re.Match[str]) -> str:
    return next(
        name
        for name, value in match.groupdict().items()
        if value is not None and name not in ("flagname", "keyname", "urluser")
    )


def _url_user(match: re.Match[str]) -> _Found | None:
    """The user name of a URL's credentials (`_URL_CREDENTIALS`), where it has one."""
    start, end = match.span("urluser")
    if start == end:
        return None
    return _found(USER_NAME, start, end, _mask(match.string, start, end))


def _mask_secret(match: re.Match[str], group: str) -> str:
    """Show what comes before the secret and at most its first four characters."""
    secret_start = match.start(group) - match.start()
    secret = match.group(group)
    before = match.group()[:secret_start].translate(_BEFORE_TO_SPACE)
    return before + secret[: min(4, len(secret) // 5)] + ELLIPSIS


def after_version_word(text: str, start: int) -> bool:
    """Whether the dotted number at `start` follows a version word (`cuda 12.4.1.0`)."""
    return _VERSION_BEFORE.search(text[max(0, start - _ADDRESS_WINDOW) : start]) is not None


def _is_public_ipv4(text: str, start: int, end: int, address: str) -> bool:
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:  # an octet over 255 or with a leading zero: not an address
        return False
    if ip.is_loopback or ip in _THIS_NETWORK or ip.is_unspecified:
        return False
    private = any(ip in network for network in _GLUED_RANGES)
    if private and _WILDCARD_DNS_AT.match(text, end):  # a name that spells it
        return True
    if after_version_word(text, start):
        return False
    before = text[max(0, start - _ADDRESS_WINDOW) : start]
    if start and text[start - 1] in "-_":  # glued after a word (_IPV4_GLUED)
        return private and (ip not in _TEN or _MACHINE_BEFORE.search(before) is not None)
    if ip.is_private or ip in _SHARED or ip.is_link_local:
        return True
    return bool(_ADDRESS_BEFORE.search(before) or _ADDRESS_AFTER.match(text, end))


def _is_public_ipv6(address: str) -> bool:
    bare = address.split("%", 1)[0]
    groups = [g for g in bare.split(":") if g]
    # Conservative: times (12:34:56), C++ scopes (a::b) and "::" alone are not addresses.
    if len(groups) < 2:
        return False
    has_digit = any(c.isdigit() for c in bare)
    if not has_digit and len(groups) < 3 and not all(len(g) == 4 for g in groups):
        return False
    # Without `::`, an address has 8 groups, or 6 and an IPv4 address: anything else is
    # what IPv6Address refuses, known without its parser (a time, `12:30:45`, most often).
    parts = bare.count(":") + 1
    if "::" not in bare and parts != 8 and not (parts == 7 and "." in bare):
        return False
    try:
        ip = ipaddress.IPv6Address(bare)
    except ValueError:
        return False
    if ip.ipv4_mapped is not None:
        return not (ip.ipv4_mapped.is_loopback or ip.ipv4_mapped.is_unspecified)
    return not (ip.is_loopback or ip.is_unspecified)


def _is_identifying_mac(address: str) -> bool:
    digits = address.replace(":", "").replace("-", "").replace(".", "").lower()
    return digits not in ("000000000000", "ffffffffffff")


def _accept_mac(match: re.Match[str]) -> bool:
    """An identifying MAC address; in Cisco's notation only after a word that says so (the
    `_ADDRESS_WINDOW` characters before it: within a batch's gap)."""
    if match.group("cisco") is not None:
        start = match.start()
        window = match.string[max(0, start - _ADDRESS_WINDOW) : start]
        if _MAC_WORD_BEFORE.search(window) is None:
            return False
    return _is_identifying_mac(match.group())


def _is_dashed_address(name: str) -> bool:
    """`ip-a-b-c-d` where a.b.c.d is an address other than loopback or unspecified."""
    octets = [int(octet) for octet in name[3:].split("-")]
    if any(octet > 255 for octet in octets):
        return False
    address = ipaddress.IPv4Address(bytes(octets))
    return not (address.is_loopback or address.is_unspecified)


def _is_machine_name(host: str) -> bool:
    if host.lower() in _NOT_HOSTS:
        return False
    return "." not in host or bool(_LOCAL_DOMAIN.search(host))


_NUMBER = _Lazy(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


def _tokenish(value: str) -> bool:
    """A word of prose is not a token: a token has digits, mixed case, symbols or length."""
    if len(value) >= 16 or any(c.isdigit() for c in value):
        return True
    if any(c in "._~+/=-" for c in value):
        return True
    upper = sum(c.isupper() for c in value)
    return upper >= 2 and len(value) - upper >= 2


def _secret_value(name: str, value: str) -> bool:
    """Whether the value after a secret name (`_is_secret_name`) can be its secret: not a
    number (llama.cpp's `prompt_per_token_ms`); after a weak name (`_WEAK_SECRET_NAMES`), a
    signature of 16 characters or more of base64, URL-escaped base64 or hex with a digit
    (`sig=Qm9n...%3D`, `X-Amz-Signature=9f86...`), or a password of 8 or more with letters
    in both cases and a digit (`pass=Tr0ub4dor3`), no path (`PWD=D:\\work\\x`)."""
    if _NUMBER.fullmatch(value) or _PLACEHOLDER.fullmatch(value):
        return False
    if _CODE_KEY_NAME.fullmatch(name) and _IDENTIFIER.fullmatch(value):
        # a key of code names what it sorts or looks up by (`sorted(x, key=lambda ...)`,
        # `sort_key=created_at`, `{"key": "temperature", "value": 0}`), not a secret
        return False
    if name == "token":  # a model's token (logprobs), unless it is 16 random characters
        return len(value) >= 16 and _random_key(value)
    if _WEAK_SECRET_NAME.search(name):
        if "sig" in name.lower():
            return len(value) >= 16 and _SIGNATURE_VALUE.fullmatch(value) is not None
        return (
            len(value) >= 8
            and not any(c in value for c in "/\\:")
            and any(c.isdigit() for c in value)
            and any(c.islower() for c in value)
            and any(c.isupper() for c in value)
        )
    return True


# A key of code that names what it sorts, looks up or partitions by, as code writes it (not
# an environment variable's capitals): a bare `key` (`sorted(x, key=lambda ...)`, `{"key":
# "temperature"}`, AWS's tags' `Key`), `sort_key`, `primaryKey`, `partition_key`.
_CODE_KEY_NAME = _Lazy(
    r"(?:key|Key|(?:sort|primary|foreign|partition|cluster|clustering|cache|lookup|group|join"
    r"|index|row|hash|range|dict|map|unique|composite|natural|shard|routing|order|dedup|item"
    r"|record|object|s3|bucket|redis|table|column|field|attr|attribute)(?:[_.-]?(?:key|Key)|Key))",
    re.ASCII,
)
# What such a key names in code: an identifier that starts in lower case, or a dotted one, no
# digit (`lambda`, `created_at`, `createdAt`, `str.lower`); a random key holds digits.
_IDENTIFIER = _Lazy(r"[a-z_][A-Za-z_]*(?:\.[A-Za-z_]+)*", re.ASCII)
# What stands in a secret's place where it was left out (`api_key: [REDACTED]`, `token:
# xxxxxxxx`), in any case.
_PLACEHOLDER = _Lazy(
    r"(?i:redacted|hidden|masked|removed|omitted|placeholder|none|null|undefined|x{4,})",
    re.ASCII,
)
_SIGNATURE_VALUE = _Lazy(r"(?=[^0-9]*[0-9])(?:[A-Za-z0-9+/=_-]|%[0-9A-Fa-f]{2})+", re.ASCII)


def _is_secret_name(name: str, *, flag: bool = False) -> bool:
    """`--token` is a secret flag (a member named `token` is most often a model's token, in
    logprobs: `_secret_value` asks its value to be random); a weak name
    (`_WEAK_SECRET_NAMES`) is no flag's (`--pass 2`)."""
    if flag and _WEAK_SECRET_NAME.search(name):
        return False
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET_NAME.search(name)


def _name_before(match: re.Match[str]) -> tuple[int, str]:
    """Where the name that ends in this member's secret word starts, and the whole name."""
    text, start = match.string, match.start()
    while start > 0 and text[start - 1] in _NAME_CHARS:
        start -= 1
    while start < match.start() and not text[start].isalpha():
        start += 1
    end = start
    while end < len(text) and text[end] in _NAME_CHARS:
        end += 1
    return start, text[start:end]


def _member_value(name: str, value: str, head: str, after: str) -> bool:
    """Whether the value after a secret member's name can be its secret (`_secret_value`):
    not where a call or an index follows it (`after`, the character after it, is `(` or
    `[`: `secret=os.environ.get("X")`, `[os.environ['KEY']]` are code); the first item of a
    list on a line of its own (`head`, what stands between the name's secret word and the
    value, breaks the line: a YAML block list, a `[` at a line's end) only where it has a
    key's random shape (`_random_key`), as `secret_lists` reads items: a label before a
    Markdown list (`Your API key:\n- Register at ...`) is prose."""
    if after in ("(", "[") or ("\n" in head and not _random_key(value)):
        return False
    return _secret_value(name, value)


def _in_word(char: str) -> bool:
    """Whether a token prefix after `char` is inside a longer word (`task-`, `xhf_`): an ASCII
    letter or digit. After another letter a token may start, as one glued to a word does
    (`密钥hf_...`, not `Gdańsk-Airport`: `_token_boundary`)."""
    return char.isascii() and char.isalnum()


def _after_boundary(match: re.Match[str], chars: str) -> bool:
    before = match.string[match.start() - 1] if match.start() else ""
    return not before or not (_in_word(before) or before in chars)


def _token_boundary(
    match: re.Match[str], group: str, value: str, words: _Words | None = None
) -> bool:
    """Whether a prefixed token starts where a token can: not after a letter or a digit
    (`xhf_...` is part of a longer word); after `-` or `_` (glued to a word: `srv-hf_...`,
    `run_sk-...`, as names of files, hosts and jobs hold one) where it is the first token
    prefix of its word (_Words: `sk-learn-sk-compatible-...` holds no second) and its value
    has a key's random characters (_glued_key). `words`: the text's _Words, if the caller
    has one (asked in ascending order, it reads each word once)."""
    if not _after_boundary(match, ""):
        return False
    text, start = match.string, match.start()
    if not start or not (text[start - 1] in "_-" or text[start - 1].isalnum()):
        return True
    # glued to a word: by `_` or `-`, or after a letter past ASCII (`_in_word`)
    return (words or _Words(text)).first(start) and _glued_key(group, value)


# Keys some providers write in hex (DeepSeek's `sk-` and 32 digits, OpenRouter's `sk-or-v1-`
# and 64, DigitalOcean's, Slack's legacy `xoxp-...-` and 32): a hex tail after dashed parts.
_HEX_KEY = _Lazy(r"(?:[A-Za-z0-9]+-)*[0-9a-f]{32,}", re.ASCII)
_HEX_KEYED = frozenset(("sk", "digitalocean", "slack"))


def _glued_key(group: str, value: str) -> bool:
    """Whether the value of a token glued to a word has a key's random characters, not a
    word's: its letters of both cases, a fifth or more each, and fewer than a third of them
    vowels (random letters hold about one in five; English in camel case about two in five,
    `AutoModelForCausalLM` 9 of 20, `PretrainedTokenizerFast` 9 of 23, with 3 upper case);
    or, of a provider that writes keys in hex, a hex tail (`_HEX_KEY`). Not a revision's hex
    (`Llama-2-7b-hf_8cca5276...`) nor a name (`opus-mt-en-sk-finetuned-legal-2023`)."""
    if group in _HEX_KEYED and _HEX_KEY.regex.fullmatch(value):
        return True
    letters = [c for c in value if c.isascii() and c.isalpha()]
    upper = sum(c.isupper() for c in letters)
    vowels = sum(c in "aeiouAEIOU" for c in letters)
    return 0 < 5 * min(upper, len(letters) - upper) >= len(letters) > 3 * vowels


# The characters of a word a token can be glued into (`srv-hf_...`).
_WORD_TEXT = string.ascii_letters + string.digits + "_-"
_WORD_RUN = _Lazy(r"[A-Za-z0-9_-]*", re.ASCII)
_PREFIX_MOST = 40  # characters: the longest `_TOKEN_PREFIX` match (discordapp.com/...: 32)


class _Words:
    """Of the words of ASCII letters, digits, `_` and `-` in one text, where each one's first
    token prefix (`_TOKEN_PREFIX`) that is not after a letter or a digit starts (one that is,
    `sk-` in `task-hf_...`, is never a token itself), an AWS key's aside. For places asked
    in ascending order, each word is read once, however many places it holds: the scans
    stay linear."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._start = self._end = self._first = 0

    def first(self, at: int) -> bool:
        """Whether no token prefix starts before `at` in the word that holds `at`."""
        if not self._start <= at < self._end:
            text = self._text
            start = _run_start(text, at, _WORD_TEXT)
            end = _end_of(_WORD_RUN.regex, text, at)
            # (a prefix may run on past the word, `SG.`, `hooks.slack.com/services/`: the
            # search reads no further than the longest one past it)
            prefix, first = _TOKEN_PREFIX.regex, end
            found = prefix.search(text, start, end + _PREFIX_MOST)
            while found is not None and (place := found.start()) < end:
                # (an AWS key's prefix is tried glued or not, without this: `ASIA_hf_...`)
                if not (place and _in_word(text[place - 1])) and not text.startswith(
                    ("AKIA", "ASIA"), place
                ):
                    first = place
                    break
                found = prefix.search(text, place + 1, end + _PREFIX_MOST)
            self._start, self._end, self._first = start, max(end, at + 1), first
        return self._first >= at


def _accept_token(match: re.Match[str], words: _Words | None = None) -> bool:
    """Whether a match of a secret pattern is a secret. `words`: the text's _Words, for the
    prefixed tokens (_token_boundary)."""
    group = _secret_group(match)
    value = match.group(group)
    if group == "sk":  # a key, not a word in kebab case (`sk-learn-compatible-estimators`)
        key = any(c.isdigit() for c in value) or not value.islower() or value.isalpha()
        return key and _token_boundary(match, group, value, words)
    if group in (
        "hf", "gh", "gl", "google", "slack", "slackhook", "jwt", "stripe", "pypi", "npm",
        "discordhook", "telegram", "sendgrid", "digitalocean",
    ):  # fmt: skip
        return _token_boundary(match, group, value, words)
    if group in ("groq", "xai", "pplx", "nvapi", "replicate", "googleoauth"):
        return (
            len(value) >= 30 and _token_boundary(match, group, value, words) and _random_key(value)
        )
    if group == "aws":
        return _after_boundary(match, "")
    if group == "awssecret":
        return (
            any(c.isupper() for c in value)
            and any(c.islower() for c in value)
            and any(c.isdigit() for c in value)
            and "//" not in value
        )
    if group in ("flagvalue", "flagnext", "flagword", "flagquoted", "flagitem"):
        name = match.group("flagname")
        return (
            _is_secret_name(name, flag=True)
            and _flag_value_shape(group, value, name)
            and not _token_setting(name, value)
        )
    if group == "keyvalue":
        # A number after a key-like name is a measurement (llama.cpp's prompt_per_token_ms).
        name = _name_before(match)[1]
        head = match.string[match.start() : match.start(group)]
        after = match.string[match.end() : match.end() + 1]
        return _is_secret_name(name) and _member_value(name, value, head, after)
    if group in ("auth", "bearer"):
        return _tokenish(value)
    if group == "spacedpass":  # `.netrc`'s `password X`, prose's: a password's shape only
        return _secret_value("pass", value)
    if group == "cookie":  # the whole list goes, where one of its values is a session's
        # (Set-Cookie's attributes only after its first pair: a Cookie header has none)
        attributes = _COOKIE_ATTRIBUTES if match.group(0)[:3].lower() == "set" else frozenset()
        pairs = [pair.strip().partition("=") for pair in value.split(";")]
        return any(
            (i == 0 or name.lower() not in attributes) and _is_session(cookie)
            for i, (name, _, cookie) in enumerate(pairs)
        )
    return True


def _flag_value_shape(group: str, value: str, flag: str) -> bool:
    """Whether a secret flag's value (`_SECRET_FLAG`, by its group) has a secret's shape: a
    word after a space, a token's (`_tokenish`); one in quotes or in a printed list, a key's
    (`_quoted_key`: not a placeholder, `"your-api-key"`), or after a password's flag a
    password's (`_secret_value`: `"S3cr3t_P4ssw0rd_2024"`); after `=` or as the next
    argument, any."""
    if group == "flagword":
        return _tokenish(value)
    if group in ("flagquoted", "flagitem"):
        return _quoted_key(value) or (
            _PASSWORD_FLAG.search(flag) is not None
            and _secret_value("pass", value)
            and _LETTER_RUN.search(value) is None  # (not `Password123`, `ChangeMe123`)
        )
    return True


_PASSWORD_FLAG = _Lazy(r"(?<![A-Za-z])(?i:pass|pwd)", re.ASCII)  # (not `--bypass-token`)


def _quoted_key(value: str) -> bool:
    """A quoted value with a key's random shape, not a placeholder's (`"your-api-key"`,
    `"abc123"`, `'token-abc123'`, `'llama3-8b-2024-06-01-v2'`, `"00000000-0000-..."`), 12
    characters or more: a UUID of 8 different hex digits, not counting up, nor one that
    documentation gives as its example; a password's random characters (`_random_key`, no
    run of 8 letters: not `MySecret123!`) where it holds a symbol (`Xk9#mP2$vL7!qR4`, which a
    shell makes one quote; not a path's or a URL's `/` or `:`); or a run of letters and
    digits of 12 or more, of 8 different characters, not counting up (`1234567890abcdef`),
    random, or in lower case 16 or more with a digit in every five and no run of 8 letters
    (`7f3k9x2m4q8w1z5t`, `"prod:7f3k9x2m4q8w1z5t8k2m"`)."""
    if len(value) < 12:
        return False
    if _UUID.fullmatch(value):
        return (
            len(set(value.lower()) - {"-"}) >= 8
            and not _counts_up(value.replace("-", ""))
            and value.lower() not in _EXAMPLE_UUIDS
        )
    if (
        _PASSWORD_SYMBOL.search(value) is not None
        and len(set(value)) >= 8
        and not _counts_up(value)
        and _LETTER_RUN.search(value) is None
        and _random_key(value)
    ):
        return True
    run = max(_ALNUM_RUN.regex.findall(value), key=len, default="")
    if len(run) < 12 or len(set(run)) < 8 or _counts_up(run):
        return False
    if _random_key(run):
        return True
    return (
        len(run) >= 16
        and sum(c.isdigit() for c in run) * 5 >= len(run)
        and _LETTER_RUN.search(run) is None
    )


def _counts_up(run: str) -> bool:
    """Whether most of a run's characters follow the one before (`12345678`, `abcdef`)."""
    steps = sum(ord(b) - ord(a) == 1 for a, b in itertools.pairwise(run))
    return 2 * steps >= len(run) - 1


_UUID = _Lazy(r"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}", re.ASCII)
# (RFC 4122's example and namespaces, Swagger's default, and those most tutorials give)
_EXAMPLE_UUIDS = frozenset(
    ("550e8400-e29b-41d4-a716-446655440000", "123e4567-e89b-12d3-a456-426614174000",
     "f81d4fae-7dec-11d0-a765-00a0c91e6bf6", "3fa85f64-5717-4562-b3fc-2c963f66afa6",
     "f47ac10b-58cc-4372-a567-0e02b2c3d479", "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
     "6ba7b811-9dad-11d1-80b4-00c04fd430c8", "6ba7b812-9dad-11d1-80b4-00c04fd430c8",
     "6ba7b814-9dad-11d1-80b4-00c04fd430c8")
)  # fmt: skip
_PASSWORD_SYMBOL = _Lazy(r"^[^/\\:]*[!#$%&*+=?@^~|;,<>(){}\[\]][^/\\:]*$", re.ASCII)
_ALNUM_RUN = _Lazy(r"[A-Za-z0-9]+", re.ASCII)
_LETTER_RUN = _Lazy(r"[A-Za-z]{8}", re.ASCII)


def _token_setting(flag: str, value: str) -> bool:
    """Whether a secret flag's value is a setting: a number after a flag that names a count
    of tokens, not a secret (vLLM's `--long-prefill-token-threshold 2048`,
    `--thinking-token-budget 1024`). Not after a key's, a password's or a secret's flag:
    `--password 12345678` is one."""
    return bool(_NUMBER.fullmatch(value)) and "token" in flag.lower() and not _KEYISH.search(flag)


_KEYISH = _Lazy(r"(?i:key|secret|passw|pwd|pass(?:phrase)?\b|auth|credential|cookie)", re.ASCII)


def _random_key(value: str) -> bool:
    """Random characters, as a provider's key is, not an identifier
    (`nvapi-python-bindings-for-windows-2024`, `pplx-PerplexityClientHelperLibrary`): a
    digit in every twenty characters or so, and both cases, or hex. (Of keys of 40 random
    letters and digits, about one in a hundred has fewer digits: it is missed.)"""
    digits = sum(c.isdigit() for c in value)
    if digits < max(2, len(value) // 20):
        return False
    if all(c in "0123456789abcdef" for c in value.lower()) and (
        value.islower() or value.isupper() or not any(c.isalpha() for c in value)
    ):
        return True
    return sum(c.isupper() for c in value) >= 2 and sum(c.islower() for c in value) >= 2


# What Set-Cookie says of a cookie, not a cookie (RFC 6265 and its successors' attributes).
_COOKIE_ATTRIBUTES = frozenset(
    ("expires", "max-age", "domain", "path", "samesite", "secure", "httponly", "priority",
     "partitioned", "version", "comment")
)  # fmt: skip


_COOKIE_NUMBER = _Lazy(
    r"[0-9]{1,8}|[0-9]{4}-[0-9]{2}-[0-9]{2}(?:T[0-9]{2}(?::[0-9]{2}){1,2}(?:\.[0-9]+)?Z?)?"
)


def _is_session(cookie: str) -> bool:
    """A cookie's value is a session's where it has 8 characters or more and a digit, or
    20 or more: `theme=dark-mode-on` is a preference, and so are a number of 8 digits or
    fewer and a date (`seen=20240101`, `consent_at=2024-01-01T10:00:00`); a longer number is
    an id (`c_user=100012345678901`)."""
    if _COOKIE_NUMBER.fullmatch(cookie):
        return False
    return len(cookie) >= 20 or (len(cookie) >= 8 and any(c.isdigit() for c in cookie))


def _matches(
    pattern: re.Pattern[str] | _Lazy, text: str, accept: Callable[[re.Match[str]], bool]
) -> Iterator[re.Match[str]]:
    """The accepted matches; a rejected one does not hide a match that starts inside it."""
    position = 0
    while (match := pattern.search(text, position)) is not None:
        if match.end() > match.start() and accept(match):
            yield match
            position = match.end()
        else:
            position = match.start() + 1


@dataclass(frozen=True)
class _Found:
    """One match of a detector in a text: where it is and what replaces it."""

    category: str
    start: int
    end: int
    excerpt: str
    placeholder: str
    identifying: bool
    known: bool
    value: bool = False  # a match of a value the capture knows (a name, a path, a secret)


def _outside(hit: _Found, chosen: Sequence[_Found], starts: Sequence[int]) -> list[_Found]:
    """The stretches of `hit` that none of `chosen` (sorted by start, none overlapping
    another; `starts`: their starts) covers."""
    if hit.start == hit.end:  # (an empty value's: kept where no chosen hit is around it)
        before = bisect.bisect_left(starts, hit.end) - 1
        return [hit] if before < 0 or chosen[before].end <= hit.start else []
    stretches = []
    at = hit.start
    index = max(bisect.bisect_right(starts, hit.start) - 1, 0)
    while index < len(starts) and chosen[index].start < hit.end:
        other = chosen[index]
        if other.end > at and other.end > other.start:  # (an empty one covers nothing)
            if other.start > at:
                stretches.append(replace(hit, start=at, end=other.start))
            at = other.end
        index += 1
    if at < hit.end:
        stretches.append(hit if at == hit.start else replace(hit, start=at))
    return stretches


def _found(category: str, start: int, end: int, excerpt: str, placeholder: str = "") -> _Found:
    return _Found(category, start, end, excerpt, placeholder or PLACEHOLDERS[category], True, False)


# Where a match can start. Each finder below is a necessary condition of its pattern that the
# regular expression engine checks fast, since it starts with a literal character (an engine
# pass over a text that starts with a set of characters, or a lookbehind, costs ten times
# more): a text without it skips the pattern, and a text with it tries the pattern only there.
_HOME_OR_TEMP = re.compile(
    r"/(?:home|[Uu][Ss][Ee][Rr][Ss]|root|tmp|var|folders|shm"
    r"|(?i:documents and settings|docume~[0-9]))/"
)
_IPV4_DOT = re.compile(r"\.(?=\d{1,3}\.\d{1,3}\.\d)", re.ASCII)  # after the first number
_IPV6_COLON = re.compile(r":(?=[0-9A-Fa-f]{0,4}:)")  # the first colon: after 0 to 4 digits
_MAC_DASH = re.compile(r"-(?=[0-9A-Fa-f]{2}(?:-[0-9A-Fa-f]{2}){4})")  # the first separator
_MAC_DOT = re.compile(r"\.(?=[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4})")  # the first of Cisco's dots
# (found at its dash, two characters on: a pattern that starts with a set of characters is
# tried at every place of every text, one that starts with a literal is searched for in C)
_IP_DASH = re.compile(r"-(?<=[iI][pP]-)(?=[0-9]{1,3}-)")
# The prefixed tokens: hf_, gh?_ and github_pat_; the `-` of sk-, xox?-, glpat-; AIza...;
# eyJ (found where the text holds a J).
_TOKEN_HF = re.compile(r"hf_(?=[A-Za-z0-9]{20})")
_TOKEN_G = re.compile(r"g(?:h[pousr]|ithub_pat)_(?=[A-Za-z0-9_]{20})")
_TOKEN_DASH = re.compile(r"-(?:(?<=sk-)|(?<=xox[abposr]-)|(?<=glpat-))(?=[\w-]{10})", re.ASCII)
_TOKEN_A = re.compile(r"A(?=Iza|KIA|SIA)")
_TOKEN_JWT = re.compile("eyJ")  # a JSON Web Token: header and payload are base64url of `{"`
# Stripe's secret and restricted keys, PyPI's and npm's tokens.
# Each starts with a literal (`k_`, `npm_`), which `re` looks for at C speed; an alternation
# first (`(?:[sr]k_...|npm)_`) made it try every place of the text (0.3 s of 10,000 records).
_TOKEN_STRIPE = re.compile(r"k_(?=(?:live|test)_[0-9A-Za-z]{16})")  # one after the s or r
_TOKEN_NPM = re.compile(r"npm_(?=[0-9A-Za-z]{16})")
_TOKEN_PYPI = re.compile(r"pypi-(?=AgE)")
_SLACK_HOOKS = "hooks.slack.com/"  # a webhook's URL: its path is the secret
_TOKEN_SLACK_HOOK = re.compile(re.escape(_SLACK_HOOKS))
_DISCORD_HOOKS = "webhooks/"  # after discord(app).com/api/ and perhaps a version (v10/)
_TOKEN_DISCORD_HOOK = re.compile(re.escape(_DISCORD_HOOKS))
# A Telegram bot's token: its id (8 to 12 digits, after `bot` in its API's URLs), `:AA`...
_TOKEN_TELEGRAM = re.compile(r":AA(?=[A-Za-z0-9_-]{33})")
# The prefixes of API keys that need no finder of their own: each is searched for as it is.
_TOKEN_LITERALS = ("gsk_", "xai-", "pplx-", "nvapi-", "r8_", "ya29.", "SG.", "_v1_")
_TOKEN_LITERAL_FINDERS = tuple(
    (re.compile(re.escape(prefix)), prefix, 3 if prefix == "_v1_" else 0)
    for prefix in _TOKEN_LITERALS
)
# Where `_SECRET_WORD` can match, in the text with its letters in lower case: each finder
# starts with a letter (rare in prose: k, cre...), and `_WORD_BACK` is the way back from what
# it matches to the word's start.
_SECRET_WORDS = (
    re.compile(r"k(?:ey|(?<=tok)en(?!s|iz))"),
    re.compile(r"cre(?:(?<=secre)t|dential)"),
    re.compile(r"pass"),
    re.compile(r"auth"),
    re.compile(r"pwd"),
    re.compile(r"sig"),
)
_WORD_BACK = {
    "key": 0, "ken": 2, "cret": 2, "credential": 0, "pass": 0, "auth": 0, "pwd": 0, "sig": 0
}  # fmt: skip
# The characters of the run that ends at a pattern's anchor (`@`, `://`) or holds its word.
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_EMAIL_LOCAL = frozenset(_LETTERS + "._%+-") | _LETTER_CHARS
# (and the Latin-1 symbols of a name's mojibake, as `_ACCOUNT` takes them)
_ACCOUNT_USER = frozenset(_LETTERS + "._-") | _LETTER_CHARS | _MOJIBAKE_CHARS
_URL_SCHEME = frozenset(_LETTERS + "+.-")
_FLAG_NAME = frozenset(_LETTERS + "_-")
# An AWS secret is a run of 40 characters or more of its alphabet: each becomes b"a".
_AWS_RUN = bytes(ord("a") if chr(b) in _LETTERS or chr(b) in "/+" else ord(" ") for b in range(256))


def _ascending(*groups: list[int] | None) -> list[int] | None:
    """The places of all groups, ascending and distinct; None (anywhere) if one group is."""
    if None in groups:
        return None
    if not any(groups):  # the usual case: no place at all
        return []
    return sorted({p for group in groups if group is not None for p in group if p >= 0})


# Words looked for in a whole text, where a search for a literal (in C, a character at a
# time) is quicker than `str.find` (some 15 ms against 22 over 30 MB). Neither word can
# overlap itself, so their matches are all their occurrences (`_occurrences`).
_SCHEME_END = re.compile("://")
_BEARER = re.compile("bearer")
_COOKIE = re.compile("cookie")


def _starts(word: re.Pattern[str], text: str) -> Iterator[int]:
    return (match.start() for match in word.finditer(text))


def _occurrences(text: str, word: str) -> Iterator[int]:
    at = text.find(word)
    while at >= 0:
        yield at
        at = text.find(word, at + 1)


def _run_starts(text: str, ends: list[int] | None, chars: frozenset[str]) -> list[int] | None:
    """Where the run of `chars` that ends at each place (ascending) starts, if not empty.

    A run never crosses an earlier place whose character is not in `chars`; where it reaches
    an earlier place that is, it is that place's run: each character is looked at once.
    """
    if ends is None:
        return None
    starts: list[int] = []
    previous = previous_start = -1
    for end in ends:
        start = end
        while start > previous + 1 and text[start - 1] in chars:
            start -= 1
        if start == previous + 1 and previous >= 0 and text[previous] in chars:
            start = previous_start
        previous, previous_start = end, start
        if start < end:
            starts.append(start)
    return sorted(set(starts))


_T = TypeVar("_T")


def _ascii_low(text: str) -> str:
    """`text` with its ASCII letters in lower case and every other character `?` (one
    character for one: the offsets are the text's)."""
    if not text.isascii():
        text = text.encode("ascii", "replace").decode("ascii")
    return text.lower()


class _Places:
    """Where each generic pattern can match in one text (`starts`), found once per text.

    Past `limit` places for one pattern, trying it place by place would cost more than its
    own search over the whole text (a text of colons, of `@`...): then it searches (None).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.limit = 64 + len(text) // 64
        self._low: str | None = None
        self._words: list[int] | None = None
        self._words_done = False
        self._has_key = True
        self._ats: list[int] | None = None
        self._ats_done = False
        self._colons: list[int] | None = None
        self._colons_done = False
        self._paths_found: bool | None = None
        self._schemes: list[int] | None = None
        self._schemes_done = False

    def bounded(self, places: Iterable[_T]) -> list[_T] | None:
        """The places, or None past the limit."""
        found = list(itertools.islice(places, self.limit + 1))
        return None if len(found) > self.limit else found

    def _found(self, finder: re.Pattern[str], first: str, *offsets: int) -> list[int] | None:
        """The places `offsets` before each place where the finder matches (which starts with
        the character `first`: a text without it is ruled out at once)."""
        text = self.text
        if first not in text or (match := finder.search(text)) is None:
            return []
        matches = itertools.islice(finder.finditer(text, match.start()), self.limit + 1)
        found = [m.start() for m in matches]
        if len(found) > self.limit:
            return None
        return [at - d for at in found for d in offsets]

    @property
    def low(self) -> str:
        """The text with its ASCII letters in lower case (as `(?i)` under re.ASCII)."""
        if self._low is None:
            self._low = _ascii_low(self.text)
        return self._low

    @property
    def words(self) -> list[int] | None:
        """Where `_SECRET_WORD` can match."""
        if not self._words_done:
            self._words_done = True
            low = self.low
            firsts = [
                (f, first)
                for f in _SECRET_WORDS
                if f.pattern[0] in low and (first := f.search(low)) is not None
            ]
            found = self.bounded(m for f, first in firsts for m in f.finditer(low, first.start()))
            if found is not None:
                self._words = sorted(m.start() - _WORD_BACK[m.group()] for m in found)
                self._has_key = any(m.group() == "key" for m in found)
        return self._words

    @property
    def has_key(self) -> bool:
        """Whether the word `key` can be in the text, in any case."""
        self.words  # noqa: B018 - found with the words
        return self._has_key

    @property
    def ats(self) -> list[int] | None:
        if not self._ats_done:
            self._ats_done = True
            self._ats = self.bounded(_occurrences(self.text, "@"))
        return self._ats

    @property
    def colons(self) -> list[int] | None:
        """The first colon of each place that can start an IPv6 address (or a MAC address)."""
        if not self._colons_done:
            self._colons_done = True
            self._colons = self._found(_IPV6_COLON, ":", 0)
        return self._colons

    def starts(self, pattern: _Lazy) -> list[int] | None:
        """Every place (ascending) where `pattern` can match, or None: anywhere."""
        return _STARTS[pattern](self)

    def _paths(self) -> list[int] | None:
        if self._paths_found is None:
            text = self.text
            self._paths_found = "~" in text or _HOME_OR_TEMP.search(text) is not None
        return None if self._paths_found else []

    def _email(self) -> list[int] | None:
        return _run_starts(self.text, self.ats, _EMAIL_LOCAL)

    def _account(self) -> list[int] | None:
        starts = _run_starts(self.text, self.ats, _ACCOUNT_USER)
        if not starts:
            return starts
        # A run that starts with a symbol may start its name after it (`§root@h`: _ACCOUNT);
        # nowhere else past its start can a name start (a symbol inside is the name's).
        text = self.text
        after = [at + 1 for at in starts if text[at] in _MOJIBAKE_CHARS]
        return sorted({*starts, *after}) if after else starts

    @property
    def schemes(self) -> list[int] | None:
        """Where `://` is."""
        if not self._schemes_done:
            self._schemes_done = True
            text = self.text
            self._schemes = self.bounded(_starts(_SCHEME_END, text)) if ":" in text else []
        return self._schemes

    def _url_host(self) -> list[int] | None:
        return _run_starts(self.text, self.schemes, _URL_SCHEME)

    def _mac(self) -> list[int] | None:
        # A MAC address with colons has the first colon of an IPv6 address.
        colons = self.colons
        return _ascending(
            None if colons is None else [at - 2 for at in colons],
            self._found(_MAC_DASH, "-", 2),
            self._found(_MAC_DOT, ".", 4),
        )

    def _dashed_ipv4(self) -> list[int] | None:
        return self._found(_IP_DASH, "-", 2)

    def _ipv4(self) -> list[int] | None:
        return _ascending(self._found(_IPV4_DOT, ".", 1, 2, 3))

    def _ipv6(self) -> list[int] | None:
        colons = self.colons
        return _ascending(None if colons is None else [at - b for at in colons for b in range(5)])

    def _prefixed_tokens(self) -> list[int] | None:
        return _ascending(
            self._found(_TOKEN_HF, "_", 0),
            self._found(_TOKEN_G, "_", 0),
            self._found(_TOKEN_DASH, "-", 2, 4, 5),
            self._found(_TOKEN_A, "A", 0),
            self._found(_TOKEN_JWT, "J", 0),
            self._found(_TOKEN_STRIPE, "k_", 1),
            self._found(_TOKEN_NPM, "npm_", 0),
            self._found(_TOKEN_PYPI, "-", 0),
            self._found(_TOKEN_SLACK_HOOK, _SLACK_HOOKS, 0),
            self._found(_TOKEN_DISCORD_HOOK, _DISCORD_HOOKS, 16, 19, 20, 22, 23),
            self._found(_TOKEN_TELEGRAM, ":AA", *range(8, 16)),
            *(self._found(f, prefix, back) for f, prefix, back in _TOKEN_LITERAL_FINDERS),
        )

    def _aws_secret(self) -> list[int] | None:
        """The first place of each run of 40 characters or more of the secret's alphabet."""
        runs = self.text.encode("ascii", "replace").translate(_AWS_RUN)

        def starts() -> Iterator[int]:
            at = runs.find(b"a" * 40)
            while at >= 0:
                yield at  # a run's first place: each search starts outside any run
                end = runs.find(b" ", at + 40)
                if end < 0:
                    return
                at = runs.find(b"a" * 40, end)

        return self.bounded(starts())

    def _auth_tokens(self) -> list[int] | None:
        low, words = self.low, self.words
        if words is None:
            return None
        auth = [at for at in words if low.startswith(("authorization", "pass"), at)]
        bearer = self.bounded(_starts(_BEARER, low))
        cookie = self.bounded(_starts(_COOKIE, low))
        if bearer is None or cookie is None:
            return None
        # or proxy-authorization, or set-cookie
        return _ascending(auth, [at - 6 for at in auth], bearer, cookie, [at - 4 for at in cookie])

    def _secret_flag(self) -> list[int] | None:
        """A flag's dash starts the run of name characters that holds its secret word."""
        text = self.text
        starts = _run_starts(text, self.words, _FLAG_NAME)
        return None if starts is None else [s for s in starts if text[s] == "-"]

    def _secret_member(self) -> list[int] | None:
        return self.words


_TOKEN_PATTERNS = (
    _PREFIXED_TOKENS,
    _AWS_SECRET,
    _AUTH_TOKENS,
    _SECRET_FLAG,
    _SECRET_MEMBER,
    _URL_CREDENTIALS,
)
_STARTS: dict[_Lazy, Callable[[_Places], list[int] | None]] = {
    _HOME: _Places._paths,
    _TEMP: _Places._paths,
    _EMAIL: _Places._email,
    _ACCOUNT: _Places._account,
    _URL_HOST: _Places._url_host,
    _URL_CREDENTIALS: _Places._url_host,
    _MAC: _Places._mac,
    _DASHED_IPV4: _Places._dashed_ipv4,
    _IPV4: _Places._ipv4,
    _IPV6: _Places._ipv6,
    _PREFIXED_TOKENS: _Places._prefixed_tokens,
    _AWS_SECRET: _Places._aws_secret,
    _AUTH_TOKENS: _Places._auth_tokens,
    _SECRET_FLAG: _Places._secret_flag,
    _SECRET_MEMBER: _Places._secret_member,
}


def _matches_at(
    pattern: _Lazy,
    text: str,
    starts: list[int] | None,
    accept: Callable[[re.Match[str]], bool],
) -> Iterator[re.Match[str]]:
    """`_matches`, trying the pattern only at `starts` (ascending; None: everywhere).

    The same matches as `_matches` when `starts` holds every place where a match can start:
    a search returns the first place where the pattern matches, and a rejected match only
    moves the search one place on.
    """
    if starts is None:
        yield from _matches(pattern, text, accept)
        return
    regex = pattern.regex
    position = 0
    for start in starts:
        if start < position:
            continue
        match = regex.match(text, start)
        if match is not None and match.end() > start and accept(match):
            yield match
            position = match.end()


# The secret patterns in time linear in the text. Tried as `_matches` tries them, each could
# read a long run again at every place inside it where it is rejected or fails: a secret word
# reads its name to the end of the run (`keykeykey...`), a name its value (`monkey=monkey=...`),
# a flag's name every secret word in it (`-keykeykey...`), a prefixed token the run after it
# (`xsk-sk-sk-...`). Each scan below gives the same matches, deciding a place without the
# pattern where the pattern cannot give an accepted match there, and running the pattern only
# where it will be accepted; the ends of values are found once per run (`_RunEnd`).
_WORD_AT = _Lazy(rf"(?i:{_SECRET_WORD})", re.ASCII)
_NAME_RUN = _Lazy(r"[\w.-]*", re.ASCII)
_NAME_CHARS_TEXT = "".join(sorted(_NAME_CHARS))
_NOT_LETTERS = "0123456789_.-"
# What follows a member's name up to its value, and the value's first character.
_MEMBER_SEP = _Lazy(
    rf"""["']?[ \t]*[:=\x01][ \t]*{_LIST_OPENER}["']?(?={_VALUE_FIRST})""", re.ASCII
)
_VALUE_RUN = _Lazy(rf"{_VALUE_CHAR}*", re.ASCII)
_FLAG_HEAD = _Lazy(r"(?<![\w-])--?(?=[A-Za-z])", re.ASCII)
_FLAG_RUN = _Lazy(r"[\w-]*", re.ASCII)
_FLAG_EQUALS = _Lazy(r"""=(?=[^\s"'<>\x00-\x02])""", re.ASCII)
_FLAG_NEXT = _Lazy(r"\x02(?=[^<\x00-\x02-]|-(?!-))")
_FLAG_BLANKS = _Lazy(rf"{_FLAG_GAP}(?!--|\#)[\"']?(?={_VALUE_FIRST})", re.ASCII)
_FLAG_ITEM = _Lazy(rf"""{_FLAG_ITEM_GAP}(?!-)(?={_VALUE_FIRST})""", re.ASCII)
_TOKEN_PREFIX = _Lazy(
    r"hf_|sk-|gh[pousr]_|github_pat_|glpat-|AIza|AKIA|ASIA|xox[abposr]-|eyJ"
    r"|[sr]k_(?:live|test)_|pypi-AgE|npm_|(?i:discord(?:app)?\.com)/api/(?:v[0-9]{1,2}/)?webhooks/"
    r"|hooks\.slack\.com/(?:services|workflows|triggers)/"
    r"|(?:bot)?[0-9]{8,12}:AA|gsk_|xai-|pplx-|nvapi-|r8_|ya29\.|SG\.|do[opr]_v1_"
)


def _end_of(run: re.Pattern[str], text: str, at: int) -> int:
    """Where the run (a pattern of zero or more characters of a class) from `at` ends."""
    match = run.match(text, at)
    assert match is not None
    return match.end()


class _RunEnd:
    """Where the run of a character class that holds a place ends, for places in ascending
    order: the run is read once, whatever the number of places inside it."""

    def __init__(self, text: str, run: re.Pattern[str]) -> None:
        self._text, self._run = text, run
        self._start = self._end = 0

    def __call__(self, at: int) -> int:
        if not self._start <= at < self._end:
            self._start, self._end = at, _end_of(self._run, self._text, at)
        return self._end


class _Cursor:
    """The places to try in turn: from `starts` (ascending), or those `finder` finds."""

    def __init__(self, text: str, starts: list[int] | None, finder: re.Pattern[str]) -> None:
        self._text, self._starts, self._finder = text, starts, finder
        self._index = 0

    def next(self, position: int) -> int:
        """The first place at or after `position`, or -1."""
        if self._starts is None:
            found = self._finder.search(self._text, position)
            return -1 if found is None else found.start()
        self._index = bisect.bisect_left(self._starts, position, self._index)
        return self._starts[self._index] if self._index < len(self._starts) else -1


def _run_start(text: str, at: int, chars: str) -> int:
    """Where the run of `chars` that ends at `at` starts (read back in C, a window at a
    time)."""
    size = 256
    while True:
        window = text[max(0, at - size) : at]
        kept = window.rstrip(chars)
        if kept or len(window) < size:
            break
        size *= 4
    return at - (len(window) - len(kept))


def _name_at(text: str, start: int, end: int) -> str:
    """`_name_before` for a member whose secret word starts at `start`, its run ending at
    `end`: the run from its first letter."""
    return text[_run_start(text, start, _NAME_CHARS_TEXT) : end].lstrip(_NOT_LETTERS)


def _secret_members(text: str, starts: list[int] | None) -> Iterator[re.Match[str]]:
    """`_matches_at(_SECRET_MEMBER, text, starts, _accept_token)` (with `starts` None, as
    `_matches`), in time linear in the text.

    What the pattern does after its secret word, and whether the match is accepted, is the
    same at each place of a run of name characters: the name runs to the end of the run, and
    the rest follows it. So the first place of a run where the word matches decides the run.
    """
    word_at, name_run, member_sep = _WORD_AT.regex, _NAME_RUN.regex, _MEMBER_SEP.regex
    cursor = _Cursor(text, starts, word_at)
    values = _RunEnd(text, _VALUE_RUN.regex)
    position = 0
    while (start := cursor.next(position)) >= 0:
        word = word_at.match(text, start)
        if word is None:
            position = start + 1
            continue
        end = _end_of(name_run, text, word.end())
        position = end  # the whole run is decided here
        head = member_sep.match(text, end)
        if head is None:
            continue
        value_start = head.end()
        value_end = values(value_start)
        if value_end - value_start < 6:  # the value's first character and five more
            continue
        name = _name_at(text, start, end)
        if not _is_secret_name(name) or not _member_value(
            name,
            text[value_start:value_end],
            text[end:value_start],
            text[value_end : value_end + 1],
        ):
            continue
        match = _SECRET_MEMBER.regex.match(text, start)
        if match is not None:
            yield match
            position = match.end()


def secret_lists(text: str, starts: list[int] | None) -> Iterator[tuple[int, int, str]]:
    """Each item of a list after a secret's name (`_LIST_HEAD`: vLLM's start-up line
    `'api_key': ['K1', 'K2']`, a list `json.dumps(indent=2)` breaks over lines, a YAML block
    list, a document's `"api_keys": ["K1", "K2"]`) that has a key's random shape
    (`_random_key`) and is a secret after that name (`_secret_value`): its span and its
    excerpt. An item of another shape (a URL too) is read past, not taken: such a list is as
    often one of names (`secrets: [OPENAI_API_KEY, HF_TOKEN]`, docker-compose's `secrets:\n-
    db_password`), of links, rules or code as of keys, and a placeholder, an empty string or
    a note may stand among the keys (`[REDACTED, K]`, `['', K]`, `- old key (revoked)`).
    (In a text the first item is also `_SECRET_MEMBER`'s, judged as a value.) In a
    document, a member's name is a string that stands after SEP: the next string after a
    string of a list (`["token", "3f2a..."]`) is no member's value.

    `starts`: where a secret word may start, as for `_secret_members` (None: anywhere). A
    list that opens inside a list already read (`- a_key:\n- K`, an item that is itself a
    member) is not read again, so each stretch of a text is read as items once, and the
    scan stays linear however lists nest; one that opens past it is read from there."""
    word_at, name_run = _WORD_AT.regex, _NAME_RUN.regex
    head, value_at, next_at, body_at = (
        _LIST_HEAD.regex.match, _LIST_VALUE.regex.match, _LIST_NEXT.regex.match,
        _LIST_BODY.regex.match,
    )  # fmt: skip
    cursor = _Cursor(text, starts, word_at)
    position = reached = 0  # where the cursor goes on; where the lists read so far end
    while (start := cursor.next(position)) >= 0:
        if word_at.match(text, start) is None:
            position = start + 1
            continue
        end = _end_of(name_run, text, start)
        position = end  # the whole run is decided here
        opened = head(text, end)
        if opened is None or opened.end() <= reached:  # (its items read already)
            continue
        run = _run_start(text, start, _NAME_CHARS_TEXT)
        if ITEM_SEP in opened.group() and run and text[run - 1] != SEP:
            continue  # a string of a list, not a member's name: no list of its own
        name = text[run:end].lstrip(_NOT_LETTERS)
        if not _is_secret_name(name):
            continue
        at: int | None = opened.end()
        while at is not None:  # at an item
            found = value_at(text, at)
            if found is None:
                body = body_at(text, at)
                assert body is not None  # (it matches the empty string)
                reached = body.end()
            else:  # (the cursor goes on from the name: a list may hold one)
                reached = found.end()
                value = found.group("keyvalue")
                if "://" not in value and _random_key(value) and _secret_value(name, value):
                    shown = value[: min(4, len(value) // 5)]  # as `_mask_secret` shows one
                    yield found.start("keyvalue"), found.end(), f"{name}: [..., {shown}{ELLIPSIS}"
            following = next_at(text, reached)
            at = None if following is None else following.end()


# Another key after a secret flag's or name's value, where several are given so: after `,`
# (`--api-key K1,K2`, as llama-server takes several; `LLAMA_API_KEY=K1,K2`) and after a
# flag's value also after blanks or as the next argument (vLLM's `--api-key K1 K2`); not a
# flag (`-`), and ending where a list's item does. (Not `/`: a model's repository follows
# a flag's value as often, `--api-key K Qwen/Qwen3-8B`; nor `=` or `:`, a member of its
# own, `api_key=K1, model=M`.)
_MORE_KEY_CHAR = r"""[^\s"'<>`,;(){}\[\]\x00-\x02/=:]"""
_MORE_KEY = (
    rf"(?![-$*%])(?P<keyvalue>{_MORE_KEY_CHAR}{{12,}}(?<!\.))"
    r"""(?=\.?(?:[\s,;)\]}"'\x00-\x02]|\Z))"""
)
_MORE_AFTER_FLAG = _Lazy(r"(?:,[ \t]*|[ \t]+|\x02)" + _MORE_KEY, re.ASCII)
_MORE_AFTER_NAME = _Lazy(r",[ \t]*" + _MORE_KEY, re.ASCII)
# The keys read after one value at most (as `--api-key` lists are in practice: a few).
_MOST_MORE_KEYS = 64
# A key's run of random letters and digits: a name of words has none so long
# (`Qwen3-8B-Instruct-AWQ`, a model given after the keys).
_KEY_RUN = _Lazy("[A-Za-z0-9]{12}", re.ASCII)


class MoreKeys:
    """The keys that follow the values of one detector's matches in one text, in order
    (`more_keys`): a value that ends inside the keys read after an earlier one starts no
    list of its own (each of `K.--api-key K.--api-key ...` is a key and a flag: its keys
    are read once, not once a flag)."""

    def __init__(self, text: str, *, flag: bool) -> None:
        self.text, self.flag = text, flag
        self.reached = -1  # where the keys read so far end

    def after(self, end: int) -> list[tuple[int, int, str]]:
        """The keys after a value that ends at `end`: their spans and excerpts."""
        if end < self.reached:
            return []
        found = list(more_keys(self.text, end, flag=self.flag))
        self.reached = found[-1][1] if found else end
        return found


def more_keys(text: str, end: int, *, flag: bool) -> Iterator[tuple[int, int, str]]:
    """The keys that follow a secret flag's (`flag`) or name's value ending at `end`
    (`_MORE_AFTER_FLAG`, `_MORE_AFTER_NAME`), one after another while each has a key's random
    shape (`_random_key`, with a letter and a run of 12 letters and digits: a word, a number,
    a path, a name of words ends the list): their spans and excerpts."""
    after = (_MORE_AFTER_FLAG if flag else _MORE_AFTER_NAME).regex.match
    run = _KEY_RUN.regex.search
    for _ in range(_MOST_MORE_KEYS):
        found = after(text, end)
        if found is None:
            return
        value = found.group("keyvalue")
        if run(value) is None or value.isdigit() or not _random_key(value):
            return
        end = found.end()
        yield found.start("keyvalue"), end, f"..., {value[: min(4, len(value) // 5)]}{ELLIPSIS}"


def _secret_flags(text: str, starts: list[int] | None) -> Iterator[re.Match[str]]:
    """`_matches_at(_SECRET_FLAG, text, starts, _accept_token)` (with `starts` None, as
    `_matches`), in time linear in the text.

    A flag's name is the whole run of letters, digits, `_` and `-` after its dashes, if the run
    starts with a letter and holds a secret word; what follows the run decides the value.
    """
    flag_head, flag_run, word_at = _FLAG_HEAD.regex, _FLAG_RUN.regex, _WORD_AT.regex
    cursor = _Cursor(text, starts, flag_head)
    values = _RunEnd(text, _VALUE_RUN.regex)
    position = 0
    while (start := cursor.next(position)) >= 0:
        position = start + 1
        head = flag_head.match(text, start)
        if head is None:
            continue
        name_start = head.end()
        end = _end_of(flag_run, text, name_start)
        position = end  # no flag starts inside the run
        if word_at.search(text, name_start, end) is None:
            continue
        if _FLAG_EQUALS.match(text, end) is None and _FLAG_NEXT.match(text, end) is None:
            # `--name value`: a word of prose is not a value.
            # (Each way, a value too short is refused here: the pattern, tried on it, would
            # try every shorter name before a secret word in the flag's run, as long as it is.
            # One too short after blanks leaves the pattern to the next item of a list, as
            # the pattern's alternatives do: `--api-key  # the key` and `- KEY` below.)
            blanks = _FLAG_BLANKS.match(text, end)
            value_start = blanks.end() if blanks is not None else end
            value_end = values(value_start) if blanks is not None else end
            if value_end - value_start >= 6:
                if value_end - value_start < 16 and not _tokenish(text[value_start:value_end]):
                    continue
            elif (item := _FLAG_ITEM.match(text, end)) is None or values(
                item.end()
            ) - item.end() < 6:
                continue
        if not _is_secret_name(text[name_start:end], flag=True):
            continue
        match = _SECRET_FLAG.regex.match(text, start)
        if match is None:
            continue
        group, name = _secret_group(match), match.group("flagname")
        value = match.group(group)
        if _flag_value_shape(group, value, name) and not _token_setting(name, value):
            yield match
            position = match.end()


def _prefixed_tokens(text: str, starts: list[int] | None) -> Iterator[re.Match[str]]:
    """`_matches_at(_PREFIXED_TOKENS, text, starts, _accept_token)` (with `starts` None, as
    `_matches`), in time linear in the text.

    After a letter or a digit no token is accepted, and after `_` or `-` only an AWS key (of
    fixed length) or the first token prefix of its word (_Words, read once a word):
    the pattern runs only where its match can be accepted.
    """
    tokens = _PREFIXED_TOKENS.regex
    cursor = _Cursor(text, starts, _TOKEN_PREFIX.regex)
    words = _Words(text)
    position = 0
    while (start := cursor.next(position)) >= 0:
        position = start + 1
        if start:
            before = text[start - 1]
            if _in_word(before):
                continue
            if (
                before in "_-"
                and not text.startswith(("AKIA", "ASIA"), start)
                and not words.first(start)
            ):
                continue
        match = tokens.match(text, start)
        if match is not None and _accept_token(match, words):
            yield match
            position = match.end()


_LINEAR_SCANS: dict[_Lazy, Callable[[str, list[int] | None], Iterator[re.Match[str]]]]
_LINEAR_SCANS = {
    _SECRET_MEMBER: _secret_members,
    _SECRET_FLAG: _secret_flags,
    _PREFIXED_TOKENS: _prefixed_tokens,
}


def _generic(text: str, places: _Places) -> Iterator[_Found]:
    """Every hit of the generic detectors in one view of a text (overlaps included)."""
    # Each detector needs a character or word; a text without it skips the detector's pass,
    # and a text with it tries the detector only where `_Places` says a match can start.
    slash, tilde, colon, dot, at, dash = (
        "/" in text,
        "~" in text,
        ":" in text,
        "." in text,
        "@" in text,
        "-" in text,
    )
    private_key = places.has_key and "PRIVATE KEY" in text
    ends = [m.end() for m in _KEY_END.finditer(text)] if private_key else []
    string_end = -1  # the end of the string the last BEGIN without END was in
    for match in _KEY_BEGIN.finditer(text) if private_key else ():
        end = match.end()
        following = bisect.bisect_left(ends, end + 1)
        if following < len(ends) and ends[following] - end <= _KEY_MAX_CHARS:
            end = ends[following]
        elif end <= string_end:  # in the same string as the BEGIN before: read once
            end = string_end
        elif (rest := _STRING_END.match(text, end)) is not None:
            end = string_end = rest.end()  # no END (a log cut short): to its string's end
        yield _found(PRIVATE_KEY, match.start(), end, match.group() + ELLIPSIS)
    for pattern in _TOKEN_PATTERNS:
        if (pattern is _SECRET_FLAG and not dash) or (pattern is _URL_CREDENTIALS and not colon):
            continue
        starts = places.starts(pattern)
        if starts == []:
            continue
        linear = _LINEAR_SCANS.get(pattern)
        matches = (
            linear(text, starts) if linear else _matches_at(pattern, text, starts, _accept_token)
        )
        chained = MoreKeys(text, flag=pattern is _SECRET_FLAG)
        for match in matches:
            group = _secret_group(match)
            # A prefixed token goes whole; after a name or a flag, only the value.
            start, end = match.span() if pattern is _PREFIXED_TOKENS else match.span(group)
            excerpt = _mask_secret(match, group)
            if pattern is _SECRET_MEMBER:
                excerpt = text[_name_before(match)[0] : match.start()] + excerpt
            yield _found(TOKEN, start, end, excerpt)
            if pattern is _SECRET_FLAG or pattern is _SECRET_MEMBER:  # K2 of `K1,K2`
                for more in chained.after(end):
                    yield _found(TOKEN, *more)
            elif pattern is _URL_CREDENTIALS and (user := _url_user(match)) is not None:
                yield user
    # the items of a list after a secret's name (`secret_lists`), where a text has such a name
    member_starts = places.starts(_SECRET_MEMBER)
    if member_starts != []:
        for start, end, excerpt in secret_lists(text, member_starts):
            yield _found(TOKEN, start, end, excerpt)
    simple: tuple[tuple[str, _Lazy, Callable[[re.Match[str]], bool], bool], ...] = (
        (HOME_PATH, _HOME, lambda m: True, slash or tilde),
        (TEMP_PATH, _TEMP, lambda m: True, slash),
        (
            EMAIL,
            _EMAIL,
            lambda m: not _RESERVED_DOMAIN.search(m.group().rsplit("@", 1)[1]),
            at,
        ),
        (MAC_ADDRESS, _MAC, _accept_mac, colon or dash or dot),
        (IP_ADDRESS, _DASHED_IPV4, lambda m: _is_dashed_address(m.group()), dash),
        (
            IP_ADDRESS,
            _IPV4,
            lambda m: _is_public_ipv4(text, m.start(), m.end(), m.group()),
            dot,
        ),
        (IP_ADDRESS, _IPV6, lambda m: _is_public_ipv6(m.group()), colon),
    )
    for category, pattern, accept, needed in simple:
        starts = places.starts(pattern) if needed else []
        if starts == []:
            continue
        for match in _matches_at(pattern, text, starts, accept):
            yield _found(
                category, match.start(), match.end(), _mask(text, match.start(), match.end())
            )
    windows = colon and (
        "U" in text or "users" in places.low or "settings" in places.low or "e~" in places.low
    )
    for match in _WINDOWS_HOME.finditer(text) if windows else ():
        start = match.start() - 1
        yield _found(HOME_PATH, start, match.end(), _mask(text, start, match.end()))
    for match in _WSL_HOME.finditer(text) if "wsl" in places.low else ():
        yield _found(HOME_PATH, match.start(), match.end(), _mask(text, match.start(), match.end()))
    if not at and places.schemes == []:
        return
    for match in _matches_at(
        _ACCOUNT, text, places.starts(_ACCOUNT), lambda m: _is_machine_name(m.group("host"))
    ):
        yield _found(
            USER_NAME,
            match.start(),
            match.end(),
            _mask(text, match.start(), match.end()),
            "<user>@<host>",
        )
    for match in _matches_at(
        _URL_HOST, text, places.starts(_URL_HOST), lambda m: _is_machine_name(m.group("host"))
    ):
        start, end = match.span("host")
        yield _found(HOST_NAME, start, end, _mask(text, match.start(), match.end()))


# ---------------------------------------------------------------------------------------------
# Known values

# The end of a plain user's name after a slash: no character of a name after it (nor a dot
# before one: `alice.txt` is a file's name), so that a name a home path's pattern stopped
# inside (`C:\Users\o'brien)`, at `'`) is found to its end before any punctuation.
_PATH_NAME_END = rf"(?!(?-i:[A-Za-z0-9_{_LETTER}-]|\.[A-Za-z0-9_{_LETTER}-]))"
# The system's own folders, whose entries name programs and services, not accounts: a user
# named `cache`, `www` or `postgres` is not found in `/var/cache`, `/var/www`,
# `/var/lib/postgres`; each folder from the root of its path (`/mnt/share/al` is a user's).
# (A distinctive name is found anywhere.)
_SYSTEM_PARENTS = "".join(
    rf"(?<!(?<![\w.~/-]){re.escape(parent)})"
    for parent in (
        "/var/", "/usr/", "/etc/", "/lib/", "/lib64/", "/run/", "/sys/", "/proc/", "/dev/",
        "/boot/", "/bin/", "/sbin/", "/var/lib/", "/var/cache/", "/usr/lib/", "/usr/lib64/",
        "/usr/share/", "/usr/local/", "/usr/bin/", "/usr/sbin/", "/usr/local/bin/",
        "/usr/local/lib/", "/usr/local/share/",
    )
)  # fmt: skip


# A home's parent, where a name with a suffix is its user's (`C:\Users\o'brien.000`, a
# Windows profile's folder, `o'brien.CORP`, `o'brien_old`, `o'brien-PC`), not a file's
# (`/data/alice.txt`).
_HOME_PARENT = (
    "(?:"
    + "|".join(
        rf"(?<=[/\\]{parent}{sep})"
        for parent in ("home", "users", "documents and settings", "docume~1")
        for sep in (r"[/\\]", "//", r"\\\\")
    )
    + ")"
)


# What may follow a user name: `@`, or `:` and then `@` before any `/` or space (the
# password of `al:pw@host`); or, in the two forms `_KnownRegex` splits it into, `@` or `:`
# where the colon's run leads to `@`, and `@` alone where it does not.
_AFTER_USER = {None: r"@|:[^/@\s]*@", True: "@|:", False: "@"}


# Between two components of a private path, any spelling the system reads as one slash:
# `/data//models`, `/data/./models` (`_spelled_path`).
_PATH_SEP = r"/+(?:\./+)*"
_SAME_DIR = _Lazy(r"/(?:\.?/)+")


def normal_path(path: str) -> str:
    """`path` with each run of slashes and `./` spelled as one slash, and no `/` or `/.` at
    its end: `/data//./models/.` is `/data/models`."""
    normal = _SAME_DIR.regex.sub("/", path)
    while normal.endswith("/.") and len(normal) > 2:
        normal = normal[:-2]
    return normal.rstrip("/") if len(normal) > 1 else normal


def _spelled_path(path: str) -> str:
    """A pattern of `path` however its slashes are spelled: doubled (`/a//b`), with `./`
    between (`/a/./b`), or both, in the path as collected and in the text. A leading slash
    is one character, so a match starts at the last slash of a run (`//a/b` from its second
    character): a run of slashes is not read again from each of its places."""
    first, *rest = normal_path(path).split("/")
    if not rest:
        return re.escape(first)
    return (re.escape(first) + _PATH_SEP if first else "/") + _PATH_SEP.join(map(re.escape, rest))


def _known_path(path: str) -> str:
    """The pattern of a private path: in any spelling (`_spelled_path`), not inside a longer
    path (`x/data/m`), but after a short option it is given to (`-m/data/m`), after `/.`
    that starts a path (`/./data/m`, which is `/data/m`) and in a local file URL
    (`file://localhost/data/m`)."""
    after = (
        r"(?<=^-[A-Za-z])|(?<=[\s\x00-\x02]-[A-Za-z])|(?<=(?<![A-Za-z0-9._~-])/\.)"
        r"|(?<=(?i:file://localhost))"
    )
    return (
        rf"(?:{after}|(?<![A-Za-z0-9._~-])|(?<=(?<![.~/-])-)){_spelled_path(path)}"
        r"(?![A-Za-z0-9_-])"
    )


def _known_address(address: str) -> str:
    """An IPv4 address the capture sent requests to, within the generic detector's bounds
    (`_IPV4`), its octets but the first also zero-padded (`192.168.040.023`); also joined
    by dashes or underscores, as in a cloud machine's name (`ip-192-168-40-23.internal`).
    An address in dotted decimal (not another spelling of one: `spellings`) also with its
    first octet padded (`034.012.005.006`, as `%03d` prints it). (Not in reverse order, as
    a PTR name spells it, `6.5.12.34.in-addr.arpa`: a match would start at the last octet,
    and a short one, `1.0`, is a place in every numeric text, where the scan then tries
    every pattern at every character: 13 s a 200 KB text with 28 such addresses.) Before a
    port as tcpdump writes it (`192.168.40.23.51234 > ...`) too. A private one also glued
    after any word by a dash or an underscore (`server-192.168.40.23`, `lib-10.0.3.17`: the
    generic detector asks a machine's word of 10/8) and before a file's extension
    (`192.168.40.23.log`): no version is written so (a public one is: `lora-34.12.5.6.bin`).
    Any one also as a wildcard DNS service spells it (`app.34.12.5.6.sslip.io`), as there.
    After a version word it is a version (`after_version_word`), as there."""
    first, *rest = address.split(".")
    dotted = _is_dotted_quad(address)
    padded = [_padded(octet) for octet in rest]
    head = _padded(first) if dotted else re.escape(first)
    octets = r"\.".join([head, *padded])
    joined = "[-_]".join([head, *padded])
    glued = dotted and ipaddress.IPv4Address(address).is_private
    before = rf"(?:{_IPV4_BEFORE}|{_IPV4_GLUED})" if glued else _IPV4_BEFORE
    extension = r"|(?=\.[A-Za-z]{1,8}(?![\w.-]))" if glued else ""
    return (
        rf"{before}{octets}(?:{_IPV4_AFTER}|(?=\.[0-9]{{1,5}}{_IPV4_AFTER}){extension})"
        rf"|{_NOT_IN_NUMBER}{octets}(?={_WILDCARD_DNS})"
        rf"|(?<![0-9.]){joined}(?![0-9]|\.[0-9])"
    )


def _padded(octet: str) -> str:
    """The pattern of an octet, zero-padded to three digits or not."""
    return f"0{{0,{3 - len(octet)}}}{octet}" if len(octet) < 3 else re.escape(octet)


def _is_dotted_quad(address: str) -> bool:
    """Whether a known address is an IPv4 address in dotted decimal, without padding."""
    try:
        return str(ipaddress.IPv4Address(address)) == address
    except ValueError:
        return False


def _place_prefixes(known: Known) -> list[str]:
    """The first characters of the matches of the known value (up to four), one of which
    starts each: of a path's spelling with single slashes, and not past its second slash,
    whose spelling varies; of an address, its first octet (the rest may be padded or
    dashed), in dotted decimal also padded with zeros to three digits."""
    if known.kind is KnownKind.ADDRESS:
        if _is_dotted_quad(known.value):
            octets = known.value.split(".")
            return ["0" * pad + octets[0] for pad in range(3 - len(octets[0]) + 1)]
        dot = known.value.find(".")
        return [known.value[:dot] if dot > 0 else known.value[:4]]
    if known.kind is not KnownKind.PATH:
        return [known.value[:4]]
    first = normal_path(known.value)[:4]
    cut = first.find("/", 1)
    return [first[:cut] if cut > 0 else first]


def is_distinctive(name: str) -> bool:
    """Whether a user or host name is unlike a word (`alice-smith`, `lab-host-07`, `j.doe`):
    found wherever it is a token of its own, not only where it names an account. Asked of
    the name composed (NFC), so that each spelling of it (`spellings`) gets one answer."""
    if not name.isascii():
        name = unicodedata.normalize("NFC", name)
    return len(name) >= 4 and any(c in name for c in "-._")


# Around a distinctive name: any character but an ASCII letter or digit, so that the name
# is found inside a longer token too (`server-alice-smith.log`, `alice-smith.log`), never
# inside a longer word or number (`xalice-smith`, `lab-host-070`). `(?-i:...)`: in the
# patterns' `(?i)` an ASCII class would also take the letters that fold to ASCII (`K`).
_NOT_ALNUM_BEFORE = r"(?<!(?-i:[A-Za-z0-9]))"
_NOT_ALNUM_AFTER = r"(?!(?-i:[A-Za-z0-9]))"


def _after_any(prefixes: Iterable[str]) -> str:
    """Lookbehinds of the literal prefixes: one for each width (Python's are of one width)."""
    widths: dict[int, list[str]] = {}
    for prefix in prefixes:
        widths.setdefault(len(prefix), []).append(re.escape(prefix))
    return "|".join(f"(?<={'|'.join(found)})" for _, found in sorted(widths.items()))


# A name given to a variable that names an account or a machine, in free text or a dump of
# the environment (`USER=jdoe`, `export LOGNAME='jdoe'`, `HOSTNAME=buildbox`), in any case
# (`--host=buildbox`, `?user=jdoe`); a user name also as the value of a member so named
# (`user: jdoe`, `{"login": "jdoe"}`, a document's `"owner": "jdoe"`, `Username: jdoe` as
# docker info prints it), but after `User:` as written (a chat transcript's speaker); the
# first of a list so named (`{"username": ["jdoe"]}`), which a document's text joins to its
# key by SEP as it joins a value to the next key (not after `user`, `login`, `owner` or
# `account`, which are values too: a chat message's `"role": "user"` before `"content"`);
# and after FTP's `USER ` command.
_USER_KEYS = (
    "user", "username", "logname", "login", "owner", "user_name", "user-name", "account",
    "acct", "whoami", "user.name",
)  # fmt: skip
_LIST_KEYS = ("username", "logname", "user_name", "user-name", "users")
# after `key: ` in prose too (`Username: jdoe`), but not `account: ` ("your NVIDIA account:
# NVIDIA Developer Program" names no account), nor `user: `, below (a chat's speaker)
_USER_LINE_KEYS = (
    "username", "logname", "login", "owner", "user_name", "user-name", "x-forwarded-user",
    "remote-user", "x-remote-user",
)  # fmt: skip
_USER_FLAGS = ("--user", "--username", "--user-name", "--login", "--owner")
# What system logs write around a user's name, as written, each before and after it: PAM's
# `session opened for user NAME`, sshd's `Accepted publickey for NAME from`, `Invalid user
# NAME from`, `Connection closed by authenticating user NAME`, sudo's line (`sudo:    NAME
# : TTY=...`). Not a command's idiom (`sudo -u NAME`, `chown -R NAME:NAME`, `-u NAME`): a
# model's reply gives them with ordinary names (`chown -R node:node /app`, pip's `-U`), and
# a plain name there would stop an honest export; nor `of user ` or `from user ` in prose
# (`the privacy of user data`).
_USER_LOGGED = (
    *((f"session {event} for user ", "") for event in ("opened", "closed")),
    *(
        (f"{what} for ", " from")
        for what in (
            "Accepted publickey",
            "Accepted password",
            "Accepted keyboard-interactive/pam",
            "Failed password",
            "Failed publickey",
            "Failed password for invalid user",
            "Postponed publickey",
        )
    ),
    ("by ", "(uid="),  # PAM's `session opened for user root(uid=0) by NAME(uid=1000)`
    ("Invalid user ", " from"),
    ("invalid user ", " from"),
    ("authenticating user ", " "),
    ("Disconnected from user ", " "),
    *(("sudo:" + " " * n, " :") for n in range(1, 9)),
)


def _user_logged(v: str, *, shown: bool = True) -> str:
    """The alternatives of a plain user name's pattern (`v`) that `_USER_LOGGED` and, with
    `shown`, `_user_shown` read (as written: case matters)."""
    logged = [
        f"(?<={re.escape(before)}){v}(?={re.escape(after)})" if after
        else f"(?<={re.escape(before)}){v}(?![\\w-]|\\.\\w)"
        for before, after in _USER_LOGGED
    ]  # fmt: skip
    # (`(?=v)` first: a place without the name is refused at once, not by each lookbehind)
    return f"(?-i:(?={v})(?:" + "|".join([*logged, *([_user_shown(v)] if shown else [])]) + "))"


# A line's start: the text's, or after a line break or a document's joiner.
_LINE_START = r"(?<![^\n\x00-\x02])"
# `ls -l`'s mode (a file's type, then nine permissions, perhaps an ACL's or a context's
# mark) and link count before the owner, as aligned: 1 to 3 spaces, 1 to 4 digits.
_LS_MODE = r"[-dlcbpsD][-r][-w][-xsS][-r][-w][-xsS][-r][-w][-xtT]"
_LS_OWNER = "|".join(
    rf"(?<={_LS_MODE}{mark}{' ' * spaces}[0-9]{{{digits}}} )"
    for mark in ("", "[.+@]")
    for spaces in (1, 2, 3)
    for digits in (1, 2, 3, 4)
)
# `ls -l`'s time of a file: `Dec  5 12:00`, `Dec  5  2025`, or `--time-style=long-iso`'s.
_LS_TIME = (
    r"(?:[A-Z][a-z]{2} {1,2}[0-9]{1,2} {1,2}(?:[0-9]{2}:[0-9]{2}|[0-9]{4})"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2})"
)
_STAT_OWNER = "|".join(rf"(?<=[0-9]/{' ' * spaces})" for spaces in range(9))
_SESSION_OF = "|".join(rf"(?<=[Ss]ession [0-9]{{{n}}} of [Uu]ser )" for n in range(1, 7))


def _user_shown(v: str) -> str:
    """Where tools print a user's name, as written: `ls -l`'s owner (`-rw-r--r-- 1 NAME
    staff 1024`) and group (`root NAME 1024 Dec  5 12:00`), `ps aux`'s first column
    (`NAME  4821 97.3  1.2 ...`), `top`'s user after the process id (`4821 NAME  20   0
    ...`), `who` (`NAME  pts/0`), a passwd line (`NAME:x:1000:1000:`), stat's `Uid: (
    1000/  NAME)`, PostgreSQL's `for user "NAME"` and `role "NAME" does not exist`, cron's
    `crontab for NAME`, systemd-logind's `session 3 of user NAME`. Each with the columns
    around it, so that a reply's prose (`for user data`) is not read as an account."""
    return "|".join(
        [
            rf"(?:{_LS_OWNER}){v} {{1,16}}{v}(?= {{1,16}}[0-9])",
            rf"(?:{_LS_OWNER}){v}(?= {{1,16}}\S{{1,64}} {{1,16}}[0-9])",
            # the group, after another owner: read by the size and the time after it
            rf"(?<= ){v}(?= {{1,16}}[0-9]{{1,15}} {_LS_TIME} )",
            rf"{_LINE_START}{v}(?= {{1,16}}[0-9]{{1,7}} {{1,16}}[0-9]{{1,3}}\.[0-9] "
            rf"{{1,16}}[0-9]{{1,3}}\.[0-9] )",
            rf"(?<=[0-9] ){v}(?= {{1,16}}(?:rt|-?[0-9]{{1,3}}) {{1,16}}-?[0-9]{{1,3}} "
            rf"{{1,16}}[0-9])",
            rf"{_LINE_START}{v}(?= {{1,32}}(?:pts/|tty|console\b|:[0-9]))",
            rf"{_LINE_START}{v}(?=:[^:\n\x00-\x02]{{0,256}}:[0-9]{{1,10}}:[0-9]{{1,10}}:)",
            rf"(?:{_STAT_OWNER}){v}(?=\))",
            rf'(?<=for user "){v}(?=")|(?<=role "){v}(?=" does not exist)',
            rf"(?<=crontab for ){v}(?![\w-]|\.\w)",
            rf"(?:{_SESSION_OF}){v}(?![\w-]|\.\w)",
        ]
    )


@functools.lru_cache(maxsize=256)
def _shown_patterns(value: str, user: bool) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A plain user's or host's name where tools print it (`_user_shown`, `_host_shown`),
    and everywhere else its pattern finds it."""
    v = re.escape(value)
    shown = f"(?-i:(?={v})(?:{_user_shown(v)}))" if user else _host_shown(v)
    kind = KnownKind.USER if user else KnownKind.HOST
    other = _known_pattern(Known(value, "", "", kind), shown=False)
    return re.compile(shown), re.compile(other)


def only_shown(value: str, user: bool, text: str, at: int) -> bool:
    """Whether the plain name `value` at `at` is found only as a tool prints it (`ls -l`'s
    owner, `uname -a`'s host): a name that evidence may hold, since a model's reply prints
    those lines with ordinary names (`node`, `pi`, `server`), so its hit is not
    identifying: removed from free text, kept in evidence."""
    shown, other = _shown_patterns(value, user)
    return shown.match(text, at) is not None and other.match(text, at) is None


def _host_shown(v: str) -> str:
    """Where tools print a machine's name, as written: `uname -a` (`Linux NAME 6.8.0-45`,
    macOS's `Darwin NAME 23.4.0`),
    ssh's and curl's `connect to host NAME port 22`, `Failed to connect to NAME port 80`,
    `Could not resolve host: NAME`, ssh's `Permanently added 'NAME'`, `PING NAME (`,
    Slurm's `srun: error: NAME: task 0`, HTTP's `Via: 1.1 NAME`; and, in any case, the
    first label of a full name that is a URL's or a share's host (`https://NAME.acme.com/`,
    `//NAME.acme.com/x`): the machine's own full name as likely as another site's
    (`https://docs.python.org/` where the machine is `docs`), which evidence may hold."""
    return rf"(?i:(?:(?<=://)|{_SLASHED_SHARE}){v}{_HOST_DOMAIN})|" + (
        f"(?-i:(?={v})(?:"
        + "|".join(
            [
                *(
                    rf"(?<={system} ){v}(?= [0-9]{{1,4}}\.[0-9]{{1,4}}\.[0-9])"
                    for system in ("Linux", "Darwin")
                ),
                rf"(?<=connect to host ){v}(?= port )|(?<=Failed to connect to ){v}(?= port )",
                rf"(?<=Could not resolve host: ){v}(?![\w-]|\.\w)",
                rf"(?<=Permanently added '){v}(?=[',])|(?<=PING ){v}(?= \()",
                rf"(?<=srun: error: ){v}(?=: )|(?<=Via: 1\.[01] ){v}(?![\w-]|\.\w)",
            ]
        )
        + "))"
    )


# How a JSON text (or a Python dict's repr) joins a member's quoted name to its value, as
# the formatters write it: `"k":"v"`, `"k": "v"`, `"k" : "v"`, PowerShell's `"k":  "v"`, a
# tab; and to a list's first item, on the same line or on the next, indented as
# `json.dumps(indent=N)` and ConvertTo-Json write it (`"k": [\n    "v"`), in double quotes.
# (Each spelling is one more literal a lookbehind tries wherever a known name stands: 48
# of them made a text of 87,000 `al:` take 17 s of CPU for the user `al`; values aligned
# further, or spaced otherwise, are a known gap.)
_JSON_COLONS = tuple(
    before + ":" + after for before in ("", " ") for after in ("", " ", "  ", "\t")
)
_JSON_LIST_OPENS = (
    *(colon + "[" + gap + q for colon in _JSON_COLONS for gap in ("", " ") for q in "\"'"),
    *(
        colon + "[" + line + indent + '"'
        for colon in (": ", ":  ")
        for line in ("\n", "\r\n")
        for indent in (*(" " * n for n in range(17)), *("\t" * n for n in range(1, 5)))
    ),
)


def _json_members(keys: Iterable[str], *, lists: bool) -> list[str]:
    """What stands before the value of a JSON member of each of `keys` (`_JSON_COLONS`),
    and, with `lists`, before the first item of its list (`_JSON_LIST_OPENS`). The value's
    quote need not be the key's: Python's repr quotes a string that holds `'` with `"`
    (`{'USER': "o'brien"}`)."""
    return [
        *(
            q + key + q + colon + v
            for key in keys
            for q in "\"'"
            for colon in _JSON_COLONS
            for v in "\"'"
        ),
        *(
            q + key + q + opening
            for key in (keys if lists else ())
            for q in "\"'"
            for opening in _JSON_LIST_OPENS
        ),
    ]


# (Built where a known name first needs it: verify, which knows none, never builds them:
# some 4 ms of start-up.)
@functools.cache
def _user_assigned() -> str:
    return (
        _after_any(
            [
                *(key + sep for key in _USER_KEYS for sep in ("=", " = ", '="', "='", KEY_SEP)),
                *(key + sep for key in _USER_KEYS for sep in (' = "', " = '")),  # TOML, INI
                # a document's member whose value is a list (`_Flat`: its first string
                # follows the name as a list's next string does)
                *(key + ITEM_SEP for key in _LIST_KEYS),
                # a command line's flag and its value, as two arguments or in its text
                *(f"{key}{sep}" for key in _USER_FLAGS for sep in (ITEM_SEP, " ")),
                # a member (`{"login": "jdoe"}`) and the first of a list (`{"username": ["jdoe"]}`,
                # and `{"users": ["jdoe"]}`, not `USERS=jdoe`: a count, a group)
                *_json_members((*_USER_KEYS, "users"), lists=True),
                *(key + sep for key in _USER_LINE_KEYS for sep in (":", ": ", ': "', ": '")),
            ]
        )
        + "|(?-i:"
        + _after_any(
            [
                *(key + sep for key in ("user", "USER") for sep in (":", ": ", ': "', ": '")),
                "USER ",
            ]
        )
        + ")"
    )


# What id(1) prints: `uid=1000(jdoe) gid=1000(jdoe) groups=1000(jdoe),27(sudo)`.
_ID_NAMED = "|".join(rf"(?<=[=,][0-9]{{{digits}}}\()" for digits in range(1, 11))
# A host name given to a variable or a member that names the machine (`HOSTNAME=falcon`,
# `--host=falcon`, `{"hostname": "falcon"}`, `'node': 'falcon'`), in any case; or as the
# value of a line so named, alone to its end (`hostname: falcon`, HTTP's `Host: falcon`):
# after `host: ` in prose (`Host: falcon is a bird`) the word names nothing.
_HOST_KEYS = (
    "host", "hostname", "host_name", "host-name", "node", "nodename", "node_name", "machine",
    "computer_name", "master_addr", "nodelist", "slurm_nodelist", "slurmd_nodename",
    "server_name", "fqdn",
    # a node's address in a multi-node setting (vLLM's `--kv-transfer-config` `kv_ip` and
    # `proxy_ip`, Ray's): not a bare `ip` or `address`, which the keys are read after
    # as literals, so that `ship = "x"` or `email_address = "x"` would name a machine
    "kv_ip", "proxy_ip", "ip_address", "master_address", "node_ip", "node_ip_address",
    "data_parallel_address", "dist_init_addr", "advertise_addr", "head_address",
    "coordinator_address",
)  # fmt: skip
# And a command line's flag that names the machine to listen on or reach, and its value, as
# two arguments, in its text or after `=` (`llama-server --host falcon`, torchrun's
# `--master-addr=falcon`, vLLM's `--data-parallel-address falcon`, Ray's and SGLang's).
_HOST_FLAGS = (
    "--host", "--hostname", "--host-name", "--bind", "--bind-addr", "--bind-address",
    "--listen", "--master-addr", "--master_addr", "--node", "--server",
    "--data-parallel-address", "--data_parallel_address", "--node-ip-address",
    "--node_ip_address", "--ray-address", "--address", "--addr", "--ip", "--dist-init-addr",
    "--dist_init_addr", "--nccl-init-addr", "--advertise-addr", "--master-address",
    "--coordinator-address", "--head-address", "--rdzv-endpoint", "--rdzv_endpoint",
    "--local-addr", "--local_addr", "--node-name", "--nodelist", "--hosts", "--master",
    "--hostname-override", "--head-node-ip", "--head_node_ip",
    # the short ones of the launchers: Open MPI's and mpirun's `-H NAME,...`, Slurm's
    # `srun -w NAME` (its --nodelist); a known host's name after them (no other value of
    # these flags is a machine's name)
    "-H", "-w",
)  # fmt: skip


@functools.cache
def _host_assigned() -> str:
    return _after_any(
        [
            *(key + sep for key in _HOST_KEYS for sep in ("=", '="', "='", KEY_SEP)),
            *(flag + sep for flag in _HOST_FLAGS for sep in (ITEM_SEP, " ", "=")),
            # the loopback names of /etc/hosts (`127.0.1.1\tNAME`)
            *(loopback + sep for loopback in ("127.0.0.1", "127.0.1.1") for sep in ("\t", " ")),
            *(key + sep for key in _HOST_KEYS for sep in (" = ", ' = "', " = '")),  # TOML, INI
            # a member whose name is not quoted (YAML's flow, a JavaScript object)
            *(key + sep for key in _HOST_KEYS for sep in (': "', ": '", ':"', ":'")),
            *_json_members(_HOST_KEYS, lists=False),
        ]
    )


# (not `node: ` or `machine: `: prose's "The node: spark" ends a line as often)
@functools.cache
def _host_line() -> str:
    return _after_any(key + sep for key in _HOST_KEYS[:4] for sep in (":", ": ", ":\t"))


_LINE_END = r"(?=[ \t]{0,16}(?:[\r\n\x00-\x02]|\Z))"
# The host of a system log's line, after its time: syslog's and journalctl's `Dec  5 00:19:12
# NAME sshd[812]:` (`-o short-precise` with a fraction), rsyslog's and journalctl's ISO times
# (`2026-12-05T00:19:12.123456+00:00 NAME`, `-o short-iso`), journalctl's `-o short-full`
# (`Sat 2026-12-05 00:19:12 UTC NAME`) and `-o short-unix` (`1733357952.123456 NAME`); then
# the program that wrote the line and a colon (`sshd[812]: `, `sshd(pam_unix)[812]: `,
# `kernel: `). In RFC 5424 (`<34>1 2026-12-05T00:19:12.003Z NAME su - ID47 -`) the host is
# the field after the time, whatever follows it.
_D2 = "[0-9]{2}"
_CLOCK = f"{_D2}:{_D2}:{_D2}"
_DATE = f"[0-9]{{4}}-{_D2}-{_D2}"
_FRACTIONS = ("", *(rf"\.[0-9]{{{n}}}" for n in range(1, 10)))
_ZONES = ("Z", rf"[+-]{_D2}", rf"[+-]{_D2}{_D2}", rf"[+-]{_D2}:{_D2}")
_WORD_ZONES = (*(f"(?-i:[A-Z][A-Za-z]{{{n}}})" for n in (2, 3, 4)), *_ZONES[1:])
_LOG_TIMES = (
    *(rf"(?-i:[A-Z][a-z]{{2}}) [ 0-9][0-9] {_CLOCK}{f} " for f in _FRACTIONS),
    *(rf"{_DATE}T{_CLOCK}{f}{z} " for f in _FRACTIONS for z in _ZONES),
    *(rf"(?-i:[A-Z][a-z]{{2}}) {_DATE} {_CLOCK} {z} " for z in _WORD_ZONES),
    r"[0-9]{10}\.[0-9]{6} ",
)
_LOG_TIME = "|".join(f"(?<={time})" for time in _LOG_TIMES)  # (each of one width)
_LOG_SOURCE = (  # the program that wrote the line, and its colon
    r"(?= [^\s:\[\x00-\x02]{1,64}(?:\[[0-9]{1,10}\])?:(?=[ \t\r\n\x00-\x02]|\Z))"
)
_RFC5424_TIME = "|".join(
    f"(?<=>1 {_DATE}T{_CLOCK}{f}{z} )" for f in _FRACTIONS[:7] for z in ("Z", _ZONES[3])
)
# A quoted name before a quoted host, as MySQL writes an account (`'jdoe'@'localhost'`).
_QUOTED_ACCOUNT = (r"(?<=['\"`])", r"(?=['\"`]@)")
# A secret this long is found inside a longer token too (`tokhf_...`): no word of prose.
_GLUED_SECRET = 12
# A host name followed by a port (`buildbox:8080`), or by a path as scp and NFS write it
# (`buildbox:/data`), not inside a longer name, path or address (`x.buildbox:80`,
# `/buildbox:80`, `a:buildbox:80`) nor before a decimal (`cache:0.5`); in brackets before a
# port (`[buildbox]:29500`); a Windows share's machine (`\\buildbox\models`).
_HOST_BEFORE_PORT = r"(?<![\w./:-])"
# A Windows share written with the other slash (`//buildbox/models`, as Python and MSYS2
# accept it): `//` at the start of a path, not inside a URL or after another path's name.
_SLASHED_SHARE = r"(?<=//)(?<![\w.:/~-]//)"
# A plain host name as the first label of its full name, which goes with it: before a
# private suffix (`NAME.lan`, `NAME.cluster.local`) or two labels or more that end in
# letters (`NAME.acme-corp.io`); before one other label it is taken for code or a file
# (`NAME.py`, `NAME.run()`). The labels backtrack one at a time, each tried once.
_PRIVATE_SUFFIXES = "lan|local|localdomain|internal|intranet|corp|home|private"
_HOST_DOMAIN = (
    rf"(?:\.[A-Za-z0-9-]+)*(?:\.(?:{_PRIVATE_SUFFIXES})|\.[A-Za-z0-9-]+\.[A-Za-z]{{2,}})"
    r"(?![\w-]|\.\w)"
)
_PORT = r"(?=:\d{1,5}(?!\w|\.\d))"
_BRACKETED_PORT = r"(?=\]:\d{1,5}(?!\w|\.\d))"


# What stands between two words of a named string in a text: any white space (a line's
# break, a no-break or thin space), `_`, `+` (a form's space) or `%20`, a dash of any width
# (`-`, `‐`, `–`, `—`, `−`), a dot, a slash either way or a colon (`project.zeta.internal`,
# `Project/Zeta`, `Project:Zeta`); never a separator of the scanned text's fields.
_WORD_GAP = r"(?:[^\S\x00-\x02]|[_+./\\:\u2010-\u2015\u2212-]|%20)+"


def _spaced_words(value: str) -> str:
    """The pattern of a value (with no white space around it) whose runs of white space
    are each any `_WORD_GAP`."""
    words = value.split()
    if len(words) < 2 or value != value.strip():
        return re.escape(value)
    return _WORD_GAP.join(map(re.escape, words))


def string_head(value: str) -> str:
    """What a match of a named string starts with: its first word (`_spaced_words`)."""
    words = value.split()
    return words[0] if len(words) > 1 and value == value.strip() else value


def _known_pattern(known: Known, colon_to_at: bool | None = None, *, shown: bool = True) -> str:
    """The pattern of a known value. Each alternative matches the value itself, after
    lookbehinds of fixed width and before lookaheads that read a bounded number of
    characters (but `_AFTER_USER`'s, which `_KnownRegex` bounds, and a host's domain
    labels, which its match takes): a try at one place reads a bounded stretch of text."""
    v = re.escape(known.value)
    distinctive = is_distinctive(known.value)
    if known.kind is KnownKind.PATH:
        return _known_path(known.value)
    if known.kind is KnownKind.ADDRESS:
        return _known_address(known.value)
    if known.kind is KnownKind.USER:
        if distinctive:
            # Every form below is one of these (a name after `/`, `~`, `=` or before `@` is
            # bounded by no letter or digit): a match is never one that `_AccountNames` is
            # to judge, so a distinctive name in a URL's path (`github.com/alice-smith/x`)
            # or a repository id is found too.
            return rf"(?i:{_NOT_ALNUM_BEFORE}{v}{_NOT_ALNUM_AFTER})"
        return (
            rf"(?i:(?<=[/\\]){_SYSTEM_PARENTS}{v}{_PATH_NAME_END}|{_HOME_PARENT}{v}(?=[._-])"
            rf"|(?<=~){v}(?![\w.-])"
            rf"|(?<![\w.+-]){v}(?={_AFTER_USER[colon_to_at]})"
            rf"|{_QUOTED_ACCOUNT[0]}{v}{_QUOTED_ACCOUNT[1]}"
            rf"|(?:{_user_assigned()}){v}(?![\w-]|\.\w)|(?:{_ID_NAMED}){v}(?=\))"
            rf"|{_user_logged(v, shown=shown)})"
        )
    if known.kind is KnownKind.HOST:
        # A distinctive host name also where it is a label of a longer name (`det0.NAME`,
        # `NAME.lan`, `NAME-det0`, `NAME_x.log`); what follows it as a domain
        # (`NAME.acme-corp.com`, its full name) goes with it. The labels never backtrack:
        # a label's class holds every character the bound after them refuses, so the
        # greedy labels are the match.
        labels = (
            rf"|{_NOT_ALNUM_BEFORE}{v}(?:\.[A-Za-z0-9-]+)*{_NOT_ALNUM_AFTER}"
            if distinctive
            else rf"|(?<![\w./:-]){v}{_HOST_DOMAIN}"
        )
        return (
            rf"(?i:(?<=@){v}(?![\w-])|(?<=://){v}(?=\.?(?:[:/?#\]\s\"'\x00-\x02]|\Z))"
            rf"|(?:{_host_assigned()}){v}(?![\w-])|(?:{_host_line()}){v}{_LINE_END}"
            rf"|(?:{_LOG_TIME}){v}{_LOG_SOURCE}|(?:{_RFC5424_TIME}){v}(?= \S)"
            rf"|{_HOST_BEFORE_PORT}{v}(?:{_PORT}|(?=:/))|(?<=\[){v}{_BRACKETED_PORT}"
            rf"|(?<=\\\\){v}(?=\\[^\\\s\x00-\x02])|{_SLASHED_SHARE}{v}(?=/[^/\s\x00-\x02])"
            rf"|{_hosts_alias(v)}{'|' + _host_shown(v) if shown else ''}{labels})"
        )
    if known.kind is KnownKind.STRING:
        # inside any longer word too (`falconbox`, `myfalcon`): a code name glued into a
        # host or repository name is the common case (`eli` in `Elias` goes as well); its
        # words apart however they are (`Project+Zeta`, `Project_Zeta`, a no-break space)
        return rf"(?i:{_spaced_words(known.value)})"
    if known.kind is KnownKind.SECRET and len(known.value) >= _GLUED_SECRET:
        return v
    if known.kind is KnownKind.SECRET:  # a shorter one also glued to a short option's letter
        return rf"(?:(?<![A-Za-z0-9])|{_OPTION_GLUED}){v}(?![A-Za-z0-9])"
    return rf"(?<![A-Za-z0-9]){v}(?![A-Za-z0-9])"


_ANY_CASE = (KnownKind.USER, KnownKind.HOST, KnownKind.STRING)


def _lead(known: Known) -> list[str] | None:
    """What every match of the known value starts with, one of these: of a user or host
    name, or a named string's first word (`string_head`), its first four characters, in
    any case (`jörg` too); of another value, `_place_prefixes`. None where there is nothing
    to look for: an empty prefix. Both the lookahead that leads the value's pattern
    (`_known_lead`) and the places it is tried at (`_KnownPlaces`) come from it, so that
    the two cannot differ."""
    if known.kind in _ANY_CASE:
        first = (string_head(known.value) if known.kind is KnownKind.STRING else known.value)[:4]
        return [first] if first else None
    prefixes = _place_prefixes(known)
    return prefixes if all(prefixes) else None


def _known_lead(known: Known) -> str:
    """A lookahead of what a match of the known value starts with (`_lead`), to put before
    its pattern: where another value stands, the pattern is refused at once, not by each of
    its lookbehinds (a place of `al` in `/al/al/...` tried every host's dozens)."""
    prefixes = _lead(known)
    if prefixes is None:
        return ""
    ahead = "(?=" + "|".join(map(re.escape, prefixes)) + ")"
    # (as the pattern reads it: in any case, `K` for `k` too)
    return f"(?i:{ahead})" if known.kind in _ANY_CASE else ahead


# A command line's short option with its value glued on (`mysql -pSECRET`, `-aSECRET`).
_OPTION_GLUED = r"(?<=[\s\x00-\x02]-[A-Za-z])"


def _hosts_alias(v: str) -> str:
    """The name at the end of /etc/hosts' loopback line as Debian writes it, after the full
    name it starts (`127.0.1.1\tNAME.localdomain\tNAME`), to the line's end."""
    return "|".join(
        rf"(?<={re.escape(loopback)}{sep}{v}\.{suffix}{sep}){v}{_LINE_END}"
        for loopback in ("127.0.0.1", "127.0.1.1")
        for sep in ("\t", " ")
        for suffix in ("localdomain", "lan", "local", "home", "internal")
    )


_ACCOUNT_BREAK = _Lazy(r"[/@\s]")
_ACCOUNT_RUN = _Lazy(r"[^/@\s]*")


class _KnownRegex:
    """One pattern of known values, with where it can match (`_KnownPlaces`).

    After a user name and a colon, the pattern reads on to the next `/`, `@` or space: at each
    name of a run that repeats it (`al:al:al:...`), to the end of the run. Where no user name
    holds such a character, what it finds there is the same for every name at one place, and
    is found once per run (`_RunEnd`): the pattern is also compiled with the colon taken as
    leading to `@` and as not, and the run's answer picks one at each place.

    The patterns are compiled when a text first has a place one can match at: export asks
    a detector of the values collected so far about each name it embeds in a placeholder
    (`_Collector.safe`), building a new one as each value comes: compiling all their
    patterns cost about 1.1 s of CPU for the 20 values of a 10,000-record capture, where a
    name rarely holds the first characters of any value.
    """

    def __init__(self, group: list[tuple[int, Known]]) -> None:
        self._group = group
        self._regex: re.Pattern[str] | None = None
        self.places = _KnownPlaces([k for _, k in group])
        users = [k.value for _, k in group if k.kind is KnownKind.USER]
        self._splits = bool(
            users and all(k.value for _, k in group) and not any(map(_ACCOUNT_BREAK.search, users))
        )
        self._split: tuple[re.Pattern[str], re.Pattern[str]] | None = None

    def _joined(self, colon_to_at: bool | None) -> re.Pattern[str]:
        return re.compile(
            "|".join(
                f"(?P<k{i}>{_known_lead(k)}{_known_pattern(k, colon_to_at)})"
                for i, k in self._group
            )
        )

    @property
    def regex(self) -> re.Pattern[str]:
        """The pattern of every value of the group."""
        if self._regex is None:
            self._regex = self._joined(None)
        return self._regex

    def finditer(self, places: _Places) -> Iterator[re.Match[str]]:
        """`self.regex.finditer(places.text)`."""
        text = places.text
        starts = self.places.starts(places)
        if starts is not None:
            first = next(starts, None)
            if first is None:  # (nowhere to match: nothing compiled)
                return
            starts = itertools.chain((first,), starts)
        if not self._splits:
            yield from _finditer_at(self.regex, text, starts)
            return
        if self._split is None:
            self._split = (self._joined(True), self._joined(False))
        to_at, not_to_at = self._split
        runs = _RunEnd(text, _ACCOUNT_RUN.regex)

        def leads_to_at(start: int) -> bool:
            end = runs(start)
            return end < len(text) and text[end] == "@"

        position = 0
        if starts is None:
            # Where the pattern matches, the weaker one does: the first place it does is tried.
            while (match := to_at.search(text, position)) is not None:
                start = match.start()
                if not leads_to_at(start):
                    match = not_to_at.match(text, start)
                if match is None:
                    position = start + 1
                    continue
                yield match
                position = match.end()
            return
        for start in starts:
            if start < position:
                continue
            regex = to_at if leads_to_at(start) else not_to_at
            if (match := regex.match(text, start)) is not None:
                yield match
                position = match.end()


# ---------------------------------------------------------------------------------------------
# Known values in base64
#
# A value the exporter knows to be private can be published base64-encoded: in a note
# (`Basic dXNlcjp0b2tlbg==`), a log line, a metric label. Base64 writes each 3 bytes as 4
# characters of 6 bits, so the characters whose 6 bits all come from the value's bytes
# depend on nothing else: for each of the 3 places the value can start at in a group of 3
# bytes, they are one string, its core, found in every base64 encoding of every byte string
# that holds the value (`base64_cores`). The cores are searched as literals, and a hit is
# the whole run of base64 characters around one (the encoding), with its padding.

# A shorter value's cores are of 6 characters or less, found in base64 by chance.
_BASE64_MIN_BYTES = 6
_BASE64_CLASS = "[A-Za-z0-9+/_-]"  # both alphabets: standard (+/) and URL-safe (-_)
# A run of base64 characters over line breaks (`\n` or `\r\n`, each between two of them,
# the next line perhaps indented: a YAML block's `data: |`, a log's continued lines).
# (Only runs of two lines or more, each from where a run starts: inside one, the lookbehind
# fails at once, and its characters are taken without backtracking, so each is read twice
# at most.)
_BASE64_LINES = _Lazy(
    rf"(?<!{_BASE64_CLASS}){_BASE64_CLASS}++(?:\r?\n[ \t]*+{_BASE64_CLASS}++)+={{0,6}}",
    re.ASCII,
)
# What joins such lines: a line break and the indentation after it.
_LINE_JOIN = re.compile(r"\r?\n[ \t]*")
_BASE64_TEXT = "".join(sorted(set(_LETTERS + "+/_-")))
_URL_SAFE = str.maketrans("+/", "-_")
# Branches nested deeper than this in the cores' trie are written as one alternation (the
# parser of regular expressions recurses once per nested group).
_TRIE_DEPTH = 48


def base64_cores(value: bytes, *, url_safe: bool = True) -> list[str]:
    """The base64 characters that depend on `value`'s bytes alone, after 0, 1 and 2 bytes of
    anything, in the standard and (with `url_safe`) the URL-safe alphabet (distinct, in that
    order)."""
    cores: list[str] = []
    for k in range(3):
        encoded = base64.b64encode(bytes(k) + value).decode("ascii")
        # Character i holds bits 6i to 6i+5; the value's are bits 8k to 8(k + len) - 1.
        core = encoded[-(-8 * k // 6) : 8 * (k + len(value)) // 6]
        cores += [core, core.translate(_URL_SAFE)] if url_safe else [core]
    return list(dict.fromkeys(cores))


def base32_cores(value: bytes, *, hex_alphabet: bool = False) -> list[str]:
    """The base32 characters (RFC 4648's alphabet, or with `hex_alphabet` its extended hex
    one, `0-9A-V`; in upper and in lower case) that depend on `value`'s bytes alone, after 0
    to 4 bytes of anything."""
    encode = base64.b32hexencode if hex_alphabet else base64.b32encode
    cores: list[str] = []
    for k in range(5):
        encoded = encode(bytes(k) + value).decode("ascii")
        # Character i holds bits 5i to 5i+4; the value's are bits 8k to 8(k + len) - 1.
        core = encoded[-(-8 * k // 5) : 8 * (k + len(value)) // 5]
        cores += [core, core.lower()]
    return list(dict.fromkeys(cores))


def base85_cores(value: bytes) -> list[str]:
    """The base85 characters that depend on `value`'s bytes alone: base85 writes each group of
    4 bytes as 5 characters, so for each of the 4 places the value can start at in a group,
    the characters of the groups wholly inside it; in Ascii85 (`a85encode`, Adobe's), RFC
    1924's alphabet (`b85encode`, git's) and ZeroMQ's Z85 (distinct, in that order). Only
    cores of 2 groups or more (10 characters): one of 5 is found in text by chance."""
    cores: list[str] = []
    for k in range(4):
        first = -k % 4  # where the value's first whole group starts in it
        whole = (len(value) - first) // 4 * 4
        if whole >= 2 * 4:
            groups = value[first : first + whole]
            rfc1924 = base64.b85encode(groups).decode("ascii")
            cores += [base64.a85encode(groups).decode("ascii"), rfc1924, rfc1924.translate(_Z85)]
    return list(dict.fromkeys(cores))


_Z85 = str.maketrans(
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~",
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#",
)
# A base85 encoding is a run of printable ASCII without spaces (the three alphabets
# together): a hit is the whole run around a core.
_PRINTABLE_RUN = re.compile("[!-~]*")
# ... or lines of them (a line break between two such characters, `\n` or `\r\n`)
_PRINTABLE_BREAK = re.compile(r"\n(?:(?<=[!-~]\n)|(?<=[!-~]\r\n))(?=[ \t]*[!-~])")
_PRINTABLE_LINES = re.compile(r"[!-~]+(?:\r?\n[ \t]*[!-~]+)*")


def separated_bytes(value: bytes, *, decimal: bool = True) -> list[str]:
    """`value`'s bytes one by one: in hex, in lower case, a pair a byte, with a separator
    between them (`2f 68 6f`, `2f:68:6f`, `2f-68-6f`, `2f,68,6f`, `2f, 68, 6f`), each after
    an `=` (quoted-printable: `=2F=68=6F`), or each after `0x` (`0x2f, 0x68`, as C arrays);
    and with `decimal`, in decimal (`47, 104, 111`, `47,104,111`, `47 104 111`: a list of
    them printed)."""
    pairs = [f"{byte:02x}" for byte in value]
    prefixed = [f"0x{pair}" for pair in pairs]
    numbers = [str(byte) for byte in value]
    return [
        *(sep.join(pairs) for sep in _HEX_SEPARATORS),
        "=" + "=".join(pairs),
        *(sep.join(prefixed) for sep in (" ", ",", ", ")),
        *(sep.join(numbers) for sep in (", ", ",", " ") if decimal),
    ]


_HEX_SEPARATORS = (" ", ":", "-", ",", ", ")
# Where a text can hold such a spelling (in lower case): three bytes so separated (the
# second perhaps after `0x`), or two after `=`, or three numbers; tried where a separator or
# `=` is. (A value of 6 bytes or more: 3 in a row.)
_SEPARATED_BYTES = re.compile(
    r"[ :,=-](?:(?:(?<=[0-9a-f]{2}[ :,-])|(?<=[0-9a-f]{2}, )|(?<==))(?:0x)?[0-9a-f]{2}[ :,=-]"
    r"|(?:(?<=[0-9][ ,])|(?<=[0-9], ))[0-9]{1,3}[ ,])"
)


def _in_base64(known: Known) -> bool:
    """Whether a known value is looked for in base64: a private path, a secret, an opaque
    value, a named string, an address, a distinctive user or host name (an ordinary word is
    no leak, in base64 or not), of 6 bytes or more."""
    if known.kind in (KnownKind.USER, KnownKind.HOST) and not is_distinctive(known.value):
        return False
    return len(known.value.encode("utf-8", "surrogatepass")) >= _BASE64_MIN_BYTES


def _encodings(value: str) -> tuple[bytes, bytes]:
    """The bytes of a value as a text holds it encoded: UTF-8, and UTF-16LE (what Windows
    encodes, as PowerShell's -EncodedCommand)."""
    return value.encode("utf-8", "surrogatepass"), value.encode("utf-16-le", "surrogatepass")


def single_byte(value: str) -> list[bytes]:
    """A value past ASCII in the one-byte encodings that hold it, Latin-1 and Windows-1252
    (`/home/j\\xf6rg` for `/home/jörg`: what a Windows or an old Unix tool writes), for
    its base64 and hex (distinct; none for a value of ASCII, whose bytes are its UTF-8, nor
    bytes fewer than `_BASE64_MIN_BYTES`, whose cores are found in base64 by chance)."""
    if value.isascii():
        return []
    found: list[bytes] = []
    for codec in ("latin-1", "cp1252"):
        with contextlib.suppress(UnicodeError):
            data = unicodedata.normalize("NFC", value).encode(codec)
            if len(data) >= _BASE64_MIN_BYTES:
                found.append(data)
    return list(dict.fromkeys(found))


def _ascii_json(value: str) -> bytes:
    """A value past ASCII as a JSON string holds it escaped to ASCII (`json.dumps`' default:
    `j\\u00f6rg` for `jörg`, a surrogate pair past the Basic Multilingual Plane), without
    the quotes; empty for a value of ASCII, which JSON writes as it is."""
    if value.isascii():
        return b""
    return json.dumps(value)[1:-1].encode("ascii")


def _upper_escape(match: re.Match[bytes]) -> bytes:
    return b"\\u" + match.group()[2:].upper()


def _big_endian(value: str) -> bytes:
    """A value's UTF-16BE bytes (Java's and the network's order), for its base64 and hex."""
    return value.encode("utf-16-be", "surrogatepass")


def _trie_pattern(words: Sequence[str], depth: int = 0) -> str:
    """One pattern of the words (not empty), as a trie: tried at a place, it reads at most
    the longest word (each branch's first characters differ: one is followed) and matches
    the longest word there (a word's continuations are tried before its end)."""
    if depth >= _TRIE_DEPTH:
        return "(?:" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + ")"
    # What every word starts with is one branch: a literal. (Found at once: taken a
    # character at a time, every word was copied for each character, and a known value of
    # 100 KB took export a minute.)
    prefix = os.path.commonprefix(list(words))  # noqa: RUF071 - characters, not paths
    if prefix:
        words = [w[len(prefix) :] for w in words]
    ends = "" in words
    branches: dict[str, list[str]] = {}
    for word in words:
        if word:
            branches.setdefault(word[0], []).append(word[1:])
    if not branches:
        return re.escape(prefix)
    inner = "|".join(
        re.escape(first) + _trie_pattern(rest, depth + 1) if any(rest) else re.escape(first)
        for first, rest in sorted(branches.items())
    )
    return re.escape(prefix) + "(?:" + inner + (")?" if ends else ")")


class _Base64Cores:
    """The cores of the known values looked for in base64 (of their UTF-8 and UTF-16LE
    bytes, and but an environment value's, UTF-16BE and past ASCII its `single_byte` ones)
    and in base32 (of their UTF-8 bytes), and their hex (of the UTF-8 and UTF-16LE bytes, and
    UTF-16BE's and the single-byte ones likewise, in any case),
    each with the index of the first known value it is a core of, and
    where they are in a text.

    In time linear in the text, whatever the number of cores: one trie of them (compiled at
    the first text with a run of base64 characters as long as the shortest core) finds the
    first core after a place, reading at most the longest core at each place it tries; the
    run around a core found is read once, forward to its end and back to its start (never
    past the end of the run before: the search goes on from there), and the search then
    goes on after the run, however many cores it holds (`AAAA...`, cores over and over).

    The opaque values (environment values that identify nobody) are looked for with the
    others, in the same pass, but never name a run that an identifying value's core is in
    too: a core shared with one is the identifying value's, and a run whose first core is an
    opaque value's is searched again for the identifying values' alone (`TERM=xterm...\n
    HOME=/home/alice` encoded whole names the home path, not TERM's value)."""

    def __init__(self, known: Sequence[Known], skip: frozenset[str] = frozenset()) -> None:
        self.cores: dict[str, int] = {}
        # Hex is found the same way: its digits are base64 characters, and a value's hex is
        # one string wherever it starts; in lower case, matched in any case.
        self.hexes: dict[str, int] = {}
        # And the bytes one by one, in hex or decimal, with separators, or quoted-printable
        # (`separated_bytes`): not base64 characters, so a hit is the spelling alone, not the
        # run around it.
        self.separated: dict[str, int] = {}
        # And base85's cores (`base85_cores`): a hit is the run of printable ASCII around one.
        self.base85: dict[str, int] = {}
        self._opaque = frozenset(i for i, k in enumerate(known) if k.kind is KnownKind.OPAQUE)
        # The identifying values first: a core (or hex) that one shares is its own.
        for index, value in sorted(enumerate(known), key=lambda item: item[0] in self._opaque):
            if _in_base64(value) and value.value not in skip:
                utf8, utf16 = _encodings(value.value)
                if value.kind is KnownKind.OPAQUE:
                    # An environment value (it identifies nobody): in the common encodings
                    # only, base64 of UTF-8 and UTF-16LE, base32, hex. A capture holds scores
                    # of them, and each further spelling is another pass over every text.
                    for core in (*base64_cores(utf8), *base64_cores(utf16), *base32_cores(utf8)):
                        self.cores.setdefault(core, index)
                    self.hexes.setdefault(utf8.hex(), index)
                    self.hexes.setdefault(utf16.hex(), index)
                    continue
                # (base32's alphabet is base64's upper-case letters and 2-7); and a path as
                # JSON may escape it (`\/home\/alice`), base64 of a JSON document
                escaped = utf8.replace(b"/", b"\\/") if b"/" in utf8 else b""
                # and a value past ASCII as JSON's ASCII escaping writes it (`j\u00f6rg`, as
                # `json.dumps` does by default), in base64 or hex of a JSON document
                ascii_json = _ascii_json(value.value)
                # (its hex digits in capitals too, as .NET's and Jackson's writers write them)
                ascii_upper = re.sub(rb"\\u[0-9a-f]{4}", _upper_escape, ascii_json)
                big = _big_endian(value.value)
                one_byte = single_byte(value.value)
                for core in (
                    *(core for data in one_byte for core in base64_cores(data)),
                    *base64_cores(utf8),
                    *base64_cores(utf16),
                    *base64_cores(big),
                    *base32_cores(utf8),
                    *base32_cores(utf8, hex_alphabet=True),
                    *(base64_cores(escaped) if escaped else ()),
                    *(base64_cores(ascii_json) if ascii_json else ()),
                    *(base64_cores(ascii_upper) if ascii_upper != ascii_json else ()),
                    # base64 of base64: the cores of each core (found in base64 of any
                    # text that holds it, as the cores of a value are), in the standard
                    # alphabet at both levels
                    *(
                        again
                        for inner in base64_cores(utf8, url_safe=False)
                        for again in base64_cores(inner.encode("ascii"), url_safe=False)
                    ),
                ):
                    self.cores.setdefault(core, index)
                self.hexes.setdefault(utf8.hex(), index)
                self.hexes.setdefault(utf16.hex(), index)
                self.hexes.setdefault(big.hex(), index)
                for data in one_byte:
                    self.hexes.setdefault(data.hex(), index)
                if ascii_json:
                    self.hexes.setdefault(ascii_json.hex(), index)
                    self.hexes.setdefault(ascii_upper.hex(), index)
                for spelled in separated_bytes(utf8, decimal=spells_apart(value.value)):
                    self.separated.setdefault(spelled, index)
                for core in base85_cores(utf8):
                    self.base85.setdefault(core, index)
            if value.kind is KnownKind.USER and value.value not in skip:
                # A user name names an account before `@` (`al@lab-07`), which the text
                # holds for it found by `_known_pattern`: so spelled too, the bytes of
                # `al@` (the host after it is found, or not, as a host).
                for spelled in separated_bytes(f"{value.value}@".encode("utf-8", "surrogatepass")):
                    self.separated.setdefault(spelled, index)
        shortest = min(map(len, [*self.cores, *self.hexes]), default=0)
        self._long_run = re.compile(rf"{_BASE64_CLASS}{{{shortest}}}", re.ASCII)
        # each run of base64 characters that can hold a core, with its padding
        self._runs = re.compile(rf"{_BASE64_CLASS}{{{shortest},}}={{0,6}}", re.ASCII)
        self._regexes: list[tuple[re.Pattern[str], dict[str, int]]] | None = None
        # the identifying values' alone (`_identifying_first`), made at the first run whose
        # first core is an opaque value's
        self._identifying: list[tuple[re.Pattern[str], dict[str, int]]] | None = None
        self._separated: re.Pattern[str] | None = None
        self._base85: re.Pattern[str] | None = None
        self._memo: dict[str, list[tuple[int, int, int]]] = {}
        self._memo_chars = 0
        everything = [*self.cores, *self.hexes, *self.separated, *self.base85]
        self._shortest = min(map(len, everything), default=0)

    def _first(
        self,
        texts: tuple[str, str],
        start: int = 0,
        end: int = sys.maxsize,
        regexes: list[tuple[re.Pattern[str], dict[str, int]]] | None = None,
    ) -> int | None:
        """The index of the known value of the first core between `start` and `end` (the
        longest there, then the first known value's): a base64 core in `texts[0]`, a hex one
        in `texts[1]`, the same text in lower case; None where there is none. Of every
        core, or of those of `regexes` (`_identifying_first`)."""
        regexes = self._regexes if regexes is None else regexes
        assert regexes is not None
        best: tuple[int, int, int] | None = None
        for (regex, cores), text in zip(regexes, texts, strict=True):
            if (match := regex.search(text, start, end)) is not None:
                key = (match.start(), match.start() - match.end(), cores[match.group()])
                if best is None or key < best:
                    best = key
        return None if best is None else best[2]

    def _identifying_first(
        self, index: int, texts: tuple[str, str], start: int = 0, end: int = sys.maxsize
    ) -> int:
        """`index`, the known value of the first core between `start` and `end`; but where
        it is an opaque value's, that of the first identifying value's core there, if any."""
        if index not in self._opaque:
            return index
        if self._identifying is None:
            self._identifying = []
            for found in (self.cores, self.hexes):
                mine = {core: i for core, i in found.items() if i not in self._opaque}
                # (no identifying value: a pattern that matches nothing)
                self._identifying.append(
                    (re.compile(_trie_pattern(list(mine)) if mine else "(?!)"), mine)
                )
        identifying = self._first(texts, start, end, self._identifying)
        return index if identifying is None else identifying

    def hits(self, text: str, low: str) -> Iterator[tuple[int, int, int]]:
        """`_hits` of `text` (`low`: the same in lower case, one character for one), string
        by string. No hit holds a SEP (no core, hex spelling or run does), so the hits of
        the text are those of its strings; and those of a string seen before are taken from
        a memo: a sweep sends the same prompts again and again, and gets the same replies
        (1,500 exchanges of the bench's capture: 6.8 million characters, of which 343,000
        in distinct strings of 16 characters or more)."""
        if not (self.cores or self.separated):
            return
        memo, shortest, offset = self._memo, self._shortest, 0
        for piece, piece_low in zip(text.split(SEP), low.split(SEP), strict=True):
            if len(piece) >= shortest:  # (a shorter one holds nothing to find)
                found = memo.get(piece)
                if found is None:
                    found = list(self._hits(piece, piece_low))
                    if len(piece) <= _MEMO_MOST:
                        if self._memo_chars > _MEMO_CHARS:
                            memo.clear()
                            self._memo_chars = 0
                        memo[piece] = found
                        self._memo_chars += len(piece) + _MEMO_ENTRY
                for start, end, index in found:
                    yield start + offset, end + offset, index
            offset += len(piece) + 1

    def _hits(self, text: str, low: str) -> Iterator[tuple[int, int, int]]:
        """(start, end, known value's index) of each run of base64 characters (with its
        padding) that holds a core, and of each run of such lines (base64 wrapped at 64 or 76
        columns, as MIME and PEM write it) whose lines joined hold one; the known value is
        that of the core that starts first in the run, the longest there; and each spelling
        of the bytes one by one (`separated_bytes`), in any case, alone (the longest at its
        place)."""
        if self.separated and _SEPARATED_BYTES.search(low) is not None:
            if self._separated is None:
                self._separated = re.compile(_trie_pattern(list(self.separated)))
            # every place one starts (the longest there): one may overlap another's
            find, position = self._separated.search, 0
            while (match := find(low, position)) is not None:
                yield match.start(), match.end(), self.separated[match.group()]
                position = match.start() + 1
        if self.base85:
            if self._base85 is None:
                self._base85 = re.compile(_trie_pattern(list(self.base85)))
            # each run of printable ASCII read once, back to its start and on to its end,
            # however many cores it holds: the search goes on after it
            find, position = self._base85.search, 0
            while (match := find(text, position)) is not None:
                start = match.start()
                while start > position and "!" <= text[start - 1] <= "~":
                    start -= 1
                run = _PRINTABLE_RUN.match(text, match.end())
                end = run.end() if run is not None else match.end()
                yield start, end, self.base85[match.group()]
                position = end
            if "\n" in text:
                # and each run of such lines (`a85encode(wrapcol=...)`), its lines joined
                position = 0
                for line_break in _PRINTABLE_BREAK.finditer(text):
                    if line_break.start() < position:
                        continue  # inside the run read last
                    start = line_break.start() - (text[line_break.start() - 1] == "\r")
                    while start > position and "!" <= text[start - 1] <= "~":
                        start -= 1
                    run = _PRINTABLE_LINES.match(text, start)
                    position = run.end() if run is not None else line_break.end()
                    joined = _LINE_JOIN.sub("", text[start:position])
                    if (match := find(joined)) is not None:
                        yield start, position, self.base85[match.group()]
        if not self.cores:  # (only a user name's spellings: no run can hold one)
            return
        lines = "\n" in text
        one_line = self._long_run.search(text) is not None
        if not (one_line or lines):
            return
        if self._regexes is None:
            self._regexes = [
                (re.compile(_trie_pattern(list(self.cores))), self.cores),
                (re.compile(_trie_pattern(list(self.hexes))), self.hexes),
            ]
        if one_line:
            # A core is base64 characters only: each lies inside one run of them, as long as
            # the core or longer. Only such runs are searched, each on its own (about half
            # of a record's text, read once by a pattern that starts with a set of
            # characters, which `re` skips through in C: the tries' many first characters
            # cost it some 80 ns a character wherever they are tried).
            # (_first, written out: a record's text holds about 90 runs)
            (cores, in_text), (hexes, in_low) = self._regexes
            for run in self._runs.finditer(text):
                start, end = run.span()
                best: tuple[int, int, int] | None = None
                if (core := cores.search(text, start, end)) is not None:
                    best = (core.start(), core.start() - core.end(), in_text[core.group()])
                if (hexed := hexes.search(low, start, end)) is not None:
                    key = (hexed.start(), hexed.start() - hexed.end(), in_low[hexed.group()])
                    if best is None or key < best:
                        best = key
                if best is not None:
                    yield start, end, self._identifying_first(best[2], (text, low), start, end)
        if lines:
            # Each run of lines is read once (`_BASE64_LINES`), then once more joined.
            for run in _BASE64_LINES.regex.finditer(text):
                joined = _LINE_JOIN.sub("", run.group())
                texts = (joined, joined.lower())
                if (index := self._first(texts)) is not None:
                    yield run.start(), run.end(), self._identifying_first(index, texts)


# The strings whose hits `_Base64Cores.hits` keeps: up to this long (a longer one is seldom
# seen twice), for this many characters in all (then it starts again with none), each entry
# counted as this many more (what a dict entry and its list cost: 800,000 strings of 10
# characters held 117 MiB).
_MEMO_MOST = 1 << 16
_MEMO_CHARS = 1 << 23
_MEMO_ENTRY = 128

# The escapes a bounded scan (scan_text's `most`) decodes in one text at most: past them it
# stops (`TOO_MANY`). Each costs some 150 bytes and 1-2 us to decode; 15 MB of `%41` held
# 5 million (a gigabyte, and seconds for each of the two views).
_MOST_ESCAPES = 100_000

# `scan_documents` scans at most this many documents as one text, or about this many
# characters: a batch is scanned once its texts reach it (the last document may take it
# past the bound, up to twice the bound). A document whose text alone reaches it is
# scanned alone.
_BATCH_DOCUMENTS = 64
_BATCH_CHARS = 1 << 20
# What separates two documents' texts in a batch. For the generic detectors, a text X
# between two gaps (or a gap and the batch's own start or end) is seen as X alone: where X
# alone has a hit, the batch has one. Why, reading every pattern, window and view above:
#
# 1. No consuming part of any generic pattern matches SEP ("\x00"): each negated class
#    lists \x00-\x02 (`_PATH_REST`, `_VALUE_CHAR`, `_URL_HOST`'s, `_SECRET_FLAG`'s, ...),
#    and the others (\w, \d, \s, [A-Za-z0-9...], literals, `[:=\x01]`) hold no \x00. So a
#    match that starts in X ends in X, and where reading X alone met the end of the text
#    (and failed, a consuming part), reading the batch meets \x00 and fails the same way.
# 2. Every lookaround that reads past X's edge succeeds or fails there as at the text's
#    edge: the negative lookbehinds (`(?<![\w.-])`, `(?<![\w.~/-]/)`, `(?<![A-Za-z0-9]
#    [A-Za-z]:)`, ...) and lookaheads (`(?!\w|\.\w)`, `(?![\w:-])`, `(?!s|iz)`,
#    `(?!Shared\b)`, ...) hold no \x00, so they succeed on \x00 as on no character; the
#    positive lookbehinds (`(?<=[A-Za-z]:)`) hold no \x00 and fail on it as on none; \b is
#    a boundary next to \x00 (not a word character) exactly where it is at the text's edge;
#    the only `\Z`s are in lookaheads that take `[\x00-\x02]` as well (`_HOME`, `_URL_HOST`,
#    `_NAME_ENDS` of a home's name), true at \x00 too.
#    No generic pattern has `^`, `$` or `\A`; those of `_SECRET_NAME`, `_RESERVED_DOMAIN`...
#    read a name or host taken from the match, not the text. The lookbehinds read 17
#    characters back at most (`(?<=(?i:file://localhost)/)`), fewer than the gap holds.
# 3. So the match at each place of X is the same match in the batch, and what accepts it
#    reads no further than the gap: `_after_boundary` one character back (none and \x00
#    both pass); `_name_before` and `_name_at` back and forth over name characters (they
#    stop at \x00 as at the edge); `_ADDRESS_AFTER` forward from the match (it needs
#    characters that are not \x00); `_is_public_ipv4` the `_ADDRESS_WINDOW` characters
#    before it, which the gap's length keeps inside X and the gap: the window of X alone
#    with \x00s in front, and `_VERSION_BEFORE` and `_ADDRESS_BEFORE` (a word, then at most
#    4 of `[\W_]`, then the end; or `://`, `@`, `[` at the end) match the one as the
#    other, the word and \b being inside X. Nothing else looks at the text: the private
#    key's BEGIN is a literal, and a hit whatever follows it; `_Places` and the linear
#    scans find what the plain search of each pattern finds (tests/leaks_reference.py).
# 4. Each loop over matches (`_matches`) moves one place on after a rejected match, so in a
#    batch with no accepted match every place of X is tried, with the result of 3.
# 5. The views: no escape (`_Decoded._ESCAPE`: `\uXXXX`, `\/`, `\\`, `\"`, `\n` and the
#    other JSON control escapes, `%XX`, `\xXX`, `\NNN`, `&#N;`, `&#xX;` and those without `;`,
#    the named references of `_ENTITIES` (with or without `;`), quoted-printable's `=3D`, a
#    run of invisible characters or terminal sequences and the character after it, never a
#    separator; in the second reading, `_SPACED`, a run of terminal sequences read as a
#    space) holds \x00,
#    so the batch decodes as each text decoded between the same gaps; a text with an
#    escape makes the batch have one, at each depth. A view of X (which may begin without
#    a separator, and may hold \x00s decoded from `\u0000` or `%00`) is another text
#    between gaps: 1 to 4 hold for any text. The view of compatibility forms
#    (`_view_hits`) reads each character for one printable ASCII character, never a
#    separator: a batch's is its texts' between the same gaps.
# 6. A hit in X alone is then a match found in the batch; the batch's overlap resolution
#    keeps at least one of its hits, so its scan is not empty.
# Hence: a batch with no hit holds no document with a hit (tests/test_leaks_batch.py checks
# it; a gap of one \x00 would let a text that ends in `version` hide the next one's
# 10.0.0.7). The detectors of known values are not batched (`scan_documents`).
_BATCH_GAP = SEP * (_ADDRESS_WINDOW + 8)


def spellings(
    value: str,
    *,
    host: bool = False,
    address: bool = False,
    rot13: bool = False,
    name: bool = False,
) -> list[str]:
    """The other spellings of a known value that a text can hold for it: where it has letters
    past ASCII, composed and decomposed (NFC, NFD: `jöns` as `jo\u0308ns`), and a host name
    also in its IDNA form (`xn--bro-lab-07-9db` for `büro-lab-07`, label by label); with
    `rot13`, its ROT13 (`/ubzr/nyvpr` for `/home/alice`); an IPv4 address as one number, in
    decimal and in hex (padded to 8 digits or not: `0xa2c0509`), and with its octets in octal
    (as they are, or of 4 digits) or in hex,
    as URLs and `inet_aton` read them (`3232245783`, `0xC0A82817`, `0300.0250.050.027`,
    `0300.0250.0050.0027`, `0xc0.0xa8.0x28.0x17`); with `name`, a distinctive user or host
    name with its dashes written as underscores, or its underscores as dashes."""
    if address:
        try:
            packed = ipaddress.IPv4Address(value).packed
        except ValueError:
            return []
        number = int.from_bytes(packed, "big")
        octal = ".".join(f"0{octet:o}" if octet else "0" for octet in packed)
        return list(dict.fromkeys([
            str(number),
            f"0x{number:08x}",
            f"0x{number:08X}",
            f"0X{number:08X}",
            # without the padding, as Python's hex() and printf's %#x write it (an address
            # whose first octet is under 16: 0xa2c0509 for 10.44.5.9)
            f"0x{number:x}",
            f"0x{number:X}",
            f"0X{number:X}",
            octal,
            ".".join(f"{octet:04o}" for octet in packed),
            ".".join(f"0x{octet:x}" for octet in packed),
            ".".join(f"0x{octet:02x}" for octet in packed),
            ".".join(f"0x{octet:02X}" for octet in packed),
            ".".join(f"0X{octet:02X}" for octet in packed),
        ]))  # fmt: skip
    found = []
    if name and is_distinctive(value):  # `gb10_lab_07` for `gb10-lab-07`, and the reverse
        found += [value.replace(a, b) for a, b in (("-", "_"), ("_", "-")) if a in value]
    if not value.isascii():
        found += [unicodedata.normalize(form, value) for form in ("NFC", "NFD")]
        if host:
            with contextlib.suppress(UnicodeError):  # a label too long, empty or not allowed
                found.append(value.encode("idna").decode("ascii"))
    if rot13:
        found.append(codecs.encode(value, "rot13"))
    return [form for form in dict.fromkeys(found) if form != value]


def quoted_printable(value: str) -> list[str]:
    """A value past ASCII as quoted-printable (MIME's) writes it, composed and decomposed:
    each byte past ASCII, and `=`, as `=C3`, `=3D` (`j=C3=B6ns` for `jöns`), the digits in
    capitals as the standard has them, or not; none for a value of ASCII (the rest of a
    quoted-printable text is itself, and its `=3D` a view reads as `=`: `_Decoded`).
    Looked for as literals, as a secret is: `=C3=B6` is in no ordinary text."""
    if value.isascii():
        return []
    forms = dict.fromkeys(unicodedata.normalize(form, value) for form in ("NFC", "NFD"))
    return [
        "".join(
            c if " " <= c <= "~" and c != "=" else
            "".join(f"={byte:02{case}}" for byte in c.encode("utf-8", "surrogatepass"))
            for c in form
        )
        for form in forms
        for case in ("X", "x")
    ]  # fmt: skip


def shell_quoted(value: str) -> list[str]:
    """A value that holds `'` as a shell's single quotes write it: each `'` closes the
    quotes, is given another way and opens them again, `'"'"'` (Python's `shlex.quote`) or
    `'\\''` (bash's habit): `Tr0ub'"'"'4dor` for `Tr0ub'4dor`; or doubled, as YAML's, SQL's
    and PowerShell's single quotes write it (`'Tr0ub''4dor'`). None for a value without
    one. Looked for as literals, as a secret is."""
    if "'" not in value:
        return []
    return [
        value.replace("'", "'\"'\"'"),
        value.replace("'", "'\\''"),
        value.replace("'", "''"),
    ]


# Windows-1252's characters for the bytes 0x80-0x9F; where it has none (0x81, 0x8D, 0x8F,
# 0x90, 0x9D), Windows reads the byte as Latin-1 does (`MultiByteToWideChar`).
_CP1252_HIGH = "".join(
    bytes([byte]).decode("cp1252", "ignore") or chr(byte) for byte in range(0x80, 0xA0)
)


def mojibake(value: str) -> list[str]:
    """A value past ASCII as its UTF-8 bytes read a byte a character, as a tool that takes
    them for Latin-1 or Windows-1252 writes it (`bÃ¼ro-lab-07` for `büro-lab-07`, `Ã¶` for
    `ö`), composed and decomposed; none for a value of ASCII. Looked for as `_mangled`
    says: most as a secret's literals (`Ã¼` is in no ordinary text)."""
    if value.isascii():
        return []
    found = []
    for form in dict.fromkeys(unicodedata.normalize(f, value) for f in ("NFC", "NFD")):
        latin1 = form.encode("utf-8", "surrogatepass").decode("latin-1")
        found.append(latin1)
        found.append(
            "".join(_CP1252_HIGH[ord(c) - 0x80] if "\x80" <= c <= "\x9f" else c for c in latin1)
        )
    return [form for form in dict.fromkeys(found) if form != value]


def other_case(value: str) -> list[str]:
    """A secret of a key's random shape (`is_random_key`) or of 16 characters or more, in
    capitals and in small letters (`HF_QMVY...` for `hf_QmVy...`): what a tool that folds
    case writes of it. (Not a password a person chose, `Admin123`: `admin123` is in every
    text about default passwords.) Looked for as literals, as a secret is."""
    if len(value) < 8 or not (len(value) >= 16 or _random_key(value)):
        return []
    return [form for form in dict.fromkeys((value.upper(), value.lower())) if form != value]


def spelled_out(value: str) -> list[str]:
    """A value written backwards (`ecila/emoh/`) and, where it `spells_apart`, spaced out
    (`/ h o m e`, `/.h.o.m.e`): looked for as literals, as a secret is (a path's or a name's
    shape is gone from them)."""
    found = [value[::-1]]
    if spells_apart(value):
        found += [" ".join(value), ".".join(value)]
    return [form for form in dict.fromkeys(found) if form != value]


def spells_apart(value: str) -> bool:
    """Whether a value spelled out a character at a time (spaced, dotted, its bytes in
    decimal) is unlike ordinary text: 8 characters or more, neither all letters nor all
    digits (a reply that counts `1 2 3 4 5 6` or lists `a, b, c` spells no secret)."""
    return len(value) >= 8 and not value.isalpha() and not value.isdigit()


def _mangled(known: Known) -> KnownKind | None:
    """The kind a known value's `mojibake` is looked for as: a secret's literal; but a user
    name's, a user name (`josé` is found where it names an account, `C:\\Users\\josÃ©`,
    not in every `josÃ© said`), a named string's, a named string, and a host name's like a
    word, a host name (`müller`: `http://mÃ¼ller:8080`); an environment value's not (it
    identifies nobody)."""
    kind = known.kind
    if kind is KnownKind.USER or kind is KnownKind.STRING:
        return kind
    if kind is KnownKind.HOST:
        return KnownKind.SECRET if is_distinctive(known.value) else kind
    return None if kind is KnownKind.OPAQUE else KnownKind.SECRET


def _spelled(known: Sequence[Known], *, scrambled: bool = True) -> list[Known]:
    """The known values (the last of each value), then each one's other spellings that is
    not a known value itself, with its category and placeholder; of its kind, but a value
    `spelled_out`, a secret. With `scrambled`, a value also in ROT13 and spelled out (not a
    string named private, found inside any word: its ROT13 could be one; nor an environment
    value, which identifies nobody: a capture holds scores of them), past ASCII in
    `quoted_printable` (but an environment value) and as `mojibake` (of the kind `_mangled`
    says), a secret also in `other_case`, each a secret's literal; and a value with `'`
    `shell_quoted`, a secret's literal (an environment value's, its own kind)."""
    values = {k.value: k for k in known}
    found = list(values.values())
    for k in list(found):
        kind = k.kind
        scrambles = (
            scrambled
            and kind not in (KnownKind.ADDRESS, KnownKind.STRING, KnownKind.OPAQUE)
            and _in_base64(k)
        )
        forms = [
            (value, kind)
            for value in spellings(
                k.value,
                host=kind is KnownKind.HOST,
                address=kind is KnownKind.ADDRESS,
                rot13=scrambles,
                name=kind in (KnownKind.USER, KnownKind.HOST),
            )
        ]
        if scrambles or (scrambled and kind is KnownKind.ADDRESS):  # (no ROT13 of digits)
            forms += [(value, KnownKind.SECRET) for value in spelled_out(k.value)]
        if scrambled and kind is not KnownKind.OPAQUE:
            forms += [(value, KnownKind.SECRET) for value in quoted_printable(k.value)]
        if scrambled and (mangled := _mangled(k)) is not None:
            forms += [(value, mangled) for value in mojibake(k.value)]
        if scrambled and kind is KnownKind.SECRET:
            forms += [(value, KnownKind.SECRET) for value in other_case(k.value)]
        if scrambled:  # (an environment value's stays one: it identifies nobody)
            literal = KnownKind.OPAQUE if kind is KnownKind.OPAQUE else KnownKind.SECRET
            forms += [(value, literal) for value in shell_quoted(k.value)]
        for value, form_kind in forms:
            if value not in values:
                values[value] = Known(value, k.category, k.placeholder, form_kind)
                found.append(values[value])
    return found


# Compressed data in base64: gzip's (`1f 8b 08`: `H4sI`), zlib's (`78 01`, `78 5e`, `78 9c`,
# `78 da`: `eA`, `eF`, `eJ`, `eN`), bzip2's (`BZh` and a level from 1 to 9: `QlpoM` to
# `QlpoO`) and xz's (`fd 37 7a 58 5a 00`: `/Td6WFo`), each a run of base64 that starts
# there. Export reads what they hold (at most _MOST_INFLATED bytes of all those of one text),
# for the values it knows.
_COMPRESSED = _Lazy(
    rf"(?:H4sI|e[AFJN]|Qlpo[MNO]|[/_]Td6WFo){_BASE64_CLASS}{{12,}}={{0,2}}", re.ASCII
)
_COMPRESSED_STARTS = (
    "H4sI",
    "eA",
    "eF",
    "eJ",
    "eN",
    "QlpoM",
    "QlpoN",
    "QlpoO",
    "/Td6WFo",
    "_Td6WFo",
)
# Each run starts with one of these: a text without any holds no run (found at C's speed,
# where `_COMPRESSED`, led by a set of characters, is tried at every `e`).
_COMPRESSED_HINTS = ("H4sI", "eA", "eF", "eJ", "eN", "Qlpo", "Td6WFo")
_MOST_INFLATED = 1 << 20
# What each run read costs of that at least: a text of many small runs is read no longer.
_LEAST_INFLATED = 1 << 10
# In place of compressed data past what one text's runs may give: not read, so not published.
UNREAD_PLACEHOLDER = "<compressed data not read>"
# A NUL after each of four characters or more (found at the first NUL, a literal).
_SPREAD = _Lazy("\x00(?=[^\x00-\x02]\x00[^\x00-\x02]\x00[^\x00-\x02])")
_SPREAD_RUN = _Lazy("[^\x00-\x02](?:\x00[^\x00-\x02])+\x00?")
_FROM_URL_SAFE = str.maketrans("-_", "+/")


def _compressed(run: str) -> bytes | None:
    """The bytes of a run of base64 (either alphabet, its line breaks left out) that start
    as gzip, zlib, bzip2 or xz data do; None where they do not."""
    data = run.rstrip("=").translate(_FROM_URL_SAFE)
    if len(data) % 4 == 1:
        return None
    try:  # the header first (its first 3 bytes), then the rest
        head = base64.b64decode(data[:4])
        zlib_header = head[0] == 0x78 and (0x78 << 8 | head[1]) % 31 == 0
        if head not in (b"\x1f\x8b\x08", b"BZh", b"\xfd7z") and not zlib_header:
            return None
        return base64.b64decode(data + "=" * (-len(data) % 4))
    except ValueError:  # binascii.Error
        return None


def _inflated(raw: bytes, most: int) -> tuple[str | None, int, bool]:
    """The text (UTF-8, invalid bytes replaced) of gzip, zlib, bzip2 or xz data, its streams
    one after another (gzip members, bzip2 or xz streams: as `gzip -dc` reads them), up to
    `most` bytes, and what reading it cost. Where a stream stops decompressing (a broken
    check, data damaged or cut short), what came out of it before the _SALVAGE_STEP bytes
    that hold the fault. None where nothing came out. The cost: the bytes that came out, or
    more: each stream costs _LEAST_INFLATED at least, and a bzip2 stream its block's size
    (100 to 900 kB), which it decodes whole before it checks it. And whether all of it was
    read (False: `most` was reached first)."""
    out = bytearray()
    cost = 0
    data = raw
    while data:
        if max(len(out), cost) >= most:
            return _text_of_bytes(out), max(len(out), cost), False
        opened = _decompressor(data)
        if opened is None:
            break  # no stream follows (what `gzip -d` calls trailing garbage)
        decompressor, errors, block = opened
        cost += max(block, _LEAST_INFLATED)  # (a run of many empty streams costs too)
        try:
            out += decompressor.decompress(data, most - len(out))
        except errors:
            out += _salvaged(data, most - len(out))
            break
        if not decompressor.eof:  # cut short, or `most` bytes came out
            return _text_of_bytes(out), max(len(out), cost), len(out) < most
        data = decompressor.unused_data
    return _text_of_bytes(out), max(len(out), cost), True


def _text_of_bytes(data: bytes | bytearray) -> str | None:
    """Decompressed bytes as text (UTF-8, invalid bytes replaced); None for none."""
    return data.decode("utf-8", "replace") if data else None


def _salvaged(data: bytes, most: int) -> bytes:
    """What came out of the stream that `data` starts with, fed _SALVAGE_STEP bytes at a
    time, before the step that failed (at most `most` bytes)."""
    opened = _decompressor(data)
    assert opened is not None
    decompressor, errors, _ = opened
    out = bytearray()
    try:
        for at in range(0, len(data), _SALVAGE_STEP):
            out += decompressor.decompress(data[at : at + _SALVAGE_STEP], most - len(out))
            if len(out) >= most or decompressor.eof:
                break
    except errors:
        pass
    return bytes(out)


_WRAPPED_KINDS = frozenset({KnownKind.SECRET, KnownKind.OPAQUE, KnownKind.ADDRESS})
# A line break inside a value, with the spaces that indent the line after it, or a shell's
# `\` before it (`_wrapped_hits`).
# (`\\?\r?\n`, each branch led by a character; then any other line break, as Unicode counts
# them: a terminal's bare `\r`, `\n\r`, a vertical tab, a form feed, NEL, U+2028, U+2029)
_BREAK = _Lazy(r"(?:\\\r?\n|\r\n|\n\r|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029])[ \t]*")
# And, read a second way where a text holds one, quoted-printable's soft break (`=` at a
# line's end, MIME's `=\r\n`) with the others: a value with its own `=` cut after it is
# found the first way, a value cut by a soft break the second.
_SOFT_BREAK = _Lazy(r"(?:[\\=]\r?\n|\r\n|\n\r|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029])[ \t]*")


def _has_break(text: str) -> bool:
    """Whether `text` holds a line break `_BREAK` reads (each looked for in C; past ASCII
    only in a text that is not all ASCII, which `isascii` says at once)."""
    return (
        "\n" in text
        or "\r" in text
        or "\v" in text
        or "\f" in text
        or "\x1c" in text
        or "\x1d" in text
        or "\x1e" in text
        or (not text.isascii() and ("\x85" in text or "\u2028" in text or "\u2029" in text))
    )


# Hex dumps as their tools lay them out, line after line (`xxd`, `xxd -p`, `hexdump -C`,
# `hexdump`, `od -A x -t x1z`, `od -x`, `tcpdump -X`): an offset or none, then the bytes in
# groups of 2, 4 or 8 hex digits, then perhaps the bytes again as characters. A value
# across two lines is in neither line's hex nor its characters: export reads the bytes of
# consecutive lines as one text (`_dump_runs`) and looks for the values it knows there, as
# in compressed data: the whole run goes where it holds one.
#
# Where such a run can start (a line's start, or a string's in a document's text): an
# offset or a first group, a gap, and a pair of digits; or a line of 16 digits or more and
# a line break before 16 more (`xxd -p`'s, which alone make no run: a digest is one).
_DUMP_HINT = _Lazy(
    r"[\n\x00-\x02][ \t]*(?:(?:0x)?[0-9A-Fa-f]{2,16}:?[ \t]+[0-9A-Fa-f]{2}"
    r"|[0-9A-Fa-f]{16,}[ \t\r]*\n[ \t]*[0-9A-Fa-f]{16})"
)
_DUMP_LINE = _Lazy(
    r"[ \t]*(?:(?P<prefix>0x)?(?P<offset>[0-9A-Fa-f]{2,16})(?P<colon>:)?(?P<gap>[ \t]+)"
    r"(?=[0-9A-Fa-f]))?"
    r"(?P<groups>[0-9A-Fa-f]+(?:(?: {1,2}|\t)[0-9A-Fa-f]+)*)[^\n\x00-\x02]*"
)
_DUMP_GROUP = _Lazy(r"( {1,2}|\t)?([0-9A-Fa-f]+)")
# The widths of a dump's groups of digits: a byte, two or four.
_DUMP_WIDTHS = (2, 4, 8)


def _dump_line(text: str, at: int) -> tuple[list[str], bool, int] | None:
    """The groups of hex digits of the dump line that starts at `at`, in order, whether the
    line is `xxd -p`'s (digits alone), and where the line ends; None where no dump line
    starts there.

    The first field is an offset where it ends with `:`, starts with `0x`, is followed by
    more than one space, or is not as wide as the group after it (`00000010  2f 68`);
    else it is the first group (`2f68 6f6d`). Then every group as wide as the first, one
    space apart, two only after the eighth of a byte each (`hexdump -C`'s middle), and
    one narrower group last (`xxd`'s odd byte); what follows them is not read (the
    characters' column)."""
    match = _DUMP_LINE.match(text, at)
    if match is None:
        return None
    fields = _DUMP_GROUP.regex.findall(match["groups"])
    offset = match["offset"]
    if offset is not None and not (
        match["colon"] or match["prefix"] or match["gap"] != " " or len(offset) != len(fields[0][1])
    ):
        fields.insert(0, ("", offset))
    width = len(fields[0][1])
    if offset is None and len(fields) == 1:  # `xxd -p`: even digits, the line's all
        whole = width >= 16 and width % 2 == 0 and not match.group().strip(" \t\r")[width:]
        return ([fields[0][1]], True, match.end()) if whole else None
    if width not in _DUMP_WIDTHS:
        return None
    groups: list[str] = []
    for index, (gap, digits) in enumerate(fields):
        if gap == "  " and not (width == 2 and index == 8):
            break
        if len(digits) != width:
            if len(digits) < width and len(digits) % 2 == 0:
                groups.append(digits)
            break
        groups.append(digits)
    if offset is None and len(groups) < 2:
        return None
    return groups, False, match.end()


# In place of a hex dump past what one text's dumps may give: not read, so not published.
DUMP_PLACEHOLDER = "<hex dump not read>"
# The readable runs of a dump's bytes, as `strings` finds them (4 characters or more): of
# UTF-8 (its sequences past ASCII too, so `ödön` is one), of UTF-16LE and of UTF-16BE
# (ASCII and Latin-1 letters). A value is text: what lies between the runs is read by nothing, and a
# binary buffer's bytes, read as text, would cost the known values' search far more.
_DUMP_UTF8 = re.compile(
    rb"(?:[\t\x20-\x7e]|[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}"
    rb"|[\xf0-\xf4][\x80-\xbf]{3}){4,}"
)
_DUMP_UTF16LE = re.compile(rb"(?:[\t\x20-\x7e\xa0-\xff]\x00){4,}")
_DUMP_UTF16BE = re.compile(rb"(?:\x00[\t\x20-\x7e\xa0-\xff]){4,}")


def _dump_text(data: bytes) -> str:
    """The readable runs of a dump's bytes (`_DUMP_UTF8` and the rest), one a line."""
    runs = [run.decode("utf-8", "replace") for run in _DUMP_UTF8.findall(data)]
    if b"\x00" in data:
        runs += [run.decode("utf-16-le") for run in _DUMP_UTF16LE.findall(data)]
        runs += [run.decode("utf-16-be") for run in _DUMP_UTF16BE.findall(data)]
    return "\n".join(runs)


def _dump_runs(text: str) -> list[tuple[int, int, list[bytes]]]:
    """Each run of consecutive hex dump lines (`_dump_line`), all `xxd -p`'s (two or more)
    or none:
    its span, from its first line's start to its last line's end, and its bytes in the
    dump's order and, where a group holds more than a byte, with each group's bytes the
    other way round (`hexdump` and `od -x` write a group as a little-endian number)."""
    runs: list[tuple[int, int, list[bytes]]] = []
    starts = [0] if text[:1] not in "\n\x00\x01\x02" else []
    position = 0
    hint = _DUMP_HINT.regex.search
    while True:
        if starts:
            at = starts.pop()
        else:
            found = hint(text, position)
            if found is None:
                return runs
            at = found.start() + 1
        lines: list[list[str]] = []
        kind = None  # whether the run's lines are `xxd -p`'s: the first line's kind, all through
        end = next_line = at
        while (line := _dump_line(text, next_line)) is not None:
            groups, alone, line_end = line
            if kind is None:
                kind = alone
            elif alone is not kind:
                break
            lines.append(groups)
            end = line_end
            if text[end : end + 1] != "\n":
                break
            next_line = end + 1
        position = max(end, at + 1)
        if not lines or (kind and len(lines) < 2):
            continue
        digits = [group for line in lines for group in line]
        streams = [bytes.fromhex("".join(digits))]
        if any(len(group) > 2 for group in digits):
            streams.append(b"".join(bytes.fromhex(group)[::-1] for group in digits))
        runs.append((at, end, streams))


# The compressed bytes fed at a time to read what a damaged stream holds before its fault.
_SALVAGE_STEP = 16
# An xz stream may ask for this much memory at most (`xz -9` asks for 65 MiB).
_XZ_MEMORY = 1 << 28


class _Decompressor(Protocol):
    """What zlib's, bz2's and lzma's decompressors have alike."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, /, max_length: int = ...) -> bytes: ...


def _decompressor(
    data: bytes,
) -> tuple[_Decompressor, tuple[type[Exception], ...], int] | None:
    """A decompressor of the stream `data` starts with, the errors it raises on data it
    cannot read, and the least that reading it costs; None where no stream starts."""
    if data.startswith(b"\x1f\x8b\x08"):
        return zlib.decompressobj(wbits=31), (zlib.error, MemoryError), 0
    if data[:1] == b"\x78" and len(data) > 1 and int.from_bytes(data[:2], "big") % 31 == 0:
        return zlib.decompressobj(wbits=15), (zlib.error, MemoryError), 0
    if data.startswith(b"BZh"):
        import bz2  # (imported only where there is such data)

        level = data[3:4]
        block = int(level) * 100_000 if level.isdigit() and level != b"0" else 900_000
        return bz2.BZ2Decompressor(), (OSError, EOFError, ValueError, MemoryError), block
    if data.startswith(b"\xfd7zXZ\x00"):
        import lzma

        decompressor = lzma.LZMADecompressor(lzma.FORMAT_XZ, memlimit=_XZ_MEMORY)
        return decompressor, (lzma.LZMAError, EOFError, MemoryError), 0
    return None


# ASCII written in fullwidth forms (`ｇｂ１０－ｌａｂ－０７`), and each as its ASCII
# character: one for one, so a view of a text so read has the text's offsets.
_FULLWIDTH = _Lazy("[\uff01-\uff5e]")
_FROM_FULLWIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}


class Detector:
    """The generic detectors plus the values one raw capture knows to be private.

    Each known value is also looked for in its other spellings (`spellings`), and in a text
    that holds fullwidth forms, in the text with those read as ASCII.
    """

    def __init__(self, known: Sequence[Known] = (), *, encoded: bool = True) -> None:
        """`encoded=False`: the known values as they are and in their spellings only, not
        in ROT13, base64, hex and the rest (what export builds as it collects values, for
        the few short texts it names placeholders after: each value added means another
        detector, and every public document is scanned by the whole one at the end)."""
        self.known = tuple(sorted(_spelled(known, scrambled=encoded), key=_longest_first))
        # (a value's ROT13, or spelled out, is looked for as it is, not encoded again)
        rotated = {k.value for k in self.known} - {
            k.value for k in _spelled(known, scrambled=False)
        }
        # Opaque values apart: a long one must not hide a private path inside it.
        self._regexes: list[_KnownRegex] = []
        for opaque in (False, True):
            group = [
                (i, k) for i, k in enumerate(self.known) if (k.kind is KnownKind.OPAQUE) is opaque
            ]
            if group:
                self._regexes.append(_KnownRegex(group))
        # The values read across line breaks (`_wrapped_hits`): a secret, an environment
        # value, an address, which a terminal wraps as it wraps any long word. (Not a name,
        # a path or a string named private: `/srv/` and `app.py` on two lines are no
        # `/srv/app`, nor `size` and `table` a `zeta`.)
        self._wrap_regexes = [
            _KnownRegex(wrapped)
            for opaque in (False, True)
            if encoded  # (`encoded=False` looks for no value cut by a break: `_known_hits`)
            and (
                wrapped := [
                    (i, k)
                    for i, k in enumerate(self.known)
                    if k.kind in _WRAPPED_KINDS and (k.kind is KnownKind.OPAQUE) is opaque
                ]
            )
        ]
        # (In base64 and the rest, an opaque value's core never names a run that holds an
        # identifying value's: `_Base64Cores`.)
        self._base64 = _Base64Cores(self.known if encoded else (), skip=frozenset(rotated))
        self._encoded = encoded
        self._inflating = False  # scanning a text inflated from compressed data

    def _known_hits(self, places: _Places) -> Iterator[_Found]:
        text = places.text
        yield from self._known_matches(places, text)
        if self._regexes and not text.isascii() and _FULLWIDTH.search(text) is not None:
            yield from self._known_matches(_Places(text.translate(_FROM_FULLWIDTH)), text)
        for start, end, index in self._base64.hits(text, places.low):
            known = self.known[index]
            excerpt = _mask(text, start, end)
            identifying = known.kind is not KnownKind.OPAQUE
            yield _Found(
                known.category, start, end, excerpt, known.placeholder, identifying, True, True
            )
        if not self._encoded:
            return
        if self.known and not self._inflating:
            yield from self._compressed_hits(text)
            if "\n" in text:  # (a dump is lines)
                yield from self._dump_hits(text)
            yield from self._wrapped_hits(text)
        if self._regexes and "\x00" in text:
            yield from self._spread_hits(text)

    def _spread_hits(self, text: str) -> Iterator[_Found]:
        """Each run of characters with a NUL after each (UTF-16LE read as Latin-1: `g\\u0000b
        \\u0000...` in JSON) that holds a known value once its NULs are left out: the whole
        run. (A NUL is also what separates a document's strings: so is a run of one-letter
        strings, whose letters would have to spell a known value.)"""
        last = 0
        for nul in _SPREAD.regex.finditer(text):
            at = nul.start() - 1
            if at < last or text[at] in _SEPS:
                continue
            run = _SPREAD_RUN.regex.match(text, at)
            if run is None:
                continue
            last = run.end()
            joined = run.group().replace("\x00", "")
            inside = list(self._known_matches(_Places(joined), joined))
            if inside:  # an identifying value first: an opaque one identifies nobody
                first = min(inside, key=lambda h: (not h.identifying, h.start))
                yield replace(
                    first,
                    start=run.start(),
                    end=run.end(),
                    excerpt=_mask(text, run.start(), run.end()),
                )

    def _compressed_hits(self, text: str) -> Iterator[_Found]:
        """Each run of base64 (on one line, or wrapped in lines) that holds gzip, zlib,
        bzip2 or xz data whose text (`_inflated`) holds a known value, in it or in its decoded
        views: the whole run, as the known value's hit inside names it (`_first_inside`).
        Binary data can spell anything a generic detector finds: only the known values are
        looked for. The runs of one text give _MOST_INFLATED bytes in all, in the order they
        start, each stream counted as _LEAST_INFLATED at least (a text of bombs, or of many
        small runs, costs no more than that); a run not read to its end within them, and
        every run after it, goes as a token would (fail closed: what was not read is not
        published)."""
        runs: list[tuple[int, int, str]] = []
        if any(start in text for start in _COMPRESSED_HINTS):  # (most texts hold none)
            for match in _COMPRESSED.regex.finditer(text):
                start = match.start()
                if not start or text[start - 1] not in _BASE64_TEXT:  # where a run starts
                    runs.append((start, match.end(), match.group()))
            if "\n" in text:
                for run in _BASE64_LINES.regex.finditer(text):
                    if run.group().startswith(_COMPRESSED_STARTS):
                        joined = _LINE_JOIN.sub("", run.group())
                        runs.append((run.start(), run.end(), joined))
        left = _MOST_INFLATED
        for start, end, data in sorted(runs):
            raw = _compressed(data)
            if raw is None:
                continue
            excerpt = _mask(text, start, end)
            if left <= 0:
                yield _Found(TOKEN, start, end, excerpt, UNREAD_PLACEHOLDER, True, True)
                continue
            inflated, cost, whole = _inflated(raw, left)
            left -= max(cost, _LEAST_INFLATED)  # (data that does not decompress costs too)
            first = self._first_inside(inflated) if inflated is not None else None
            if first is not None:
                yield replace(first, start=start, end=end, excerpt=excerpt)
            elif not whole:  # what it holds past the bytes read was not read: it goes
                yield _Found(TOKEN, start, end, excerpt, UNREAD_PLACEHOLDER, True, True)

    def _wrapped_hits(self, text: str) -> Iterator[_Found]:
        """A secret, environment value or address that line breaks cut (a terminal's or an
        editor's wrap, a shell's `\\` before a break): the text read again with each break
        and the spaces after it left out (`_BREAK`), and each hit there that holds a break,
        from its first character to its last at the text's offsets. (Not a value cut by a
        space, or by a hyphen before a break: prose cuts words so.) A text with
        quoted-printable's soft breaks (`=` at a line's end) is read a second way, those
        left out too (`_SOFT_BREAK`)."""
        if not self._wrap_regexes or not _has_break(text):
            return
        yield from self._joined_hits(text, _BREAK.regex)
        if "=\n" in text or "=\r\n" in text:
            yield from self._joined_hits(text, _SOFT_BREAK.regex)

    def _joined_hits(self, text: str, breaks: re.Pattern[str]) -> Iterator[_Found]:
        """`_wrapped_hits` of one way of reading the breaks."""
        joined = breaks.sub("", text)
        if len(joined) == len(text):
            return
        cuts: list[int] = []  # where each break was, at the joined text's offsets
        gone: list[int] = []  # the characters left out up to and with each break
        for hit in self._known_matches(_Places(joined), joined, self._wrap_regexes):
            if not cuts:
                total = 0
                for found in breaks.finditer(text):
                    cuts.append(found.start() - total)
                    total += found.end() - found.start()
                    gone.append(total)
            after = bisect.bisect_right(cuts, hit.start)  # the first break past its start
            if after == len(cuts) or cuts[after] >= hit.end:
                continue  # no break inside: the text holds it as it is
            last = bisect.bisect_right(cuts, hit.end - 1)
            start, end = (
                hit.start + gone[after - 1] if after else hit.start,
                hit.end + gone[last - 1],
            )
            yield replace(hit, start=start, end=end, excerpt=_mask(text, start, end))

    def _dump_hits(self, text: str) -> Iterator[_Found]:
        """Each run of hex dump lines (`_dump_runs`) whose bytes' readable runs
        (`_dump_text`) hold a known value, in them or in their decoded views: the whole run,
        as the known value's hit inside names it. Only the known values: bytes of any kind
        spell what a generic detector finds. The runs of one text give _MOST_INFLATED bytes
        in all, as compressed data does; a run past them goes unread, as a token would."""
        left = _MOST_INFLATED
        for start, end, streams in _dump_runs(text):
            if left <= 0:
                yield _Found(
                    TOKEN, start, end, _mask(text, start, end), DUMP_PLACEHOLDER, True, True
                )
                continue
            left -= len(streams[0])
            found = [
                hit
                for data in streams
                if (readable := _dump_text(data))
                and (hit := self._first_inside(readable)) is not None
            ]
            if found:
                first = min(found, key=lambda h: (not h.identifying, h.category, h.placeholder))
                yield replace(first, start=start, end=end, excerpt=_mask(text, start, end))

    def _first_inside(self, text: str) -> _Found | None:
        """The known value's hit that names a text read out of another (compressed data): in
        the text or its decoded views, the identifying ones first, then by category and
        placeholder; None where there is none. Not for compressed data again."""
        self._inflating = True
        try:
            found = list(self._known_hits(_Places(text)))
            view = _Decoded.of(text)
            depth = 0
            while isinstance(view, _Decoded) and depth < 2:
                found += self._known_hits(_Places(view.text))
                view = _Decoded.of(view.text, view)
                depth += 1
        finally:
            self._inflating = False
        return min(
            found, key=lambda h: (not h.identifying, h.category, h.placeholder), default=None
        )

    def _known_matches(
        self, places: _Places, text: str, regexes: Sequence[_KnownRegex] | None = None
    ) -> Iterator[_Found]:
        """The matches of the known values' patterns (`regexes`, all by default) in
        `places.text`: `text`, or a view of it with the same offsets."""
        names_an_account = _AccountNames(places.text)
        for regex in self._regexes if regexes is None else regexes:
            for match in regex.finditer(places):
                assert match.lastgroup is not None
                known = self.known[int(match.lastgroup[1:])]
                # A distinctive name's every match is a token of its own (`_known_pattern`),
                # an account wherever it is; a plain name after a slash only in a file path.
                if (
                    known.kind is KnownKind.USER
                    and not is_distinctive(known.value)
                    and not names_an_account(match.start())
                ):
                    continue
                if known.kind is KnownKind.ADDRESS and after_version_word(
                    places.text, match.start()
                ):
                    continue
                identifying = known.kind is not KnownKind.OPAQUE
                if (
                    known.kind in (KnownKind.USER, KnownKind.HOST)
                    and not is_distinctive(known.value)
                    and only_shown(
                        known.value, known.kind is KnownKind.USER, places.text, match.start()
                    )
                ):
                    identifying = False
                yield _Found(
                    known.category,
                    match.start(),
                    match.end(),
                    _mask(text, match.start(), match.end()),
                    known.placeholder,
                    identifying,
                    known.kind not in (KnownKind.USER, KnownKind.HOST),
                    True,
                )

    def _view_hits(self, text: str) -> Iterator[_Found]:
        places = _Places(text)
        yield from self._known_hits(places)
        yield from _generic(text, places)
        if not text.isascii() and _COMPATIBLE_IN.search(text) is not None:
            # The text with its compatibility forms read as ASCII (`_compatible_ascii`), one
            # for one: its offsets are the text's, and its excerpts are taken from the text.
            read = text.translate(_COMPATIBLE)
            if read == text:  # (the search reads whole blocks past the BMP: none of them)
                return
            alike = _Places(read)
            yield from self._known_matches(alike, text)
            for hit in _generic(read, alike):
                yield replace(hit, excerpt=_mask(text, hit.start, hit.end))

    def scan_text(self, text: str, most: int | None = None) -> list[LeakHit]:
        """Every private string in `text`, in order, without overlaps; with `most`, the
        scan stops once it found that many (overlaps included): enough to say the text
        leaks, whatever else it holds (verify's leak scan, against a text of millions).

        Where two matches overlap (an address inside a home path, a token inside an
        Authorization header), the one that starts first wins, a known value before a
        pattern, then the longer one; a known value's match is never published in part:
        each stretch of it that the ones taken leave is a hit too.
        """
        found = list(itertools.islice(self._view_hits(text), most))
        stopped: tuple[int, str] | None = None  # where the scan stopped early, and why
        firsts: list[_Decoded] = []
        if most is not None and len(found) >= most:
            stopped = (found[-1].start, f"{most} private strings or more")
        else:
            # Terminal sequences are read two ways (`_Decoded._SPACED`): both views are scanned.
            readings = (False, True) if "\x1b" in text or "\x9b" in text else (False,)
            for spaced in readings:
                first = _Decoded.of(
                    text, escapes=None if most is None else _MOST_ESCAPES, spaced=spaced
                )
                if isinstance(first, int):  # a text of too many escapes to decode, bounded
                    stopped = (first, f"more than {_MOST_ESCAPES:,} escapes in one text")
                    break
                if first is not None:
                    firsts.append(first)
        if not firsts and not found and stopped is None:
            return []
        for first in firsts:
            if stopped is not None:
                break
            stopped = self._views_hits(text, first, found, most)
        # Identifying hits first, so that an opaque value (removed from free text only) never
        # hides a home path or a token inside it; then the opaque ones, each stretch of one
        # outside them: an environment value that holds an address or a password
        # (`NO_PROXY=localhost,10.0.0.7,.corp.internal`, `http://al:PW@proxy.corp:3128`) is
        # removed whole, the identifying value inside it with its own placeholder.
        layer = sorted(
            (h for h in found if h.identifying),
            key=lambda h: (h.start, not h.known, h.start - h.end),
        )
        chosen: list[_Found] = []
        for hit in layer:
            if not chosen or hit.start >= chosen[-1].end:
                chosen.append(hit)
        # (they do not overlap: by start, their ends ascend too)
        starts = [h.start for h in chosen]
        # A known value's match that runs past the ones taken (a WSL home's `\\wsl$\...\home\j`,
        # whose name stops at `ö`, then the rest of the known `jörg`; `C:\Users\Zolt` of the
        # mojibake `ZoltÃ¡n`, whose `¡` no name takes): what they leave of it is a hit too,
        # one known value after another. (Not a pattern's match: a home path that runs on
        # past a known model path would name the model's files `/path/to/home`.)
        # Each character goes to the first that holds it: what the ones before a match
        # left of it starts past `reach`, the end of the last (their stretches ascend).
        pieces: list[_Found] = []
        reach = 0
        for hit in layer:
            if hit.value and hit.end > reach and hit.end > hit.start:
                pieces += _outside(
                    hit if hit.start >= reach else replace(hit, start=reach), chosen, starts
                )
                reach = hit.end
        if pieces:
            chosen = list(heapq.merge(chosen, pieces, key=lambda h: h.start))
            starts = [h.start for h in chosen]
        layer = sorted(
            (h for h in found if not h.identifying),
            key=lambda h: (h.start, not h.known, h.start - h.end),
        )
        reach = 0  # where the opaque hits taken end
        for hit in layer:
            if hit.start >= reach:
                chosen += _outside(hit, chosen, starts)
                reach = hit.end
        chosen.sort(key=lambda h: h.start)
        hits = [
            LeakHit(h.category, h.start, h.end, h.excerpt, h.placeholder, h.identifying, h.known)
            for h in chosen
        ]
        if stopped is not None:  # where: the last hit found, or an escape; inside a string
            hits.append(LeakHit(TOO_MANY, stopped[0], stopped[0] + 1, stopped[1]))
        return hits

    def _views_hits(
        self, text: str, view: _Decoded | None, found: list[_Found], most: int | None
    ) -> tuple[int, str] | None:
        """The hits of `view` and of its own views (two deep), added to `found` at `text`'s
        offsets; where the scan stopped early, and why (None: it did not)."""
        stopped: tuple[int, str] | None = None
        depth = 0
        while view is not None and depth < 2:
            left = None if most is None else most - len(found)
            for hit in itertools.islice(self._view_hits(view.text), left):
                start, end = view.original(hit.start, hit.end)
                excerpt = _mask(text, start, end) if hit.category != PRIVATE_KEY else hit.excerpt
                found.append(
                    _Found(
                        hit.category, start, end, excerpt, hit.placeholder, hit.identifying,
                        hit.known, hit.value,
                    )
                )  # fmt: skip
            if most is not None and len(found) >= most:
                stopped = (found[-1].start, f"{most} private strings or more")
                break
            deeper = _Decoded.of(view.text, view, escapes=None if most is None else _MOST_ESCAPES)
            if isinstance(deeper, int):
                at = view.original(deeper, deeper + 1)[0]
                stopped, deeper = (at, f"more than {_MOST_ESCAPES:,} escapes in one text"), None
            view = deeper
            depth += 1
        return stopped

    def scan_document(self, document: Any, most: int | None = None) -> list[DocumentHit]:
        """Every private string of a JSON document (object keys included), by location
        (the first `most` the scan finds, with `most`: see scan_text)."""
        return self._located(document, _Flat.text_of(document), most)

    def scan_document_hiding(
        self,
        document: Any,
        hidden: Mapping[tuple[tuple[str | int, ...], bool], Sequence[tuple[int, int]]],
        shown: Collection[tuple[tuple[str | int, ...], bool]] | None = None,
    ) -> list[DocumentHit]:
        """`scan_document`, with spans of some strings (by location, and whether the string
        is an object key; offsets into the string) read as a plain directory of their length
        (`/xxxx`): what export was told is not private (`--allow`). What follows such a span
        is then scanned again, and a hit that an allowed one started and swallowed
        (`/home/user/x?owner=al@host`, `/home/user/al/x`) is found again; the offsets are
        the document's, since a span keeps its length.

        With `shown`, only those strings are read (and the few before each, which patterns
        read as its context: its key, the argument before it); the others are boundaries
        whole, and only the hits of those strings are given (a scan again of a few strings
        costs theirs, not the document's)."""
        if not hidden:
            return self.scan_document(document)
        flat = _Flat.of(document)
        paths = _Flat.paths(document, set(range(len(flat.starts))))
        whole: list[tuple[int, int]] = []
        if shown is not None:
            wanted = {i for i, path in paths.items() if (path, bool(flat.keys[i])) in shown}
            read = {i - back for i in wanted for back in range(_CONTEXT_STRINGS + 1)}
            whole = [(i, flat.length(i)) for i in range(len(flat.starts)) if i not in read]
        # A hidden span reads as a plain directory of its length (`/xxxx`), so that what
        # follows it is still read as the path's next component (`/home/user//al`: `al`
        # names an account below a directory, not at a word's start); a string not read is
        # a boundary whole.
        spans = sorted(
            [
                (
                    flat.starts[index] + start,
                    flat.starts[index] + min(end, flat.length(index)),
                    True,
                )
                for index, path in paths.items()
                for start, end in hidden.get((path, bool(flat.keys[index])), ())
                if 0 <= start < end
            ]
            + [(flat.starts[i], flat.starts[i] + length, False) for i, length in whole if length]
        )
        pieces: list[str] = []
        last = 0
        for start, end, directory in spans:
            start = max(start, last)
            if end > start:
                filler = "/" + "x" * (end - start - 1) if directory else SEP * (end - start)
                pieces += [flat.text[last:start], filler]
                last = end
        pieces.append(flat.text[last:])
        found = self._located(document, "".join(pieces))
        if shown is None:
            return found
        return [hit for hit in found if (hit.path, hit.is_key) in shown]

    def scan_documents(
        self, documents: Iterable[Any], most: int | None = None
    ) -> Iterator[list[DocumentHit]]:
        """`scan_document` of each document, in order, reading at most one batch ahead.

        Most documents of a bundle fit to publish hold no hit, and scanning a text costs
        some 25 us whatever its size (the places, the views, the lists): the generic
        detectors scan a batch of documents as one text (`_BATCH_GAP` between them) and,
        where that text has no hit, no document of the batch has one (see `_BATCH_GAP`).
        A batch whose text has a hit is scanned again document by document, so every hit
        is `scan_document`'s own; the next batch is then smaller, the one after a batch
        without a hit larger again, so that a bundle full of hits is scanned about once.
        The known values (export's) are not batched: their patterns read further back
        (`_AccountNames`), and export scans one text at a time anyway.
        """
        if self._regexes:
            for document in documents:
                yield self.scan_document(document, most)
            return
        text_of = _text_of()
        size = _BATCH_DOCUMENTS
        batch: list[tuple[Any, str]] = []
        chars = 0

        def scanned() -> list[list[DocumentHit]]:
            nonlocal batch, chars, size
            results, quiet = self._scan_batch(batch, most)
            size = min(size * 2, _BATCH_DOCUMENTS) if quiet else max(size // 2, 1)
            batch, chars = [], 0
            return results

        for document in documents:
            text = text_of(document)
            if len(text) >= _BATCH_CHARS:
                # Alone: joined to the others, a large text would be copied once more (a
                # 15 MiB string of four-byte characters is 60 MiB), for no time saved.
                if batch:
                    yield from scanned()
                yield self._located(document, text, most)
                del document, text  # not held while the next one is read
                continue
            batch.append((document, text))
            chars += len(text)
            if len(batch) >= size or chars >= _BATCH_CHARS:
                yield from scanned()
        if batch:
            yield from self._scan_batch(batch, most)[0]

    def _scan_batch(
        self, batch: list[tuple[Any, str]], most: int | None
    ) -> tuple[list[list[DocumentHit]], bool]:
        """`scan_document` of each (document, its text), and whether the batch had no hit.
        (Whether the batch's text has a hit is all its scan is asked: it stops at the first.)"""
        if len(batch) > 1 and not self.scan_text(_BATCH_GAP.join(t for _, t in batch), 1):
            return [[] for _ in batch], True
        results = [self._located(document, text, most) for document, text in batch]
        return results, len(batch) == 1 and not results[0]

    def _located(self, document: Any, text: str, most: int | None = None) -> list[DocumentHit]:
        """`scan_document(document, most)`, given its text (`_Flat.text_of(document)`)."""
        hits = self.scan_text(text, most)
        if not hits:
            return []
        flat = _Flat.of(document)  # the same text, with where each string starts
        located: list[tuple[int, int, int, LeakHit]] = []
        for hit in hits:
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


# The strings before one that `scan_document_hiding` reads with it, as patterns read them
# (its key, the argument before it; a window of `_ADDRESS_WINDOW` over a short key).
_CONTEXT_STRINGS = 3

# The characters that `(?i)` matches with an ASCII letter, in a pattern without re.ASCII.
_FOLDS_TO_ASCII = ("\u0130", "\u0131", "\u017f", "\u212a")  # İ ı ſ K (Kelvin)
# Each as the one ASCII letter it matches (a place of a value in any case starts there too).
_FOLDED_TO_ASCII = str.maketrans(dict(zip(_FOLDS_TO_ASCII, "iisk", strict=True)))


class _KnownPlaces:
    """Where a match of known values can start: where the first characters of one are
    (`_lead`, the lookahead that leads its pattern).

    Those of user and host names and named strings (matched in any case) are looked for in
    the lower-cased text, each character that `(?i)` matches with an ASCII letter read as
    that letter; one past ASCII (`jörg`, which that text cannot hold) by `(?i)` itself, as
    the lookahead before the value's pattern reads it (`_known_lead`). Where a value has
    no lead, the pattern's own search runs (None). (Before, a name past ASCII had none:
    every text of a capture was searched by the whole pattern, at each character, and a
    capture of 1,400 records by `jörg` on `büro-gpu-07` took 279 s to export.)
    """

    def __init__(self, known: Sequence[Known]) -> None:
        leads = [(k.kind in _ANY_CASE, _lead(k)) for k in known]
        exact = [p for any_case, lead in leads if not any_case for p in lead or ()]
        any_case = [p for is_any_case, lead in leads if is_any_case for p in lead or ()]
        self._plain = any(lead is None for _, lead in leads)
        self._exact = _prefixes(exact)
        self._folded = _prefixes([p.lower() for p in any_case if p.isascii()])
        caseless = _prefixes([p for p in any_case if not p.isascii()])
        self._caseless = (
            re.compile("(?i:(?=" + "|".join(map(re.escape, caseless)) + "))") if caseless else None
        )
        # (whether one can start in a text of ASCII alone: each of its characters past
        # ASCII one that `(?i)` matches with an ASCII letter, as `K` (Kelvin) matches `k`)
        self._caseless_in_ascii = any(map(_caseless_matches_ascii, caseless))

    def starts(self, places: _Places) -> Iterator[int] | None:
        """The places, ascending, each once, as they are found (a text of millions of
        places is not listed); None: everywhere."""
        if self._plain:
            return None
        text = places.text
        low = places.low
        if self._folded and not text.isascii() and any(c in text for c in _FOLDS_TO_ASCII):
            low = _ascii_low(text.translate(_FOLDED_TO_ASCII))
        # (Unbounded, unlike a generic pattern's places: the known values' pattern has no
        # literal to search by, and tries each of its many lookbehinds at every place a
        # search passes; a place where a value starts is one it would try anyway.)
        found = [
            *(_occurrences(text, prefix) for prefix in self._exact),
            *(_occurrences(low, prefix) for prefix in self._folded),
        ]
        caseless = self._caseless
        if caseless is not None and (self._caseless_in_ascii or not text.isascii()):
            found.append(match.start() for match in caseless.finditer(text))
        if len(found) == 1:
            return found[0]
        return (at for at, _ in itertools.groupby(heapq.merge(*found)))


def _caseless_matches_ascii(prefix: str) -> bool:
    """Whether `(?i)` reads `prefix` in some text of ASCII characters alone."""
    return all(
        char.isascii() or any(re.fullmatch(f"(?i:{re.escape(char)})", chr(a)) for a in range(128))
        for char in prefix
    )


def _prefixes(values: Sequence[str]) -> list[str]:
    """The distinct first four characters of the values, none the start of another."""
    kept: list[str] = []
    for prefix in sorted({v[:4] for v in values}, key=len):
        if not any(prefix.startswith(shorter) for shorter in kept):
            kept.append(prefix)
    return kept


def _finditer_at(
    regex: re.Pattern[str], text: str, starts: Iterable[int] | None
) -> Iterator[re.Match[str]]:
    """`regex.finditer(text)`, trying it only at `starts` (ascending; None: everywhere),
    for a regex that never matches an empty string."""
    if starts is None:
        yield from regex.finditer(text)
        return
    position = 0
    for start in starts:
        if start >= position and (match := regex.match(text, start)) is not None:
            yield match
            position = match.end()


_TOKEN_STOP = frozenset(" \t\r\n\"'`=,;()[]{}<>" + _SEPS)


_DRIVE = _Lazy(r"[A-Za-z]:[\\/]")
# A home's directory relative to `/` (a tar or zip listing's `home/al/x`) or below a
# relative path (`../home/al`, `..\\..\\Users\\al`, `rootfs/home/al`, `$HOME/../home/al`): the
# directory before the name, a component of its own.
_RELATIVE_HOME = _Lazy(r"(?:(?:var|usr)[/\\])?(?:home|Users|users)[/\\]\Z")
_BELOW_FIRST = _Lazy(r"[^/\\][/\\]")
# The home's parent before Vista (and its short name), whose spaces end the word a name is
# in: on any drive, below a mount or a share (`/mnt/c/...`, `\\\\srv\\c$\\...`), in a backup.
_DOCUMENTS_HOME = _Lazy(r"(?i:(?:documents and settings|docume~1)[/\\]{1,2})\Z", re.ASCII)


class _AccountNames:
    """Whether the name at each place of one text (in ascending order) is an account: a
    name after a slash is one only as a component of an absolute file path (`/srv/shared/
    al/x`, `~/al`, `C:\\x\\al`), below its first component, and not in `org/model` (a
    repository) or a URL path (`_names_an_account` in tests/leaks_reference.py, for one
    place). The way back to a word's start stops at the place before, whose word start is
    known, so each character is read once however many names a long word holds
    (`/al/al/al...`). It is asked about plain names only (a distinctive name is an account
    wherever its pattern finds it: `_known_pattern`); asked at fewer places, the walk still
    stops at the last place asked, and each character is still read once."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._at = -1
        self._begin = 0  # the word start of the place before (or a bound at most 4096 back)

    def __call__(self, start: int) -> bool:
        text = self._text
        if start == 0 or text[start - 1] not in "/\\":
            return True
        low = max(0, start - 4096)
        begin = start
        while begin > low and text[begin - 1] not in _TOKEN_STOP:
            begin -= 1
            if begin == self._at:  # no stop since the place before: its word goes on
                begin = max(self._begin, low)
                break
        self._at, self._begin = start, begin
        if text.startswith("://", start - 3):  # a URL's user (`http://al@127.0.0.1/`)
            return True
        if _DOCUMENTS_HOME.search(text, max(0, start - 24), start) is not None:
            return True
        if text.startswith("/path/to/", begin):
            return False
        if text.startswith("file://", begin, start):
            begin += len("file://")
        if text.startswith("~", begin, start) or _DRIVE.match(text, begin, start):
            return True
        home = _RELATIVE_HOME.search(text, max(begin, start - 16), start)
        if home is not None and (
            not text[begin : home.start()].strip("./\\")
            or text[home.start() - 1] in "/\\"  # a component below others: `rootfs/home/al`
            or home.group()[3] in "/\\"  # (`x/var/home/`: its `home` is one too)
        ):
            return True
        return (
            text.startswith(("/", "\\"), begin, start)
            and _BELOW_FIRST.search(text, begin, start) is not None
        )


def _longest_first(known: Known) -> tuple[int, str]:
    return (-len(known.value), known.value)


@dataclass(frozen=True)
class DocumentHit:
    """A hit inside one string of a JSON document."""

    path: tuple[str | int, ...]
    """The string's location (for an object key: the key's own member)."""
    is_key: bool
    start: int  # offsets into that string
    end: int
    hit: LeakHit

    @property
    def pointer(self) -> str:
        """The JSON pointer of the string; for an object key, of the object that holds it."""
        return json_pointer(*(self.path[:-1] if self.is_key else self.path))

    @property
    def where(self) -> str:
        return self.pointer + (" (an object key)" if self.is_key else "")


def _utf8_run(escape: str) -> str:
    """A pattern of the escapes (`%`, `\\x`) of one UTF-8 character's bytes: a lead byte, then
    as many continuation bytes as it announces."""
    lead, more = re.escape(escape), f"(?:{re.escape(escape)}[89abAB][0-9a-fA-F])"
    return (
        f"(?:{lead}[cdCD][0-9a-fA-F]{more}|{lead}[eE][0-9a-fA-F]{more}{{2}}"
        f"|{lead}[fF][0-7]{more}{{3}})"
    )


# The same in octal escapes (`\\303\\266`, `ö`: git's quoted paths, `ls -b`, bash's `$'...'`):
# a lead byte of 0o300-0o367, then continuation bytes of 0o200-0o277.
_UTF8_OCTAL_RUN = (
    r"(?:\\3[0-3][0-7](?:\\2[0-7]{2})|\\3[45][0-7](?:\\2[0-7]{2}){2}"
    r"|\\36[0-7](?:\\2[0-7]{2}){3})"
)


# Characters that show nothing, which a text can hold inside a value (`ali\u200bce`): the
# default-ignorable code points of Unicode (zero-width spaces and joiners, the word joiner and
# invisible operators, byte order mark, soft hyphen, bidirectional marks and controls,
# variation selectors, Hangul fillers, tags), as ranges of a character class.
_INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
# A terminal's escape sequences, which show nothing either: a control sequence (`ESC[2m`,
# colour and style: ECMA-48's CSI, 7-bit or 8-bit, its parameter and intermediate bytes,
# then its final byte), an operating system command (`ESC]8;;URL ESC\`, a hyperlink) ended
# by BEL or ST, a character set's designation (`ESC(B`, as `tput sgr0` writes it) and the
# other sequences of ESC and one character (`ESC7`).
_TERMINAL = (
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b\][^\x00-\x02\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[ -/]+[0-~]|\x1b[0-Z\\^-~]"
)


def _compatible_ascii() -> dict[int, str]:
    """The characters outside ASCII that Unicode's compatibility normalization (NFKC) reads
    as one printable ASCII character, each with it: fullwidth forms (`／ｈｏｍｅ`),
    mathematical letters and digits (`𝐚𝐥𝐢𝐜𝐞`), superscripts and subscripts, letterlike
    symbols (the Kelvin sign, `ℎ`), circled and parenthesized digits and letters that stand
    alone. One for one: the view of a text so read keeps its offsets (`Detector._view_hits`).
    Not the fullwidth tilde: Japanese writes `～` between words (`楽しかった～ｗｗｗ`), which
    read as ASCII would be the home of a user `www`."""
    blocks = (
        (0x00A0, 0x00FF), (0x02B0, 0x02FF), (0x1D2C, 0x1D6A), (0x2000, 0x206F),
        (0x2070, 0x209F), (0x2100, 0x218F), (0x2460, 0x24FF), (0x3000, 0x3000),
        (0xFE50, 0xFE6F), (0xFF01, 0xFF5E), (0x1D400, 0x1D7FF), (0x1F100, 0x1F1FF),
    )  # fmt: skip
    table: dict[int, str] = {}
    for first, last in blocks:
        for code in range(first, last + 1):
            read = unicodedata.normalize("NFKC", chr(code))
            if len(read) == 1 and " " < read < "\x7f" and read != "~":
                table[code] = read
    return table


def _ranges(codes: Iterable[int]) -> str:
    """A character class's inside for `codes`, each run of consecutive ones as a range: `re`
    tests a character past the Basic Multilingual Plane against each item of a class in
    turn (a class of 700 such single characters took 10 s over a 15 MiB text)."""
    items: list[str] = []
    run: list[int] = []
    for code in sorted(codes):
        if run and code == run[-1] + 1:
            run.append(code)
            continue
        if run:
            items.append(_range_item(run[0], run[-1]))
        run = [code]
    if run:
        items.append(_range_item(run[0], run[-1]))
    return "".join(items)


def _range_item(first: int, last: int) -> str:
    if first == last:
        return re.escape(chr(first))
    return f"{re.escape(chr(first))}-{re.escape(chr(last))}"


_COMPATIBLE = _compatible_ascii()
# Whether a text holds one of them (past the Basic Multilingual Plane, their whole blocks:
# a view of a text that holds none is the text itself), searched for in a text not ASCII.
_COMPATIBLE_IN = _Lazy(
    "["
    + _ranges(code for code in _COMPATIBLE if code <= 0xFFFF)
    + "\U0001d400-\U0001d7ff\U0001f100-\U0001f1ff]"
)


# HTML's named references of the characters that paths, addresses, accounts and tokens are
# written with (HTML5's names), and those `html.escape` writes (`&amp;`, `&quot;`, `&#x27;`,
# `&lt;`, `&gt;`): a password holding `&` or `"` is published in an HTML page or an XML
# file so escaped. (An honest page holds the latter by the thousand; each counts towards a
# bounded scan's `_MOST_ESCAPES` of one text, which is far more.) A text escaped twice
# (`&amp;#47;`) is read as `/` in the second view.
# HTML's named references of Latin-1's letters and of Œ œ Š š Ÿ (`b&uuml;ro-lab-07`), in
# the order of their code points.
_LATIN_NAMES = (
    "Agrave Aacute Acirc Atilde Auml Aring AElig Ccedil Egrave Eacute Ecirc Euml Igrave "
    "Iacute Icirc Iuml ETH Ntilde Ograve Oacute Ocirc Otilde Ouml Oslash Ugrave Uacute Ucirc "
    "Uuml Yacute THORN szlig agrave aacute acirc atilde auml aring aelig ccedil egrave eacute "
    "ecirc euml igrave iacute icirc iuml eth ntilde ograve oacute ocirc otilde ouml oslash "
    "ugrave uacute ucirc uuml yacute thorn yuml OElig oelig Scaron scaron Yuml"
)
_LATIN_LETTERS = [chr(c) for c in range(0xC0, 0x100) if c not in (0xD7, 0xF7)] + [
    "\u0152", "\u0153", "\u0160", "\u0161", "\u0178"
]  # fmt: skip
_LATIN_SYMBOL_NAMES = (
    "iexcl cent pound curren yen brvbar sect uml copy ordf laquo not shy reg macr deg plusmn "
    "sup2 sup3 acute micro para middot cedil sup1 ordm raquo frac14 frac12 frac34 iquest "
    "times divide"
)
_LATIN_SYMBOLS = [chr(c) for c in range(0xA1, 0xC0)] + ["\u00d7", "\u00f7"]
_WINDOWS_SYMBOL_NAMES = (
    "euro sbquo fnof bdquo hellip dagger Dagger circ permil lsaquo lsquo rsquo ldquo rdquo "
    "bull ndash mdash tilde trade rsaquo Zcaron zcaron"
)
_WINDOWS_SYMBOLS = list(
    "\u20ac\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u2039\u2018\u2019\u201c\u201d"
    "\u2022\u2013\u2014\u02dc\u2122\u203a\u017d\u017e"
)
_ENTITIES = {
    "sol": "/", "bsol": "\\", "commat": "@", "colon": ":", "period": ".", "lowbar": "_",
    "UnderBar": "_", "plus": "+", "equals": "=", "percnt": "%", "num": "#",
    "hyphen": "-", "dash": "-",  # (U+2010: a name's hyphen as HTML may write it)
    "nbsp": "\u00a0",
    # what `html.escape` writes (a password's `"`, `'`, `<`, `>`)
    "quot": '"', "QUOT": '"', "apos": "'", "lt": "<", "LT": "<", "gt": ">", "GT": ">",
    **dict(zip(_LATIN_NAMES.split(), _LATIN_LETTERS, strict=True)),
    # the symbols that mojibake puts after `Ã` or `Å` (`j&Atilde;&para;rg`, PHP's
    # `htmlentities` of `jÃ¶rg`): Latin-1's, and the ones Windows-1252 has in their place
    **dict(zip(_LATIN_SYMBOL_NAMES.split(), _LATIN_SYMBOLS, strict=True)),
    **dict(zip(_WINDOWS_SYMBOL_NAMES.split(), _WINDOWS_SYMBOLS, strict=True)),
}  # fmt: skip
_ENTITY_NAMES = _trie_pattern(sorted(_ENTITIES))
# (the `;` may be left out where HTML's parsers read a name without it: `&amp`, and the
# Latin-1 letters', `&uuml`; not the others: `&sol` is no `/`)
_LEGACY_NAMES = _trie_pattern(_LATIN_NAMES.split()[:-5])  # (not OElig ... Yuml)
_ENTITY = rf"&({_ENTITY_NAMES}(?=;)|{_LEGACY_NAMES});?|&(?:amp|AMP);?"

# A UTF-16 surrogate pair as JSON's ASCII escaping writes a character past the Basic
# Multilingual Plane (`json.dumps` of a name in mathematical letters: `\ud835\udc1a`),
# read as that character; a lone half is read as the surrogate it is (`\uXXXX`).
_SURROGATES = r"\\u([dD][89abAB][0-9A-Fa-f]{2})\\u([dD][c-fC-F][0-9A-Fa-f]{2})"
# The characters a backslash before them stands for themselves: JSON's `\/`, `\\`, `\"`,
# and what bash's `printf %q` escapes in a word:
# white space, quotes and the shell's special characters (`Xk9#mP2\&qL7\!vR4@` for the
# password `Xk9#mP2&qL7!vR4@`, `My\ Models` for a folder). Not `.` or `@`, which a regular
# expression escapes by the thousand (`10\.0\.0\.1`) and the shell never does, nor the
# brackets, `,`, `;` and `|`, which LaTeX's and regular expressions' `\(`, `\[`, `\{`,
# `\,`, `\;`, `\|` write as often (each escape counts towards a bounded scan's
# `_MOST_ESCAPES`).
_LITERAL = "[" + re.escape("/\\\"' !#$&*<>?^`~") + "]"
# (... but not the `&` of an HTML reference after a Windows path's `\`: `C:\Users\&Ouml;zil`)
_NOT_A_REFERENCE = r"(?!&(?:[A-Za-z][A-Za-z0-9]{1,31};|#))"


def _character(digits: str, base: int) -> str:
    """The character of an HTML numeric reference; U+FFFD past the last code point."""
    digits = digits.lstrip("0") or "0"
    number = int(digits, base) if len(digits) <= 7 else sys.maxunicode + 1
    return chr(number) if number <= sys.maxunicode else "\ufffd"


class _Decoded:
    """A text with its escapes decoded once, and the way back to the text's offsets."""

    # JSON's escapes (`\\n` too: in `cannot open\\n/home/alice` the `n` would stand
    # before the path as a letter), the wider escapes of a code point (`\\u{2f}` of
    # JavaScript and Rust, Python's `\\U0000002f`, `%u002f` of JavaScript's `escape`),
    # URL's, C's and Python's `\\xHH` and octal `\\057` (a
    # byte each: bash's `$'...'`, git's quoted paths), HTML's `&#47;`, `&#x2f;`, the named
    # references of the characters of paths, addresses and names (`&sol;`, `&commat;`; and
    # `&amp;`, so that `&amp;#47;`, escaped twice, is read as `/` in the second view)
    # (and without the `;`, its digits read as far as they go, as an HTML parser reads them:
    # `&#47home`; and the names HTML reads without it, `&uumlro`, `&amp`), quoted-printable's
    # `=3D` (`path=3D/home/alice`: the rest of a quoted-printable text is itself, but past
    # ASCII, which the known values' spellings hold). A run of `%HH`, `\\xHH` or octal
    # `\\OOO` that spells one character in UTF-8 (`%C3%B6`, `\\303\\266`, `ö`) is one
    # escape of that character; a run that does not is one escape a byte, each its Latin-1
    # character, as a lone `%HH` is. A run of
    # invisible characters (zero-width spaces and joiners, word joiner, byte order mark, soft
    # hyphen) and terminal escape
    # sequences, and the character after it, is one escape of that character: `ali\u200bce`
    # and `/home/\x1b[1malice` are read as `alice` (`\x1b[2m/home/alice` too, whose `m`
    # would stand before the path as a letter). A text with terminal sequences is read a
    # second way too (`_SPACED`), each run of them a space: in `see\x1b[0m/home/alice`,
    # `see` is no part of the path.
    _ESCAPE = _Lazy(
        rf"(?P<utf8>{_utf8_run('%')}|{_utf8_run(chr(92) + 'x')}|{_UTF8_OCTAL_RUN})"
        rf"|{_SURROGATES}|\\u([0-9A-Fa-f]{{4}})|\\{_NOT_A_REFERENCE}({_LITERAL})|\\([nrtbf])"
        r"|(?:%|\\x)([0-9A-Fa-f]{2})"
        r"|\\u\{(?P<wide>[0-9A-Fa-f]{1,6})\}|\\U(?P<wide8>[0-9A-Fa-f]{8})"
        r"|%u(?P<wide4>[0-9A-Fa-f]{4})"
        r"|\\([0-3][0-7]{2})|&#([0-9]+);?|&#[xX]([0-9A-Fa-f]+);?|=3D"
        rf"|{_ENTITY}"
        rf"|(?:[{_INVISIBLE}]|{_TERMINAL})+([^\x00-\x02])"
    )
    _SPACED = _Lazy(
        rf"(?P<utf8>{_utf8_run('%')}|{_utf8_run(chr(92) + 'x')}|{_UTF8_OCTAL_RUN})"
        rf"|{_SURROGATES}|\\u([0-9A-Fa-f]{{4}})|\\{_NOT_A_REFERENCE}({_LITERAL})|\\([nrtbf])"
        r"|(?:%|\\x)([0-9A-Fa-f]{2})"
        r"|\\u\{(?P<wide>[0-9A-Fa-f]{1,6})\}|\\U(?P<wide8>[0-9A-Fa-f]{8})"
        r"|%u(?P<wide4>[0-9A-Fa-f]{4})"
        r"|\\([0-3][0-7]{2})|&#([0-9]+);?|&#[xX]([0-9A-Fa-f]+);?|=3D"
        rf"|{_ENTITY}"
        rf"|[{_INVISIBLE}]+([^\x00-\x02])|(?P<terminal>(?:{_TERMINAL})+)"
    )
    # How an escape starts. `_ESCAPE` starts with a group, so `re` finds no set of first
    # characters in it and tries it at every place of a text (some 40 ns a character); this
    # pattern's branches each start with a character, which `re` searches for in C, and
    # `_ESCAPE` is tried only where one matches (`_escapes`). Replies with a `%` and a `\\`
    # in each: the leak scan of 10,000 records took 3.7 s with the two full searches.
    _ESCAPE_START = _Lazy(
        rf"%[0-9A-Fa-fu]|\\[uUxnrtbf0-3]|\\{_LITERAL}|&#|=3D|{_ENTITY}"
        rf"|[\x1b\x9b]|[{_INVISIBLE}]"
    )
    # Whether a text holds a character past ASCII that starts an escape (a text of ASCII
    # alone needs no search for one). (These four compiled where first used: a bundle whose
    # texts hold no escape never needs them.)
    _PAST_ASCII = _Lazy(rf"[{_INVISIBLE}\x9b]")
    _CONTROL: ClassVar[dict[str, str]] = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}

    def __init__(self, text: str, positions: list[int], spans: list[tuple[int, int]]) -> None:
        self.text = text
        self._positions = positions  # decoded offset of each escape's character
        self._spans = spans  # (start, end) of each escape in the text it was decoded from
        self._parent: _Decoded | None = None

    @classmethod
    def of(
        cls,
        text: str,
        parent: _Decoded | None = None,
        *,
        escapes: int | None = None,
        spaced: bool = False,
    ) -> _Decoded | int | None:
        """The view of `text` with its escapes decoded; None where it holds none (a text
        without `\\`, `%` or `&` is not searched); with `escapes`, where the text holds
        more escapes than that, the offset of the first one past them instead."""
        if (
            "\\" not in text
            and "%" not in text
            and "&" not in text
            and "=3D" not in text
            and "\x1b" not in text
            and (text.isascii() or cls._PAST_ASCII.search(text) is None)
        ) or next(cls._escapes(text, spaced), None) is None:
            return None
        return cls._decoded(text, parent, escapes, spaced)

    @classmethod
    def _escapes(cls, text: str, spaced: bool = False) -> Iterator[re.Match[str]]:
        """`_ESCAPE.finditer(text)`: every match of `_ESCAPE` starts where `_ESCAPE_START`
        matches (each of its alternatives begins as one of that pattern's), so trying it at
        each such place, from the end of the last match, finds the same matches."""
        start = cls._ESCAPE_START.regex.search
        escape = (cls._SPACED if spaced else cls._ESCAPE).regex.match
        position = 0
        while (found := start(text, position)) is not None:
            at = found.start()
            match = escape(text, at)
            if match is None:
                position = at + 1
            else:
                yield match
                position = match.end()

    @classmethod
    def _decoded(
        cls, text: str, parent: _Decoded | None, escapes: int | None, spaced: bool = False
    ) -> _Decoded | int:
        pieces: list[str] = []
        positions: list[int] = []
        spans: list[tuple[int, int]] = []
        last = length = 0
        for match in cls._escapes(text, spaced):
            if escapes is not None and len(spans) >= escapes:
                return match.start()
            pieces.append(text[last : match.start()])
            length += match.start() - last
            (
                utf8, high, low, code, literal, control, percent, wide, wide8, wide4, octal,
                decimal, hexadecimal, entity, shown, *more,
            ) = match.groups()  # fmt: skip
            terminal = more[0] if more else None  # (`_SPACED`'s)
            hexadecimal = hexadecimal or wide or wide8 or wide4
            if utf8 is not None:
                # `%HH`, `\\xHH` or octal `\\OOO`: the digits end each escape
                width = 3 if utf8[0] == "%" else 4
                digits, base = (2, 16) if utf8[0] == "%" or utf8[1] == "x" else (3, 8)
                data = bytes(
                    int(utf8[at + width - digits : at + width], base)
                    for at in range(0, len(utf8), width)
                )
                try:
                    character = data.decode("utf-8")
                except UnicodeDecodeError:
                    character = ""
                if len(character) != 1:  # not one character: each byte its own escape
                    at = match.start()
                    for byte in data:
                        pieces.append(chr(byte))
                        positions.append(length)
                        spans.append((at, at + width))
                        at, length = at + width, length + 1
                    last = match.end()
                    continue
                pieces.append(character)
            elif high is not None:  # a UTF-16 surrogate pair: the one code point it spells
                pieces.append(
                    chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + int(low, 16) - 0xDC00)
                )
            elif literal is not None:
                pieces.append(literal)
            elif control is not None:
                pieces.append(cls._CONTROL[control])
            elif decimal is not None:
                pieces.append(_character(decimal, 10))
            elif hexadecimal is not None:
                pieces.append(_character(hexadecimal, 16))
            elif entity is not None:
                pieces.append(_ENTITIES[entity])
            elif match.group().startswith("&"):  # `&amp;` before `#` or a name
                pieces.append("&")
            elif shown is not None:
                pieces.append(shown)
            elif terminal is not None:
                pieces.append(" ")
            elif octal is not None:
                pieces.append(chr(int(octal, 8)))
            elif match.group() == "=3D":
                pieces.append("=")
            else:
                pieces.append(chr(int(code or percent, 16)))
            positions.append(length)
            spans.append(match.span())
            length += 1
            last = match.end()
        pieces.append(text[last:])
        view = cls("".join(pieces), positions, spans)
        view._parent = parent
        return view

    def _map(self, offset: int, *, end: bool) -> int:
        probe = offset - 1 if end else offset
        index = bisect.bisect_left(self._positions, probe)
        if index < len(self._positions) and self._positions[index] == probe:
            span = self._spans[index]
            return span[1] if end else span[0]
        if index == 0:
            return offset
        # Past `index` escapes: shift by their extra length.
        previous = self._spans[index - 1][1] - self._positions[index - 1] - 1
        return offset + previous

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The span of the outermost text that [start, end) of this view came from."""
        mapped = (self._map(start, end=False), self._map(end, end=True))
        if self._parent is not None:
            return self._parent.original(*mapped)
        return mapped


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

    @staticmethod
    def text_of(document: Any) -> str:
        """`_Flat.of(document).text`, without the offsets: most documents have no hit."""
        return _text_of()(document)

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
                    # a number, a boolean or null between two strings is read past, as
                    # in a text (`{"api_keys": [null, "K"]}`: `api_keys` ITEM_SEP `K`)
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

        # Handed itself to call, as `_text_of`'s walk: no reference cycle left behind.
        def walk(node: Any, walk: Callable[[Any, Any], None]) -> None:
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
                        walk(value, walk)
                        path.pop()
            else:
                for index, value in enumerate(node):
                    if isinstance(value, str):
                        if count in wanted:
                            found[count] = (*path, index)
                        count += 1
                    elif isinstance(value, dict | list) and count <= last:
                        path.append(index)
                        walk(value, walk)
                        path.pop()

        if isinstance(document, dict | list) and last >= 0:
            walk(document, walk)
        return found


def _text_of() -> Callable[[Any], str]:
    """`_Flat.text_of`, as a function to call for document after document: what it needs
    (the walk, its list of pieces) is made once (some 3 us a document less)."""
    pieces: list[str] = []
    add = pieces.extend
    containers = (dict, list)

    # As `_walk`, with a test of the exact type first: JSON's own types are the usual case.
    # It is handed itself, to call: a function that named itself from the scope around it
    # would be in a reference cycle, which only the cyclic collector frees.
    def walk(node: Any, walk: Callable[..., None], first: str = SEP) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                kind = type(value)
                if kind is str:
                    add((SEP, key, KEY_SEP, value))
                elif kind is dict or kind is list:
                    add((SEP, key))
                    walk(value, walk, ITEM_SEP)
                elif kind is int or kind is float or kind is bool or value is None:
                    add((SEP, key))
                elif isinstance(value, str):
                    add((SEP, key, KEY_SEP, value))
                else:
                    add((SEP, key))
                    if isinstance(value, containers):
                        walk(value, walk, ITEM_SEP)
        else:
            joiner = first
            for value in node:
                if type(value) is str or isinstance(value, str):
                    add((joiner, value))
                    joiner = ITEM_SEP
                elif isinstance(value, containers):
                    joiner = SEP
                    walk(value, walk)
        if len(pieces) >= 65536:  # join as we go: no list of millions of pieces
            pieces[:] = ["".join(pieces)]

    def text_of(document: Any) -> str:
        if isinstance(document, str):
            return SEP + document
        try:
            if isinstance(document, containers):
                walk(document, walk)
            return "".join(pieces)
        finally:
            pieces.clear()  # empty for the next document, even after one that failed

    return text_of


GENERIC = Detector()


def scan_text(text: str, most: int | None = None) -> list[LeakHit]:
    """The generic detectors over one text (the first `most` hits: Detector.scan_text)."""
    return GENERIC.scan_text(text, most)


def scan_document(document: Any, most: int | None = None) -> list[DocumentHit]:
    """The generic detectors over every string of a JSON document."""
    return GENERIC.scan_document(document, most)


def scan_documents(
    documents: Iterable[Any], most: int | None = None
) -> Iterator[list[DocumentHit]]:
    """`scan_document` of each document in turn (scanned in batches: see Detector's)."""
    return GENERIC.scan_documents(documents, most)


def scan_bytes(data: bytes, most: int | None = None) -> list[LeakHit]:
    """scan_text over UTF-8 (invalid bytes replaced); offsets count characters, not bytes."""
    return scan_text(data.decode("utf-8", errors="replace"), most)


def is_tokenish(value: str) -> bool:
    """Whether a value has a token's shape rather than a word's: digits, mixed case, symbols
    or 16 characters (`S3cretPassw0rd`, not `postgres`)."""
    return _tokenish(value)


def is_random_key(value: str) -> bool:
    """Whether a value reads as random characters, as a provider's key does: digits spread
    through it, and both cases, or hex (`Zq8Wm3Xr5Tb7Nc9Vd1`, not `state-of-the-art` or
    `2024-05-01`)."""
    return _random_key(value)


def is_secret_name(name: str, *, flag: bool = False) -> bool:
    """Whether an environment variable (or a flag) of this name holds a secret (`HF_TOKEN`)."""
    return _is_secret_name(name, flag=flag)
