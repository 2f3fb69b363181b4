"""What the verify audit of 2026-12-06 (helper-74) found:

- F1: a condition of many replies, each its own output and all capped at one count, had
  every pair of outputs compared with texts worked out again for each pair: 1,010 records
  took 33 s, 4,012 took 9.4 minutes (a bundle of 1.15 MB, within every reading limit).
  Each reply's texts are now worked out once, replies alike are asked once, and past
  `classify.MOST_CUT_WORK` the outputs prove nothing (inconclusive, with the reason).
- (helper-76, on these fixes: the bound was each condition's and counted a pair that runs
  `_marked_start`'s loops as one, so six conditions built so took 53 s; it is now the
  bundle's, five more a compared pair. The rule below read runs of white space again from
  each of their places, and a raw call nested past the parser's depth raised.)
- F2: one reply written two ways: its reasoning in `reasoning_content` in some answers and
  left in the content as `<think>...</think>` in others (or a tool call parsed in some and
  left as `<tool_call>` text in others), every count the same, turned the stable bundle
  into `cache-state-dependent`. A parser is a function of the text: the same count says
  one generation, written two ways.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_proofs import RULES, _cold, _counted, _reply, _warm, condition
from test_soundness import SEED_FILES, _archive_files
from test_soundness_audit70 import _errors, _only, _verify
from test_soundness_signals import Files, _edited, _invalid, _records

import verifier.classify as classify
from verifier import layout
from verifier.canonical import output_hash
from verifier.classify import ProtocolContext, _cut_from, _labels, completion_count
from verifier.model import Verdict
from verifier.proofs import RequestProof, prove_all
from verifier.records import Record

# --- F1: many capped outputs --------------------------------------------------------------

_WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def _capped(count: int, seed: int = 0) -> list[Record]:
    """Two cold replies that finished, and `count` warm replies each of its own text (no
    one the start of another), all counting 64 tokens, the warm ones at the cap."""
    rnd = random.Random(seed)
    records = [_counted(_reply(_cold(s), "stop", content="the cold reply"), 64) for s in (1, 2)]
    for n in range(count):
        text = f"{n:04d} " + " ".join(rnd.choice(_WORDS) for _ in range(30))
        records.append(_counted(_reply(_warm(3 + n), "length", content=text), 64))
    return records


def _classified(records: list[Record]) -> Any:
    proofs = prove_all(records, RULES, {}, attached=True)
    return classify.classify([condition()], proofs, RULES, ProtocolContext(max_tokens=64))


def test_many_capped_outputs_within_the_bound_are_compared_pair_by_pair() -> None:
    """300 outputs (some 90,000 pairs): compared, and the warm arm varies within itself."""
    result = _classified(_capped(300)).conditions[0]
    assert result.verdict is Verdict.NONDETERMINISTIC, result.reasons


def test_past_the_bound_capped_outputs_prove_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(classify, "MOST_CUT_WORK", 1_000)
    result = _classified(_capped(300)).conditions[0]
    assert result.verdict is Verdict.INCONCLUSIVE
    (reason,) = [r for r in result.reasons if "more than the tool compares" in r]
    assert reason.startswith("301 outputs, 300 of them given by replies at the cap")


def test_the_bound_is_the_bundles_not_each_conditions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two conditions, each within the bound alone: together past it, the second proves
    nothing."""
    first, second = _capped(40), _capped(40, seed=1)
    second = [replace(r, condition="d") for r in second]
    proofs = prove_all(first + second, RULES, {}, attached=True)
    conditions = [condition(), condition("d")]
    context = ProtocolContext(max_tokens=64)
    alone = classify.classify(conditions[:1], proofs[:42], RULES, context).conditions[0]
    assert alone.verdict is Verdict.NONDETERMINISTIC
    work = classify.CutWork()  # what one condition reads
    comparable = [p for p in proofs[:42] if p.comparable]
    assert classify._cut_short(comparable, _labels(comparable, ["c"]), work) is None
    monkeypatch.setattr(classify, "MOST_CUT_WORK", work.spent + work.spent // 2)
    results = classify.classify(conditions, proofs, RULES, context).conditions
    assert results[0].verdict is Verdict.NONDETERMINISTIC, results[0].reasons
    assert results[1].verdict is Verdict.INCONCLUSIVE
    assert any("more than the tool compares in one bundle" in r for r in results[1].reasons)


def test_a_start_among_many_capped_outputs_is_still_found() -> None:
    """The last warm reply is the start of the cold one: found past 299 others."""
    records = _capped(299)
    records.append(_counted(_reply(_warm(400), "length", content="the cold"), 64))
    result = _classified(records).conditions[0]
    assert result.verdict is Verdict.INCONCLUSIVE
    assert any("is the start of A" in r for r in result.reasons), result.reasons


def _text_length(record: Record) -> int:
    """How many characters a reply holds: its reasoning, its content and its tool calls."""
    calls = classify._tool_calls(record)
    return len(record.reasoning or "") + len(record.content or "") + len(calls or "")


def _cut_short_pairwise(comparable: list[RequestProof], labels: dict[str, str]) -> str | None:
    """`classify._cut_short` as it was before F1: every capped reply against every other
    output, its texts worked out for each pair (the reference for the one now)."""
    by_label: dict[str, list[RequestProof]] = {}
    for proof in comparable:
        by_label.setdefault(labels[proof.record.output_hash or ""], []).append(proof)
    if len(by_label) < 2 or not any(p.capped for p in comparable):
        return None
    ended = {label for label, proofs in by_label.items() if not all(p.capped for p in proofs)}
    longest: dict[str, int | None] = {}
    for label, proofs in by_label.items():
        counts = [completion_count(p.record) for p in proofs]
        longest[label] = None if None in counts else max(c for c in counts if c is not None)
    length = {label: _text_length(proofs[0].record) for label, proofs in by_label.items()}
    for label, proofs in by_label.items():
        for proof in (p for p in proofs if p.capped):
            record, used = proof.record, completion_count(proof.record)
            for other, most in longest.items():
                if other == label:
                    continue
                start = _cut_from(record, by_label[other][0].record)
                why = None
                if record.finish_reason not in classify._CUT_AT_CAP:
                    why = "it did not finish by the cap"
                elif used is None or most is None:
                    why = "it, or a reply that gave the other, counts no tokens"
                elif used < most:
                    why = f"it counts {used} tokens, a reply that gave {other} {most}"
                elif start:
                    why = f"it is the start of {other}"
                elif other in ended and length[label] < length[other]:
                    why = f"it holds less text than {other}, which ended by itself"
                if why is not None:
                    return (
                        f"{label} may have been cut short ({record.file}: {why}): the replies "
                        f"agree as far as it goes, which proves nothing past it"
                    )
    return None


_TEXTS = st.sampled_from(["", "ab", "abc", "abd", "a", " ab", "ab\ufffd", "<think>ab</think>c"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["stop", "length", "abort", None]),
            st.sampled_from([3, 4, None]),
            _TEXTS,
            _TEXTS,
        ),
        min_size=2,
        max_size=7,
    )
)
def test_the_bounded_comparison_says_what_the_pairwise_one_said(
    replies: list[tuple[str | None, int | None, str, str]],
) -> None:
    """Within the bound, the first reason (its output, its file, its why) is the one the
    comparison of every pair gave, whatever the finish reasons, counts and texts."""
    records = []
    for n, (finish, count, reasoning, content) in enumerate(replies):
        message = {"content": content, **({"reasoning_content": reasoning} if reasoning else {})}
        made = _reply(_warm(n + 1), finish, **message)
        records.append(_counted(made, count) if count is not None else made)
    proofs = prove_all(records, RULES, {}, attached=True)
    comparable = [p for p in proofs if p.comparable]
    labels = _labels(comparable, [condition().id])
    assert classify._cut_short(comparable, labels) == _cut_short_pairwise(comparable, labels)


