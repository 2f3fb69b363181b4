"""The divergence localized from token lists: first differing token, margins, reading."""

from __future__ import annotations

from typing import Any

import pytest

from verifier.localize import NEAR_TIE_NATS, LogprobsError, localize, token_choices


def response(*tokens: tuple[str, float, dict[str, float]]) -> dict[str, Any]:
    content = [
        {
            "token": token,
            "logprob": logprob,
            "top_logprobs": [{"token": t, "logprob": lp} for t, lp in alternatives.items()],
        }
        for token, logprob, alternatives in tokens
    ]
    text = "".join(token for token, _, _ in tokens)
    return {
        "choices": [{"message": {"content": text}, "logprobs": {"content": content}}],
        "usage": {"completion_tokens": len(tokens)},
    }


SAME = ("It", -0.1, {"It": -0.1, "The": -2.5})


def test_a_near_tie_is_read_as_rounding() -> None:
    cold = token_choices(response(SAME, ("was", -0.70, {"was": -0.70, "is": -0.72})))
    warm = token_choices(response(SAME, ("is", -0.69, {"is": -0.69, "was": -0.71})))
    found = localize(cold, warm)
    assert found.index == 1 and found.near_tie is True
    assert found.cold is not None and found.warm is not None
    assert (found.cold.token, found.warm.token) == ("was", "is")
    assert found.cold.margin == pytest.approx(0.02) and found.warm.gap == pytest.approx(0.02)
    assert "near tie" in found.reading


def test_two_confident_sides_are_worth_a_bug_report() -> None:
    cold = token_choices(response(SAME, ("was", -0.1, {"was": -0.1, "is": -3.0})))
    warm = token_choices(response(SAME, ("is", -0.2, {"is": -0.2, "was": -2.0})))
    found = localize(cold, warm)
    assert found.near_tie is False and "bug report" in found.reading
    assert found.cold is not None and found.cold.margin == pytest.approx(2.9)


def test_an_unlisted_token_gives_a_bound_not_a_value() -> None:
    cold = token_choices(response(SAME, ("was", -0.1, {"was": -0.1, "had": -1.5})))
    warm = token_choices(response(SAME, ("is", -0.1, {"is": -0.1, "was": -0.15})))
    found = localize(cold, warm)
    assert found.cold is not None and found.cold.other_logprob is None
    assert found.cold.other_at_most == pytest.approx(-1.5)
    assert found.near_tie is True  # the warm side's margin of 0.05 is under the threshold
    assert NEAR_TIE_NATS == 0.1


def test_equal_lists_and_a_longer_reply() -> None:
    same = token_choices(response(SAME))
    assert localize(same, same).index is None
    longer = token_choices(response(SAME, SAME))
    found = localize(same, longer)
    assert found.index == 1 and found.near_tie is None


def test_a_list_that_is_not_the_reply_or_not_greedy_is_refused() -> None:
    spelled = response(SAME, ("was", -0.7, {"was": -0.7, "is": -0.72}))
    spelled["choices"][0]["message"]["content"] = "It is"  # the hashed reply says otherwise
    with pytest.raises(LogprobsError, match="spell"):
        token_choices(spelled)
    with pytest.raises(LogprobsError, match="greedy"):
        token_choices(response(SAME, ("was", -3.0, {"was": -3.0, "is": -0.01})))


def test_a_list_of_merged_tokens_is_not_the_replys_list() -> None:
    """Eleven entries merged into one moved the divergence from 11 to 1 (helper-49): the
    list must have one entry a counted token (or one fewer: an end token left out)."""
    merged = response(("It was a", -0.1, {"It was a": -0.1}), SAME)
    merged["usage"] = {"completion_tokens": 4}
    with pytest.raises(LogprobsError, match="2 entries for a reply of 4 tokens"):
        token_choices(merged)
    for counted in (2, 3):
        merged["usage"] = {"completion_tokens": counted}
        assert len(token_choices(merged)) == 2


