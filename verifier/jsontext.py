"""Indented JSON text: exactly `json.dumps(document, indent=2, ensure_ascii=False)`, faster.

The one writer of the two indented JSON texts the tool writes: the JSON report
(`verifier.report`) and every public document (`jsonio.dumps_stable`'s bytes, through
`export.serialize.dumps_public`). With an indent the standard library uses its pure-Python
encoder, a generator per container and a yield per token: ~0.25 s for the report of a
10,000-record bundle, ~1 s for the documents of its export. This writer gives the same
bytes with one list of pieces and no generators, and lays out a long list (the report's
requests and conditions) a column at a time with C-level loops (`_Columns`). It handles the
values a report holds (dict, list, tuple, str, int, float, bool, None and their
subclasses, string keys); on anything else (a non-string key, an unknown type, a cycle)
it leaves the whole document to `json.dumps`, which then answers as it always did.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from itertools import chain, islice, repeat
from json.encoder import INFINITY, encode_basestring
from typing import Any

try:  # the standard library's C encoder, as json.encoder finds it
    from _json import make_encoder
except ImportError:  # pragma: no cover - an interpreter without it: every value walked
    make_encoder = None  # type: ignore[assignment, misc]

_float_repr = float.__repr__
_int_repr = int.__repr__


class _Unusual(Exception):
    """A value this writer does not spell itself: json.dumps writes the document."""


def reference_dumps(document: Any, *, allow_nan: bool = True) -> str:
    """The plain path, and the reference the fast one is tested against."""
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=allow_nan)


def dumps_indented(document: Any, *, allow_nan: bool = True) -> str:
    """`json.dumps(document, indent=2, ensure_ascii=False, allow_nan=...)`, byte for byte
    (and its error, where it refuses the document)."""
    return "".join(chunks_indented(document, allow_nan=allow_nan))


def chunks_indented(document: Any, *, allow_nan: bool = True) -> list[str]:
    """The text of dumps_indented in pieces of some hundred kilobytes, to be written one
    after the other: the report of a large bundle is never held twice, nor as millions of
    small strings at once."""
    try:
        return _dumps(document, allow_nan)
    except (_Unusual, RecursionError):
        return [reference_dumps(document, allow_nan=allow_nan)]


def _scalar(value: Any, allow_nan: bool) -> str:
    """A value that is no container, spelled as json.dumps spells it (its order of tests);
    NaN and the infinities only where json.dumps would write them (else it says why not)."""
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return _int_repr(value)
    if isinstance(value, float):
        if not allow_nan and (value != value or value in (INFINITY, -INFINITY)):
            raise _Unusual
        if value != value:
            return "NaN"
        if value == INFINITY:
            return "Infinity"
        if value == -INFINITY:
            return "-Infinity"
        return _float_repr(value)
    raise _Unusual


_PIECES = 20_000  # small strings joined into one chunk at a time
_COLUMN = 8  # the shortest list laid out by _Columns: a shorter one is walked into
_SMALL = 2_000  # the most pieces of a list's first item for its others to go to _Columns
# Items of a long list laid out together (see _Columns): their texts, some hundred
# kilobytes, are joined and written before the next are made, so that memory is reused.
_ROWS = 256
# The most items of the lists (or dicts) of a column taken together: long lists within a
# column (each bundle's requests, where a report has many bundles) are written one by one,
# each a long list of its own, rather than all their items' texts made at once.
_FLAT = 65_536

# The exact types the C encoder spells as json.dumps does: the same int and float repr,
# the same encode_basestring, NaN and the infinities by the same rule. Subclasses (enums,
# str subclasses) are left to the walk, which takes them the way json.dumps does.
_SCALARS = frozenset({str, int, float, bool, type(None)})
_STRINGS = frozenset({str})
_DICTS = frozenset({dict})
_SEQUENCES = frozenset({list, tuple})
# Scalars whose text a dict of their distinct values can look up: no two of them are
# equal with different texts (1 == True == 1.0 and 0.0 == -0.0 are, so not int with
# bool, and no float).
_MEMO = (frozenset({str, int, type(None)}), frozenset({str, bool, type(None)}))


def _spelled(distinct: set[str]) -> dict[str, str]:
    """Each string's JSON text, to be looked up where the same strings repeat."""
    return dict(zip(distinct, map(encode_basestring, distinct), strict=True))


