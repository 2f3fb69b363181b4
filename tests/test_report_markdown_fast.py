"""markdown.plain skips the escaping sub() for words without punctuation; it must escape
every text as the plain path (a sub() on every word) does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from verifier.report import markdown


def plain_reference(text: str, *, in_table: bool = False) -> str:
    words = []
    for word in text.split(" "):
        if markdown._LINKY.search(word):
            words.append(markdown.cell(word) if in_table else markdown.code(word))
        else:
            words.append(markdown._PUNCTUATION.sub(r"\\\1", word))
    return " ".join(words)


_TEXT = st.text(alphabet=st.sampled_from(list("ab \\`*_[]<>|~&@#:/.w\n")) | st.characters())


@given(_TEXT, st.booleans())
def test_plain_escapes_as_a_sub_on_every_word(text: str, in_table: bool) -> None:
    assert markdown.plain(text, in_table=in_table) == plain_reference(text, in_table=in_table)


def test_plain_still_escapes() -> None:
    assert markdown.plain("a_b *c* d") == "a\\_b \\*c\\* d"
    assert markdown.plain("see @you") == "see `@you`"