def test_a_list_padded_to_the_count_or_without_one_is_refused() -> None:
    """Merged tokens padded back to the count with empty entries, or a reply whose count
    was removed, moved the divergence (helper-51): an empty token only ends the list, and a
    list is read only against a count."""
    padded = response(("It was a", -0.1, {"It was a": -0.1}), ("", -0.1, {"": -0.1}), SAME)
    with pytest.raises(LogprobsError, match="empty token before its last"):
        token_choices(padded)
    ended = response(SAME, ("", -0.1, {"": -0.1}))
    assert len(token_choices(ended)) == 2  # llama.cpp's end token, last
    # a piece of a character (no text of its own, but its bytes) is no padding
    split = response(("", -0.1, {"": -0.1}), ("", -0.1, {"": -0.1}), ("x", -0.1, {"x": -0.1}))
    pieces = split["choices"][0]["logprobs"]["content"]
    for entry, raw in zip(pieces, ([0xE2], [0x80, 0x94], [0x78]), strict=True):
        entry["bytes"] = raw
    split["choices"][0]["message"]["content"] = "\u2014x"
    assert len(token_choices(split)) == 3
    del ended["usage"]
    with pytest.raises(LogprobsError, match="does not count its tokens"):
        token_choices(ended)


def test_bytes_that_do_not_spell_the_reply_are_refused_whatever_the_text_says() -> None:
    """Tokens given the same id and the bytes [255] (no UTF-8 anywhere) beside their own
    text moved the divergence (helper-49): where every entry has bytes, the bytes spell it."""
    forged = response(SAME, SAME)
    for entry in forged["choices"][0]["logprobs"]["content"]:
        entry.update(id=7, bytes=[255])
    with pytest.raises(LogprobsError, match="spell"):
        token_choices(forged)
    honest = response(SAME, SAME)
    for entry in honest["choices"][0]["logprobs"]["content"]:
        entry.update(id=7, bytes=list(b"It"))
    assert len(token_choices(honest)) == 2
    del honest["choices"][0]["logprobs"]["content"][0]["bytes"]  # some with bytes, some not
    with pytest.raises(LogprobsError, match="spell"):
        token_choices(honest)


def test_tokens_that_look_alike_but_differ_are_different() -> None:
    def entry(token_id: int) -> dict[str, Any]:
        return {"id": token_id, "token": "\ufffd", "logprob": -0.1,
                "top_logprobs": [{"id": token_id, "token": "\ufffd", "logprob": -0.1}]}  # fmt: skip

    def reply(token_id: int) -> dict[str, Any]:
        content = [entry(token_id)]
        return {
            "choices": [{"message": {"content": "\ufffd"}, "logprobs": {"content": content}}],
            "usage": {"completion_tokens": 1},
        }

    found = localize(token_choices(reply(4)), token_choices(reply(5)))
    assert found.index == 0


def test_a_margin_known_only_as_a_bound_gives_no_near_tie() -> None:
    flat = {"was": -1.60, "a": -1.61, "b": -1.62, "c": -1.63, "d": -1.64}
    cold = token_choices(response(SAME, ("was", -1.60, flat)))
    warm = token_choices(
        response(SAME, ("is", -1.55, {**{"is": -1.55}, **dict(list(flat.items())[1:])}))
    )
    found = localize(cold, warm)
    assert found.near_tie is None and "at least" in found.reading


@pytest.mark.parametrize(
    "bad",
    [{}, {"choices": [{"logprobs": None}]}, response(("x", float("nan"), {})),
     response(("x", 0.5, {})), {"choices": [{"message": {"content": "x"}, "logprobs": {
         "content": [{"token": "x", "logprob": -0.1, "top_logprobs": 5}, {"token": 1}]}}]}],
)  # fmt: skip
def test_malformed_logprobs_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(LogprobsError):
        token_choices(bad)


def test_the_real_flip_shows_its_divergent_token_in_every_format() -> None:
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from verifier.cli import app

    sample = str(
        Path(__file__).resolve().parent.parent / "sample_bundles" / "llama-cpp-real.tar.gz"
    )

    def run(fmt: str) -> str:
        return CliRunner().invoke(app, ["verify", sample, "-f", fmt], env={"COLUMNS": "200"}).stdout

    diagnosis = json.loads(run("json"))["bundles"][0]["classification"]["conditions"][0][
        "diagnosis"
    ]
    index, cold, warm = diagnosis["token_index"], diagnosis["cold"], diagnosis["warm"]
    assert isinstance(index, int) and cold["token"] != warm["token"]
    assert cold["top1_top2_gap"] is not None and warm["top1_top2_gap"] is not None
    for fmt in ("text", "markdown"):
        out = run(fmt)
        assert f"zero-based token {index}" in out, fmt
        assert f"{cold['top1_top2_gap']:.3g}" in out and f"{warm['top1_top2_gap']:.3g}" in out
        assert diagnosis["note"].split(":")[0] in out