def _refuse(value: Any) -> Any:
    """The C encoder's `default`: never called, as it is only given scalars."""
    raise _Unusual


class _Columns:
    """The texts of many values at once, each as the walk writes it, by C-level loops
    (map, join, the C encoder) rather than a Python step per token: the values of a list
    taken together, their dicts' values together, and so down. The JSON report is mostly
    such lists (a bundle's requests; its conditions, each of the same few keys).

    `texts(values, newline)` gives the text of each value that starts a line indented as
    `newline` ("\n" and spaces) says: the scalars by the C encoder (a dict of the
    distinct strings where they repeat); the dicts by the texts of all their values (one
    level in) and their keys; the lists by the texts of all their items. What is none of
    these (a subclass) is written by `walk`, the plain walker."""

    def __init__(self, walk: Callable[[Any, str], str], allow_nan: bool) -> None:
        self.walk = walk
        # All scalars of a column in one call, one per line: the C encoder escapes every
        # newline within a string, so a raw one only ever separates two values.
        self.lines = make_encoder(
            None, _refuse, encode_basestring, None, ": ", "\n", False, False, allow_nan
        )

    def texts(self, values: list[Any], newline: str) -> list[str]:
        if not values:
            return []
        kinds = set(map(type, values))
        if kinds <= _SCALARS:
            return self.scalars(values, kinds)
        if kinds == _DICTS:
            return self.dicts(values, newline)
        if kinds <= _SEQUENCES:
            return self.sequences(values, newline)
        # A mix: each kind together, then back in order.
        out: list[str] = [""] * len(values)
        groups: dict[str, list[int]] = {}
        for index, value in enumerate(values):
            kind = type(value)
            group = (
                "scalar" if kind in _SCALARS
                else "dict" if kind is dict
                else "sequence" if kind in _SEQUENCES
                else "other"
            )  # fmt: skip
            groups.setdefault(group, []).append(index)
        for group, indices in groups.items():
            if group == "other":
                texts = [self.walk(values[i], newline) for i in indices]
            else:
                texts = self.texts([values[i] for i in indices], newline)
            for index, text in zip(indices, texts, strict=True):
                out[index] = text
        return out

    def scalars(self, values: list[Any], kinds: set[type]) -> list[str]:
        if kinds == _STRINGS:
            distinct = set(values)
            if len(distinct) * 2 > len(values):
                return list(map(encode_basestring, values))
            return list(map(_spelled(distinct).__getitem__, values))
        if kinds <= _MEMO[0] or kinds <= _MEMO[1]:
            unique = list(set(values))
            memo = dict(zip(unique, self.encoded(unique), strict=True))
            return list(map(memo.__getitem__, values))
        return self.encoded(values)

    def encoded(self, values: list[Any]) -> list[str]:
        try:
            text = "".join(self.lines(values, 0))
        except ValueError:  # NaN refused, an int too long to spell: json.dumps says so
            raise _Unusual from None
        return text[1:-1].split("\n")

    def dicts(self, values: list[dict[Any, Any]], newline: str) -> list[str]:
        if sum(map(len, values)) > _FLAT:
            return [self.walk(value, newline) for value in values]
        keys = list(chain.from_iterable(values))
        if not _STRINGS.issuperset(map(type, keys)):
            raise _Unusual  # json.dumps turns such keys to text; leave it to it
        shape = list(values[0])
        if keys == shape * len(values):  # (exact strings: == is their text's)
            return self.rows(values, shape, newline)
        # Dicts of several key lists: those of each list together, then back in order;
        # where most lists are of one dict or two (counts by class label), all together.
        by_shape: dict[tuple[str, ...], list[int]] = {}
        for index, value in enumerate(values):
            by_shape.setdefault(tuple(value), []).append(index)
        if len(by_shape) * 4 > len(values):
            return self.mixed_dicts(values, keys, newline)
        out: list[str] = [""] * len(values)
        for group, indices in by_shape.items():
            texts = self.rows([values[i] for i in indices], list(group), newline)
            for index, text in zip(indices, texts, strict=True):
                out[index] = text
        return out

    def mixed_dicts(self, values: list[dict[str, Any]], keys: list[str], newline: str) -> list[str]:
        """Dicts of any keys (`keys`: all of them, in order): all their values are one
        column, each distinct key spelled once."""
        inner = newline + "  "
        items = self.texts(list(chain.from_iterable(map(dict.values, values))), inner)
        spelled = _spelled(set(keys)).__getitem__
        pairs = map("%s: %s".__mod__, zip(map(spelled, keys), items, strict=True))
        return self.wrap(values, pairs, "{" + inner, newline + "}", "{}", inner)

    def rows(self, values: list[dict[str, Any]], keys: list[str], newline: str) -> list[str]:
        """Dicts of the same keys in the same order: each key's values are one column."""
        if not keys:
            return ["{}"] * len(values)
        inner = newline + "  "
        # All values in a row, then each key's every len(keys)-th: its column.
        flat = list(chain.from_iterable(map(dict.values, values)))
        width = len(keys)
        columns = [self.texts(flat[k::width], inner) for k in range(width)]
        # The text of a dict, its values left as "%s" (a key's "%" doubled, as % reads it).
        spelled = [encode_basestring(key).replace("%", "%%") + ": %s" for key in keys]
        template = "{" + inner + ("," + inner).join(spelled) + newline + "}"
        return list(map(template.__mod__, zip(*columns, strict=True)))

    def sequences(self, values: list[list[Any] | tuple[Any, ...]], newline: str) -> list[str]:
        total = sum(map(len, values))
        if total > _FLAT or total > _ROWS * len(values):
            return [self.walk(value, newline) for value in values]
        inner = newline + "  "
        items = self.texts(list(chain.from_iterable(values)), inner)
        return self.wrap(values, items, "[" + inner, newline + "]", "[]", inner)

    @staticmethod
    def wrap(
        values: list[Any], items: Any, opening: str, closing: str, empty: str, inner: str
    ) -> list[str]:
        """Each container of `values` around its share of `items`, in order."""
        lengths = list(map(len, values))
        around = (opening + "%s" + closing).__mod__
        if lengths.count(1) == len(lengths):  # one item each (counter deltas): no slicing
            return list(map(around, items))
        # Consecutive islices of one iterator: each container's items, in turn.
        bodies = map(("," + inner).join, map(islice, repeat(iter(items)), lengths))
        out = list(map(around, bodies))
        if 0 in lengths:
            for index, length in enumerate(lengths):
                if not length:
                    out[index] = empty
        return out