# --- F2: one generation written two ways ----------------------------------------------------

_STABLE = "llama-cpp-cuda-stable.tar.gz"
_R = "the user lists words; reply with words"
_CALL = {"type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
_RAW_CALL = '<tool_call>\n{"name": "lookup", "arguments": {"q": 1}}\n</tool_call>'
_TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def _written(files: Files, write: Callable[[Any, dict[str, Any]], None]) -> Files:
    """Each answer of the bundle with its message written by `write(record, message)` (its
    output hash redone)."""

    def edit(record: Any) -> None:
        if record["http_status"] != 200:
            return
        choice = record["response"]["choices"][0]
        write(record, choice["message"])
        record["output_hash"] = output_hash(record["response"])

    return _records(files, edit)


def _offering_tools(files: Files) -> Files:
    """Every request body offering the one tool the calls name (a server reads calls out of a
    reply only where its request offers tools)."""
    files = _edited(files, layout.EXPERIMENT, lambda e: e["request_body"].update(tools=_TOOLS))
    return _records(files, lambda r: r["request_body"].update(tools=_TOOLS))


def _think_in_warm(record: Any, message: dict[str, Any]) -> None:
    if record["claimed_arm"] == "warm":
        message["content"] = f"<think>\n{_R}\n</think>\n\n" + message["content"]
    else:
        message["reasoning_content"] = _R


def _think_in_cold(record: Any, message: dict[str, Any]) -> None:
    if record["claimed_arm"] == "cold":
        message["content"] = f"<think>{_R}</think>" + message["content"]
    else:
        message["reasoning_content"] = f"\n{_R}\n"


def _call_in_warm(record: Any, message: dict[str, Any]) -> None:
    choice = record["response"]["choices"][0]
    if record["claimed_arm"] == "warm":
        message["content"] = _RAW_CALL
        choice["finish_reason"] = "stop"
    else:
        message["content"] = None
        message["tool_calls"] = [_CALL]
        choice["finish_reason"] = "tool_calls"


@pytest.mark.parametrize(
    ("write", "moved"),
    [
        (_think_in_warm, "where its reasoning is written"),
        (_think_in_cold, "where its reasoning is written"),
        (_call_in_warm, "where its tool calls are written"),
    ],
    ids=["reasoning-warm", "reasoning-cold", "tool-call"],
)
def test_a_part_a_parser_takes_out_on_one_side_only_is_a_split_made_of_nothing(
    tmp_path: Path, write: Callable[[Any, dict[str, Any]], None], moved: str
) -> None:
    """F2: the same 22 tokens on both sides; one side's content holds what the other's
    parser took out. It had been judged cache-state-dependent."""
    files = _written(_offering_tools(_archive_files(_STABLE)), write)
    result = _invalid(files, tmp_path, "consistency", moved)
    _only(result, "one generation written two ways")
    finding = next(f for f in result.findings if moved in f.message)
    assert "both count 22 completion tokens" in finding.message
    assert finding.pointer == "/response/choices/0/message"


@pytest.mark.parametrize(
    "write",
    [
        lambda r, m: m.__setitem__("content", f"<think>\n{_R}\n</think>\n\n" + m["content"]),
        lambda r, m: m.__setitem__("reasoning_content", _R),
        lambda r, m: m.update(content=_RAW_CALL),
    ],
    ids=["parser-off", "parser-on", "calls-unparsed"],
)
def test_a_part_written_one_way_in_every_answer_is_no_finding(
    tmp_path: Path, write: Callable[[Any, dict[str, Any]], None]
) -> None:
    """A server writes every answer one way, its parser on or off: no split, no finding."""
    result = _verify(_written(_offering_tools(_archive_files(_STABLE)), write), tmp_path)
    assert result.verdict is Verdict.CACHE_STATE_INDEPENDENT, _errors(result)
    assert not _errors(result)


def _seed_moved(*, warm_count: int) -> Files:
    """The seed (mlxcel, whose counters bind no count of generated tokens) with every reply
    the cold story and reasoning `_R`: parsed out on the cold side (731 tokens), left in the
    content on the warm side (`warm_count` tokens)."""
    records = [
        json.loads(data)
        for name, data in sorted(SEED_FILES.items())
        if name.startswith(layout.RECORDS_DIR + "/")
    ]
    story = next(
        r["response"]["choices"][0]["message"]["content"]
        for r in records
        if r["claimed_arm"] == "cold"
    )

    def edit(record: Any) -> None:
        response = record["response"]
        message = response["choices"][0]["message"]
        warm = record["claimed_arm"] == "warm"
        message["content"] = f"<think>\n{_R}\n</think>\n\n{story}" if warm else story
        if not warm:
            message["reasoning_content"] = _R
        usage = response["usage"]
        usage["completion_tokens"] = warm_count if warm else 731
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if "usage" in record:  # (the record's copy of it)
            record["usage"] = dict(usage)
        record["output_hash"] = output_hash(response)

    return _records(dict(SEED_FILES), edit)


def test_a_part_moved_with_the_same_count_on_another_server(tmp_path: Path) -> None:
    """The rule reads the answers' own counts, not one server's counters: mlxcel too."""
    result = _invalid(_seed_moved(warm_count=731), tmp_path, "consistency", "written two ways")
    _only(result, "where its reasoning is written")


def test_a_part_moved_with_other_counts_is_two_generations(tmp_path: Path) -> None:
    """Where the side that left the block in its content counts the block's tokens too, the
    replies may be two generations: left to the classification, which finds the split."""
    result = _verify(_seed_moved(warm_count=740), tmp_path)
    assert not _errors(result)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT


def _think_opened_by_the_template(record: Any, message: dict[str, Any]) -> None:
    """Qwen3's and DeepSeek-R1's templates open `<think>` in the prompt: a parser that is
    off leaves the reasoning and its end alone in the content."""
    if record["claimed_arm"] == "warm":
        message["content"] = f"{_R}\n</think>\n\n" + message["content"]
    else:
        message["reasoning_content"] = _R


def test_a_block_opened_by_the_template_on_one_side_only_is_a_split_made_of_nothing(
    tmp_path: Path,
) -> None:
    files = _written(_archive_files(_STABLE), _think_opened_by_the_template)
    result = _invalid(files, tmp_path, "consistency", "where its reasoning is written")
    _only(result, "one generation written two ways")


@pytest.mark.parametrize(
    "raw",
    [
        '<tool_call>\n{"name": "lookup"}\n</tool_call>',  # no arguments
        '<tool_call>\n{"name": "lookup", "arguments": "{\\"q\\": 1}"}\n</tool_call>',  # text
    ],
    ids=["no-arguments", "arguments-as-text"],
)
def test_a_raw_call_whose_arguments_are_no_object_is_not_compared(tmp_path: Path, raw: str) -> None:
    """What a parser makes of arguments left out or written as text is not known: such a
    call is two generations as far as this rule knows, left to the classification."""

    def write(record: Any, message: dict[str, Any]) -> None:
        _call_in_warm(record, message)
        if record["claimed_arm"] == "warm":
            message["content"] = raw

    files = _written(_offering_tools(_archive_files(_STABLE)), write)
    result = _verify(files, tmp_path)
    assert not [m for m in _errors(result) if "written two ways" in m], _errors(result)


def test_a_raw_call_nested_past_the_parsers_depth_is_not_compared(tmp_path: Path) -> None:
    """helper-76: arguments 5,000 deep inside the content's text (the document's own depth
    is unchanged) raised RecursionError: the check failed (an internal error)."""
    deep = "[" * 5000 + "]" * 5000

    def write(record: Any, message: dict[str, Any]) -> None:
        if record["claimed_arm"] == "warm" and record["sequence"] == 2:
            message["content"] = f'<tool_call>{{"name": "f", "arguments": {deep}}}</tool_call>'

    result = _verify(_written(_archive_files(_STABLE), write), tmp_path)
    assert not [m for m in _errors(result) if "internal error" in m], _errors(result)


@pytest.mark.parametrize(
    "content",
    [
        " " * 50_000 + "<tool_call>",
        "<tool_call>" * 5_000,
        "\n" * 30_000 + '<tool_call>{"name": "f", "arguments": {}}</tool_call>' + " " * 30_000,
        "a <tool_call>x</tool_call> b <tool_call> c",
    ],
    ids=["spaces", "unclosed", "around", "mixed"],
)
def test_raw_calls_are_read_as_the_pattern_reads_them(content: str) -> None:
    """`_raw_calls` (one pass of `str.find`) finds what `\\s*<tool_call>(.*?)</tool_call>\\s*`
    found, and leaves the content it left (the pattern read a run of white space again
    from each of its places: 200,000 spaces took a minute)."""
    from verifier.checks.consistency import _raw_call, _raw_calls

    pattern = re.compile(r"\s*<tool_call>(.*?)</tool_call>\s*", re.S)
    head = content[:2000] + content[-2000:]  # (the pattern itself, on a text it reads fast)
    for text in (content, head) if len(content) < 4000 else (head,):
        expected = [_raw_call(m.group(1)) for m in pattern.finditer(text)]
        found, rest = _raw_calls(text)
        assert found == expected
        if expected:
            assert rest == pattern.sub("", text)
    found, rest = _raw_calls(content)
    assert rest == content or found


def test_a_block_whose_text_differs_is_a_split(tmp_path: Path) -> None:
    """The other side's reasoning in the content, but not the same reasoning: two texts."""

    def write(record: Any, message: dict[str, Any]) -> None:
        if record["claimed_arm"] == "warm":
            message["content"] = f"<think>\n{_R}, twice\n</think>\n\n" + message["content"]
        else:
            message["reasoning_content"] = _R

    result = _verify(_written(_archive_files(_STABLE), write), tmp_path)
    assert not [m for m in _errors(result) if "written two ways" in m]
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT, _errors(result)
