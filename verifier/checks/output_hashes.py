"""Recompute each record's canonical output hash; the usage copy must match the response."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from verifier import layout
from verifier.canonical import OutputHashError, canonical_hash, canonical_output
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity

CHECK = "output-hash"


def check_output_hashes(ctx: BundleContext) -> Iterator[Finding]:
    # The digest of the last output hashed without tool calls, by its two strings: the
    # records of one condition nearly all give the same reply, in a row, and the digest
    # is a function of those two strings alone (compared by ==: str or None each).
    last: tuple[object, object, str] | None = None
    for path in sorted(ctx.documents):
        if not path.startswith(layout.RECORDS_DIR + "/"):
            continue
        record = ctx.valid(path)
        if record is None:
            continue
        claimed = record["output_hash"]
        response = record["response"]
        if record["http_status"] != 200 or response is None:
            if claimed is not None:
                yield Finding(
                    CHECK,
                    Severity.ERROR,
                    "a failed request cannot have an output hash",
                    file=path,
                    pointer="/output_hash",
                    expected="null",
                    actual=claimed,
                )
            continue
        try:
            canonical = canonical_output(response)
            if canonical["tool_calls"] is None:
                content, reasoning = canonical["content"], canonical["reasoning_content"]
                if last is not None and last[0] == content and last[1] == reasoning:
                    actual = last[2]
                else:
                    actual = canonical_hash(canonical)
                    last = (content, reasoning, actual)
            else:
                actual = canonical_hash(canonical)
        except OutputHashError as exc:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the response has no canonical output: {exc}",
                file=path,
                pointer="/response/choices/0/message",
            )
            continue
        if claimed != actual:
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the output hash does not match the response: output or hash was altered",
                file=path,
                pointer="/output_hash",
                expected=actual,
                actual=str(claimed),
            )
        yield from _one_reply(path, record, response)
        yield from _token_list(path, response)
        if record["usage"] != response.get("usage"):
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the usage copy differs from response.usage",
                file=path,
                pointer="/usage",
            )


# What a chat completion's message may carry of the model's reply besides the three fields
# the output hash reads (content, reasoning, tool_calls): the legacy single function call,
# a refusal, audio. Servers send each as null (vLLM) or not at all.
_UNHASHED = ("function_call", "refusal", "audio")


def _one_reply(path: str, record: dict[str, Any], response: dict[str, Any]) -> Iterator[Finding]:
    """The protocol asks one reply of each request, and the output hash reads the first
    choice alone: a body that asks more (`n`, `best_of`, llama.cpp's `n_cmpl`; vLLM's beam
    search), a second choice, a first one that says it is another (`index`), or a reply
    with a part the hash does not read (`_UNHASHED`) would leave a reply unjudged."""
    body = record.get("request_body")
    for field in ("n", "best_of", "n_cmpl", "use_beam_search"):
        value = body.get(field) if isinstance(body, dict) else None
        one = value is False if field == "use_beam_search" else type(value) is int and value == 1
        if value is not None and not one:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the request asks {field}={value!r}: the protocol asks one reply of each "
                "request, and the output hash reads the first alone",
                file=path,
                pointer=f"/request_body/{field}",
            )
    choices = response.get("choices")
    if isinstance(choices, list) and len(choices) > 1:
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"the response holds {len(choices)} choices: its output hash reads the first "
            "alone, so the others would go unjudged (the protocol asks one reply a request)",
            file=path,
            pointer="/response/choices/1",
        )
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    for field in _UNHASHED:
        if isinstance(message, dict) and message.get(field) not in (None, "", [], {}):
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the reply holds message.{field}, which the output hash does not read: two "
                "replies that differ there would be judged alike",
                file=path,
                pointer=f"/response/choices/0/message/{field}",
            )
    index = first.get("index") if isinstance(first, dict) else None
    if index is not None and not (type(index) is int and index == 0):
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"the response's only choice says it is choice {index!r}: another was left out",
            file=path,
            pointer="/response/choices/0/index",
        )


def _token_list(path: str, response: dict[str, Any]) -> Iterator[Finding]:
    """A reply's own list of its tokens (`choices[0].logprobs.content`, where the request
    asked logprobs) is a second copy of what the model generated: each text of the reply
    (its content, its reasoning) must be in what the list spells (`_spellings`). Read
    leniently, so that no honest list is refused: white space left out on both sides (a
    token's text may show a space the whole text has not); the list may spell more
    (reasoning tags, a tool call, an end token). A list that cannot be read as one
    spelling says nothing (a consistency check, never a proof: a bundle may leave logprobs
    out altogether)."""
    choice = response["choices"][0]
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    entries = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(entries, list) or not entries:
        return
    spellings = _spellings(entries)
    if not spellings:
        return
    message = choice["message"]
    for field in ("content", "reasoning_content", "reasoning"):
        text = message.get(field)
        if isinstance(text, str) and not any(_holds(s, _bare(text)) for s in spellings):
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the reply's own token list (choices[0].logprobs) does not spell its "
                f"message.{field}: the response contradicts itself",
                file=path,
                pointer="/response/choices/0/logprobs/content",
            )
            return


def _holds(spelled: str, text: str) -> bool:
    """Whether what a list spells holds a text: from a place where the list spells the
    text's first characters, as it goes on, in at most `_PIECES` pieces, where the list
    spells something else only as a parser's marker or a special token does: the gap
    starts as one does (`_GAP_STARTS`) and the next piece follows a closing `>`, `]`, `}`
    or `｜` (`_CLOSERS`). A parser may join a text from pieces the list spells apart
    (llama.cpp's Hermes content: the text before a `<tool_call>...</tool_call>` and after
    it; gpt-oss's reasoning of two analysis messages, `<|end|>...<|message|>` between
    them); a word the list spells that the text lacks (`not`) is no such gap. The places
    tried are bounded (`_TRIES`: where they run out, the text is not held), and a text past
    `_GAPPED_MOST` characters is read in one piece."""
    if not text:
        return True
    tries = [_TRIES]
    pieces = _PIECES if len(text) <= _GAPPED_MOST else 1
    # first where the list spells the longest start of the text (where it spells it whole,
    # the one place tried), then where it spells its first characters
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if spelled.find(text[:middle]) >= 0:
            low = middle
        else:
            high = middle - 1
    if low and _goes_on(spelled, text, spelled.find(text[:low]), 0, pieces, tries):
        return True
    head = text[:_HEAD]
    at = spelled.find(head)
    while at >= 0 and tries[0] > 0:
        if _goes_on(spelled, text, at, 0, pieces, tries):
            return True
        at = spelled.find(head, at + 1)
    return False


def _goes_on(spelled: str, text: str, at: int, done: int, pieces: int, tries: list[int]) -> bool:
    """`_holds` of `text[done:]` from the place `at` of `spelled`, in at most `pieces` pieces
    (False where the tries run out)."""
    tries[0] -= 1
    if tries[0] < 0:
        return False
    # how far the list spells the text from here (a binary search: startswith is monotone)
    low, high = 0, len(text) - done
    while low < high:
        middle = (low + high + 1) // 2
        if spelled.startswith(text[done : done + middle], at):
            low = middle
        else:
            high = middle - 1
    done, at = done + low, at + low
    if done == len(text):
        return True
    if pieces == 1 or not spelled.startswith(_GAP_STARTS, at):
        return False
    head = text[done : done + _HEAD]
    for closer in _CLOSERS.finditer(spelled, at):
        if spelled.startswith(head, closer.end()) and _goes_on(
            spelled, text, closer.end(), done, pieces - 1, tries
        ):
            return True
        tries[0] -= 1
        if tries[0] < 0:
            return False
    return False


_HEAD = 4
_PIECES = 3
_TRIES = 64
_GAPPED_MOST = 1 << 16
# How what a parser takes out of a text starts and ends: a tag, a marker, a special token,
# JSON.
_GAP_STARTS = ("<", "[", "{", "|", "\uff5c")
_CLOSERS = re.compile("[>\\]}\uff5c]")


def _bare(text: str) -> str:
    """A text without its white space, nor SentencePiece's space symbol (`▁`)."""
    return "".join(text.replace("\u2581", " ").split())


def _spellings(entries: list[Any]) -> list[str]:
    """What a token list spells (`_bare`), in each reading that applies; none where it cannot
    be read whole. Its tokens' bytes (UTF-8, strict) where every entry has them; else, where
    none has bytes, their texts, and where those are all of byte-level BPE's alphabet (`Ġ`
    for a space, `Ã©` for `é`: a server that sends its tokens undecoded), the bytes they
    stand for. Not read: an entry that is not an object; a token without text or bytes
    before the last (a character a server split into empty tokens); a list that spells
    U+FFFD (a character split between tokens, each decoded alone: vLLM writes its bytes
    as those of U+FFFD); vLLM's `token_id:N`; SentencePiece's byte tokens (`<0xE5>`)."""
    if not all(isinstance(e, dict) for e in entries):
        return []
    tokens = [e.get("token") for e in entries]
    if not all(isinstance(t, str) for t in tokens):
        return []
    if any(t.startswith("token_id:") or _BYTE_TOKEN.fullmatch(t) for t in tokens):
        return []
    raw = [e.get("bytes") for e in entries]
    if any(not t and not b for t, b in zip(tokens[:-1], raw[:-1], strict=True)):
        return []
    joined = "".join(tokens)
    if all(isinstance(b, list) and all(type(x) is int and 0 <= x < 256 for x in b) for b in raw):
        try:
            found = [bytes(x for b in raw for x in b).decode("utf-8")]
        except UnicodeDecodeError:
            return []
    elif all(b is None for b in raw):
        found = [joined]
        if all(c in _BPE_BYTES for c in joined):
            found.append(bytes(_BPE_BYTES[c] for c in joined).decode("utf-8", "replace"))
    else:
        return []
    if "\ufffd" in found[0]:  # a character split between tokens, each decoded alone
        return []
    return [_bare(text) for text in found]


_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def _bpe_bytes() -> dict[str, int]:
    """Byte-level BPE's alphabet (GPT-2's `bytes_to_unicode`): each byte's character, read
    back: a printable byte is itself, every other byte the next character from U+0100."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            table[chr(0x100 + extra)] = b
            extra += 1
    return table


_BPE_BYTES = _bpe_bytes()