def dumps_each(documents: list[Any], *, allow_nan: bool = True) -> list[str]:
    """`dumps_indented` of each of `documents`, byte for byte, written together a batch at
    a time as a long list's items are (`_Columns`): documents of the same keys (a bundle's
    records) have each key's values spelled by C-level loops across all of them. A batch
    this way cannot write (a subclass, a non-string key, a NaN refused) is written one
    document at a time, so each answers as `dumps_indented` does."""
    if make_encoder is None:  # pragma: no cover - an interpreter without the C encoder
        return [dumps_indented(d, allow_nan=allow_nan) for d in documents]

    def walk(value: Any, newline: str) -> str:
        return "".join(_dumps(value, allow_nan, newline))

    columns = _Columns(walk, allow_nan)
    texts: list[str] = []
    for start in range(0, len(documents), _ROWS):
        batch = documents[start : start + _ROWS]
        try:
            texts += columns.texts(batch, "\n")
        except (_Unusual, RecursionError):
            texts += [dumps_indented(d, allow_nan=allow_nan) for d in batch]
    return texts


def _dumps(document: Any, allow_nan: bool, start: str = "\n") -> list[str]:
    """The text of `document`, in chunks, as it is written starting a line indented as
    `start` ("\n" and spaces) says."""
    chunks: list[str] = []
    pieces: list[str] = []
    append = pieces.append
    escape = encode_basestring
    held = 0  # no flush while `walked` writes one value for _Columns

    def flush() -> None:
        chunks.append("".join(pieces))
        pieces.clear()

    def walked(value: Any, newline: str) -> str:
        nonlocal held
        start = len(pieces)
        held += 1
        try:
            write(value, newline)
        finally:
            held -= 1
        text = "".join(pieces[start:])
        del pieces[start:]
        return text

    columns: list[_Columns] = []  # made for the first long list (most documents have none)

    def write_dict(value: dict[Any, Any], newline: str) -> None:
        if not value:
            append("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            if type(key) is not str:
                raise _Unusual  # json.dumps turns such keys to text; leave it to it
            append(separator)
            append(escape(key))
            separator = "," + inner
            item_kind = type(item)
            if item_kind is str:
                append(": " + escape(item))
            elif item_kind is int:
                append(": " + _int_repr(item))
            elif item is None:
                append(": null")
            else:
                append(": ")
                write(item, inner)
        append(newline + "}")
        if len(pieces) > _PIECES and not held:
            flush()

    def write_list(value: list[Any] | tuple[Any, ...], newline: str) -> None:
        if not value:
            append("[]")
            return
        inner = newline + "  "
        separator = "[" + inner
        items: Iterable[Any] = value
        if len(value) >= _COLUMN and type(value) in _SEQUENCES and make_encoder is not None:
            # (a subclass may iterate otherwise than list() does: walked below.) The first
            # item walked: where its text is short (a request, a condition), the rest are
            # laid out by _Columns; where long (a bundle), walked too: the texts _Columns
            # makes at once would be large, and copied once per level.
            append(separator)
            separator = "," + inner
            chunks_before, pieces_before = len(chunks), len(pieces)
            write(value[0], inner)
            if len(chunks) == chunks_before and len(pieces) - pieces_before <= _SMALL:
                if not columns:
                    columns.append(_Columns(walked, allow_nan))
                for start in range(1, len(value), _ROWS):
                    append(separator)
                    batch = list(value[start : start + _ROWS])
                    append(separator.join(columns[0].texts(batch, inner)))
                    if not held:  # a chunk per batch: the texts' memory is used again
                        flush()
                append(newline + "]")
                return
            items = islice(value, 1, None)
        for item in items:
            append(separator)
            separator = "," + inner
            item_kind = type(item)
            if item_kind is str:
                append(escape(item))
            elif item_kind is int:
                append(_int_repr(item))
            else:
                write(item, inner)
        append(newline + "]")
        if len(pieces) > _PIECES and not held:
            flush()

    def write(value: Any, newline: str) -> None:
        # `newline` is "\n" and the indentation of the line `value` starts on. The exact
        # JSON types first (nearly every value), then subclasses the way json.dumps takes them.
        kind = type(value)
        if kind is str:
            append(escape(value))
        elif kind is dict:
            write_dict(value, newline)
        elif kind is list:
            write_list(value, newline)
        elif value is None:
            append("null")
        elif value is True:
            append("true")
        elif value is False:
            append("false")
        elif kind is int or kind is float:
            append(_scalar(value, allow_nan))
        elif isinstance(value, dict):  # no class is both a dict and a list or tuple
            write_dict(value, newline)
        elif isinstance(value, list | tuple):
            write_list(value, newline)
        else:
            append(_scalar(value, allow_nan))

    write(document, start)
    chunks.append("".join(pieces))
    return chunks
