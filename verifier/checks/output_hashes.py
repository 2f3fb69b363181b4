"""Recompute each record's canonical output hash; the usage copy must match the response."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from verifier import layout
from verifier.canonical import OutputHashError, canonical_hash, canonical_output
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity, json_pointer

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
        yield from _token_list(path, record, response)
        if record["usage"] != response.get("usage"):
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the usage copy differs from response.usage",
                file=path,
                pointer="/usage",
            )


# The fields of a chat completion's message that the output hash reads (content, reasoning
# by either name, tool_calls), and its role. Any other that holds something is a part of
# the reply the hash does not read: the legacy single function call, a refusal, audio,
# another server's name for reasoning (`thinking`), whatever a newer build adds. Servers
# send those they know but did not use as null (vLLM's `refusal`, `audio`,
# `function_call`, `annotations`) or not at all.
_READ = frozenset(("role", "content", "reasoning_content", "reasoning", "tool_calls"))


def _calls_made(path: str, body: object, calls: list[Any]) -> Iterator[Finding]:
    """A reply's tool calls are what servers write: each a function call with a name and
    its arguments as the string the model wrote (a call that holds nothing, `{"function":
    {}}`, hashes as one, and would split replies made of nothing); and only to a request
    that offers tools: llama.cpp, vLLM and SGLang read calls out of a reply only then."""
    offered = body.get("tools") if isinstance(body, dict) else None
    if not (isinstance(offered, list) and offered):
        yield Finding(
            CHECK,
            Severity.ERROR,
            "the reply holds tool calls, yet its request offers no tools: a server reads "
            "calls out of a reply only where the request offers them",
            file=path,
            pointer="/response/choices/0/message/tool_calls",
        )
    for at, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(call, dict)
            and call.get("type") == "function"
            and isinstance(function, dict)
            and isinstance(function.get("name"), str)
            and function["name"]
            and isinstance(function.get("arguments"), str)
        ):
            yield Finding(
                CHECK,
                Severity.ERROR,
                "a tool call that is no function call with a name and its arguments as a "
                'string (`{"type": "function", "function": {"name": ..., "arguments": ...}}`'
                ", as every server writes one)",
                file=path,
                pointer=f"/response/choices/0/message/tool_calls/{at}",
            )
            return


def _one_reply(path: str, record: dict[str, Any], response: dict[str, Any]) -> Iterator[Finding]:
    """The protocol asks one reply of each request, and the output hash reads the first
    choice alone: a body that asks more (`n`, `best_of`, llama.cpp's `n_cmpl`; vLLM's beam
    search), a second choice, a first one that says it is another (`index`), or a reply
    with a part the hash does not read (not `_READ`) would leave a reply unjudged."""
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
    unread = [
        field
        for field, value in (message.items() if isinstance(message, dict) else ())
        if field not in _READ and value not in (None, "", [], {})
    ]
    if unread:
        named = ", ".join(f"message.{field[:64]}" for field in unread[:5])
        more = f" and {len(unread) - 5} more" if len(unread) > 5 else ""
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"the reply holds {named}{more}, which the output hash does not read: two "
            "replies that differ there would be judged alike",
            file=path,
            pointer=json_pointer("response", "choices", 0, "message", unread[0]),
        )
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if isinstance(calls, list) and calls:
        yield from _calls_made(path, body, calls)
    index = first.get("index") if isinstance(first, dict) else None
    if index is not None and not (type(index) is int and index == 0):
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"the response's only choice says it is choice {index!r}: another was left out",
            file=path,
            pointer="/response/choices/0/index",
        )


def _token_list(path: str, record: dict[str, Any], response: dict[str, Any]) -> Iterator[Finding]:
    """A plain reply's own list of its tokens (`choices[0].logprobs.content`, where the
    request asked logprobs) is a second copy of what the model generated: it must spell the
    reply's content (`_spells_plainly`), white space aside (a token's text may show a space
    the whole text has not). Only a plain reply, without reasoning or tool calls: a server's
    parser cuts those out of what the list spells, each family in its own syntax, and no
    reading of them was found that refuses no honest list and lets no lie through. A list
    that cannot be read as one spelling (`_spellings`) says nothing. A consistency check,
    never a proof: a bundle may leave logprobs out altogether."""
    choice = response["choices"][0]
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    entries = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(entries, list) or not entries:
        return
    message = choice["message"]
    if message.get("tool_calls") or message.get("reasoning_content") or message.get("reasoning"):
        return
    spellings = _spellings(entries)
    if not spellings:
        return
    content = message.get("content")
    body = record.get("request_body")
    stops = isinstance(body, dict) and body.get("stop") not in (None, "", [])
    text = _bare(content) if isinstance(content, str) else ""
    if not any(_spells_plainly(spelled, text, stops=stops) for spelled in spellings):
        yield Finding(
            CHECK,
            Severity.ERROR,
            "the reply's own token list (choices[0].logprobs) does not spell its "
            "message.content: the response contradicts itself",
            file=path,
            pointer="/response/choices/0/logprobs/content",
        )


def _spells_plainly(spelled: str, text: str, *, stops: bool) -> bool:
    """Whether what a list spells is the text: after nothing but tags (Qwen3's empty
    `<think></think>` when it does not think), and then nothing, or what starts as an end
    token does (`<|im_end|>`, `</s>`, `[/INST]`), or, where the request names stop strings,
    anything (the server cuts the one it met out of the content, not out of the list)."""
    tags = _TAGS.match(spelled)
    at = tags.end() if tags is not None else 0  # (it matches everywhere, if only nothing)
    if not spelled.startswith(text, at):
        return False
    rest = spelled[at + len(text) :]
    return not rest or stops or rest.startswith(_END_STARTS)


_TAGS = re.compile(r"(?:<[^<>]{0,64}>)*")
_END_STARTS = ("<", "[", "|", "\uff5c")


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
